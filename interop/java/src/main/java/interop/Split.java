package interop;

import static interop.Interop.await;
import static interop.Interop.check;
import static interop.Interop.log;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.constant.PermName;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Scenario 13 of the interop suite: a broker with enableSplitRegistration (its topics registered in chunks of
 * splitRegistrationSize) registers with our NameServer and with the Java NameServer side by side. After each step
 * both must route every topic of the broker alike (brokers, addresses, queues, permissions), and as the step means:
 * topics created on the broker only; one topic's queues changed; one topic deleted on the broker only; the broker's
 * write permission wiped on both NameServers, kept wiped through its next registrations, and given back by
 * addWritePerm; then deleteTopicWithBrokerRegistration on both, where ours keeps every topic some chunk lists and
 * Java only the last chunk's. Then, once scripts/interop restarted both NameServers (kill -9, the same ports), the
 * "restarted" step: both route every topic alike again, those deleted on the broker only absent from both (the Java
 * NameServer rebuilds its table from the broker's registrations; ours serves its route snapshot at once, with
 * snapshot=true, and drops what the broker's first complete round of chunks no longer lists).
 *
 * Usage: Split run|restarted ours=ADDR java=ADDR broker=NAME brokerAddr=ADDR topics=N periodMs=MS [snapshot=true]
 * [oursIsJava=true]
 */
public final class Split {
    private static final int TOPIC_NOT_EXIST = 17;
    private static final String PREFIX = "SplitTopic-";

    private final DefaultMQAdminExt ours;
    private final DefaultMQAdminExt java;
    private final String oursAddr;
    private final String javaAddr;
    private final String broker;
    private final String brokerAddr;
    private final List<String> topics = new ArrayList<>();
    private final long periodMs;
    /** The control run: the NameServer under test is the Java one as well. */
    private final boolean oursIsJava;

    private Split(Map<String, String> args) throws MQClientException {
        this.oursIsJava = Boolean.parseBoolean(args.getOrDefault("oursIsJava", "false"));
        this.oursAddr = args.get("ours");
        this.javaAddr = args.get("java");
        this.broker = args.get("broker");
        this.brokerAddr = args.get("brokerAddr");
        this.periodMs = Long.parseLong(args.getOrDefault("periodMs", "10000"));
        int n = Integer.parseInt(args.getOrDefault("topics", "300"));
        for (int i = 0; i < n; i++) {
            topics.add(String.format("%s%03d", PREFIX, i));
        }
        this.ours = Interop.startedAdmin(oursAddr, "interop-split-ours", 5000);
        this.java = Interop.startedAdmin(javaAddr, "interop-split-java", 5000);
    }

    public static void main(String[] argv) {
        Map<String, String> args = Interop.keyValues(argv);
        int rc = 0;
        Split it = null;
        try {
            it = new Split(args);
            if ("run".equals(argv[0])) {
                it.run();
            } else if ("restarted".equals(argv[0])) {
                it.restarted(Boolean.parseBoolean(args.getOrDefault("snapshot", "false")));
            } else {
                throw new IllegalArgumentException("unknown step " + argv[0]);
            }
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.out.println("FAILED: " + e);
            rc = 1;
        } finally {
            if (it != null) {
                it.ours.shutdown();
                it.java.shutdown();
            }
        }
        System.exit(rc);
    }

    private void run() throws Exception {
        // 1. Created on the broker only: each creation registers, and the periods register them all in chunks.
        for (String t : topics) {
            ours.createAndUpdateTopicConfig(brokerAddr, new TopicConfig(t, 4, 4, PermName.PERM_READ | PermName.PERM_WRITE));
        }
        log("created %d topics on %s (%s)", topics.size(), broker, brokerAddr);
        Map<String, String> created = alike("after creating the topics", 3 * periodMs, (t, r) -> r.startsWith("absent") ? "not routed" : null);
        log("both route all %d topics alike, e.g. %s: %s", topics.size(), topics.get(0), created.get(topics.get(0)));

        // 2. One topic's queues changed on the broker.
        String changed = topics.get(0);
        ours.createAndUpdateTopicConfig(brokerAddr, new TopicConfig(changed, 8, 8, PermName.PERM_READ | PermName.PERM_WRITE));
        alike("after changing the queues of " + changed, 3 * periodMs,
            (t, r) -> t.equals(changed) && !r.contains("r8w8") ? "still the old queues" : null);
        log("both route %s with 8 queues", changed);

        // 3. One topic deleted on the broker only (no NameServer told): what each does with it must agree.
        String deleted = topics.get(1);
        ours.deleteTopicInBroker(Collections.singleton(brokerAddr), deleted);
        Thread.sleep(2 * periodMs);
        Map<String, String> afterDelete = alike("after deleting " + deleted + " on the broker only", 2 * periodMs, (t, r) -> null);
        log("%s after its deletion on the broker only, on both: %s", deleted, afterDelete.get(deleted));

        // 4. The broker's write permission wiped on both NameServers (as before taking a broker out): it stays
        //    wiped through the broker's next registrations, whose data version has not changed (both NameServers
        //    take a topic's permission from a registration only when its version changed), until
        //    addWritePerm gives it back.
        int wipedOurs = ours.wipeWritePermOfBroker(oursAddr, broker);
        int wipedJava = java.wipeWritePermOfBroker(javaAddr, broker);
        log("wipeWritePerm: ours %d topics, Java %d", wipedOurs, wipedJava);
        check(wipedOurs == wipedJava, "wipeWritePerm touched %d topics on ours and %d on Java", wipedOurs, wipedJava);
        check(wipedOurs >= topics.size(), "wipeWritePerm touched %d topics, fewer than the broker's %d", wipedOurs, topics.size());
        Thread.sleep(periodMs + 2000);
        alike("a registration period after wipeWritePerm", 2 * periodMs,
            (t, r) -> !r.contains("perm=4") ? "write permission back before addWritePerm" : null);
        log("both keep the write permission wiped through the broker's registrations");
        int addedOurs = ours.addWritePermOfBroker(oursAddr, broker);
        int addedJava = java.addWritePermOfBroker(javaAddr, broker);
        log("addWritePerm: ours %d topics, Java %d", addedOurs, addedJava);
        check(addedOurs == addedJava, "addWritePerm touched %d topics on ours and %d on Java", addedOurs, addedJava);
        alike("after addWritePerm", periodMs, (t, r) -> !r.contains("perm=6") ? "write permission not given back" : null);
        log("both give the write permission back with addWritePerm");

        // 5. deleteTopicWithBrokerRegistration on both (docs/protocol.md §10 item 17), and one more topic deleted on
        //    the broker only. Each chunk lists only its own topics: ours removes a topic only when no chunk of the
        //    broker's round lists it (the two deleted on the broker), where Java prunes at every chunk what that
        //    chunk does not list, so that only the last chunk's topics stay routed. The setting is turned off
        //    again on both before the restart, which the Java NameServer recovers from by rebuilding its table.
        String gone = topics.get(3);
        setDeleteWithRegistration(true);
        ours.deleteTopicInBroker(Collections.singleton(brokerAddr), gone);
        log("deleteTopicWithBrokerRegistration=true on both; %s deleted on the broker only", gone);
        List<String> unlisted = List.of(deleted, gone);
        long deadline = System.currentTimeMillis() + 4 * periodMs;
        int routedOurs;
        int routedJava;
        while (true) {
            routedOurs = routed(ours, unlisted);
            routedJava = routed(java, unlisted);
            boolean settled = oursIsJava ? routedOurs < topics.size() - unlisted.size() && unlistedGone(ours, unlisted)
                : routedOurs == topics.size() - unlisted.size() && unlistedGone(ours, unlisted);
            if (settled && routedJava < topics.size() - unlisted.size() || System.currentTimeMillis() > deadline) {
                break;
            }
            Thread.sleep(1000);
        }
        log("with deleteTopicWithBrokerRegistration, of the %d topics the broker lists: ours routes %d, Java %d",
            topics.size() - unlisted.size(), routedOurs, routedJava);
        check(unlistedGone(ours, unlisted), "ours still routes a topic no chunk lists: %s", unlisted);
        if (oursIsJava) {
            check(routedOurs < topics.size() - unlisted.size(), "the Java NameServer kept every chunk's topics (%d)", routedOurs);
        } else {
            check(routedOurs == topics.size() - unlisted.size(), "ours routes %d of the %d topics the broker's chunks list",
                routedOurs, topics.size() - unlisted.size());
        }
        check(routedJava < topics.size() - unlisted.size(),
            "the Java NameServer kept every chunk's topics (%d): the difference this step documents is gone", routedJava);
        setDeleteWithRegistration(false);
    }

    private void setDeleteWithRegistration(boolean on) throws Exception {
        Properties p = new Properties();
        p.setProperty("deleteTopicWithBrokerRegistration", Boolean.toString(on));
        ours.updateNameServerConfig(p, List.of(oursAddr));
        java.updateNameServerConfig(p, List.of(javaAddr));
    }

    /** How many of the broker's topics but `unlisted` the NameServer routes. */
    private int routed(DefaultMQAdminExt admin, List<String> unlisted) throws Exception {
        int n = 0;
        for (String t : topics) {
            if (!unlisted.contains(t) && !route(admin, t).startsWith("absent")) {
                n++;
            }
        }
        return n;
    }

    private boolean unlistedGone(DefaultMQAdminExt admin, List<String> unlisted) throws Exception {
        for (String t : unlisted) {
            if (!route(admin, t).startsWith("absent")) {
                return false;
            }
        }
        return true;
    }

    /** After both NameServers restarted: the topics deleted on the broker only (steps 3 and 5) are gone from both. */
    private void restarted(boolean snapshot) throws Exception {
        List<String> deleted = List.of(topics.get(1), topics.get(3));
        String kept = topics.get(2);
        if (snapshot) {
            String atOnce = route(ours, kept);
            check(!atOnce.startsWith("absent"), "ours did not route %s at once after its restart", kept);
            log("ours routes %s at once after its restart (route snapshot): %s", kept, atOnce);
        }
        alike("after both NameServers restarted", 4 * periodMs, (t, r) -> {
            if (deleted.contains(t)) {
                return r.startsWith("absent") ? null : "still routed, though deleted on the broker before the restart";
            }
            return r.startsWith("absent") ? "not routed" : null;
        });
        log("both route the other %d topics alike after the restart, and %s on neither", topics.size() - deleted.size(), deleted);
    }

    /** What a rule finds wrong with one topic's route (null: nothing). */
    interface Rule {
        String wrong(String topic, String route) throws Exception;
    }

    /**
     * Waits until both NameServers route every topic alike and the rule finds nothing wrong on ours; the routes
     * then. Fails with the first difference seen last.
     */
    private Map<String, String> alike(String when, long timeoutMs, Rule rule) throws Exception {
        String[] last = new String[1];
        try {
            return await("both NameServers alike " + when, timeoutMs, () -> {
                Map<String, String> seen = new TreeMap<>();
                for (String t : topics) {
                    String o = route(ours, t);
                    String j = route(java, t);
                    if (!o.equals(j)) {
                        last[0] = t + ": ours " + o + ", Java " + j;
                        return null;
                    }
                    String wrong = rule.wrong(t, o);
                    if (wrong != null) {
                        last[0] = t + ": " + wrong + " (" + o + ")";
                        return null;
                    }
                    seen.put(t, o);
                }
                return seen;
            });
        } catch (Throwable e) {
            throw new AssertionError(when + ": " + last[0], e);
        }
    }

    /** One topic's route as text to compare: this broker's addresses, queues and permission, or "absent". */
    private String route(DefaultMQAdminExt admin, String topic) throws Exception {
        TopicRouteData r;
        try {
            r = admin.examineTopicRouteInfo(topic);
        } catch (MQClientException e) {
            if (e.getResponseCode() == TOPIC_NOT_EXIST) {
                return "absent";
            }
            throw e;
        }
        StringBuilder out = new StringBuilder();
        List<BrokerData> bds = new ArrayList<>(r.getBrokerDatas());
        bds.sort((a, b) -> a.getBrokerName().compareTo(b.getBrokerName()));
        for (BrokerData bd : bds) {
            out.append(bd.getCluster()).append('/').append(bd.getBrokerName()).append(new TreeMap<>(bd.getBrokerAddrs())).append(' ');
        }
        List<QueueData> qds = new ArrayList<>(r.getQueueDatas());
        qds.sort((a, b) -> a.getBrokerName().compareTo(b.getBrokerName()));
        for (QueueData qd : qds) {
            out.append(qd.getBrokerName()).append(":r").append(qd.getReadQueueNums()).append('w').append(qd.getWriteQueueNums())
                .append(" perm=").append(qd.getPerm()).append(" sysFlag=").append(qd.getTopicSysFlag()).append(' ');
        }
        return out.toString().trim();
    }
}
