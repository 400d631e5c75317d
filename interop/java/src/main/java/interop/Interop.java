package interop;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.RemotingClient;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.body.HARuntimeInfo;
import org.apache.rocketmq.remoting.protocol.body.KVTable;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Scenarios 1, 2, 3 (preparation), 5, 6 and 11 (preparation, route poller) of the interop suite, driven through the 5.x admin and client API.
 * Routing facts are read from the NameServer under test only, and broker addresses are learnt from it;
 * brokers are contacted directly only to create topics and to report their own view (HA status, topic
 * config). The expected values the driver passes in (addresses, pids) are what the NameServer must report.
 *
 * Usage: Interop SCENARIO key=value... ; exit code 0 = pass. Keys: ns, cluster, plus per scenario.
 */
public final class Interop {
    private static final int NO_PERMISSION = 16;
    private static final int TOPIC_NOT_EXIST = 17;
    private static final int QUERY_NOT_FOUND = 22;
    private static final int PERM_WRITE = 2;
    private static final int PERM_RW = 6;

    private final Map<String, String> args;
    private final String ns;
    private final String cluster;
    private final DefaultMQAdminExt admin;

    private Interop(Map<String, String> args) {
        this.args = args;
        this.ns = arg("ns");
        this.cluster = arg("cluster");
        this.admin = new DefaultMQAdminExt(5000);
        admin.setNamesrvAddr(ns);
        admin.setInstanceName("interop-admin");
    }

