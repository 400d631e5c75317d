// Command validate checks rendered Kubernetes manifests against the API's own Go types, strictly:
// every document must be a kind the chart renders, decode into its type with no unknown or
// duplicate field, and carry a name; a StatefulSet's containers may mount only volumes it has
// and probe only ports they declare; within one file, a Service must select pods that declare
// its named target ports, and a ServiceMonitor must scrape a port of a Service it selects.
// Usage: validate [-json OUT] FILE...
// With -json, the documents of every file, once they all passed, are written to OUT as one JSON
// array (the pod simulation harness, interop/kube, reads the render that way).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The kinds the chart renders, by apiVersion/kind. A template that renders another kind must add
// it here, so that nothing reaches a cluster unchecked.
var kinds = map[string]func() any{
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"apps/v1/StatefulSet":                     func() any { return &appsv1.StatefulSet{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return &monitoringv1.PrometheusRule{} },
}

type head struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

func main() {
	jsonOut := flag.String("json", "", "write the validated documents to this file as a JSON array")
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: validate [-json OUT] FILE...")
		os.Exit(2)
	}
	failures, checked := 0, 0
	var docs []json.RawMessage
	for _, path := range flag.Args() {
		n, found, errs := validateFile(path)
		checked += n
		docs = append(docs, found...)
		for _, err := range errs {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			failures++
		}
	}
	fmt.Printf("validate: %d documents in %d files, %d problems\n", checked, flag.NArg(), failures)
	if failures > 0 {
		os.Exit(1)
	}
	if *jsonOut != "" {
		out, err := json.MarshalIndent(docs, "", " ")
		if err == nil {
			err = os.WriteFile(*jsonOut, out, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// validateFile returns how many documents the file holds, each of them as JSON, and its problems.
func validateFile(path string) (int, []json.RawMessage, []error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, []error{err}
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var errs []error
	var objects []any
	var docs []json.RawMessage
	n := 0
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, docs, append(errs, fmt.Errorf("document %d: %w", i, err))
		}
		obj, err := validateDoc(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", i, err))
		}
		if obj != nil {
			objects = append(objects, obj)
		}
		if !empty(doc) {
			n++
			if j, err := yaml.YAMLToJSON(doc); err == nil {
				docs = append(docs, j)
			}
		}
	}
	return n, docs, append(errs, crossCheck(objects)...)
}

// crossCheck: what one object says of another in the same render. A Service's named target
// port must be declared by the pods it selects (or it sends nothing anywhere), a Service must
// select some pods, and a ServiceMonitor's port must be a port of a Service it selects.
func crossCheck(objects []any) []error {
	var errs []error
	var sets []*appsv1.StatefulSet
	var services []*corev1.Service
	var monitors []*monitoringv1.ServiceMonitor
	for _, o := range objects {
		switch v := o.(type) {
		case *appsv1.StatefulSet:
			sets = append(sets, v)
		case *corev1.Service:
			services = append(services, v)
		case *monitoringv1.ServiceMonitor:
			monitors = append(monitors, v)
		}
	}
	for _, svc := range services {
		var selected []*appsv1.StatefulSet
		for _, sts := range sets {
			if matches(svc.Spec.Selector, sts.Spec.Template.Labels) {
				selected = append(selected, sts)
			}
		}
		if len(selected) == 0 {
			errs = append(errs, fmt.Errorf("Service %s selects no pods of this render", svc.Name))
			continue
		}
		for _, p := range svc.Spec.Ports {
			if p.TargetPort.Type != intstr.String {
				continue
			}
			for _, sts := range selected {
				if !declares(sts, p.TargetPort.StrVal) {
					errs = append(errs, fmt.Errorf("Service %s: target port %s is declared by no container of StatefulSet %s",
						svc.Name, p.TargetPort.StrVal, sts.Name))
				}
			}
		}
	}
	for _, m := range monitors {
		for _, e := range m.Spec.Endpoints {
			found := false
			for _, svc := range services {
				if !matches(m.Spec.Selector.MatchLabels, svc.Labels) {
					continue
				}
				for _, p := range svc.Spec.Ports {
					found = found || p.Name == e.Port
				}
			}
			if !found {
				errs = append(errs, fmt.Errorf("ServiceMonitor %s: port %s is a port of no Service it selects", m.Name, e.Port))
			}
		}
	}
	return errs
}

// matches: every label of the selector is on the object.
func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func declares(sts *appsv1.StatefulSet, port string) bool {
	for _, c := range sts.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port {
				return true
			}
		}
	}
	return false
}

// empty: a document of comments and blank lines only (helm template leaves such between objects).
func empty(doc []byte) bool {
	j, err := yaml.YAMLToJSON(doc)
	return err == nil && string(bytes.TrimSpace(j)) == "null"
}

// validateDoc checks one document and returns its object (nil for an empty document or one that
// failed).
func validateDoc(doc []byte) (any, error) {
	if empty(doc) {
		return nil, nil
	}
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, fmt.Errorf("not strict YAML: %w", err)
	}
	var h head
	if err := json.Unmarshal(j, &h); err != nil {
		return nil, err
	}
	where := fmt.Sprintf("%s %s/%s", h.Kind, h.APIVersion, h.Metadata.Name)
	newObject, ok := kinds[h.APIVersion+"/"+h.Kind]
	if !ok {
		return nil, fmt.Errorf("%s: not a kind this chart renders (add it to validate's list)", where)
	}
	obj := newObject()
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if h.Metadata.Name == "" {
		return nil, fmt.Errorf("%s: no metadata.name", where)
	}
	if sts, ok := obj.(*appsv1.StatefulSet); ok {
		if err := checkStatefulSet(sts); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	return obj, nil
}

// checkStatefulSet: what the API server would refuse or the kubelet fail on that types do not say.
func checkStatefulSet(sts *appsv1.StatefulSet) error {
	spec := sts.Spec.Template.Spec
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
	}
	for _, c := range sts.Spec.VolumeClaimTemplates {
		volumes[c.Name] = true
	}
	if sts.Spec.Selector == nil {
		return fmt.Errorf("no selector")
	}
	for k, v := range sts.Spec.Selector.MatchLabels {
		if sts.Spec.Template.Labels[k] != v {
			return fmt.Errorf("the pod template's labels do not match the selector's %s=%s", k, v)
		}
	}
	if sts.Spec.ServiceName == "" {
		return fmt.Errorf("no serviceName: the pods would have no names")
	}
	for _, c := range spec.Containers {
		ports := map[string]bool{}
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				return fmt.Errorf("container %s mounts volume %s, which the pod does not have", c.Name, m.Name)
			}
		}
		for what, probe := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if probe == nil || probe.HTTPGet == nil {
				continue
			}
			port := probe.HTTPGet.Port
			if port.Type == intstr.String && !ports[port.StrVal] {
				return fmt.Errorf("container %s: the %s probe names port %s, which it does not declare", c.Name, what, port.StrVal)
			}
		}
	}
	return nil
}
