{{/* The release's name for its objects: the release name, with the chart's unless it already holds it. */}}
{{- define "mqnamesrv.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mqnamesrv.headless" -}}{{ include "mqnamesrv.fullname" . }}-members{{- end -}}
{{- define "mqnamesrv.controllerName" -}}{{ include "mqnamesrv.fullname" . }}-controller{{- end -}}
{{- define "mqnamesrv.controllerHeadless" -}}{{ include "mqnamesrv.controllerName" . }}-members{{- end -}}

{{- define "mqnamesrv.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selects the NameServers (component namesrv) or the standalone controller nodes (component controller). */}}
{{- define "mqnamesrv.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "mqnamesrv.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* member i's stable name: <pod>.<headless service>.<namespace>.svc.<domain> */}}
{{- define "mqnamesrv.memberHost" -}}
{{ .name }}-{{ .i }}.{{ .headless }}.{{ .root.Release.Namespace }}.svc.{{ .root.Values.clusterDomain }}
{{- end -}}

{{/* n0-host:port;n1-host:port;... for `count` members of StatefulSet `name` behind `headless`. */}}
{{- define "mqnamesrv.peers" -}}
{{- $out := list -}}
{{- range $i := until (int .count) -}}
{{- $host := include "mqnamesrv.memberHost" (dict "name" $.name "i" $i "headless" $.headless "root" $.root) -}}
{{- $out = append $out (printf "n%d-%s:%d" $i $host (int $.port)) -}}
{{- end -}}
{{- join ";" $out -}}
{{- end -}}

{{/* host:port;... of the same members, as brokers list them (namesrvAddr, controllerAddr). */}}
{{- define "mqnamesrv.addrs" -}}
{{- $out := list -}}
{{- range $i := until (int .count) -}}
{{- $host := include "mqnamesrv.memberHost" (dict "name" $.name "i" $i "headless" $.headless "root" $.root) -}}
{{- $out = append $out (printf "%s:%d" $host (int $.port)) -}}
{{- end -}}
{{- join ";" $out -}}
{{- end -}}

{{/* Fails the render on values that cannot work together. */}}
{{- define "mqnamesrv.validate" -}}
{{- if not (has .Values.controller.mode (list "none" "embedded" "standalone")) -}}
{{- fail (printf "controller.mode must be none, embedded or standalone, not %q" .Values.controller.mode) -}}
{{- end -}}
{{- if lt (int .Values.replicas) 1 -}}
{{- fail "replicas must be at least 1" -}}
{{- end -}}
{{- if and .Values.auth.enabled (gt (int .Values.replicas) 1) (not .Values.peerSecret.existingSecret) -}}
{{- fail "auth.enabled with more than one NameServer needs peerSecret.existingSecret: without it a process that reaches a member's port could pass for a member" -}}
{{- end -}}
{{- if and .Values.auth.enabled (not .Values.auth.existingSecret) -}}
{{- fail "auth.enabled needs auth.existingSecret (the credentials file)" -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) -}}
{{- fail "tls.enabled needs tls.existingSecret (a kubernetes.io/tls Secret with ca.crt)" -}}
{{- end -}}
{{- if le (int .Values.terminationGracePeriodSeconds) (add (int .Values.shutdownWaitSeconds) (int .Values.preStopSleepSeconds)) -}}
{{- fail "terminationGracePeriodSeconds must exceed shutdownWaitSeconds + preStopSleepSeconds, or the kubelet kills a NameServer while its clients are still leaving" -}}
{{- end -}}
{{- end -}}