    public static void main(String[] argv) {
        Map<String, String> args = keyValues(argv);
        int rc = 0;
        Interop it = null;
        try {
            it = new Interop(args);
            it.admin.start();
            switch (argv[0]) {
                case "cluster": it.cluster(); break;
                case "messages": it.messages(); break;
                case "old-prepare": it.oldPrepare(); break;
                case "admin": it.adminApi(); break;
                case "liveness": it.liveness(); break;
                case "restart-prepare": it.restartPrepare(); break;
                case "route-poll": it.routePoll(); break;
                default: throw new IllegalArgumentException("unknown scenario " + argv[0]);
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
        System.exit(rc);
    }

    // ---- scenario 1: master + slave register; the slave learns its master through the NameServer ----
    private void cluster() throws Exception {
        String broker = arg("broker"), master = arg("master"), slave = arg("slave"), masterHa = arg("masterHa");
        Map<Long, String> expected = new HashMap<>();
        expected.put(0L, master);
        expected.put(1L, slave);
        ClusterInfo info = await("cluster info lists " + broker + " = " + expected, 30_000, () -> {
            ClusterInfo ci = admin.examineBrokerClusterInfo();
            BrokerData bd = ci.getBrokerAddrTable().get(broker);
            Set<String> names = ci.getClusterAddrTable().get(cluster);
            return bd != null && expected.equals(bd.getBrokerAddrs()) && names != null && names.contains(broker)
                && cluster.equals(bd.getCluster()) ? ci : null;
        });
        log("clusterList: %s -> %s", cluster, info.getClusterAddrTable().get(cluster));

        // The broker-name system topic is carried by the master; its route must show both members.
        TopicRouteData route = admin.examineTopicRouteInfo(broker);
        BrokerData rb = brokerData(route, broker);
        check(rb != null && expected.equals(rb.getBrokerAddrs()), "route of topic %s: %s", broker, route);

        // masterAddr/haServerAddr reach the slave only through the REGISTER_BROKER response, at the first
        // registration of the slave after the master's (the two registration periods are 10 s).
        HARuntimeInfo ha = await("slave " + slave + " replicates from " + masterHa, 45_000, () -> {
            HARuntimeInfo h = admin.getBrokerHAStatus(slave);
            return h.getHaClientRuntimeInfo() != null && masterHa.equals(h.getHaClientRuntimeInfo().getMasterAddr()) ? h : null;
        });
        log("slave HA client: masterAddr=%s", ha.getHaClientRuntimeInfo().getMasterAddr());
        HARuntimeInfo mha = await("master " + master + " sees its slave", 30_000, () -> {
            HARuntimeInfo h = admin.getBrokerHAStatus(master);
            return h.isMaster() && h.getHaConnectionInfo() != null && !h.getHaConnectionInfo().isEmpty() ? h : null;
        });
        log("master HA: %d slave connection(s)", mha.getHaConnectionInfo().size());
    }

    // ---- scenario 2: 1,000 messages through a normal and through an ordered topic ----
    private void messages() throws Exception {
        String broker = arg("broker");
        String master = masterOf(broker);
        int count = Integer.parseInt(args.getOrDefault("count", "1000"));

        String topic = "InteropTopic";
        createTopic(topic, false, master);
        awaitRoute(topic, broker);
        Exchange.run(ns, topic, count, "interop-plain", false, Collections.singleton(broker));

        // Same steps as `mqadmin updateTopic -c CLUSTER -o true`.
        String orderTopic = "InteropOrderTopic";
        createTopic(orderTopic, true, master);
        String orderConf = broker + ":4";
        admin.createOrUpdateOrderConf(orderTopic, orderConf, true);
        String kv = admin.getKVConfig("ORDER_TOPIC_CONFIG", orderTopic);
        check(orderConf.equals(kv), "KV ORDER_TOPIC_CONFIG/%s = %s, expected %s", orderTopic, kv, orderConf);
        TopicRouteData route = await("route of " + orderTopic + " has orderTopicConf " + orderConf, 15_000, () -> {
            TopicRouteData r = admin.examineTopicRouteInfo(orderTopic);
            return orderConf.equals(r.getOrderTopicConf()) ? r : null;
        });
        log("ordered route: orderTopicConf=%s", route.getOrderTopicConf());
        Exchange.run(ns, orderTopic, count, "interop-ordered", true, Collections.singleton(broker));

        // A broker learns order configs only from the KVTable body of the REGISTER_BROKER response:
        // an ORDER_TOPIC_CONFIG entry for the (unordered) plain topic must turn it ordered on the broker
        // at its next periodic registration.
        check(!admin.examineTopicConfig(master, topic).isOrder(), "%s is already ordered on the broker", topic);
        admin.createOrUpdateOrderConf(topic, broker + ":4", true);
        await("broker marks " + topic + " ordered after re-registering (REGISTER_BROKER response body)", 25_000,
            () -> admin.examineTopicConfig(master, topic).isOrder() ? Boolean.TRUE : null);
        log("broker learnt the order config of %s from its registration response", topic);
    }

    // ---- scenario 3 (5.x side): the 4.9 broker registered; a topic spans it and a 5.x broker ----
    private void oldPrepare() throws Exception {
        String oldBroker = arg("oldBroker"), oldAddr = arg("oldAddr"), broker = arg("broker"), topic = arg("topic");
        await("cluster info lists 4.9 broker " + oldBroker + " at " + oldAddr, 30_000, () -> {
            BrokerData bd = admin.examineBrokerClusterInfo().getBrokerAddrTable().get(oldBroker);
            return bd != null && oldAddr.equals(bd.getBrokerAddrs().get(0L)) ? bd : null;
        });
        TopicRouteData sys = admin.examineTopicRouteInfo(oldBroker);
        check(queueData(sys, oldBroker) != null, "route of %s (registered by the 4.9 broker): %s", oldBroker, sys);
        createTopic(topic, false, masterOf(broker), oldAddr);
        QueueData qd = queueData(awaitRoute(topic, broker, oldBroker), oldBroker);
        // The 4.9 broker registers with the compressed binary body; its topic line must decode intact.
        check(qd.getReadQueueNums() == 4 && qd.getWriteQueueNums() == 4 && qd.getPerm() == PERM_RW,
            "queue data registered by the 4.9 broker: %s", qd);
    }

    // ---- scenario 5: the admin API against the NameServer ----
    private void adminApi() throws Exception {
        String broker = arg("broker");
        String master = masterOf(broker);
        String topic = "AdminTopic";
        List<String> nsList = Collections.singletonList(ns);

        createTopic(topic, false, master);
        TopicRouteData route = awaitRoute(topic, broker);
        QueueData qd = queueData(route, broker);
        check(qd.getReadQueueNums() == 4 && qd.getWriteQueueNums() == 4 && qd.getPerm() == PERM_RW,
            "topicRoute queue data: %s", qd);
        check(master.equals(brokerData(route, broker).getBrokerAddrs().get(0L)), "topicRoute broker data: %s", route);
        log("topicRoute ok: %s", route);

        check(admin.fetchAllTopicList().getTopicList().contains(topic), "topicList lacks %s", topic);
        check(admin.fetchTopicsByCLuster(cluster).getTopicList().contains(topic), "topics of cluster %s lack %s", cluster, topic);
        log("topicList ok");

        Properties conf = admin.getNameServerConfig(nsList).get(ns);
        check(conf != null && conf.containsKey("listenPort") && conf.containsKey("kvConfigPath"), "getNamesrvConfig: %s", conf);
        String kvPath = conf.getProperty("kvConfigPath");
        Properties upd = new Properties();
        upd.setProperty("waitSecondsForService", "33");
        admin.updateNameServerConfig(upd, nsList);
        conf = admin.getNameServerConfig(nsList).get(ns);
        check("33".equals(conf.getProperty("waitSecondsForService")), "after update waitSecondsForService=%s",
            conf.getProperty("waitSecondsForService"));
        for (String key : new String[] {"kvConfigPath", "configStorePath"}) {
            Properties evil = new Properties();
            evil.setProperty(key, "/tmp/interop-evil");
            expectCode(NO_PERMISSION, "updateNamesrvConfig " + key, () -> {
                admin.updateNameServerConfig(evil, nsList);
                return null;
            });
        }
        conf = admin.getNameServerConfig(nsList).get(ns);
        check(kvPath.equals(conf.getProperty("kvConfigPath")), "kvConfigPath changed to %s", conf.getProperty("kvConfigPath"));
        // Any other key naming a file or directory (an implementation may add its own) must not be
        // remotely writable either: refused, or accepted without effect as Java does for unknown keys.
        Set<String> otherPathKeys = new TreeSet<>();
        for (String key : new TreeSet<>(conf.stringPropertyNames())) {
            if (!key.matches("(?i).*(path|dir|home|file)") || key.equals("kvConfigPath") || key.equals("configStorePath")) {
                continue;
            }
            otherPathKeys.add(key);
            String before = conf.getProperty(key);
            Properties evil = new Properties();
            evil.setProperty(key, "/tmp/interop-evil-" + key);
            try {
                admin.updateNameServerConfig(evil, nsList);
            } catch (MQClientException e) {
                check(e.getResponseCode() == NO_PERMISSION, "updateNamesrvConfig %s: code %d (%s)", key,
                    e.getResponseCode(), e.getErrorMessage());
                continue;
            }
            String after = admin.getNameServerConfig(nsList).get(ns).getProperty(key);
            check(before.equals(after), "path key %s was remotely changed from '%s' to '%s'", key, before, after);
        }
        log("getNamesrvConfig / updateNamesrvConfig ok (path keys refused with %d; also protected: %s)", NO_PERMISSION,
            otherPathKeys);

        String kvNs = "INTEROP_NS";
        admin.createAndUpdateKvConfig(kvNs, "k1", "v1");
        admin.createAndUpdateKvConfig(kvNs, "k2", "v2");
        check("v1".equals(admin.getKVConfig(kvNs, "k1")), "getKvConfig k1");
        Map<String, String> expected = new HashMap<>();
        expected.put("k1", "v1");
        expected.put("k2", "v2");
        KVTable table = admin.getKVListByNamespace(kvNs);
        check(expected.equals(table.getTable()), "getKVListByNamespace = %s", table.getTable());
        admin.deleteKvConfig(kvNs, "k1");
        expectCode(QUERY_NOT_FOUND, "getKvConfig of a deleted key", () -> admin.getKVConfig(kvNs, "k1"));
        expected.remove("k1");
        table = admin.getKVListByNamespace(kvNs);
        check(expected.equals(table.getTable()), "getKVListByNamespace after delete = %s", table.getTable());
        expectCode(QUERY_NOT_FOUND, "getKVListByNamespace of an unknown namespace",
            () -> admin.getKVListByNamespace("INTEROP_NO_SUCH_NS"));
        log("KV config ok");

        DefaultMQProducer producer = producer("interop-perm");
        try {
            send(producer, topic);
            int wiped = admin.wipeWritePermOfBroker(ns, broker);
            check(wiped > 0, "wipeWritePerm count %d", wiped);
            int perm = queueData(admin.examineTopicRouteInfo(topic), broker).getPerm();
            check((perm & PERM_WRITE) == 0, "perm after wipe: %d", perm);
            await("producer refuses to send after wipeWritePerm", 15_000, () -> {
                try {
                    send(producer, topic);
                    return null;
                } catch (MQClientException e) {
                    return e;
                }
            });
            int added = admin.addWritePermOfBroker(ns, broker);
            check(added == wiped, "addWritePerm count %d, wipeWritePerm count %d", added, wiped);
            perm = queueData(admin.examineTopicRouteInfo(topic), broker).getPerm();
            check(perm == PERM_RW, "perm after add: %d", perm);
            await("producer sends again after addWritePerm", 15_000, () -> {
                try {
                    return send(producer, topic);
                } catch (MQClientException e) {
                    return null;
                }
            });
            log("wipeWritePerm/addWritePerm ok (%d topics)", wiped);
        } finally {
            producer.shutdown();
        }

        // Same steps as `mqadmin deleteTopic -c CLUSTER -t TOPIC`.
        admin.deleteTopicInBroker(Collections.singleton(master), topic);
        admin.deleteTopicInNameServer(Collections.singleton(ns), cluster, topic);
        expectCode(TOPIC_NOT_EXIST, "topicRoute of a deleted topic", () -> admin.examineTopicRouteInfo(topic));
        check(!admin.fetchAllTopicList().getTopicList().contains(topic), "topicList still has deleted %s", topic);
        log("deleteTopic ok");
    }

    // ---- scenario 6: brokers that stop or die leave the routes; clients go to the survivor ----
    private void liveness() throws Exception {
        String survivor = arg("broker"), stopped = arg("stopBroker"), killed = arg("killBroker");
        String stalled = arg("stallBroker");
        long stopPid = Long.parseLong(arg("stopPid")), killPid = Long.parseLong(arg("killPid"));
        long stallPid = Long.parseLong(arg("stallPid"));
        long limitMs = Long.parseLong(args.getOrDefault("limitMs", "3000"));
        long stallLimitMs = Long.parseLong(args.getOrDefault("stallLimitMs", "25000"));
        String topic = "LivenessTopic";
        createTopic(topic, false, masterOf(survivor), masterOf(stopped), masterOf(killed));
        awaitRoute(topic, survivor, stopped, killed);
        masterOf(stalled);

        DefaultMQProducer producer = producer("interop-liveness");
        try {
            Set<String> used = new TreeSet<>();
            for (int i = 0; i < 24; i++) {
                used.add(send(producer, topic).getMessageQueue().getBrokerName());
            }
            check(used.size() == 3, "before the failures messages went to %s", used);

            // stopped and stalled run with a 10 s expiry and register only every 60 s: only their
            // heartbeats keep them in the tables for longer than one expiry period.
            long t0 = System.currentTimeMillis();
            while (System.currentTimeMillis() - t0 < 12_000) {
                Set<String> names = admin.examineBrokerClusterInfo().getBrokerAddrTable().keySet();
                check(names.contains(stopped) && names.contains(stalled),
                    "heartbeating brokers %s/%s not both in cluster info after %d ms: %s", stopped, stalled,
                    System.currentTimeMillis() - t0, names);
                Thread.sleep(250);
            }
            log("%s and %s (10 s expiry) stayed registered for 12 s on heartbeats", stopped, stalled);

            // SIGSTOP keeps the connection open: only the expiry scan can remove the broker.
            t0 = System.currentTimeMillis();
            Process p = new ProcessBuilder("kill", "-STOP", Long.toString(stallPid)).inheritIO().start();
            check(p.waitFor() == 0, "kill -STOP %d failed", stallPid);
            awaitGone(topic, stalled, stallLimitMs);
            log("%s (SIGSTOP, connection open) expired after %d ms", stalled, System.currentTimeMillis() - t0);
            check(admin.examineBrokerClusterInfo().getBrokerAddrTable().containsKey(stopped),
                "%s expired together with %s", stopped, stalled);

            t0 = System.currentTimeMillis();
            ProcessHandle.of(stopPid).orElseThrow(() -> new AssertionError("broker pid " + stopPid + " not running")).destroy();
            awaitGone(topic, stopped, limitMs);
            log("%s (SIGTERM) left routes and cluster info after %d ms", stopped, System.currentTimeMillis() - t0);

            t0 = System.currentTimeMillis();
            ProcessHandle.of(killPid).orElseThrow(() -> new AssertionError("broker pid " + killPid + " not running")).destroyForcibly();
            awaitGone(topic, killed, limitMs);
            log("%s (SIGKILL) left routes and cluster info after %d ms", killed, System.currentTimeMillis() - t0);

            // Let the producer's route poll (500 ms) pick up the change before judging where it sends.
            Thread.sleep(1500);
            used.clear();
            for (int i = 0; i < 50; i++) {
                used.add(send(producer, topic).getMessageQueue().getBrokerName());
            }
            check(used.equals(Collections.singleton(survivor)), "after the failures messages went to %s", used);
            log("producer routes around the dead brokers: 50 messages to %s", used);
        } finally {
            producer.shutdown();
        }
    }

    // ---- scenario 11: a topic served by one broker only, and a route poller while the script restarts it ----
    private void restartPrepare() throws Exception {
        String broker = arg("broker"), topic = arg("topic");
        createTopic(topic, false, masterOf(broker));
        TopicRouteData r = awaitRoute(topic, broker);
        log("route of %s served by %s only: %s", topic, broker, r.getQueueDatas());
    }

    /**
     * Asks for the topic's route (GET_ROUTEINFO_BY_TOPIC) every intervalMs until the stop file exists and
     * writes one line per answer to the out file: "EPOCH_MS OK" when the route lists the broker (queue
     * data and a master address), else "EPOCH_MS MISS why". The time is taken when the answer arrived.
     */
    private void routePoll() throws Exception {
        String broker = arg("broker"), topic = arg("topic");
        long intervalMs = Long.parseLong(args.getOrDefault("intervalMs", "50"));
        long maxMs = Long.parseLong(args.getOrDefault("maxMs", "280000"));
        Path stop = Paths.get(arg("stop"));
        int ok = 0, miss = 0;
        long t0 = System.currentTimeMillis();
        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(Paths.get(arg("out"))))) {
            while (!Files.exists(stop) && System.currentTimeMillis() - t0 < maxMs) {
                String state;
                try {
                    TopicRouteData r = admin.examineTopicRouteInfo(topic);
                    BrokerData bd = brokerData(r, broker);
                    state = queueData(r, broker) != null && bd != null && bd.getBrokerAddrs().get(0L) != null
                        ? "OK" : "MISS not-listed";
                } catch (MQClientException e) {
                    state = "MISS code=" + e.getResponseCode();
                } catch (Exception e) {
                    state = "MISS " + e.getClass().getSimpleName();
                }
                out.println(System.currentTimeMillis() + " " + state);
                out.flush();
                if (state.equals("OK")) {
                    ok++;
                } else {
                    miss++;
                }
                Thread.sleep(intervalMs);
            }
        }
        log("route poller: %d answers listing %s, %d without it", ok, broker, miss);
    }

