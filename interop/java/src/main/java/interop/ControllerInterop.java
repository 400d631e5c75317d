package interop;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.Pair;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.body.BrokerMemberGroup;
import org.apache.rocketmq.remoting.protocol.body.BrokerReplicasInfo;
import org.apache.rocketmq.remoting.protocol.body.BrokerReplicasInfo.ReplicaIdentity;
import org.apache.rocketmq.remoting.protocol.body.BrokerReplicasInfo.ReplicasInfo;
import org.apache.rocketmq.remoting.protocol.body.EpochEntryCache;
import org.apache.rocketmq.remoting.protocol.body.HARuntimeInfo;
import org.apache.rocketmq.remoting.protocol.header.controller.ElectMasterResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.GetMetaDataResponseHeader;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Steps of the controller-mode interop suite (scripts/interop-controller, scripts/bench-controller), driven
 * through the 5.5.0 admin and client API against a controller group (Java ControllerStartup, our mqcontroller,
 * or controllers embedded in NameServers) and a replica group of real 5.5.0 brokers in controller mode.
 *
 * The driver script starts and restarts processes; this class observes them (controller metadata, sync-state
 * set, NameServer routes, broker logs) and kills or stops them itself when a step needs the exact moment
 * (kill -9, SIGSTOP, SIGCONT), so that failover times are measured from one long-lived JVM polling every 100 ms.
 *
 * Usage: ControllerInterop STEP key=value... ; exit code 0 = pass. Common keys:
 *   ns=ADDR[;ADDR]  cluster=NAME  broker=BROKER_NAME  topic=TOPIC  work=DIR (the run's work dir, for broker logs)
 *   controllers=NAME@HOST:PORT@PID;...   the controller nodes (pid 0 = not running)
 *   brokers=NAME@HOST:PORT@PID;...       the replica group's brokers that should be running
 * Lines starting with "TIMING " are machine-readable measurements; "KILLED NAME" and "LEADER ..." lines tell the
 * script what changed.
 */
public final class ControllerInterop {
    private static final int CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009;
    private static final int CONTROLLER_ELECT_MASTER_FAILED = 2012;
    private static final long POLL_MS = 100;

    private final Map<String, String> args;
    private final String cluster;
    private final String brokerName;
    private final String topic;
    private final List<Node> controllers;
    private final List<Node> brokers;
    private final DefaultMQAdminExt admin;
    private final String ns;

    /** A process the script started: a controller node or a broker. */
    static final class Node {
        final String name;
        final String addr;
        final long pid;

        Node(String spec) {
            String[] p = spec.split("@");
            this.name = p[0];
            this.addr = p[1];
            this.pid = p.length > 2 ? Long.parseLong(p[2]) : 0;
        }

        boolean alive() {
            return pidAlive(pid);
        }

        @Override
        public String toString() {
            return name + "(" + addr + ")";
        }
    }

    private ControllerInterop(Map<String, String> args) {
        this.args = args;
        this.ns = arg("ns");
        this.cluster = arg("cluster");
        this.brokerName = arg("broker");
        this.topic = args.getOrDefault("topic", "CtlTopic");
        this.controllers = nodes(args.getOrDefault("controllers", ""));
        this.brokers = nodes(args.getOrDefault("brokers", ""));
        this.admin = new DefaultMQAdminExt(5000);
        admin.setNamesrvAddr(ns);
        admin.setInstanceName("ctl-interop-" + System.nanoTime());
    }

    private static List<Node> nodes(String spec) {
        List<Node> out = new ArrayList<>();
        for (String s : spec.split(";")) {
            if (!s.isEmpty()) {
                out.add(new Node(s));
            }
        }
        return out;
    }

    public static void main(String[] argv) {
        Map<String, String> args = Interop.keyValues(argv);
        int rc = 0;
        ControllerInterop it = null;
        try {
            it = new ControllerInterop(args);
            it.admin.start();
            switch (argv[0]) {
                case "await-healthy": it.awaitHealthy(Long.parseLong(args.getOrDefault("timeoutMs", "180000"))); break;
                case "leader": it.printLeader(); break;
                case "tls-only": it.tlsOnly(); break;
                case "a": it.scenarioA(); break;
                case "b": it.scenarioB(); break;
                case "kill-master": it.killMaster(); break;
                case "c": it.scenarioC(); break;
                case "d": it.scenarioD(); break;
                case "e": it.scenarioE(); break;
                case "f-before": it.scenarioFBefore(); break;
                case "f-after": it.scenarioFAfter(); break;
                case "g-elect": it.scenarioGElect(); break;
                case "g-clean": it.scenarioGClean(); break;
                case "clean-extra": it.cleanExtra(); break;
                case "h": it.scenarioH(); break;
                case "j": it.scenarioJ(); break;
                case "k": it.scenarioK(); break;
                case "i": it.scenarioI(); break;
                case "l": it.scenarioL(); break;
                case "m": it.scenarioM(); break;
                case "n": it.scenarioN(); break;
                case "bench-round": it.benchRound(); break;
                default: throw new IllegalArgumentException("unknown step " + argv[0]);
            }
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.out.println("FAILED: " + e);
            rc = 1;
        } finally {
            if (it != null) {
                it.admin.shutdown();
            }
        }
        System.out.flush();
        System.exit(rc);
    }

    // ------------------------------------------------------------------------------------------------------------
    // Observations

    /** The controller-side view of the replica group (CONTROLLER_GET_SYNC_STATE_DATA through the leader). */
    static final class View {
        final ReplicasInfo info;
        final String via;

        View(ReplicasInfo info, String via) {
            this.info = info;
            this.via = via;
        }

        Long masterId() {
            return info.getMasterBrokerId();
        }

        String masterAddr() {
            return info.getMasterAddress();
        }

        List<ReplicaIdentity> all() {
            List<ReplicaIdentity> l = new ArrayList<>(info.getInSyncReplicas());
            l.addAll(info.getNotInSyncReplicas());
            return l;
        }

        ReplicaIdentity byAddr(String addr) {
            return all().stream().filter(r -> addr.equals(r.getBrokerAddress())).findFirst().orElse(null);
        }

        ReplicaIdentity byId(long id) {
            return all().stream().filter(r -> r.getBrokerId() == id).findFirst().orElse(null);
        }

        boolean inSync(String addr) {
            return info.getInSyncReplicas().stream().anyMatch(r -> addr.equals(r.getBrokerAddress()));
        }

        Set<String> inSyncAddrs() {
            return info.getInSyncReplicas().stream().map(ReplicaIdentity::getBrokerAddress).collect(Collectors.toCollection(TreeSet::new));
        }

        @Override
        public String toString() {
            return String.format("master=%s@%s masterEpoch=%d syncStateSetEpoch=%d inSync=%s notInSync=%s (via %s)",
                masterId(), masterAddr(), info.getMasterEpoch(), info.getSyncStateSetEpoch(),
                fmt(info.getInSyncReplicas()), fmt(info.getNotInSyncReplicas()), via);
        }

        static String fmt(List<ReplicaIdentity> l) {
            return l.stream().sorted((x, y) -> Long.compare(x.getBrokerId(), y.getBrokerId()))
                .map(r -> r.getBrokerId() + "@" + r.getBrokerAddress() + (Boolean.TRUE.equals(r.getAlive()) ? "" : "(dead)"))
                .collect(Collectors.joining(",", "[", "]"));
        }
    }

    private List<Node> liveControllers() {
        return controllers.stream().filter(Node::alive).collect(Collectors.toList());
    }

    private GetMetaDataResponseHeader meta(String addr) {
        try {
            return admin.getControllerMetaData(addr);
        } catch (Exception e) {
            return null;
        }
    }

    /** The leader named by the first live controller that names one (may not yet serve: see view()). */
    private String namedLeader() {
        for (Node c : liveControllers()) {
            GetMetaDataResponseHeader m = meta(c.addr);
            if (m != null && m.getControllerLeaderAddress() != null && !m.getControllerLeaderAddress().isEmpty()) {
                return m.getControllerLeaderAddress();
            }
        }
        return null;
    }

    private Node controllerByAddr(String addr) {
        return controllers.stream().filter(c -> c.addr.equals(addr)).findFirst().orElse(null);
    }

    /** GET_SYNC_STATE_DATA as mqadmin getSyncStateSet sends it: metadata from a node, then the leader. */
    private View view() {
        for (Node c : liveControllers()) {
            try {
                BrokerReplicasInfo r = admin.getInSyncStateData(c.addr, Collections.singletonList(brokerName));
                ReplicasInfo ri = r == null || r.getReplicasInfoTable() == null ? null : r.getReplicasInfoTable().get(brokerName);
                if (ri != null) {
                    return new View(ri, c.name);
                }
            } catch (Exception e) {
                // the next node, or not yet
            }
        }
        return null;
    }

    /** The replica group's broker addresses in the route of the test topic (id -> address), or null. */
    private Map<Long, String> route() {
        try {
            TopicRouteData r = admin.examineTopicRouteInfo(topic);
            for (BrokerData bd : r.getBrokerDatas()) {
                if (brokerName.equals(bd.getBrokerName())) {
                    return new TreeMap<>(bd.getBrokerAddrs());
                }
            }
            lastRouteError = "the route of " + topic + " has no " + brokerName + ": " + r;
        } catch (Exception e) {
            lastRouteError = e.toString();
        }
        return null;
    }

    private String lastRouteError = "";

    private Map<Long, String> clusterEntry() throws Exception {
        BrokerData bd = admin.examineBrokerClusterInfo().getBrokerAddrTable().get(brokerName);
        return bd == null ? null : new TreeMap<>(bd.getBrokerAddrs());
    }

    private Node brokerByAddr(String addr) {
        return brokers.stream().filter(b -> b.addr.equals(addr)).findFirst().orElse(null);
    }

    private String name(String addr) {
        Node n = brokerByAddr(addr);
        return n == null ? addr : n.name + "(" + addr + ")";
    }

    private Set<String> liveBrokerAddrs() {
        return brokers.stream().filter(Node::alive).map(b -> b.addr).collect(Collectors.toCollection(TreeSet::new));
    }

    /**
     * Healthy: the controller names a master among the running brokers; every running broker is in the sync-state
     * set and alive; the NameServer route lists the master at id 0 and every slave at its controller id.
     */
    private String unhealthyReason(View v, Map<Long, String> route, Set<String> expected) {
        if (v == null) {
            return "no sync-state data from the controller";
        }
        if (v.masterId() == null || v.masterAddr() == null || !expected.contains(v.masterAddr())) {
            return "no running master: " + v;
        }
        if (!v.inSyncAddrs().equals(expected)) {
            return "sync-state set " + v.inSyncAddrs() + " != running brokers " + expected + ": " + v;
        }
        for (ReplicaIdentity r : v.info.getInSyncReplicas()) {
            if (!Boolean.TRUE.equals(r.getAlive())) {
                return "replica " + r + " not alive: " + v;
            }
        }
        if (route == null) {
            return "no route for " + topic + " (" + lastRouteError + ")";
        }
        if (!v.masterAddr().equals(route.get(0L))) {
            return "route " + route + " does not list the master " + v.masterAddr() + " at id 0";
        }
        for (ReplicaIdentity r : v.info.getInSyncReplicas()) {
            if (!r.getBrokerAddress().equals(v.masterAddr()) && !r.getBrokerAddress().equals(route.get(r.getBrokerId()))) {
                return "route " + route + " does not list slave " + r.getBrokerAddress() + " at its id " + r.getBrokerId();
            }
        }
        if (route.size() != expected.size()) {
            return "route " + route + " lists " + route.size() + " brokers, expected " + expected.size();
        }
        return null;
    }

    private View awaitHealthy(long timeoutMs) throws Exception {
        Set<String> expected = liveBrokerAddrs();
        check(!expected.isEmpty(), "no running broker");
        ensureTopicOnMaster(timeoutMs);
        String[] why = new String[1];
        long t0 = System.currentTimeMillis();
        View v = await("healthy replica group (" + expected.size() + " brokers in sync, route follows)", timeoutMs, () -> {
            View x = view();
            why[0] = unhealthyReason(x, route(), expected);
            if (why[0] != null && System.currentTimeMillis() - t0 > 15_000) {
                unstickStaleHa(x);
            }
            return why[0] == null ? x : null;
        }, () -> why[0]);
        log("healthy after %d ms: %s; route %s", System.currentTimeMillis() - t0, v, route());
        return v;
    }

    /** The test topic must exist on the master (and the route carry it); slaves copy it at their metadata sync. */
    private void ensureTopicOnMaster(long timeoutMs) throws Exception {
        View v = await("a master known to the controller", timeoutMs, () -> {
            View x = view();
            return x != null && x.masterAddr() != null && !x.masterAddr().isEmpty() ? x : null;
        });
        Map<Long, String> r = route();
        if (r != null && v.masterAddr().equals(r.get(0L))) {
            return;
        }
        if (r == null) {
            TopicConfig tc = new TopicConfig(topic, 4, 4, 6);
            await("topic " + topic + " created on master " + v.masterAddr(), 30_000, () -> {
                admin.createAndUpdateTopicConfig(v.masterAddr(), tc);
                return Boolean.TRUE;
            });
            log("created topic %s on master %s", topic, name(v.masterAddr()));
        }
    }

    /** Every running slave has copied the topic from the master (needed before a failover). */
    private void awaitTopicOnSlaves(View v) throws Exception {
        for (ReplicaIdentity r : v.all()) {
            if (r.getBrokerAddress().equals(v.masterAddr()) || brokerByAddr(r.getBrokerAddress()) == null
                || !brokerByAddr(r.getBrokerAddress()).alive()) {
                continue;
            }
            long since = System.currentTimeMillis();
            boolean[] nudged = {false};
            // Room for the workaround below and the slave's next sync after it.
            await("slave " + name(r.getBrokerAddress()) + " has topic " + topic, 45_000, () -> {
                try {
                    return admin.examineTopicConfig(r.getBrokerAddress(), topic);
                } catch (Exception e) {
                    if (!nudged[0] && System.currentTimeMillis() - since > SLAVE_SYNC_MS) {
                        nudged[0] = true;
                        nudgeVersionAfterLostSync(v, r.getBrokerAddress());
                    }
                    throw e;
                }
            });
        }
    }

    /** Longer than one period of a slave's metadata sync from its master (the broker's 10 s, plus its jitter). */
    private static final long SLAVE_SYNC_MS = 15_000;

    /**
     * Works around a race of the Java broker (not of the NameServer or the controller): a slave copies its master's
     * topic table only when the master's topic data version differs from its own. A sync that runs while the topic is
     * being created can take the new version with the table before the topic, and the slave then never asks again
     * until the master's version moves (the master reads its table before its version when it answers). Creating
     * another topic on the master moves it (the same config sent again does not: a 5.5 broker takes an unchanged
     * config as a no-op); the slave takes the whole table at its next sync. Printed as a WORKAROUND line.
     */
    private void nudgeVersionAfterLostSync(View v, String slave) throws Exception {
        String nudge = topic + "-sync";
        System.out.println("WORKAROUND lost-topic-sync: slave " + name(slave) + " lacks " + topic + " after "
            + SLAVE_SYNC_MS + " ms of syncs from the master " + name(v.masterAddr()) + ": topic " + nudge
            + " created on the master to move its version");
        admin.createAndUpdateTopicConfig(v.masterAddr(), new TopicConfig(nudge, 1, 1, 6));
    }

    private long lastUnstick;

    /**
     * Works around a race of the Java broker (not of the controller): in controller mode a broker takes the master's
     * HA address from every REGISTER_BROKER answer of the NameServer. A slave told by NOTIFY_BROKER_ROLE_CHANGED
     * (1008) that the master changed re-registers at once; if the new master has not re-registered yet, the answer
     * still names the old master, the slave's HA client connects to the old master's HA port, and it stays
     * connected there (the demoted broker keeps serving the connection) instead of to the new master: it never
     * catches up and never rejoins the sync-state set. Its HA address is corrected at its next registration, but the
     * HA client only uses it after a reconnect: closing that connection (ss -K) makes it reconnect to the master.
     * Happens when the old master is still registered (electMaster, SIGSTOP); printed as a WORKAROUND line.
     */
    private void unstickStaleHa(View v) {
        if (v == null || v.masterAddr() == null || System.currentTimeMillis() - lastUnstick < 10_000) {
            return;
        }
        String masterHa = haAddr(v.masterAddr());
        List<Node> all = new ArrayList<>(brokers);
        all.addAll(nodes(args.getOrDefault("extra", "")));
        for (Node b : all) {
            if (!b.alive() || b.addr.equals(v.masterAddr()) || v.inSync(b.addr)) {
                continue;
            }
            String target = lastHaConnect(b);
            if (target == null || target.equals(masterHa)) {
                continue;
            }
            lastUnstick = System.currentTimeMillis();
            String port = target.substring(target.lastIndexOf(':') + 1);
            System.out.println("WORKAROUND stale-ha-master: " + b + " replicates from " + target + ", not from the master's "
                + masterHa + " (broker race: its REGISTER_BROKER answer named the old master); closing that connection");
            try {
                Process p = new ProcessBuilder("ss", "-K", "dst", target.substring(0, target.lastIndexOf(':')), "dport", "=", ":" + port)
                    .redirectErrorStream(true).start();
                String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                if (p.waitFor() != 0) {
                    log("ss -K failed: %s", out.trim());
                }
            } catch (Exception e) {
                log("ss -K failed: %s", e);
            }
        }
    }

    /** The HA port of a broker of this suite is its listen port + 1 (see interop/controller/lib.sh). */
    private static String haAddr(String brokerAddr) {
        int i = brokerAddr.lastIndexOf(':');
        return brokerAddr.substring(0, i + 1) + (Integer.parseInt(brokerAddr.substring(i + 1)) + 1);
    }

    /** The address the broker's HA client last connected to, from its store.log. */
    private String lastHaConnect(Node b) {
        Path p = Paths.get(arg("work"), b.name, "home", "logs", "rocketmqlogs", "store.log");
        try {
            String last = null;
            for (String line : Files.readAllLines(p, StandardCharsets.UTF_8)) {
                int i = line.indexOf("AutoSwitchHAClient connect to master ");
                if (i >= 0 && !line.endsWith("failed")) {
                    last = line.substring(i + "AutoSwitchHAClient connect to master ".length()).trim();
                }
            }
            return last == null || last.equals("null") ? null : last;
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    // ------------------------------------------------------------------------------------------------------------
    // Process control

    static boolean pidAlive(long pid) {
        if (pid <= 0) {
            return false;
        }
        try {
            String stat = new String(Files.readAllBytes(Paths.get("/proc/" + pid + "/stat")), StandardCharsets.UTF_8);
            String state = stat.substring(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
            return !"Z".equals(state) && !"X".equals(state);
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    private static long kill9(Node n) throws Exception {
        check(n.alive(), "%s (pid %d) is not running", n, n.pid);
        long t = System.currentTimeMillis();
        ProcessHandle.of(n.pid).ifPresent(ProcessHandle::destroyForcibly);
        for (int i = 0; i < 100 && n.alive(); i++) {
            Thread.sleep(20);
        }
        check(!n.alive(), "%s survived SIGKILL", n);
        System.out.println("KILLED " + n.name);
        return t;
    }

    private static long signal(Node n, String sig) throws Exception {
        long t = System.currentTimeMillis();
        Process p = new ProcessBuilder("kill", "-" + sig, Long.toString(n.pid)).inheritIO().start();
        check(p.waitFor() == 0, "kill -%s %d failed", sig, n.pid);
        return t;
    }

    // ------------------------------------------------------------------------------------------------------------
    // Steps

    private void printLeader() throws Exception {
        String leader = await("a controller leader that serves requests", 120_000, () -> view() != null ? namedLeader() : null);
        String followers = controllers.stream().filter(c -> !c.addr.equals(leader)).map(c -> c.addr).collect(Collectors.joining(";"));
        System.out.println("LEADER " + leader);
        System.out.println("FOLLOWERS " + followers);
    }

    /**
     * With tls.server.mode=enforcing on the controller nodes (CONTROLLER_TLS=1): every node answers this driver's
     * admin client, which speaks TLS (-Dtls.enable=true), and closes a remoting client that speaks plaintext.
     */
    private void tlsOnly() throws Exception {
        NettyClientConfig plainConfig = new NettyClientConfig();
        plainConfig.setUseTLS(false);
        NettyRemotingClient plain = new NettyRemotingClient(plainConfig);
        plain.start();
        try {
            for (Node c : liveControllers()) {
                GetMetaDataResponseHeader m = await(c.name + " answering over TLS", 30_000, () -> meta(c.addr));
                log("%s over TLS: leader %s", c.name, m.getControllerLeaderAddress());
                RemotingCommand request = RemotingCommand.createRequestCommand(RequestCode.CONTROLLER_GET_METADATA_INFO, null);
                String answer;
                try {
                    RemotingCommand r = plain.invokeSync(c.addr, request, 3_000);
                    answer = "code " + r.getCode();
                } catch (Exception e) {
                    answer = null;
                    log("%s in plaintext: %s", c.name, e.getClass().getSimpleName());
                }
                check(answer == null, "%s answered a plaintext request (%s) although it takes only TLS", c, answer);
            }
        } finally {
            plain.shutdown();
        }
    }

    /** (a) One master elected, the sync-state set complete, the NameServer lists the master at id 0. */
    private void scenarioA() throws Exception {
        long t0 = System.currentTimeMillis();
        String leader = await("a controller leader that serves requests", 120_000, () -> view() != null ? namedLeader() : null);
        log("controller leader %s after %d ms", leader, System.currentTimeMillis() - t0);
        for (Node c : controllers) {
            GetMetaDataResponseHeader m = meta(c.addr);
            log("getControllerMetaData %s: %s", c.name, m == null ? "(no answer)"
                : String.format("group=%s leaderId=%s leaderAddress=%s isLeader=%s peers=%s", m.getGroup(),
                    m.getControllerLeaderId(), m.getControllerLeaderAddress(), m.isLeader(), m.getPeers()));
            check(m != null && leader.equals(m.getControllerLeaderAddress()), "%s names leader %s, not %s", c, m == null ? null : m.getControllerLeaderAddress(), leader);
        }
        long leaders = controllers.stream().map(c -> meta(c.addr)).filter(m -> m != null && m.isLeader()).count();
        check(leaders == 1, "%d controller nodes claim to be leader", leaders);

        View v = awaitHealthy(150_000);
        Set<Long> ids = v.all().stream().map(ReplicaIdentity::getBrokerId).collect(Collectors.toCollection(TreeSet::new));
        check(ids.size() == brokers.size() && ids.stream().allMatch(i -> i >= 1), "controller broker ids %s: expected %d distinct ids >= 1", ids, brokers.size());
        check(v.info.getMasterEpoch() >= 1, "master epoch %d", v.info.getMasterEpoch());
        log("one master: %s (id %d), slaves in sync: %s", name(v.masterAddr()), v.masterId(), View.fmt(v.info.getInSyncReplicas()));

        Map<Long, String> ce = await("clusterList shows the master at id 0", 30_000, () -> {
            Map<Long, String> c = clusterEntry();
            return c != null && v.masterAddr().equals(c.get(0L)) && c.size() == brokers.size() ? c : null;
        });
        log("examineBrokerClusterInfo %s -> %s", brokerName, ce);
        Map<Long, String> r = route();
        log("topicRoute %s -> %s", topic, r);

        EpochEntryCache epochs = admin.getBrokerEpochCache(v.masterAddr());
        log("getBrokerEpoch(master): %s", epochs.getEpochList().stream().map(e -> e.getEpoch() + "@" + e.getStartOffset()).collect(Collectors.toList()));
        check(!epochs.getEpochList().isEmpty() && epochs.getEpochList().get(epochs.getEpochList().size() - 1).getEpoch() == v.info.getMasterEpoch(),
            "the master's last epoch entry %s is not the controller's master epoch %d", epochs.getEpochList(), v.info.getMasterEpoch());
        HARuntimeInfo ha = admin.getBrokerHAStatus(v.masterAddr());
        check(ha.isMaster() && ha.getHaConnectionInfo().size() == brokers.size() - 1, "master HA: master=%s, %d connection(s)",
            ha.isMaster(), ha.getHaConnectionInfo() == null ? 0 : ha.getHaConnectionInfo().size());
        log("master HA: %d slave connection(s)", ha.getHaConnectionInfo().size());
        awaitTopicOnSlaves(v);
        log("every slave has copied topic %s", topic);
    }

    /**
     * (b) kill -9 the master under a synchronous producer: a slave is elected, the route shows it at id 0, the
     * producer resumes after a gap, and every acknowledged message can be consumed afterwards.
     */
    private void scenarioB() throws Exception {
        View v = awaitHealthy(180_000);
        awaitTopicOnSlaves(v);
        Node master = brokerByAddr(v.masterAddr());
        Sender sender = new Sender("b-" + System.currentTimeMillis() + "-");
        try {
            await("the producer's first acknowledged sends", 30_000, () -> sender.acked.size() >= 50 ? Boolean.TRUE : null);
            Thread.sleep(2000);
            int before = sender.acked.size();
            long tKill = kill9(master);
            log("kill -9 master %s after %d acknowledged sends", master, before);
            Failover f = awaitNewMasterInRoute(master.addr, tKill, 60_000);
            System.out.println("TIMING master-failover-ms=" + (f.routeAt - tKill));
            if (f.controllerAt > 0) {
                System.out.println("TIMING master-elect-ms=" + (f.controllerAt - tKill));
            }
            log("new master %s at id 0 in the route %d ms after the kill (controller named it after %d ms)",
                name(f.newMaster), f.routeAt - tKill, f.controllerAt > 0 ? f.controllerAt - tKill : -1);
            await("the producer acknowledges 100 sends after the failover", 60_000,
                () -> sender.ackedAfter(tKill) >= 100 ? Boolean.TRUE : null);
            // The outage the producer saw: the longest pause between two consecutive acknowledgements (a send
            // the old master answered just before dying may still be acknowledged after the kill).
            long[] gap = sender.longestPause(0, Long.MAX_VALUE);
            System.out.println("TIMING producer-gap-ms=" + gap[0]);
            log("producer: longest pause between acknowledgements %d ms, ending %d ms after the kill; failed sends: %s",
                gap[0], gap[1] - tKill, sender.failures);
        } finally {
            sender.close();
        }
        checkNothingLost(sender, "after the failover");
    }

    /** Every message the sender saw acknowledged (SEND_OK) can be consumed from the start of every queue. */
    private void checkNothingLost(Sender sender, String when) throws Exception {
        Set<String> want = new TreeSet<>(sender.acked.keySet());
        log("%d sends acknowledged (SEND_OK); failures by kind: %s", want.size(), sender.failures);
        Set<String> got = consumeAll(sender.prefix, want, 90_000);
        Set<String> missing = new TreeSet<>(want);
        missing.removeAll(got);
        log("consumed %d messages of this run from the master; %d acknowledged ones missing", got.size(), missing.size());
        if (!missing.isEmpty()) {
            // Whether they are gone or this read skipped them: the queues' offsets on the master, and a second
            // read from the start by a consumer of its own (seen once: a lite pull consumer started seconds after
            // a failover read one queue from offset 50 while the new master held all of it).
            try {
                for (QueueData q : admin.examineTopicRouteInfo(topic).getQueueDatas()) {
                    for (int i = 0; i < q.getReadQueueNums(); i++) {
                        MessageQueue mq = new MessageQueue(topic, q.getBrokerName(), i);
                        log("%s: offsets %d..%d on the master", mq, admin.minOffset(mq), admin.maxOffset(mq));
                    }
                }
            } catch (Exception e) {
                log("could not read the queues' offsets: %s", e);
            }
            Set<String> again = consumeAll(sender.prefix, want, 90_000);
            Set<String> stillMissing = new TreeSet<>(missing);
            stillMissing.removeAll(again);
            log("a second read from the start consumed %d; %d of the missing still missing", again.size(), stillMissing.size());
            if (stillMissing.isEmpty()) {
                System.out.println("WORKAROUND consumer-reread: the first read " + when + " skipped " + missing.size()
                    + " acknowledged messages the master holds (a second read found them all)");
            }
            missing = stillMissing;
        }
        check(missing.isEmpty(), "acknowledged messages lost %s (%d, first: %s)", when, missing.size(),
            missing.stream().limit(10).collect(Collectors.toList()));
    }

    /**
     * A synchronous producer (route poll 100 ms, 3 s send timeout) sending numbered bodies PREFIX+N to the test
     * topic in a thread of its own until closed: each acknowledged (SEND_OK) body with the time of its answer, and
     * the failed sends by kind and time.
     */
    final class Sender implements AutoCloseable {
        final String prefix;
        final Map<String, Long> acked = new ConcurrentHashMap<>();
        final Map<String, Integer> failures = new ConcurrentHashMap<>();
        /** [start, end] of every failed send. */
        final List<long[]> failed = Collections.synchronizedList(new ArrayList<>());
        /** [start, end] of every acknowledged send. */
        final List<long[]> ok = Collections.synchronizedList(new ArrayList<>());
        private final DefaultMQProducer producer;
        private final AtomicBoolean stop = new AtomicBoolean();
        private final AtomicLong seq = new AtomicLong();
        private final Thread thread;

        Sender(String prefix) throws MQClientException {
            this.prefix = prefix;
            producer = new DefaultMQProducer("ctl-producer-" + System.nanoTime());
            producer.setNamesrvAddr(ns);
            producer.setInstanceName("ctl-producer-" + System.nanoTime());
            producer.setPollNameServerInterval(100);
            producer.setSendMsgTimeout(3000);
            producer.start();
            thread = new Thread(this::run, "ctl-sender");
            thread.start();
        }

        private void run() {
            while (!stop.get()) {
                String body = prefix + seq.incrementAndGet();
                long t0 = System.currentTimeMillis();
                try {
                    SendResult sr = producer.send(new Message(topic, "ctl", body, body.getBytes(StandardCharsets.UTF_8)));
                    long t1 = System.currentTimeMillis();
                    if (sr.getSendStatus() == SendStatus.SEND_OK) {
                        acked.put(body, t1);
                        ok.add(new long[] {t0, t1});
                    } else {
                        failures.merge(sr.getSendStatus().name(), 1, Integer::sum);
                        failed.add(new long[] {t0, t1});
                    }
                } catch (Exception e) {
                    failures.merge(e.getClass().getSimpleName(), 1, Integer::sum);
                    failed.add(new long[] {t0, System.currentTimeMillis()});
                    sleep(20);
                }
            }
        }

        long ackedAfter(long t) {
            return acked.values().stream().filter(x -> x > t).count();
        }

        /**
         * The longest pause between two consecutive acknowledgements that ends after FROM and starts before TO, as
         * {length, end}; a pause still running at TO counts up to TO.
         */
        long[] longestPause(long from, long to) {
            long[] ts = acked.values().stream().mapToLong(Long::longValue).sorted().toArray();
            long gap = 0, end = 0;
            for (int i = 1; i <= ts.length; i++) {
                long a = ts[i - 1], b = i < ts.length ? ts[i] : Math.min(to, System.currentTimeMillis());
                if (b > from && a < to && b - a > gap) {
                    gap = b - a;
                    end = b;
                }
            }
            return new long[] {gap, end};
        }

        @Override
        public void close() throws InterruptedException {
            stop.set(true);
            thread.join(10_000);
            producer.shutdown();
        }
    }

    private Set<String> consumeAll(String prefix, Set<String> want, long timeoutMs) throws Exception {
        Set<String> got = new ConcurrentSkipListSet<>();
        DefaultLitePullConsumer c = new DefaultLitePullConsumer("ctl-check-" + System.nanoTime());
        c.setNamesrvAddr(ns);
        c.setInstanceName("ctl-check-" + System.nanoTime());
        c.setAutoCommit(false);
        c.setPollNameServerInterval(500);
        c.start();
        try {
            Collection<MessageQueue> mqs = c.fetchMessageQueues(topic);
            c.assign(mqs);
            for (MessageQueue mq : mqs) {
                seekToBegin(c, mq);
            }
            long deadline = System.currentTimeMillis() + timeoutMs;
            long idleSince = System.currentTimeMillis();
            while (System.currentTimeMillis() < deadline) {
                List<MessageExt> batch = c.poll(1000);
                for (MessageExt m : batch) {
                    String body = new String(m.getBody(), StandardCharsets.UTF_8);
                    if (body.startsWith(prefix)) {
                        got.add(body);
                    }
                }
                if (!batch.isEmpty()) {
                    idleSince = System.currentTimeMillis();
                }
                if (got.containsAll(want) && System.currentTimeMillis() - idleSince > 2000) {
                    break;
                }
                if (System.currentTimeMillis() - idleSince > 15_000) {
                    break;
                }
            }
        } finally {
            c.shutdown();
        }
        return got;
    }

    /**
     * Seeks to the queue's minimum offset, asking again for up to 20 s: the broker's answer can fail once on a
     * connection the client had just opened (seen after a controller partition), which says nothing about
     * whether messages were kept; a route still naming a dead master fails every attempt.
     */
    private void seekToBegin(DefaultLitePullConsumer c, MessageQueue mq) throws Exception {
        long deadline = System.currentTimeMillis() + 20_000;
        while (true) {
            try {
                c.seekToBegin(mq);
                return;
            } catch (MQClientException e) {
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
                log("seekToBegin %s failed (%s); asking again", mq, e.getMessage());
                Thread.sleep(500);
            }
        }
    }

    static final class Failover {
        String newMaster;
        long routeAt;
        long controllerAt;
    }

    /** Polls route and controller every 100 ms until the route lists a running broker other than OLD at id 0. */
    private Failover awaitNewMasterInRoute(String old, long since, long timeoutMs) throws Exception {
        Failover f = new Failover();
        long deadline = since + timeoutMs;
        Set<String> live = liveBrokerAddrs();
        live.remove(old);
        Map<Long, String> r = null;
        while (System.currentTimeMillis() < deadline) {
            r = route();
            String at0 = r == null ? null : r.get(0L);
            if (at0 != null && !at0.equals(old) && live.contains(at0)) {
                f.routeAt = System.currentTimeMillis();
                f.newMaster = at0;
                break;
            }
            if (f.controllerAt == 0) {
                View v = view();
                if (v != null && v.masterAddr() != null && !v.masterAddr().equals(old) && live.contains(v.masterAddr())) {
                    f.controllerAt = System.currentTimeMillis();
                }
            }
            Thread.sleep(POLL_MS);
        }
        check(f.newMaster != null, "no new master at id 0 in the route within %d ms of losing %s (last route %s, controller: %s)",
            timeoutMs, name(old), r, view());
        if (f.controllerAt == 0) {
            f.controllerAt = f.routeAt;
        }
        return f;
    }

    /** kill -9 the current master and wait for the route to show its successor (scenario c run on its own). */
    private void killMaster() throws Exception {
        View v = awaitHealthy(180_000);
        awaitTopicOnSlaves(v);
        Node master = brokerByAddr(v.masterAddr());
        long t = kill9(master);
        Failover f = awaitNewMasterInRoute(master.addr, t, 60_000);
        log("killed master %s; new master %s at id 0 after %d ms", master, name(f.newMaster), f.routeAt - t);
    }

    /** (c) The restarted old master rejoins as a slave and the sync-state set grows back to all brokers. */
    private void scenarioC() throws Exception {
        String rejoined = arg("rejoined");
        Set<String> expected = liveBrokerAddrs();
        long t0 = System.currentTimeMillis();
        View v = await(name(rejoined) + " back in the sync-state set as a slave, all " + expected.size() + " in sync", 150_000, () -> {
            View x = view();
            if (System.currentTimeMillis() - t0 > 30_000) {
                unstickStaleHa(x);
            }
            return x != null && x.masterAddr() != null && !rejoined.equals(x.masterAddr()) && x.inSyncAddrs().equals(expected)
                && x.info.getInSyncReplicas().stream().allMatch(r -> Boolean.TRUE.equals(r.getAlive())) ? x : null;
        });
        log("after %d ms: %s", System.currentTimeMillis() - t0, v);
        ReplicaIdentity me = v.byAddr(rejoined);
        Map<Long, String> r = await("route lists " + name(rejoined) + " at its controller id " + me.getBrokerId(), 30_000, () -> {
            Map<Long, String> x = route();
            return x != null && rejoined.equals(x.get(me.getBrokerId())) && v.masterAddr().equals(x.get(0L)) ? x : null;
        });
        log("route: %s", r);
        HARuntimeInfo ha = await(name(rejoined) + " replicates from the master", 30_000, () -> {
            HARuntimeInfo h = admin.getBrokerHAStatus(rejoined);
            return !h.isMaster() && h.getHaClientRuntimeInfo() != null && h.getHaClientRuntimeInfo().getMasterAddr() != null ? h : null;
        });
        log("%s is a slave replicating from %s", name(rejoined), ha.getHaClientRuntimeInfo().getMasterAddr());
        awaitHealthy(60_000);
    }

    /**
     * (d) SIGSTOP the master: a new master after the heartbeat timeout; after SIGCONT the old master must become a
     * slave and must never again be listed at id 0.
     */
    private void scenarioD() throws Exception {
        View v = awaitHealthy(180_000);
        awaitTopicOnSlaves(v);
        Node old = brokerByAddr(v.masterAddr());
        long tStop = signal(old, "STOP");
        log("SIGSTOP master %s (id %d, epoch %d)", old, v.masterId(), v.info.getMasterEpoch());
        Failover f;
        try {
            f = awaitNewMasterInRoute(old.addr, tStop, 90_000);
        } catch (Throwable e) {
            signal(old, "CONT");
            throw e;
        }
        System.out.println("TIMING sigstop-failover-ms=" + (f.routeAt - tStop));
        log("new master %s at id 0 in the route %d ms after SIGSTOP (controller named it after %d ms)", name(f.newMaster),
            f.routeAt - tStop, f.controllerAt - tStop);
        View nv = view();
        log("controller: %s", nv);
        check(nv != null && nv.info.getMasterEpoch() > v.info.getMasterEpoch(), "master epoch did not grow: %s", nv);

        long tCont = signal(old, "CONT");
        log("SIGCONT %s", old);
        long oldId = v.masterId();
        int polls = 0;
        Map<Long, String> r = null;
        boolean slaveInRoute = false;
        long deadline = tCont + 90_000;
        String why = "";
        while (System.currentTimeMillis() < deadline) {
            r = route();
            polls++;
            if (r != null) {
                check(!old.addr.equals(r.get(0L)), "the thawed old master %s is listed at id 0 again: route %s", old, r);
                check(r.get(0L) == null || f.newMaster.equals(r.get(0L)), "route lists %s at id 0, expected the new master %s",
                    r.get(0L), f.newMaster);
                slaveInRoute = old.addr.equals(r.get(oldId));
            }
            View x = view();
            ReplicaIdentity me = x == null ? null : x.byAddr(old.addr);
            boolean slaveAtController = x != null && f.newMaster.equals(x.masterAddr()) && me != null && Boolean.TRUE.equals(me.getAlive());
            why = "route " + r + ", controller " + x;
            if (slaveInRoute && slaveAtController) {
                break;
            }
            Thread.sleep(POLL_MS);
        }
        check(slaveInRoute, "the thawed old master never appeared as slave %d in the route: %s", oldId, why);
        System.out.println("TIMING thawed-master-to-slave-ms=" + (System.currentTimeMillis() - tCont));
        log("after %d route polls the thawed broker is slave %d in the route; id 0 stayed %s: %s", polls, oldId, name(f.newMaster), r);
        HARuntimeInfo ha = await(old + " turns slave (HA client of the new master)", 30_000, () -> {
            HARuntimeInfo h = admin.getBrokerHAStatus(old.addr);
            return !h.isMaster() && h.getHaClientRuntimeInfo() != null ? h : null;
        });
        log("%s HA: slave of %s", old, ha.getHaClientRuntimeInfo().getMasterAddr());
        // Catching up and joining the sync-state set again; id 0 must stay the new master throughout.
        View end = await("all brokers in sync again", 90_000, () -> {
            Map<Long, String> x = route();
            if (x != null) {
                check(!old.addr.equals(x.get(0L)), "the thawed old master is listed at id 0 again: route %s", x);
            }
            View y = view();
            if (System.currentTimeMillis() - tCont > 15_000) {
                unstickStaleHa(y);
            }
            return unhealthyReason(y, x, liveBrokerAddrs()) == null ? y : null;
        });
        log("healthy: %s", end);
    }

    /**
     * (e) kill -9 the controller leader: a new leader is named and serves, the brokers heartbeat it (all alive, and
     * still so after more than the heartbeat timeout: #10812), they follow it, and a master failover works after.
     */
    private void scenarioE() throws Exception {
        View v = awaitHealthy(180_000);
        awaitTopicOnSlaves(v);
        String leaderAddr = await("controller leader", 60_000, this::namedLeader);
        Node leader = controllerByAddr(leaderAddr);
        check(leader != null, "leader %s is none of the controller nodes %s", leaderAddr, controllers);
        Map<String, Long> logMarks = brokerLogMarks();
        long t0 = kill9(leader);
        log("kill -9 controller leader %s", leader);
        List<Node> rest = controllers.stream().filter(c -> c != leader && c.alive()).collect(Collectors.toList());
        String newLeader = null;
        long tLeader = 0;
        View served = null;
        long tServe = 0;
        Set<String> expected = liveBrokerAddrs();
        long deadline = t0 + 90_000;
        while (System.currentTimeMillis() < deadline && served == null) {
            if (newLeader == null) {
                for (Node c : rest) {
                    GetMetaDataResponseHeader m = meta(c.addr);
                    if (m != null && m.getControllerLeaderAddress() != null && !m.getControllerLeaderAddress().isEmpty()
                        && !leaderAddr.equals(m.getControllerLeaderAddress())) {
                        newLeader = m.getControllerLeaderAddress();
                        tLeader = System.currentTimeMillis();
                        break;
                    }
                }
            }
            if (newLeader != null) {
                View x = view();
                if (x != null && expected.stream().allMatch(a -> x.byAddr(a) != null && Boolean.TRUE.equals(x.byAddr(a).getAlive()))) {
                    served = x;
                    tServe = System.currentTimeMillis();
                }
            }
            if (served == null) {
                Thread.sleep(POLL_MS);
            }
        }
        check(newLeader != null, "no new controller leader named within 90 s");
        check(served != null, "new leader %s named after %d ms, but it did not serve sync-state data with every broker alive within 90 s (%s)",
            newLeader, tLeader - t0, view());
        System.out.println("TIMING controller-leader-ms=" + (tLeader - t0));
        System.out.println("TIMING controller-failover-ms=" + (tServe - t0));
        log("new controller leader %s named after %d ms; it serves with every broker alive after %d ms: %s",
            newLeader, tLeader - t0, tServe - t0, served);
        check(v.masterId().equals(served.masterId()) && v.info.getMasterEpoch() == served.info.getMasterEpoch(),
            "the controller failover changed the master: before %s, after %s", v, served);

        // #10812: brokers must stay alive and in sync on the new leader beyond the 10 s heartbeat timeout.
        long watchUntil = System.currentTimeMillis() + 13_000;
        while (System.currentTimeMillis() < watchUntil) {
            View x = view();
            String why = unhealthyReason(x, route(), expected);
            check(why == null, "after the controller leader change (#10812): %s", why);
            Thread.sleep(500);
        }
        log("every broker stayed alive and in sync on the new leader for 13 s (beyond the 10 s heartbeat timeout)");

        // The brokers follow the new leader (ReplicasManager refreshes it every 10 s from getControllerMetaData).
        String nl = newLeader;
        for (Node b : brokers) {
            if (!b.alive()) {
                continue;
            }
            await(b + " logs that it follows the new controller leader " + nl, 20_000,
                () -> brokerLogSince(b, logMarks).contains("Update controller leader address to " + nl) ? Boolean.TRUE : null);
        }
        log("every broker logged 'Update controller leader address to %s'", nl);

        View before = awaitHealthy(60_000);
        Node master = brokerByAddr(before.masterAddr());
        long tk = kill9(master);
        Failover f = awaitNewMasterInRoute(master.addr, tk, 60_000);
        System.out.println("TIMING master-failover-after-controller-failover-ms=" + (f.routeAt - tk));
        log("master failover under the new controller leader: %s at id 0 after %d ms", name(f.newMaster), f.routeAt - tk);
    }

    private Map<String, Long> brokerLogMarks() {
        Map<String, Long> marks = new HashMap<>();
        for (Node b : brokers) {
            Path p = brokerLog(b);
            try {
                marks.put(b.name, Files.exists(p) ? Files.size(p) : 0L);
            } catch (IOException e) {
                marks.put(b.name, 0L);
            }
        }
        return marks;
    }

    private Path brokerLog(Node b) {
        return Paths.get(arg("work"), b.name, "home", "logs", "rocketmqlogs", "broker.log");
    }

    private String brokerLogSince(Node b, Map<String, Long> marks) throws IOException {
        Path p = brokerLog(b);
        if (!Files.exists(p)) {
            return "";
        }
        try (RandomAccessFile f = new RandomAccessFile(p.toFile(), "r")) {
            long from = Math.min(marks.getOrDefault(b.name, 0L), f.length());
            byte[] buf = new byte[(int) (f.length() - from)];
            f.seek(from);
            f.readFully(buf);
            return new String(buf, StandardCharsets.UTF_8);
        }
    }

    /** (f) before: record the controller's view, then kill -9 every controller node. */
    private void scenarioFBefore() throws Exception {
        View v = awaitHealthy(180_000);
        Properties p = snapshot(v);
        try (java.io.Writer w = Files.newBufferedWriter(Paths.get(arg("file")))) {
            p.store(w, "controller view before restarting every controller node");
        }
        log("before: %s", v);
        for (Node c : controllers) {
            if (c.alive()) {
                kill9(c);
            }
        }
        log("killed every controller node");
    }

    private Properties snapshot(View v) {
        Properties p = new Properties();
        p.setProperty("masterBrokerId", String.valueOf(v.masterId()));
        p.setProperty("masterAddress", String.valueOf(v.masterAddr()));
        p.setProperty("masterEpoch", String.valueOf(v.info.getMasterEpoch()));
        p.setProperty("syncStateSetEpoch", String.valueOf(v.info.getSyncStateSetEpoch()));
        p.setProperty("inSync", ids(v.info.getInSyncReplicas()));
        p.setProperty("notInSync", ids(v.info.getNotInSyncReplicas()));
        return p;
    }

    private static String ids(List<ReplicaIdentity> l) {
        return l.stream().sorted((x, y) -> Long.compare(x.getBrokerId(), y.getBrokerId()))
            .map(r -> r.getBrokerId() + "@" + r.getBrokerAddress()).collect(Collectors.joining(","));
    }

    /** (f) after the script restarted every node: ids and epochs as before, and still so after 13 s. */
    private void scenarioFAfter() throws Exception {
        Properties before = new Properties();
        try (java.io.Reader r = Files.newBufferedReader(Paths.get(arg("file")))) {
            before.load(r);
        }
        long t0 = System.currentTimeMillis();
        View v = await("the restarted controller group serves sync-state data", 120_000, this::view);
        System.out.println("TIMING controller-restart-serve-ms=" + (System.currentTimeMillis() - t0));
        log("after the restart (%d ms after the nodes printed their boot line): %s", System.currentTimeMillis() - t0, v);
        compareSnapshot(before, snapshot(v), "right after the restart");
        for (Node c : controllers) {
            GetMetaDataResponseHeader m = meta(c.addr);
            log("getControllerMetaData %s: leader=%s peers=%s", c.name, m == null ? null : m.getControllerLeaderAddress(), m == null ? null : m.getPeers());
        }
        Thread.sleep(13_000);
        View later = awaitHealthy(60_000);
        compareSnapshot(before, snapshot(later), "13 s after the restart");
        log("broker ids, master and epochs survived the restart of every controller node");
    }

    private static void compareSnapshot(Properties before, Properties after, String when) {
        List<String> diffs = new ArrayList<>();
        for (String k : new TreeSet<>(before.stringPropertyNames())) {
            if (!before.getProperty(k).equals(after.getProperty(k))) {
                diffs.add(k + ": " + before.getProperty(k) + " -> " + after.getProperty(k));
            }
        }
        check(diffs.isEmpty(), "controller state changed across the restart (%s): %s", when, diffs);
        log("%s: unchanged %s", when, new TreeMap<>(after));
    }

    /** (g) mqadmin electMaster to a designated slave; a designated unknown id is refused. */
    private void scenarioGElect() throws Exception {
        View v = awaitHealthy(180_000);
        ReplicaIdentity target = v.info.getInSyncReplicas().stream().filter(r -> !r.getBrokerId().equals(v.masterId()))
            .min((x, y) -> Long.compare(x.getBrokerId(), y.getBrokerId())).orElseThrow(() -> new AssertionError("no slave in sync: " + v));
        String ctl = liveControllers().get(0).addr;
        expectCode(CONTROLLER_ELECT_MASTER_FAILED, "electMaster designating unknown broker id 99",
            () -> admin.electMaster(ctl, cluster, brokerName, 99L));
        View same = view();
        check(same != null && v.masterId().equals(same.masterId()) && same.info.getMasterEpoch() == v.info.getMasterEpoch(),
            "a refused electMaster changed the master: %s", same);
        log("electMaster designating id 99 refused with %d; master unchanged", CONTROLLER_ELECT_MASTER_FAILED);

        Throwable undecodable = designatedElection(v, target, ctl);
        if (undecodable != null) {
            log("NOTE: the 5.5.0 admin client could not decode the electMaster answer (scenario j): %s", undecodable);
        }
    }

    /**
     * mqadmin electMaster -b ID through the admin API, then the effects: the controller's master, the route's id 0,
     * the old master listed as a slave, a healthy group. Returns the admin's decoding error, if the answer could not be
     * decoded (the election itself is then judged by its effects only).
     */
    private Throwable designatedElection(View v, ReplicaIdentity target, String ctl) throws Exception {
        long t0 = System.currentTimeMillis();
        Throwable undecodable = null;
        try {
            Pair<ElectMasterResponseHeader, BrokerMemberGroup> res = admin.electMaster(ctl, cluster, brokerName, target.getBrokerId());
            ElectMasterResponseHeader h = res.getObject1();
            log("electMaster -b %d: masterBrokerId=%s masterAddress=%s masterEpoch=%s syncStateSetEpoch=%s members=%s",
                target.getBrokerId(), h.getMasterBrokerId(), h.getMasterAddress(), h.getMasterEpoch(), h.getSyncStateSetEpoch(),
                res.getObject2() == null ? null : res.getObject2().getBrokerAddrs());
            check(target.getBrokerId().equals(h.getMasterBrokerId()) && target.getBrokerAddress().equals(h.getMasterAddress()),
                "electMaster answered master %s@%s, expected %s", h.getMasterBrokerId(), h.getMasterAddress(), target);
            check(h.getMasterEpoch() == v.info.getMasterEpoch() + 1, "electMaster epoch %s, expected %d", h.getMasterEpoch(), v.info.getMasterEpoch() + 1);
        } catch (RuntimeException e) {
            if (!e.getClass().getName().contains("JSONException")) {
                throw e;
            }
            undecodable = e;
            log("electMaster -b %d: the admin client failed to decode the answer: %s", target.getBrokerId(), e.getMessage());
        }
        Map<Long, String> r = await("route lists " + name(target.getBrokerAddress()) + " at id 0", 60_000, () -> {
            Map<Long, String> x = route();
            return x != null && target.getBrokerAddress().equals(x.get(0L)) && v.masterAddr().equals(x.get(v.masterId())) ? x : null;
        });
        System.out.println("TIMING elect-master-route-ms=" + (System.currentTimeMillis() - t0));
        log("route after electMaster: %s (old master %s now slave %d)", r, name(v.masterAddr()), v.masterId());
        View after = awaitHealthy(90_000);
        check(target.getBrokerId().equals(after.masterId()), "controller master %s, expected %s", after.masterId(), target.getBrokerId());
        check(after.info.getMasterEpoch() == v.info.getMasterEpoch() + 1, "master epoch %d after electMaster, expected %d",
            after.info.getMasterEpoch(), v.info.getMasterEpoch() + 1);
        return undecodable;
    }

    /**
     * (j) mqadmin electMaster must get an answer the 5.5.0 admin client can decode. The client reads the body of
     * CONTROLLER_ELECT_MASTER as a BrokerMemberGroup with fastjson2, which refuses unquoted object keys; the Java
     * controller writes the member map with bare numeric keys ({1:"host:port"}), so mqadmin reports a failure for
     * an election that happened.
     */
    private void scenarioJ() throws Exception {
        View v = awaitHealthy(180_000);
        ReplicaIdentity target = v.info.getInSyncReplicas().stream().filter(r -> !r.getBrokerId().equals(v.masterId()))
            .max((x, y) -> Long.compare(x.getBrokerId(), y.getBrokerId())).orElseThrow(() -> new AssertionError("no slave in sync: " + v));
        Throwable undecodable = designatedElection(v, target, liveControllers().get(0).addr);
        check(undecodable == null, "mqadmin electMaster cannot decode the controller's answer: %s", undecodable);
    }

    /**
     * (k) mqadmin getControllerConfig / updateControllerConfig through the admin API: every node lists its
     * settings, an allowed key is changed on every node and read back, a blacklisted key is refused with
     * NO_PERMISSION (16) and changes nothing.
     */
    private void scenarioK() throws Exception {
        List<String> addrs = new ArrayList<>();
        for (Node c : liveControllers()) {
            addrs.add(c.addr);
        }
        Map<String, Properties> before = admin.getControllerConfig(addrs);
        check(before.size() == addrs.size(), "getControllerConfig answered %d of %d nodes", before.size(), addrs.size());
        for (Map.Entry<String, Properties> e : before.entrySet()) {
            check(e.getValue().getProperty("controllerDLegerPeers") != null, "%s lists no controllerDLegerPeers: %s",
                e.getKey(), e.getValue());
        }
        Properties change = new Properties();
        change.setProperty("electMasterMaxRetryCount", "4");
        admin.updateControllerConfig(change, addrs);
        for (Map.Entry<String, Properties> e : admin.getControllerConfig(addrs).entrySet()) {
            check("4".equals(e.getValue().getProperty("electMasterMaxRetryCount")), "%s: electMasterMaxRetryCount %s after the update",
                e.getKey(), e.getValue().getProperty("electMasterMaxRetryCount"));
        }
        log("updateControllerConfig electMasterMaxRetryCount=4 read back from %d nodes", addrs.size());
        Properties forbidden = new Properties();
        forbidden.setProperty("configStorePath", "/tmp/elsewhere");
        expectCode(16, "updateControllerConfig of the blacklisted configStorePath", () -> {
            admin.updateControllerConfig(forbidden, addrs);
            return "updated";
        });
        String path = before.get(addrs.get(0)).getProperty("configStorePath");
        String now = admin.getControllerConfig(addrs).get(addrs.get(0)).getProperty("configStorePath");
        check(java.util.Objects.equals(path, now), "a refused update changed configStorePath from %s to %s", path, now);
        log("updateControllerConfig of configStorePath refused with 16");
    }

    /** (g) cleanBrokerMetadata: refused for a live broker id, done for a stopped one. The extra broker is bx. */
    private void scenarioGClean() throws Exception {
        Node x = new Node(arg("extra"));
        View v = await(x + " registered with the controller and alive", 120_000, () -> {
            View y = view();
            ReplicaIdentity me = y == null ? null : y.byAddr(x.addr);
            return me != null && Boolean.TRUE.equals(me.getAlive()) ? y : null;
        });
        long id = v.byAddr(x.addr).getBrokerId();
        log("extra broker %s got controller id %d: %s", x, id, v);
        String ctl = liveControllers().get(0).addr;
        expectCode(CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "cleanBrokerMetadata of live broker id " + id,
            () -> {
                admin.cleanControllerBrokerData(ctl, cluster, brokerName, Long.toString(id), false);
                return "cleaned";
            });
        check(view().byId(id) != null, "a refused clean removed id %d", id);
        log("cleanBrokerMetadata -b %d of the live broker refused with %d", id, CONTROLLER_INVALID_CLEAN_BROKER_METADATA);

        kill9(x);
        cleanDeadId(id, x.addr);
    }

    /** After the script stopped an extra broker: wait until the controller sees it dead, then clean its id. */
    private void cleanExtra() throws Exception {
        Node x = new Node(arg("extra"));
        View v = view();
        ReplicaIdentity me = v == null ? null : v.byAddr(x.addr);
        if (me == null) {
            log("%s is not registered with the controller: nothing to clean", x);
            return;
        }
        cleanDeadId(me.getBrokerId(), x.addr);
    }

    private void cleanDeadId(long id, String addr) throws Exception {
        String ctl = liveControllers().get(0).addr;
        await("controller sees id " + id + " dead", 30_000, () -> {
            View y = view();
            ReplicaIdentity me = y == null ? null : y.byId(id);
            return me != null && !Boolean.TRUE.equals(me.getAlive()) ? y : null;
        });
        admin.cleanControllerBrokerData(ctl, cluster, brokerName, Long.toString(id), false);
        View after = await("id " + id + " gone from the controller", 15_000, () -> {
            View y = view();
            return y != null && y.byId(id) == null ? y : null;
        });
        log("cleanBrokerMetadata -c %s -bn %s -b %d done: %s", cluster, brokerName, id, after);
        check(after.masterId() != null && !after.masterAddr().equals(addr), "no master after the clean: %s", after);
    }

    /**
     * (h) #10812: a slave whose heartbeats reach only controller followers (its controllerAddr lists only them, the
     * state #10812 and #9845 leave a broker in) still talks to the leader for everything else: it must count as
     * alive and join the sync-state set.
     */
    private void scenarioH() throws Exception {
        Node y = new Node(arg("extra"));
        View v = await(y + " registered with the controller", 120_000, () -> {
            View z = view();
            return z != null && z.byAddr(y.addr) != null ? z : null;
        });
        long id = v.byAddr(y.addr).getBrokerId();
        log("broker %s (heartbeats to followers only: controllerAddr=%s) got controller id %d", y, arg("followers"), id);
        HARuntimeInfo ha = await(y + " replicates from the master", 60_000, () -> {
            HARuntimeInfo h = admin.getBrokerHAStatus(y.addr);
            return !h.isMaster() && h.getHaClientRuntimeInfo() != null && h.getHaClientRuntimeInfo().getMasterAddr() != null ? h : null;
        });
        log("%s is a slave replicating from %s", y, ha.getHaClientRuntimeInfo().getMasterAddr());
        long t0 = System.currentTimeMillis();
        View last = null;
        long deadline = t0 + 30_000;
        while (System.currentTimeMillis() < deadline) {
            last = view();
            ReplicaIdentity me = last == null ? null : last.byId(id);
            if (me != null && Boolean.TRUE.equals(me.getAlive()) && last.inSync(y.addr)) {
                break;
            }
            Thread.sleep(500);
        }
        ReplicaIdentity me = last == null ? null : last.byId(id);
        log("controller view: %s", last);
        check(me != null && Boolean.TRUE.equals(me.getAlive()), "#10812: slave %d (heartbeats reach only followers) is not alive on the leader", id);
        check(last.inSync(y.addr), "#10812: slave %d (heartbeats reach only followers) never joined the sync-state set", id);
        log("slave %d is alive and in sync on the leader %d ms after it replicated", id, System.currentTimeMillis() - t0);
    }

    /**
     * (i) #9845 from outside: a slave whose controller link stops (SIGSTOP beyond the heartbeat timeout and the
     * master's catch-up limit) leaves the sync-state set and must rejoin it once it runs again.
     */
    private void scenarioI() throws Exception {
        View v = awaitHealthy(180_000);
        ReplicaIdentity slave = v.info.getInSyncReplicas().stream().filter(r -> !r.getBrokerId().equals(v.masterId()))
            .max((x, y) -> Long.compare(x.getBrokerId(), y.getBrokerId())).orElseThrow(() -> new AssertionError("no slave: " + v));
        Node s = brokerByAddr(slave.getBrokerAddress());
        long tStop = signal(s, "STOP");
        log("SIGSTOP slave %s (id %d)", s, slave.getBrokerId());
        View out;
        try {
            out = await("slave " + slave.getBrokerId() + " dropped from the sync-state set and not alive", 60_000, () -> {
                View x = view();
                ReplicaIdentity me = x == null ? null : x.byId(slave.getBrokerId());
                return x != null && !x.inSync(s.addr) && me != null && !Boolean.TRUE.equals(me.getAlive()) ? x : null;
            });
        } catch (Throwable e) {
            signal(s, "CONT");
            throw e;
        }
        log("%d ms after SIGSTOP: %s", System.currentTimeMillis() - tStop, out);
        long tCont = signal(s, "CONT");
        log("SIGCONT %s", s);
        View back = await("slave " + slave.getBrokerId() + " alive and back in the sync-state set", 90_000, () -> {
            View x = view();
            if (System.currentTimeMillis() - tCont > 20_000) {
                unstickStaleHa(x);
            }
            ReplicaIdentity me = x == null ? null : x.byId(slave.getBrokerId());
            return x != null && x.inSync(s.addr) && me != null && Boolean.TRUE.equals(me.getAlive()) ? x : null;
        });
        System.out.println("TIMING rejoin-after-sigcont-ms=" + (System.currentTimeMillis() - tCont));
        log("%d ms after SIGCONT: %s", System.currentTimeMillis() - tCont, back);
        awaitHealthy(60_000);
    }

    /** The controller view as the node at ADDR serves it (its leader's, through ADDR's metadata), or null. */
    private View viewVia(String addr) {
        try {
            BrokerReplicasInfo r = admin.getInSyncStateData(addr, Collections.singletonList(brokerName));
            ReplicasInfo ri = r == null || r.getReplicasInfoTable() == null ? null : r.getReplicasInfoTable().get(brokerName);
            Node n = controllerByAddr(addr);
            return ri == null ? null : new View(ri, n == null ? addr : n.name);
        } catch (Exception e) {
            return null;
        }
    }

    /** The node every controller node names as leader, the only one claiming to be, or null. */
    private String agreedLeader() {
        String leader = null;
        int claims = 0;
        for (Node c : controllers) {
            GetMetaDataResponseHeader m = meta(c.addr);
            if (m == null || m.getControllerLeaderAddress() == null || m.getControllerLeaderAddress().isEmpty()) {
                return null;
            }
            if (leader != null && !leader.equals(m.getControllerLeaderAddress())) {
                return null;
            }
            leader = m.getControllerLeaderAddress();
            if (m.isLeader()) {
                claims++;
                if (!c.addr.equals(leader)) {
                    return null;
                }
            }
        }
        return claims == 1 ? leader : null;
    }

    /** Runs the script's netctl (cut|heal NODE) and returns the time it finished. */
    private long netctl(String verb, Node n) throws Exception {
        Process p = new ProcessBuilder(arg("netctl"), verb, n.name).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        int rc = p.waitFor();
        check(rc == 0, "netctl %s %s failed (%d): %s", verb, n.name, rc, out);
        return System.currentTimeMillis();
    }

    /**
     * (l) The controller leader is cut off from the other two controller nodes (blackhole routes between their network
     * namespaces; brokers, NameServer and clients still reach every node) while a synchronous producer sends to the
     * replica group (allAckInSyncStateSet=true): the two others elect a new leader that serves with every broker
     * alive; the producer's sends succeed again within 10 s of the cut; the master does not change. The cut lasts
     * 20 s (beyond the brokers' 10 s leader refresh and heartbeat timeout), then is healed: one leader, named by every
     * node, a healthy group, and every acknowledged message can be consumed.
     */
    private void scenarioL() throws Exception {
        final long holdMs = 20_000, limitMs = 10_000;
        View v = awaitHealthy(180_000);
        awaitTopicOnSlaves(v);
        String leaderAddr = await("one controller leader, named by every node", 60_000, this::agreedLeader);
        Node leader = controllerByAddr(leaderAddr);
        check(leader != null, "leader %s is none of the controller nodes %s", leaderAddr, controllers);
        List<Node> others = controllers.stream().filter(c -> c != leader).collect(Collectors.toList());
        Set<String> expected = liveBrokerAddrs();
        Map<String, Long> logMarks = brokerLogMarks();
        Sender sender = new Sender("l-" + System.currentTimeMillis() + "-");
        boolean cut = false;
        long tCut = 0, tHeal = 0;
        try {
            await("the producer's first acknowledged sends", 30_000, () -> sender.acked.size() >= 50 ? Boolean.TRUE : null);
            Thread.sleep(2000);
            int before = sender.acked.size();
            cut = true;
            tCut = netctl("cut", leader);
            log("cut controller leader %s off from %s after %d acknowledged sends", leader, others, before);

            long tStepDown = 0, tNewLeader = 0, tServe = 0, bothClaimMs = 0, lastPoll = tCut, lastLogScan = 0;
            String newLeader = null;
            View served = null;
            Map<String, Long> follows = new TreeMap<>();
            long deadline = tCut + 60_000;
            while (System.currentTimeMillis() < deadline) {
                long now = System.currentTimeMillis();
                GetMetaDataResponseHeader om = meta(leader.addr);
                boolean oldClaims = om != null && om.isLeader();
                if (!oldClaims && tStepDown == 0) {
                    tStepDown = now;
                    log("the cut-off node %s no longer claims leadership (%s)", leader,
                        om == null ? "no answer" : "leader " + om.getControllerLeaderAddress());
                }
                boolean otherClaims = false;
                for (Node c : others) {
                    GetMetaDataResponseHeader m = meta(c.addr);
                    if (m != null && m.isLeader()) {
                        otherClaims = true;
                        if (newLeader == null) {
                            newLeader = c.addr;
                            tNewLeader = System.currentTimeMillis();
                            log("%s claims leadership %d ms after the cut", c, tNewLeader - tCut);
                        }
                    }
                }
                if (oldClaims && otherClaims) {
                    bothClaimMs += now - lastPoll;
                }
                lastPoll = now;
                if (newLeader != null && served == null) {
                    View x = viewVia(newLeader);
                    if (x != null && expected.stream().allMatch(a -> x.byAddr(a) != null && Boolean.TRUE.equals(x.byAddr(a).getAlive()))) {
                        served = x;
                        tServe = System.currentTimeMillis();
                        log("the new leader %s serves with every broker alive %d ms after the cut: %s", newLeader, tServe - tCut, x);
                    }
                }
                if (newLeader != null && now - lastLogScan >= 500) {
                    lastLogScan = now;
                    for (Node b : brokers) {
                        if (!follows.containsKey(b.name) && b.alive()
                            && brokerLogSince(b, logMarks).contains("Update controller leader address to " + newLeader)) {
                            follows.put(b.name, System.currentTimeMillis() - tCut);
                        }
                    }
                }
                if (served != null && now - tCut >= holdMs) {
                    break;
                }
                Thread.sleep(POLL_MS);
            }
            check(newLeader != null, "no other controller node claimed leadership within 60 s of the cut");
            check(served != null, "the new leader %s (claimed after %d ms) did not serve sync-state data with every broker alive within 60 s (%s)",
                newLeader, tNewLeader - tCut, viewVia(newLeader));
            System.out.println("TIMING partition-new-leader-ms=" + (tNewLeader - tCut));
            System.out.println("TIMING partition-leader-serves-ms=" + (tServe - tCut));
            if (tStepDown > 0) {
                System.out.println("TIMING partition-old-leader-stepdown-ms=" + (tStepDown - tCut));
            } else {
                log("the cut-off node %s still claimed leadership when the cut ended", leader);
            }
            System.out.println("TIMING partition-two-leaders-ms=" + bothClaimMs);
            log("brokers that logged 'Update controller leader address to %s' during the cut (ms after it): %s", newLeader, follows);

            // The producer during the cut: when its sends succeeded again, and its longest pause.
            long tc = tCut, end = System.currentTimeMillis();
            List<long[]> failedAfter;
            synchronized (sender.failed) {
                failedAfter = sender.failed.stream().filter(f -> f[1] > tc).collect(Collectors.toList());
            }
            long lastFail = failedAfter.stream().mapToLong(f -> f[1]).max().orElse(tc);
            long resume;
            synchronized (sender.ok) {
                resume = sender.ok.stream().filter(o -> o[0] >= lastFail || (failedAfter.isEmpty() && o[1] > tc))
                    .mapToLong(o -> o[1]).min().orElse(-1);
            }
            long[] gap = sender.longestPause(tCut, end);
            log("producer during the cut: %d sends acknowledged, %d failed (%s); longest pause between acknowledgements %d ms, ending %d ms after the cut",
                sender.ackedAfter(tCut), failedAfter.size(), sender.failures, gap[0], gap[1] - tCut);
            check(resume > 0, "the producer had no acknowledged send after the cut (last failure %d ms after it)", lastFail - tCut);
            System.out.println("TIMING partition-producer-resume-ms=" + (resume - tCut));
            System.out.println("TIMING partition-producer-gap-ms=" + gap[0]);
            check(resume - tCut <= limitMs, "the producer's sends succeeded again only %d ms after the cut (limit %d ms)", resume - tCut, limitMs);
            check(gap[0] <= limitMs, "the producer paused %d ms between acknowledgements during the cut (limit %d ms)", gap[0], limitMs);
            check(sender.ackedAfter(end - 5000) > 0, "the producer acknowledged nothing in the last 5 s of the cut");

            // A cut between controller nodes is no reason to change the master.
            View atEnd = viewVia(newLeader);
            log("at the end of the cut, via the new leader: %s", atEnd);
            check(atEnd != null && v.masterId().equals(atEnd.masterId()) && v.info.getMasterEpoch() == atEnd.info.getMasterEpoch(),
                "the cut changed the master: before %s, at the end of the cut %s", v, atEnd);

            tHeal = netctl("heal", leader);
            cut = false;
            log("healed: %s reaches the other controller nodes again", leader);
            long th = tHeal;
            String[] last = new String[1];
            long[] since = new long[1];
            String one = await("one controller leader named by every node for 3 s", 90_000, () -> {
                String l = agreedLeader();
                if (l == null || !l.equals(last[0])) {
                    last[0] = l;
                    since[0] = System.currentTimeMillis();
                    return null;
                }
                return System.currentTimeMillis() - since[0] >= 3000 ? l : null;
            });
            System.out.println("TIMING partition-heal-one-leader-ms=" + (since[0] - th));
            log("after the heal every node names %s (the only one claiming leadership) from %d ms on", one, since[0] - th);
            awaitHealthy(120_000);
            long ackedNow = sender.acked.size();
            await("the producer acknowledges 50 sends after the heal", 60_000,
                () -> sender.ackedAfter(th) >= 50 && sender.acked.size() > ackedNow ? Boolean.TRUE : null);
        } finally {
            if (cut) {
                try {
                    netctl("heal", leader);
                } catch (Throwable e) {
                    log("heal failed: %s", e);
                }
            }
            sender.close();
        }
        checkNothingLost(sender, "across the controller partition");
    }

    /** The group's members as `memberctl list` prints them (nsadmin listControllerMembers). */
    private String members() throws Exception {
        Process p = new ProcessBuilder(arg("memberctl"), "list").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        check(p.waitFor() == 0, "memberctl list failed: %s", out);
        log("members:\n%s", out.trim());
        return out;
    }

    /**
     * kill -9 the master under the sender: its successor must reach the route at id 0 within 60 s (printed as
     * TIMING {@code timing}), and the sender must get 50 acknowledgements after the kill.
     */
    private Failover failOverUnder(Sender sender, Node master, String when, String timing) throws Exception {
        long tKill = kill9(master);
        log("kill -9 master %s %s", master, when);
        Failover f = awaitNewMasterInRoute(master.addr, tKill, 60_000);
        System.out.println("TIMING " + timing + "=" + (f.routeAt - tKill));
        log("new master %s at id 0 in the route %d ms after the kill", name(f.newMaster), f.routeAt - tKill);
        await("the producer acknowledges 50 sends after the failover", 60_000,
            () -> sender.ackedAfter(tKill) >= 50 ? Boolean.TRUE : null);
        return f;
    }

    /** Runs the script's memberctl (grow|transfer ID|shrink|list) and returns the time it finished. */
    private long memberctl(String... words) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(arg("memberctl"));
        cmd.addAll(Arrays.asList(words));
        long t0 = System.currentTimeMillis();
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        int rc = p.waitFor();
        log("memberctl %s (%d ms): %s", String.join(" ", words), System.currentTimeMillis() - t0, out);
        check(rc == 0, "memberctl %s failed (%d): %s", String.join(" ", words), rc, out);
        return System.currentTimeMillis();
    }

    /**
     * (m) The controller group changes its members while a synchronous producer sends to the replica group and
     * the group's master fails over: two nodes are added (3 → 5 voters), the master is killed (-9) and replaced,
     * the leadership is handed to an added node, and both added nodes are removed again, the leader first
     * (5 → 3). The brokers know only the first three nodes (controllerAddr). Every change must succeed, the new
     * master must reach the route, the producer must go on, and every acknowledged message must be consumable.
     */
    private void scenarioM() throws Exception {
        View v = awaitHealthy(180_000);
        awaitTopicOnSlaves(v);
        Sender sender = new Sender("m-" + System.currentTimeMillis() + "-");
        long tStart = 0;
        try {
            await("the producer's first acknowledged sends", 30_000, () -> sender.acked.size() >= 50 ? Boolean.TRUE : null);
            tStart = System.currentTimeMillis();
            long tGrown = memberctl("grow");
            System.out.println("TIMING members-grow-3-to-5-ms=" + (tGrown - tStart));
            String grown = members();
            for (String id : List.of("n0", "n1", "n2", "n3", "n4")) {
                check(grown.contains(id), "%s is not a member after the growth:\n%s", id, grown);
            }
            String leaderAfterGrow = await("one controller leader named by the first three nodes", 30_000, this::agreedLeader);
            log("five voters; the leader is %s", leaderAfterGrow);

            Failover f = failOverUnder(sender, brokerByAddr(v.masterAddr()), "with five controller voters",
                "members-master-failover-ms");

            long tTransfer = System.currentTimeMillis();
            memberctl("transfer", "n3");
            long tTransferred = System.currentTimeMillis();
            System.out.println("TIMING members-transfer-ms=" + (tTransferred - tTransfer));
            long tShrink = System.currentTimeMillis();
            long tShrunk = memberctl("shrink");
            System.out.println("TIMING members-shrink-5-to-3-ms=" + (tShrunk - tShrink));
            String leader = await("one controller leader named by the three remaining nodes", 30_000, this::agreedLeader);
            log("three voters again; the leader is %s", leader);
            String members = members();
            check(members.contains("n0") && members.contains("n1") && members.contains("n2")
                && !members.contains("n3") && !members.contains("n4"), "not the first three alone:\n%s", members);

            // The sends across all of it, and the group after it: the new master is still the master.
            long[] gap = sender.longestPause(tStart, System.currentTimeMillis());
            System.out.println("TIMING members-producer-gap-ms=" + gap[0]);
            log("producer across the changes: %d sends acknowledged, failed sends %s; longest pause %d ms",
                sender.ackedAfter(tStart), sender.failures, gap[0]);
            View after = viewVia(leader);
            check(after != null && f.newMaster.equals(after.masterAddr()),
                "after the member changes the master is %s, not the failover's %s", after, name(f.newMaster));
            long ackedNow = sender.acked.size();
            long tEnd = System.currentTimeMillis();
            await("the producer acknowledges 50 sends after the last change", 60_000,
                () -> sender.ackedAfter(tEnd) >= 50 && sender.acked.size() > ackedNow ? Boolean.TRUE : null);
        } finally {
            sender.close();
        }
        checkNothingLost(sender, "across the controller's member changes and a master failover");
    }

    /**
     * Runs the script's movectl NODE: the node is killed (-9), its namespace gets a new address, its name points
     * there, and it is started again. Returns the node with its new pid (its name and port stay).
     */
    private Node movectl(Node n) throws Exception {
        long t0 = System.currentTimeMillis();
        Process p = new ProcessBuilder(arg("movectl"), n.name).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        int rc = p.waitFor();
        log("movectl %s (%d ms): %s", n.name, System.currentTimeMillis() - t0, out);
        check(rc == 0, "movectl %s failed (%d): %s", n.name, rc, out);
        String[] w = out.split("\\s+");
        // MOVED NAME OLD NEW PID N
        check(w.length == 6 && w[0].equals("MOVED") && w[4].equals("PID"), "movectl %s: unexpected answer %s", n.name, out);
        return new Node(n.name + "@" + n.addr + "@" + w[5]);
    }

    /**
     * (n) Rescheduled pods. The controller nodes are named by host name (controllerDLegerPeers and the brokers'
     * controllerAddr name them, as a StatefulSet's headless service does), and each in turn is killed (-9) and
     * started again at a new address under its name, the leader whenever it has not moved yet, while a synchronous
     * producer sends. After each move the moved node must answer at its new address and name the one leader the
     * others name within 10 s of answering, and the group must be healthy. Once every node has moved, so that every
     * link of the group and the brokers' is to a new address, the master is killed: its successor must reach the
     * route, the producer must go on, and every acknowledged message must be consumable.
     */
    private void scenarioN() throws Exception {
        final long agreeLimitMs = 10_000;
        View v = awaitHealthy(180_000);
        awaitTopicOnSlaves(v);
        Sender sender = new Sender("n-" + System.currentTimeMillis() + "-");
        Set<String> moved = new TreeSet<>();
        long tStart = 0;
        try {
            await("the producer's first acknowledged sends", 30_000, () -> sender.acked.size() >= 50 ? Boolean.TRUE : null);
            tStart = System.currentTimeMillis();
            for (int round = 0; round < controllers.size(); round++) {
                String leaderAddr = await("one controller leader, named by every node", 60_000, this::agreedLeader);
                Node leader = controllerByAddr(leaderAddr);
                check(leader != null, "leader %s is none of the controller nodes %s", leaderAddr, controllers);
                Node pick = !moved.contains(leader.name) ? leader
                    : controllers.stream().filter(c -> !moved.contains(c.name)).findFirst().orElseThrow();
                int idx = controllers.indexOf(pick);
                long tMove = System.currentTimeMillis();
                Node now = movectl(pick);
                controllers.set(idx, now);
                moved.add(now.name);
                long tReady = await(now + " answers at its new address", 60_000,
                    () -> meta(now.addr) != null ? System.currentTimeMillis() : null);
                String agreed = await("one leader named by every node, " + now + " included", 60_000, this::agreedLeader);
                long tAgreed = System.currentTimeMillis();
                String role = pick == leader ? "leader" : "follower";
                System.out.println("TIMING move-" + role + "-" + now.name + "-answers-ms=" + (tReady - tMove));
                System.out.println("TIMING move-" + role + "-" + now.name + "-agrees-ms=" + (tAgreed - tReady));
                log("moved %s %s: answers %d ms after the move, the group names %s %d ms after that", role, now,
                    tReady - tMove, agreed, tAgreed - tReady);
                check(tAgreed - tReady <= agreeLimitMs, "%s named the group's leader only %d ms after answering at its new address (limit %d ms)",
                    now, tAgreed - tReady, agreeLimitMs);
                View h = awaitHealthy(90_000);
                log("healthy after moving %s: %s", now, h);
            }
            String leader = await("one controller leader, named by every node", 60_000, this::agreedLeader);
            log("every controller node has moved; the leader is %s", leader);
            View before = awaitHealthy(60_000);
            failOverUnder(sender, brokerByAddr(before.masterAddr()), "with every controller node at a new address",
                "moved-master-failover-ms");
            long[] gap = sender.longestPause(tStart, System.currentTimeMillis());
            System.out.println("TIMING moves-producer-gap-ms=" + gap[0]);
            log("producer across the moves and the failover: %d sends acknowledged, failed sends %s; longest pause %d ms",
                sender.ackedAfter(tStart), sender.failures, gap[0]);
        } finally {
            sender.close();
        }
        checkNothingLost(sender, "across the controller nodes' moves and a master failover");
    }

    /** One bench round: kill -9 the master, time until the route shows its successor at id 0. */
    private void benchRound() throws Exception {
        View v = awaitHealthy(240_000);
        awaitTopicOnSlaves(v);
        Node master = brokerByAddr(v.masterAddr());
        long t = kill9(master);
        Failover f = awaitNewMasterInRoute(master.addr, t, 90_000);
        System.out.println("TIMING master-failover-ms=" + (f.routeAt - t));
        System.out.println("TIMING master-elect-ms=" + (f.controllerAt - t));
        log("killed %s; new master %s at id 0 after %d ms", master, name(f.newMaster), f.routeAt - t);
    }

    // ------------------------------------------------------------------------------------------------------------

    private String arg(String k) {
        String v = args.get(k);
        if (v == null) {
            throw new IllegalArgumentException("missing argument " + k);
        }
        return v;
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static void expectCode(int code, String what, Callable<?> call) throws Exception {
        try {
            Object r = call.call();
            throw new AssertionError(what + ": expected response code " + code + ", got success: " + r);
        } catch (MQBrokerException e) {
            check(e.getResponseCode() == code, "%s: expected response code %d, got %d (%s)", what, code,
                e.getResponseCode(), e.getErrorMessage());
        } catch (MQClientException e) {
            check(e.getResponseCode() == code, "%s: expected response code %d, got %d (%s)", what, code,
                e.getResponseCode(), e.getErrorMessage());
        }
    }

    static <T> T await(String what, long timeoutMs, Callable<T> probe) throws Exception {
        return await(what, timeoutMs, probe, () -> null);
    }

    /** Polls every 100 ms until the probe returns non-null; probe exceptions count as "not yet". */
    static <T> T await(String what, long timeoutMs, Callable<T> probe, Callable<String> detail) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        Throwable last = null;
        do {
            try {
                T v = probe.call();
                if (v != null) {
                    return v;
                }
            } catch (AssertionError e) {
                throw e;
            } catch (Exception e) {
                last = e;
            }
            Thread.sleep(POLL_MS);
        } while (System.currentTimeMillis() < deadline);
        String d = detail.call();
        throw new AssertionError("timed out after " + timeoutMs + " ms waiting for: " + what
            + (d == null ? "" : " (" + d + ")") + (last == null ? "" : " (last error: " + last + ")"));
    }

    static void check(boolean ok, String fmt, Object... a) {
        if (!ok) {
            throw new AssertionError(String.format(fmt, a));
        }
    }

    static void log(String fmt, Object... a) {
        System.out.println(String.format("[%tT.%<tL] ", System.currentTimeMillis()) + String.format(fmt, a));
    }
}
