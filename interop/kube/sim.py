#!/usr/bin/env python3
"""Pod simulation: the chart's rendered StatefulSet played as Kubernetes would play it, on one machine.

No Kubernetes cluster is reachable from the test machines, so this plays the parts of one that the
NameServers meet, from the rendered manifests themselves (a JSON array of the objects, written by
packaging/helm/validate -json):

- A pod is a network namespace of its own with an address on a bridge, its hostname the pod's name (a
  UTS namespace), its /etc/resolv.conf naming the harness's DNS server with Kubernetes' search path, and
  its /etc/hosts as the kubelet writes it. A new pod (created again after a deletion) gets a new address.
- Its container runs the rendered command as the rendered user, with the ConfigMap's files, the Secrets
  (made by the harness) and the volumes at places of its own: every container path the pod mounts is
  rewritten to that place in the command and in the ConfigMap's files (the properties name the paths).
  A PersistentVolumeClaim's directory outlives its pod; an emptyDir does not.
- dnsmasq serves the headless Service's names: POD.SERVICE.NAMESPACE.svc.CLUSTER_DOMAIN is there from the
  moment the pod is created (publishNotReadyAddresses), moves with it, and is gone while it is deleted.
- The kubelet's probes are played from the rendered startup, readiness and liveness probes (path, port,
  period, threshold; a failed liveness probe restarts the container); deletion runs preStop, then
  SIGTERM, then SIGKILL at the end of terminationGracePeriodSeconds.
- The StatefulSet controller: all pods at once (podManagementPolicy Parallel), a rolling update from the
  highest ordinal down, each waiting for the one before to be Ready; a drain evicts one pod at a time as
  the PodDisruptionBudget allows.

A real Java broker pair in controller mode (the controller embedded in the NameServer pods) and a client
pod (interop.KubeSim: producer, consumer, KV writer, route watcher) use the pods' names. See
docs/kubernetes.md ("Tested without a cluster").
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

CLUSTER_BROKER = "broker-a"
TOPIC = "KubeSimTopic"
SAMPLE_PREFIX = "KubeTopic-"
# Seconds each scenario goes on being watched after its last step.
SETTLE_S = 8


def log(msg):
    print(f"[kube-sim {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def now_ms():
    return int(time.time() * 1000)


def run(*cmd, check=True, **kw):
    return subprocess.run(list(cmd), check=check, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


class Failure(Exception):
    pass


# ---------------------------------------------------------------------------------------------------
# The network: a bridge, an address per pod, and dnsmasq on the bridge's address.

class Network:
    def __init__(self, work, tag):
        self.work = work
        self.tag = tag
        self.bridge = f"{tag}br"
        self.subnet = self._free_subnet()
        self.host = f"{self.subnet}.1"
        self.next_ip = 11
        self.records = {}  # name -> [address]
        self.dns = None
        self.hosts_file = os.path.join(work, "dns", "hosts")
        self.lock = threading.Lock()

    def _free_subnet(self):
        used = run("ip", "-o", "addr", "show").stdout + run("ip", "route", "show", "table", "all").stdout
        start = os.getpid() % 200 + 20
        for c in list(range(start, 255)) + list(range(20, start)):
            if f"10.238.{c}." not in used:
                return f"10.238.{c}"
        raise Failure("no free 10.238.X.0/24")

    def up(self):
        # A bridge takes the lowest MAC among its ports unless given one: a pod created or deleted
        # would change it, and every pod's ARP entry for the DNS server would point nowhere until
        # it is probed again (seconds of lost lookups, which stall a Java client's event loop).
        third = int(self.subnet.split(".")[2])
        run("ip", "link", "add", self.bridge, "address", f"02:00:0a:ee:{third:02x}:01", "type", "bridge")
        run("ip", "addr", "add", f"{self.host}/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        os.makedirs(os.path.dirname(self.hosts_file), exist_ok=True)
        self._write_hosts()
        self.dns_log = os.path.join(self.work, "logs", "dnsmasq.log")
        self.dns = subprocess.Popen(
            ["dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--no-poll",
             f"--addn-hosts={self.hosts_file}", f"--listen-address={self.host}", "--bind-interfaces", "--port=53",
             "--local=/cluster.local/", "--no-negcache", "--local-ttl=0", "--user=root", "--pid-file=",
             f"--log-facility={self.dns_log}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        time.sleep(0.3)
        if self.dns.poll() is not None:
            raise Failure(f"dnsmasq exited: {open(self.dns_log).read()[-500:] if os.path.exists(self.dns_log) else ''}")
        log(f"bridge {self.bridge} {self.host}/24, dnsmasq on {self.host}:53 serving {self.hosts_file}")

    def new_address(self):
        with self.lock:
            ip = f"{self.subnet}.{self.next_ip}"
            self.next_ip = self.next_ip + 1 if self.next_ip < 250 else 11
            return ip

    def publish(self, name, addresses):
        with self.lock:
            if addresses:
                self.records[name] = list(addresses)
            else:
                self.records.pop(name, None)
            self._write_hosts()
        if self.dns is not None:
            self.dns.send_signal(signal.SIGHUP)

    def _write_hosts(self):
        tmp = self.hosts_file + ".tmp"
        with open(tmp, "w") as f:
            for name, addrs in sorted(self.records.items()):
                for a in addrs:
                    f.write(f"{a} {name}\n")
        os.replace(tmp, self.hosts_file)

    def down(self):
        if self.dns is not None:
            self.dns.terminate()
            try:
                self.dns.wait(5)
            except subprocess.TimeoutExpired:
                self.dns.kill()
        run("ip", "link", "del", self.bridge, check=False)


# ---------------------------------------------------------------------------------------------------
# A pod: namespace, files, container process, probes.

class Pod:
    def __init__(self, sim, name, spec, ordinal, kind):
        self.sim = sim
        self.name = name
        self.spec = spec  # the pod template's spec (a dict from the render), or None for a harness pod
        self.ordinal = ordinal
        self.kind = kind  # "namesrv", "broker" or "client"
        self.ip = None
        self.netns = None
        self.host_if = None  # the host's end of the pod's veth pair
        self.proc = None
        self.ready = False
        self.created_at = 0
        self.incarnation = 0
        self.restarts = 0
        self.stop_probes = threading.Event()
        self.probe_thread = None
        self.terminating = False
        self.command = None  # the container's argv, set by create
        self.env = {}
        self.user = None

    # -- network namespace ------------------------------------------------------------------------
    def _net_up(self):
        net = self.sim.net
        self.incarnation += 1
        self.ip = net.new_address()
        idx = self.sim.next_link()
        self.netns = f"{net.tag}-{self.name}"
        host_if, pod_if = f"{net.tag}h{idx}", f"{net.tag}p{idx}"
        self.host_if = host_if
        run("ip", "netns", "add", self.netns)
        run("ip", "link", "add", host_if, "type", "veth", "peer", "name", pod_if)
        run("ip", "link", "set", pod_if, "netns", self.netns)
        run("ip", "link", "set", host_if, "master", net.bridge)
        run("ip", "link", "set", host_if, "up")
        run("ip", "-n", self.netns, "addr", "add", f"{self.ip}/24", "dev", pod_if)
        run("ip", "-n", self.netns, "link", "set", pod_if, "up")
        run("ip", "-n", self.netns, "link", "set", "lo", "up")
        etc = f"/etc/netns/{self.netns}"
        os.makedirs(etc, exist_ok=True)
        ns, domain = self.sim.namespace, self.sim.cluster_domain
        fqdn = self.sim.pod_fqdn(self.name) if self.kind == "namesrv" else f"{self.name}.{ns}.svc.{domain}"
        with open(f"{etc}/hosts", "w") as f:
            f.write(f"127.0.0.1\tlocalhost\n{self.ip}\t{fqdn}\t{self.name}\n")
        with open(f"{etc}/resolv.conf", "w") as f:
            f.write(f"search {ns}.svc.{domain} svc.{domain} {domain}\nnameserver {net.host}\noptions ndots:5\n")

    def _net_down(self):
        if self.netns:
            # The pair goes with either end; the namespace itself may outlive its name a while.
            run("ip", "link", "del", self.host_if, check=False)
            run("ip", "netns", "del", self.netns, check=False)
            shutil.rmtree(f"/etc/netns/{self.netns}", ignore_errors=True)
            self.netns = None

    def exec_argv(self, argv, hostname=True, user=None):
        """argv run in this pod: its network namespace (and its /etc files), its hostname, its user."""
        inner = list(argv)
        if user is not None:
            inner = ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups", "--"] + inner
        if hostname:
            inner = ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', self.name] + inner
        return ["ip", "netns", "exec", self.netns] + inner

    # -- lifecycle ----------------------------------------------------------------------------------
    def create(self):
        """The pod is scheduled: a new address, its name published, its container started, probes on."""
        self._net_up()
        self.created_at = now_ms()
        self.terminating = False
        self.ready = False
        if self.kind == "namesrv":
            self.sim.publish_members()
        self.stop_probes = threading.Event()
        if self.kind == "client":
            return  # the client pod's programs are run in it one by one (Sim.client_java, Sim.start_traffic)
        self._start_container()
        if self.spec is not None:
            self.probe_thread = threading.Thread(target=self._probe_loop, name=f"probes-{self.name}", daemon=True)
            self.probe_thread.start()

    def _start_container(self):
        argv, env, user = self.sim.container_argv(self)
        logf = open(os.path.join(self.sim.work, "logs", f"{self.name}.{self.incarnation}.{self.restarts}.log"), "ab")
        self.proc = subprocess.Popen(self.exec_argv(argv, user=user), env=env, stdout=logf, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        logf.close()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig=signal.SIGKILL):
        if self.alive():
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def delete(self, graceful=True):
        """Kubernetes' deletion: off DNS, preStop, SIGTERM, SIGKILL at the grace period's end."""
        self.terminating = True
        self.ready = False
        t0 = time.monotonic()
        if self.kind == "namesrv":
            self.sim.publish_members()
        self.stop_probes.set()
        if graceful and self.spec is not None:
            grace = self.spec.get("terminationGracePeriodSeconds", 30)
            container = self.spec["containers"][0]
            pre = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command")
            if pre and self.alive():
                try:
                    subprocess.run(self.exec_argv(pre, hostname=False), timeout=grace, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
                except subprocess.TimeoutExpired:
                    pass
            self.kill(signal.SIGTERM)
            left = grace - (time.monotonic() - t0)
            try:
                self.proc.wait(max(left, 0))
            except subprocess.TimeoutExpired:
                log(f"{self.name}: still running at the end of its grace period ({grace} s): SIGKILL")
                self.kill(signal.SIGKILL)
        elif graceful:
            self.kill(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill(signal.SIGKILL)
        self.kill(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()
        self._net_down()
        return time.monotonic() - t0

    # -- probes -------------------------------------------------------------------------------------
    def _port(self, port):
        if isinstance(port, int):
            return port
        for p in self.spec["containers"][0].get("ports", []):
            if p.get("name") == port:
                return p["containerPort"]
        raise Failure(f"{self.name}: the probe names port {port}, which the container does not declare")

    def _probe(self, probe):
        timeout = probe.get("timeoutSeconds", 1)
        try:
            if "httpGet" in probe and self.sim.impl == "rust":
                h = probe["httpGet"]
                url = f"http://{self.ip}:{self._port(h['port'])}{h.get('path', '/')}"
                with urllib.request.urlopen(url, timeout=timeout) as r:
                    return 200 <= r.status < 400
            # The Java NameServer has no HTTP port: its probes connect to the remoting port.
            with socket.create_connection((self.ip, self.sim.remoting_port), timeout=timeout):
                return True
        except Exception:
            return False

    def _probe_loop(self):
        c = self.spec["containers"][0]
        startup, readiness, liveness = c.get("startupProbe"), c.get("readinessProbe"), c.get("livenessProbe")
        stop = self.stop_probes
        if startup:
            fails = 0
            while not stop.is_set():
                if self._probe(startup):
                    break
                fails += 1
                if fails >= startup.get("failureThreshold", 3):
                    log(f"{self.name}: startup probe failed {fails} times: container restarted")
                    self._restart_container()
                    fails = 0
                stop.wait(startup.get("periodSeconds", 10))
        due = {"readiness": 0.0, "liveness": time.monotonic() + (liveness or {}).get("initialDelaySeconds", 0)}
        fails = {"readiness": 0, "liveness": 0}
        while not stop.is_set():
            t = time.monotonic()
            if readiness and t >= due["readiness"]:
                due["readiness"] = t + readiness.get("periodSeconds", 10)
                if self._probe(readiness):
                    fails["readiness"] = 0
                    if not self.ready and not stop.is_set():
                        self.ready = True
                else:
                    fails["readiness"] += 1
                    if fails["readiness"] >= readiness.get("failureThreshold", 3):
                        self.ready = False
            if liveness and t >= due["liveness"]:
                due["liveness"] = t + liveness.get("periodSeconds", 10)
                if self._probe(liveness):
                    fails["liveness"] = 0
                else:
                    fails["liveness"] += 1
                    if fails["liveness"] >= liveness.get("failureThreshold", 3):
                        log(f"{self.name}: liveness probe failed {fails['liveness']} times: container restarted")
                        self._restart_container()
                        fails["liveness"] = 0
            stop.wait(0.1)

    def _restart_container(self):
        self.ready = False
        self.kill(signal.SIGTERM)
        try:
            self.proc.wait(self.spec.get("terminationGracePeriodSeconds", 30))
        except subprocess.TimeoutExpired:
            self.kill(signal.SIGKILL)
            self.proc.wait()
        self.restarts += 1
        self._start_container()

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready:
                return (now_ms() - self.created_at) / 1000.0
            time.sleep(0.05)
        raise Failure(f"{self.name} was not Ready within {timeout} s (log: logs/{self.name}.{self.incarnation}.*)")


# ---------------------------------------------------------------------------------------------------
# The simulation: the render's objects, the StatefulSet's pods, the brokers and the client pod.

class Sim:
    def __init__(self, args):
        self.args = args
        self.work = args.work
        self.impl = args.impl
        os.makedirs(os.path.join(self.work, "logs"), exist_ok=True)
        with open(args.render) as f:
            objects = json.load(f)
        self.namespace = args.namespace
        self.cluster_domain = args.cluster_domain
        self.sts = next(o for o in objects if o["kind"] == "StatefulSet"
                        and o["metadata"]["name"] == args.release)
        self.configmaps = {o["metadata"]["name"]: o.get("data", {}) for o in objects if o["kind"] == "ConfigMap"}
        services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
        headless = services.get(self.sts["spec"]["serviceName"])
        if headless is None or headless["spec"].get("clusterIP") != "None":
            raise Failure(f"serviceName {self.sts['spec']['serviceName']} is not a headless Service of the render")
        if not headless["spec"].get("publishNotReadyAddresses"):
            raise Failure("the headless Service does not publish not-ready addresses: a restarting member's name "
                          "would not resolve while it catches up")
        self.headless = headless["metadata"]["name"]
        pdbs = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
        self.max_unavailable = pdbs[0]["spec"].get("maxUnavailable", 1) if pdbs else None
        self.template = self.sts["spec"]["template"]["spec"]
        self.container = self.template["containers"][0]
        self.remoting_port = next(p["containerPort"] for p in self.container["ports"] if p["name"] == "remoting")
        ctl = [p["containerPort"] for p in self.container["ports"] if p["name"] == "controller"]
        self.controller_port = ctl[0] if ctl else None
        self.replicas = self.sts["spec"]["replicas"]
        self.net = Network(self.work, f"ks{os.getpid() % 10000}")
        self.links = 0
        self.pods = [Pod(self, f"{args.release}-{i}", self.template, i, "namesrv") for i in range(self.replicas)]
        # With the controller: a master and a slave it elects between; without: one master.
        self.brokers = [Pod(self, f"broker-a-{i}", None, i, "broker")
                        for i in range(2 if self.controller_port else 1)]
        self.client = Pod(self, "client", None, 0, "client")
        self.pvc_root = os.path.join(self.work, "pvc")
        self.secret_values = {}
        self.traffic = None
        self.traffic_dir = os.path.join(self.work, "traffic")
        self.phases = []  # (name, start_ms, end_ms)
        self.results = []
        self.failures = []

    def next_link(self):
        self.links += 1
        return self.links

    def pod_fqdn(self, pod):
        return f"{pod}.{self.headless}.{self.namespace}.svc.{self.cluster_domain}"

    def ns_names(self):
        return [f"{self.pod_fqdn(p.name)}:{self.remoting_port}" for p in self.pods]

    def publish_members(self):
        """The headless Service's records: every pod that exists and is not terminating."""
        live = [p for p in self.pods if p.netns and not p.terminating]
        for p in self.pods:
            self.net.publish(self.pod_fqdn(p.name), [p.ip] if p in live else [])
        self.net.publish(f"{self.headless}.{self.namespace}.svc.{self.cluster_domain}", [p.ip for p in live])

    # -- the container of a StatefulSet pod -----------------------------------------------------------
    def container_argv(self, pod):
        if pod.kind == "broker":
            return self.broker_argv(pod)
        places = self._volumes(pod)
        # Longest container path first, so that /a/b is rewritten before /a; in one pass, so that
        # a place under a host path a container also mounts (/var/tmp/... and /tmp) is not
        # rewritten again.
        order = sorted(places, key=len, reverse=True)
        mounted = re.compile("|".join(re.escape(path) for path in order)) if order else None

        def rewrite(text):
            return mounted.sub(lambda m: places[m.group(0)], text) if mounted else text

        for path, (cm, items) in self._configmap_mounts().items():
            os.makedirs(places[path], exist_ok=True)
            for key, value in items.items():
                with open(os.path.join(places[path], key), "w") as f:
                    f.write(rewrite(value))
                os.chmod(os.path.join(places[path], key), 0o644)
        argv = [rewrite(a) for a in self.container.get("command", []) + self.container.get("args", [])]
        if self.impl == "java":
            # The control: the Java NameServer started with the same rendered properties file.
            conf = next(a for a in argv if a.endswith(".properties"))
            argv = [self.args.java, "-Xms128m", "-Xmx256m", "-XX:+UseSerialGC", f"-Duser.home={places['/tmp']}",
                    "-cp", self.args.servers_cp, "org.apache.rocketmq.namesrv.NamesrvStartup", "-c", conf]
        else:
            argv[0] = os.path.join(self.args.bin_dir, argv[0])
        env = {"PATH": "/usr/bin:/bin", "HOSTNAME": pod.name, "HOME": places.get("/tmp", "/"),
               "ROCKETMQ_HOME": self.args.rocketmq_home}
        for e in self.container.get("env", []):
            if "value" in e:
                env[e["name"]] = e["value"]
        sc = self.template.get("securityContext", {})
        user = (sc.get("runAsUser", 0), sc.get("runAsGroup", sc.get("runAsUser", 0)))
        if self.impl == "java":
            user = None  # the JDK lives in root's places; the control is about routes, not users
        return argv, env, user

    def _configmap_mounts(self):
        volumes = {v["name"]: v for v in self.template.get("volumes", [])}
        found = {}
        for m in self.container.get("volumeMounts", []):
            v = volumes.get(m["name"])
            if v and "configMap" in v:
                found[m["mountPath"]] = (v["configMap"]["name"], self.configmaps[v["configMap"]["name"]])
        return found

    def _volumes(self, pod):
        """Container path -> the pod's directory for it (made, owned as the pod's fsGroup would be)."""
        volumes = {v["name"]: v for v in self.template.get("volumes", [])}
        claims = {c["metadata"]["name"] for c in self.sts["spec"].get("volumeClaimTemplates", [])}
        sc = self.template.get("securityContext", {})
        uid, gid = sc.get("runAsUser", 0), sc.get("fsGroup", sc.get("runAsGroup", 0))
        base = os.path.join(self.work, "pods", pod.name, str(pod.incarnation))
        places = {}
        for m in self.container.get("volumeMounts", []):
            name = m["name"]
            if name in claims:
                d = os.path.join(self.pvc_root, f"{name}-{pod.name}")
            else:
                d = os.path.join(base, name)
            os.makedirs(d, exist_ok=True)
            v = volumes.get(name, {})
            if "secret" in v:
                for key, value in self.secret(v["secret"]["secretName"]).items():
                    p = os.path.join(d, key)
                    with open(p, "w") as f:
                        f.write(value)
                    os.chown(p, 0, gid)
                    os.chmod(p, v["secret"].get("defaultMode", 0o644))
                os.chown(d, 0, gid)
                os.chmod(d, 0o755)
            elif "configMap" not in v:
                os.chown(d, uid, gid)
                os.chmod(d, 0o2770)
            places[m["mountPath"]] = d
        return places

    def secret(self, name):
        """The Secrets the chart names but does not render, made as an operator would."""
        if name not in self.secret_values:
            self.secret_values[name] = {"secret": "".join(random.choice("abcdefghijkmnpqrstuvwxyz23456789")
                                                          for _ in range(40)) + "\n"}
        return self.secret_values[name]

    # -- brokers --------------------------------------------------------------------------------------
    def broker_argv(self, pod):
        d = os.path.join(self.pvc_root, f"broker-{pod.name}")
        store = os.path.join(d, "store")
        os.makedirs(os.path.join(store, "config"), exist_ok=True)
        os.makedirs(os.path.join(d, "home"), exist_ok=True)
        topics_json = os.path.join(store, "config", "topics.json")
        if not os.path.exists(topics_json):
            self.write_topics(topics_json)
        if self.controller_port:
            ctl = ";".join(f"{self.pod_fqdn(p.name)}:{self.controller_port}" for p in self.pods)
            role = ["brokerId=-1", "brokerRole=SLAVE", "enableControllerMode=true", f"controllerAddr={ctl}",
                    "allAckInSyncStateSet=true"]
        else:
            role = ["brokerId=0", "brokerRole=ASYNC_MASTER"]
        conf = os.path.join(d, "broker.conf")
        with open(conf, "w") as f:
            f.write("\n".join([
                "brokerClusterName=KubeSimCluster", f"brokerName={CLUSTER_BROKER}"] + role + [
                f"namesrvAddr={';'.join(self.ns_names())}",
                "flushDiskType=ASYNC_FLUSH", f"brokerIP1={pod.ip}", f"brokerIP2={pod.ip}", "listenPort=10911",
                "haListenPort=10912", f"storePathRootDir={store}", f"storePathCommitLog={store}/commitlog",
                "mappedFileSizeCommitLog=67108864", "mappedFileSizeConsumeQueue=600000",
                "autoCreateTopicEnable=false", "diskMaxUsedSpaceRatio=95", "waitTimeMillsInSendQueue=3000", ""]))
        argv = [self.args.java, "-Xms256m", "-Xmx512m", "-XX:MaxDirectMemorySize=512m", "-XX:+UseSerialGC",
                f"-Duser.home={d}/home", f"-Djava.io.tmpdir={d}/home"] + self.args.jvm_opens.split() + [
                "-cp", self.args.servers_cp, "org.apache.rocketmq.broker.BrokerStartup", "-c", conf]
        env = dict(os.environ, ROCKETMQ_HOME=self.args.rocketmq_home)
        return argv, env, None

    def write_topics(self, path):
        table = {}
        for name in [TOPIC] + [f"{SAMPLE_PREFIX}{i}" for i in range(self.args.topics)]:
            table[name] = {"topicName": name, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                           "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False, "attributes": {}}
        with open(path, "w") as f:
            json.dump({"topicConfigTable": table,
                       "dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": now_ms()}}, f)

    # -- client pod -----------------------------------------------------------------------------------
    def client_java(self, *args, timeout=300):
        argv = [self.args.java, "-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                f"-Duser.home={self.work}/client-home"] + self.args.jvm_opens.split() + [
                "-cp", self.args.clients_cp, "interop.KubeSim"] + list(args)
        return subprocess.run(self.client.exec_argv(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout)

    def nsadmin_diff(self):
        r = subprocess.run(self.client.exec_argv([self.args.nsadmin, "diff", "-n", ";".join(self.ns_names())]),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        return r.returncode, r.stdout.strip()

    def start_traffic(self):
        os.makedirs(self.traffic_dir, exist_ok=True)
        argv = [self.args.java, "-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                f"-Duser.home={self.work}/client-home"] + self.args.jvm_opens.split() + [
                "-cp", self.args.clients_cp, "interop.KubeSim", "traffic", f"ns={';'.join(self.ns_names())}",
                f"topic={TOPIC}", f"broker={CLUSTER_BROKER}", f"sample={SAMPLE_PREFIX}:{self.args.topics}",
                f"out={self.traffic_dir}"]
        logf = open(os.path.join(self.work, "logs", "traffic.log"), "ab")
        self.traffic = subprocess.Popen(self.client.exec_argv(argv), stdout=logf, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        logf.close()

    def stop_traffic(self):
        open(os.path.join(self.traffic_dir, "stop"), "w").close()
        try:
            self.traffic.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(self.traffic.pid, signal.SIGKILL)
            raise Failure("the client pod's traffic did not stop within 120 s")

    def events(self, name):
        path = os.path.join(self.traffic_dir, name)
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [line.split(" ", 3) for line in f.read().splitlines() if line]

    # -- checks -----------------------------------------------------------------------------------------
    def await_sends_ok(self, since_ms, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(int(e[0]) > since_ms and e[1] == "ok" for e in self.events("sends")):
                return
            time.sleep(0.2)
        raise Failure(f"no send acknowledged within {timeout} s")

    def await_routes_everywhere(self, timeout):
        """Every pod routes the broker's topics (the sample's last name, and the producer's topic)."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.route_states()
            if all(s == "ok" for s in states.values()) and len(states) == len(self.pods):
                return
            if time.monotonic() > deadline:
                raise Failure(f"routes not served everywhere within {timeout} s: {states}")
            time.sleep(0.5)

    def route_states(self):
        last = {}
        for e in self.events("routes"):
            last[e[1]] = e[2]
        return last

    def phase(self, name):
        return Phase(self, name)


class Phase:
    """A named stretch of the run: what the clients saw in it is judged by its times."""

    def __init__(self, sim, name):
        self.sim, self.name = sim, name

    def __enter__(self):
        self.start = now_ms()
        log(f"=== {self.name}")
        return self

    def __exit__(self, *exc):
        self.end = now_ms()
        self.sim.phases.append((self.name, self.start, self.end))
        return False


# ---------------------------------------------------------------------------------------------------
# What the clients saw: failed sends and route windows, by phase.

def windows(events, start, end):
    """Per NameServer: the longest stretch in [start, end] of each state other than ok, in ms."""
    per = {}
    for e in events:
        per.setdefault(e[1], []).append((int(e[0]), e[2]))
    out = {}
    for addr, changes in per.items():
        longest = {}
        for i, (t, state) in enumerate(changes):
            t_end = changes[i + 1][0] if i + 1 < len(changes) else end
            a, b = max(t, start), min(t_end, end)
            if state != "ok" and b > a:
                longest[state] = max(longest.get(state, 0), b - a)
        out[addr] = longest
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--render", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--release", default="mqnamesrv")
    ap.add_argument("--namespace", default="rocketmq")
    ap.add_argument("--cluster-domain", default="cluster.local")
    ap.add_argument("--impl", default="rust", choices=["rust", "java"])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--nsadmin", required=True)
    ap.add_argument("--java", required=True)
    ap.add_argument("--jvm-opens", default="")
    ap.add_argument("--servers-cp", required=True)
    ap.add_argument("--clients-cp", required=True)
    ap.add_argument("--rocketmq-home", required=True)
    ap.add_argument("--topics", type=int, default=10000)
    ap.add_argument("--scenarios", default="rolling reschedule delete-all drain failover")
    ap.add_argument("--report", default="")
    args = ap.parse_args()
    sim = Sim(args)
    rc = 1
    try:
        rc = play(sim, args.scenarios.split())
    except Failure as e:
        log(f"FAILED: {e}")
    finally:
        teardown(sim)
    sys.exit(rc)


def teardown(sim):
    if sim.traffic is not None and sim.traffic.poll() is None:
        os.killpg(sim.traffic.pid, signal.SIGKILL)
    for p in sim.pods + sim.brokers + [sim.client]:
        try:
            p.stop_probes.set()
            p.kill(signal.SIGKILL)
            if p.proc is not None:
                p.proc.wait(10)
            p._net_down()
        except Exception as e:  # teardown goes on whatever one pod does
            log(f"teardown of {p.name}: {e}")
    sim.net.down()


def step_diff(sim, label, require_agreement):
    t0 = time.monotonic()
    # A registration landing on one member while the diff reads the others shows for a moment: the
    # check asks again until 30 s have passed. What the first try said is logged either way. (Its
    # lookups timing out right after a pod was recreated came from the bridge changing its MAC with
    # its ports, which it no longer does: see Network.up.)
    deadline = t0 + (30 if require_agreement else 0)
    first = True
    while True:
        code, out = sim.nsadmin_diff()
        if first and code != 0:
            log(f"nsadmin diff right after {label}: exit {code}:\n{out[-1500:]}")
        first = False
        if code == 0 or time.monotonic() >= deadline:
            break
        time.sleep(1)
    summary = out.splitlines()[-1] if out else ""
    log(f"nsadmin diff after {label}: exit {code} ({time.monotonic() - t0:.1f} s): {summary}")
    if require_agreement and code != 0:
        raise Failure(f"nsadmin diff finds differences once every pod is ready after {label}:\n{out[-2000:]}")
    return code


def rolling(sim, order, label, gate_pdb=False):
    ready_secs = []
    for i in order:
        pod = sim.pods[i]
        if gate_pdb:
            # An eviction is refused while it would leave more than maxUnavailable pods unready.
            blocked = 0
            while sum(1 for p in sim.pods if not p.ready) + 1 > sim.max_unavailable:
                blocked += 1
                time.sleep(1)
            if blocked:
                log(f"eviction of {pod.name} waited {blocked} s for the PodDisruptionBudget")
        took = pod.delete()
        pod.create()
        secs = pod.wait_ready(120)
        ready_secs.append(secs)
        log(f"{label}: {pod.name} deleted in {took:.1f} s, created at {pod.ip}, Ready {secs:.2f} s after creation")
        sim.results.append({"step": f"{label} {pod.name}", "deleted_s": round(took, 2), "ready_s": round(secs, 2),
                            "diff": step_diff(sim, f"{label} of {pod.name}", sim.impl == "rust")})
    return ready_secs


def play(sim, scenarios):
    sim.net.up()
    # The StatefulSet's pods, all at once (Parallel).
    with sim.phase("start"):
        for p in sim.pods:
            p.create()
        for p in sim.pods:
            secs = p.wait_ready(120)
            log(f"{p.name} at {p.ip} Ready {secs:.2f} s after creation")
        sim.client.create()
        for b in sim.brokers:
            b.create()
        log(f"brokers {', '.join(b.name + ' at ' + b.ip for b in sim.brokers)} started with "
            f"{sim.args.topics} topics" + (", in controller mode" if sim.controller_port else ""))
        # The clients start once a master has registered: a broker busy with its start-up (10,000
        # topics to load and register) can time a new consumer's first heartbeat out, after which the
        # 5.x client stops pulling some queues (seen here, with the Java NameServer too).
        r = sim.client_java("master", f"ns={';'.join(sim.ns_names())}", f"broker={CLUSTER_BROKER}", "addr=any",
                            "timeoutMs=240000")
        if r.returncode != 0:
            raise Failure(f"no master of {CLUSTER_BROKER} registered:\n{r.stdout[-1500:]}")
        time.sleep(SETTLE_S)
        sim.start_traffic()
        sim.await_sends_ok(0, 240)
        sim.await_routes_everywhere(120)
        step_diff(sim, "start", sim.impl == "rust")
    for s in scenarios:
        with sim.phase(s) as ph:
            if s == "rolling":
                rolling(sim, reversed(range(len(sim.pods))), "rolling restart")
            elif s == "reschedule":
                pod = sim.pods[1 % len(sim.pods)]
                pod.delete(graceful=False)  # its node is gone: no preStop, no SIGTERM
                pod.create()
                secs = pod.wait_ready(120)
                log(f"{pod.name} rescheduled to {pod.ip}, Ready {secs:.2f} s after creation")
                step_diff(sim, "the reschedule", sim.impl == "rust")
            elif s == "delete-all":
                threads = [threading.Thread(target=p.delete) for p in sim.pods]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                for p in sim.pods:
                    p.create()
                for p in sim.pods:
                    secs = p.wait_ready(180)
                    log(f"{p.name} recreated at {p.ip}, Ready {secs:.2f} s after creation")
                step_diff(sim, "deleting every pod", sim.impl == "rust")
            elif s == "drain":
                rolling(sim, range(len(sim.pods)), "drain", gate_pdb=True)
            elif s == "failover":
                failover(sim, ph)
            else:
                raise Failure(f"unknown scenario {s}")
            # What a scenario set off (a broker failing over, clients moving) shows in its own phase.
            time.sleep(SETTLE_S)
    sim.stop_traffic()
    return judge(sim)


def failover(sim, ph):
    """The master broker's pod is killed: the controller in the NameServer pods elects the other."""
    r = sim.client_java("master", f"ns={';'.join(sim.ns_names())}", f"broker={CLUSTER_BROKER}",
                        f"addr={sim.brokers[0].ip}:10911", "timeoutMs=5000")
    master, other = (sim.brokers[0], sim.brokers[1]) if r.returncode == 0 else (sim.brokers[1], sim.brokers[0])
    killed = now_ms()
    master.delete(graceful=False)
    r = sim.client_java("master", f"ns={';'.join(sim.ns_names())}", f"broker={CLUSTER_BROKER}",
                        f"addr={other.ip}:10911", "timeoutMs=60000")
    if r.returncode != 0:
        raise Failure(f"the controller did not elect {other.name} after {master.name} was killed:\n{r.stdout[-1500:]}")
    elected = now_ms()
    sim.await_sends_ok(elected, 60)
    resumed = max(int(e[0]) for e in sim.events("sends") if e[1] == "ok")
    log(f"{master.name} killed: {other.name} elected master {elected - killed} ms later; sends resumed")
    master.create()  # the StatefulSet brings the pod back: it rejoins as a slave
    ph.failover = (killed, elected, resumed)


def judge(sim):
    ok = True
    sends = sim.events("sends")
    for name, start, end in sim.phases:
        failed = [e for e in sends if start <= int(e[0]) <= end and e[1] == "failed"]
        acked = sum(1 for e in sends if start <= int(e[0]) <= end and e[1] == "ok")
        w = windows(sim.events("routes"), start, end)
        missing = max([v.get("missing", 0) for v in w.values()] or [0])
        refused = max([v.get("refused", 0) for v in w.values()] or [0])
        down = max([v.get("down", 0) for v in w.values()] or [0])
        log(f"{name}: {acked} sends acknowledged, {len(failed)} failed; longest route window per NameServer: "
            f"missing {missing} ms, refused {refused} ms, down {down} ms")
        sim.results.append({"phase": name, "acked": acked, "failed": len(failed), "missing_ms": missing,
                            "refused_ms": refused, "down_ms": down})
        # The start is set-up: sends fail until the broker has registered its topics.
        if name not in ("start", "failover") and failed:
            log(f"  {name}: sends failed, e.g. {' '.join(failed[0][1:])}")
            ok = False
        if name not in ("start", "failover") and missing > 0 and sim.impl == "rust":
            log(f"  {name}: a NameServer answered a topic of the broker as missing for {missing} ms")
            ok = False
    result = open(os.path.join(sim.traffic_dir, "result")).read().split() if os.path.exists(
        os.path.join(sim.traffic_dir, "result")) else []
    if len(result) == 4:
        sim.results.append({"messages_acknowledged": int(result[1]), "messages_received": int(result[3])})
    if len(result) != 4 or result[1] != result[3]:
        log(f"messages acknowledged but not received: {' '.join(result) or 'no result'}")
        ok = False
    else:
        log(f"the consumer received all {result[1]} acknowledged messages")
    # The brokers' role changes, as they logged them: a failover outside the failover scenario
    # (a master flipped by the controller) is what failed sends and lost messages come from.
    for b in sim.brokers:
        path = os.path.join(sim.pvc_root, f"broker-{b.name}", "home", "logs", "rocketmqlogs", "broker.log")
        if os.path.exists(path):
            for line in open(path, errors="replace"):
                if "Change broker [" in line:
                    log(f"{b.name} role: {line.strip()[:220]}")
    if sim.impl == "rust":
        r = sim.client_java("kv-kept", f"ns={';'.join(sim.ns_names())}", f"file={sim.traffic_dir}/kv")
        log(r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "kv-kept printed nothing")
        ok = ok and r.returncode == 0
        ok = step_diff(sim, "the last scenario", True) == 0 and ok
    if sim.args.report:
        with open(sim.args.report, "w") as f:
            json.dump(sim.results, f, indent=1)
    log("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    main()