    private void awaitGone(String topic, String broker, long limitMs) throws Exception {
        await(broker + " gone from route of " + topic + " and from cluster info", limitMs, () -> {
            TopicRouteData r = admin.examineTopicRouteInfo(topic);
            ClusterInfo ci = admin.examineBrokerClusterInfo();
            boolean inRoute = brokerData(r, broker) != null || queueData(r, broker) != null;
            boolean inCluster = ci.getBrokerAddrTable().containsKey(broker)
                || ci.getClusterAddrTable().getOrDefault(cluster, Collections.emptySet()).contains(broker);
            return inRoute || inCluster ? null : r;
        });
    }

    // ---- helpers ----
    private String arg(String key) {
        String v = args.get(key);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException("missing argument " + key + "=");
        }
        return v;
    }

    private String masterOf(String broker) throws Exception {
        return await("master address of " + broker + " in cluster info", 30_000, () -> {
            BrokerData bd = admin.examineBrokerClusterInfo().getBrokerAddrTable().get(broker);
            return bd == null ? null : bd.getBrokerAddrs().get(0L);
        });
    }

    private void createTopic(String topic, boolean order, String... brokerAddrs) throws Exception {
        TopicConfig tc = new TopicConfig(topic, 4, 4, PERM_RW);
        tc.setOrder(order);
        for (String addr : brokerAddrs) {
            admin.createAndUpdateTopicConfig(addr, tc);
        }
    }

    /** The brokers re-register a created topic at once (incremental registration). */
    private TopicRouteData awaitRoute(String topic, String... brokers) throws Exception {
        return await("route of " + topic + " lists " + Arrays.toString(brokers), 15_000, () -> {
            TopicRouteData r = admin.examineTopicRouteInfo(topic);
            for (String b : brokers) {
                if (queueData(r, b) == null || brokerData(r, b) == null) {
                    return null;
                }
            }
            return r;
        });
    }

    static QueueData queueData(TopicRouteData r, String broker) {
        return r.getQueueDatas().stream().filter(q -> broker.equals(q.getBrokerName())).findFirst().orElse(null);
    }

    static BrokerData brokerData(TopicRouteData r, String broker) {
        return r.getBrokerDatas().stream().filter(b -> broker.equals(b.getBrokerName())).findFirst().orElse(null);
    }

    private DefaultMQProducer producer(String group) throws MQClientException {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(ns);
        p.setInstanceName(group);
        // Route changes on the NameServer must reach the producer within the scenario's patience.
        p.setPollNameServerInterval(500);
        p.setSendMsgTimeout(3000);
        p.start();
        return p;
    }

    private static SendResult send(DefaultMQProducer p, String topic) throws Exception {
        return p.send(new Message(topic, "interop".getBytes()));
    }

    static void expectCode(int code, String what, Callable<?> call) throws Exception {
        try {
            Object r = call.call();
            throw new AssertionError(what + ": expected response code " + code + ", got success: " + r);
        } catch (MQClientException e) {
            check(e.getResponseCode() == code, "%s: expected response code %d, got %d (%s)", what, code,
                e.getResponseCode(), e.getErrorMessage());
        } catch (MQBrokerException e) {
            check(e.getResponseCode() == code, "%s: expected response code %d, got %d (%s)", what, code,
                e.getResponseCode(), e.getErrorMessage());
        }
    }

    /** An admin client of its own on ns (its instance name made unique), started. */
    static DefaultMQAdminExt startedAdmin(String ns, String instance, long timeoutMs) throws MQClientException {
        DefaultMQAdminExt a = new DefaultMQAdminExt(timeoutMs);
        a.setNamesrvAddr(ns);
        a.setInstanceName(instance + "-" + System.nanoTime());
        a.start();
        return a;
    }

    /** The admin's own remoting client: requests the admin API has no call for go out as its calls do (signed alike). */
    static RemotingClient remotingOf(DefaultMQAdminExt a) {
        return a.getDefaultMQAdminExtImpl().getMqClientInstance().getMQClientAPIImpl().getRemotingClient();
    }

    /** The key=value arguments after the scenario name. */
    static Map<String, String> keyValues(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (String a : Arrays.asList(argv).subList(1, argv.length)) {
            int eq = a.indexOf('=');
            args.put(a.substring(0, eq), a.substring(eq + 1));
        }
        return args;
    }

    /** Polls until the probe returns non-null; probe exceptions count as "not yet" and are reported on timeout. */
    static <T> T await(String what, long timeoutMs, Callable<T> probe) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        Throwable last = null;
        do {
            try {
                T v = probe.call();
                if (v != null) {
                    return v;
                }
            } catch (Exception e) {
                last = e;
            }
            Thread.sleep(100);
        } while (System.currentTimeMillis() < deadline);
        throw new AssertionError("timed out after " + timeoutMs + " ms waiting for: " + what
            + (last == null ? "" : " (last error: " + last + ")"));
    }

    static void check(boolean ok, String fmt, Object... a) {
        if (!ok) {
            throw new AssertionError(String.format(fmt, a));
        }
    }

    static void log(String fmt, Object... a) {
        System.out.println(String.format(fmt, a));
    }
}
