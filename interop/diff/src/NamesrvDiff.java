import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Predicate;
import java.util.zip.CRC32;
import java.util.zip.Deflater;
import java.util.zip.DeflaterOutputStream;

import org.apache.rocketmq.remoting.CommandCustomHeader;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.SerializeType;

/**
 * Differential test: replays scripted request sequences into the official Java NameServer and into
 * ours, and compares every answer (code, flag, language, version, remark, ext fields, body).
 * Usage: NamesrvDiff JAVA_ADDR OURS_ADDR. Exit 0 = no difference outside the allow-list.
 *
 * Broker state is keyed by (cluster, address) and tied to the registering connection, so every
 * simulated broker gets its own client (its own pair of connections) and keeps it open until the
 * sequence ends; closing it is how a broker "dies".
 */
public final class NamesrvDiff {

    // ------------------------------------------------------------------------------------------
    // ALLOW-LIST: the only place where deliberate deviations of our server from Java are accepted.
    // A difference matching an entry is printed as ALLOWED and does not fail the run. Add an entry
    // only for Java behaviour that docs/protocol.md says not to copy, with the reason, and list it in its §10.
    // ------------------------------------------------------------------------------------------
    static final List<Allowed> ALLOW = List.of(
        new Allowed("own-version",
            "the response header 'version' is the server's own release ordinal; ours identifies as 5.3.3 (479), "
                + "the release docs/protocol.md describes (§1.4); no peer reads it",
            d -> d.field.equals("version") && "479".equals(d.ours)),
        new Allowed("901-remark",
            "Java's GET_BROKER_MEMBER_GROUP success carries the accidental remark 'not set any response code' "
                + "(§2.3.19: may be copied or omitted)",
            d -> d.reqCode == 901 && d.field.equals("remark") && "not set any response code".equals(d.java)
                && d.ours == null),
        new Allowed("exception-remark",
            "when a handler throws, Java's remark is '<exception class>: message, <stack frame>'; §1.10: any "
                + "helpful text is fine, as long as the code is SYSTEM_ERROR too",
            d -> d.field.equals("remark") && code(d.javaCmd) == 1 && code(d.oursCmd) == 1 && d.java != null
                && d.java.matches("(?s)[a-z][\\w$]*(\\.[\\w$]+)*\\.[A-Z][\\w$]*(Exception|Error)\\b.*")),
        new Allowed("missing-required-field",
            "Java does not enforce 'required' header fields and answers with null values (often SUCCESS); §1.9 "
                + "lets ours reject such a request with SYSTEM_ERROR and a remark naming the field",
            d -> code(d.oursCmd) == 1 && d.oursCmd.getRemark() != null && missingRequired(d.req)),
        new Allowed("extra-config-key",
            "ours may list config keys of its own in GET_NAMESRV_CONFIG (§7.4: mqadmin just prints them)",
            d -> d.reqCode == 319 && d.field.startsWith("config.") && d.java == null),
        new Allowed("close-unregisters-all",
            "when several brokers registered on one connection (broker container) and it closes, Java "
                + "unregisters only the first it finds and leaves the rest to expire; §5.5 calls unregistering "
                + "every broker of that connection the better behaviour",
            d -> d.step.contains("after the shared connection closed")),
        new Allowed("standard-json-escaping",
            "standard route JSON: the 5.3.3 reference (fastjson 1, BrowserCompatible; §3.1) escapes non-ASCII as "
                + "\\uXXXX and '/' as '\\/'; 5.5.0 (fastjson2) writes them raw. Same JSON value, both parse everywhere",
            d -> d.reqCode == 105 && d.field.equals("body") && d.java != null && d.ours != null
                && d.java.equals(Json.canonical(Json.unescapeBrowserCompatible(d.ours)))),
        new Allowed("utf8-config-values",
            "UPDATE_NAMESRV_CONFIG bodies are UTF-8 (mqadmin sends them so); Java feeds them to its ISO-8859-1 "
                + "properties reader and mangles non-ASCII values, ours decodes them as UTF-8 (§7.3: fine)",
            d -> d.reqCode == 319 && d.field.startsWith("config.") && d.java != null && d.ours != null
                && new String(d.ours.getBytes(java.nio.charset.StandardCharsets.UTF_8),
                    java.nio.charset.StandardCharsets.ISO_8859_1).equals(d.java)),
        new Allowed("refused-registration-changes-nothing",
            "Java creates the broker group and its cluster entry before refusing a first registration with a "
                + "single topic, so refusals pile up empty groups (50k refusals: 50k groups); ours refuses before "
                + "changing anything, so there is no empty group for a later REGISTER_TOPIC_IN_NAMESRV to attach "
                + "queues to",
            d -> d.seq.equals("single-topic-first")
                && (d.step.contains("after refused") || d.step.contains("on empty group"))),
        new Allowed("one-master-per-epoch",
            "in controller mode stateVersion is the master epoch, which has one master; Java lets a second "
                + "address claim id 0 at the holder's epoch (a broker demoted while its registration as master "
                + "was in flight), ours keeps the first claimant (§10 item 15)",
            d -> d.seq.equals("stateversion") && d.step.contains("after a same-epoch claim"))
    );

    record Allowed(String id, String reason, Predicate<Diff> matches) { }

    record Diff(String seq, String step, Req req, int reqCode, String field, String java, String ours,
                RemotingCommand javaCmd, RemotingCommand oursCmd) { }

    static int code(RemotingCommand c) {
        return c == null ? -1 : c.getCode();
    }

    // "Required" header fields per request code (docs/protocol.md §2.3); Java never checks them.
    static final Map<Integer, List<String>> REQUIRED = Map.ofEntries(
        Map.entry(100, List.of("namespace", "key")), Map.entry(101, List.of("namespace", "key")),
        Map.entry(102, List.of("namespace", "key")),
        Map.entry(103, List.of("brokerName", "brokerAddr", "clusterName", "haServerAddr", "brokerId")),
        Map.entry(104, List.of("brokerName", "brokerAddr", "clusterName", "brokerId")),
        Map.entry(105, List.of("topic")), Map.entry(205, List.of("brokerName")), Map.entry(327, List.of("brokerName")),
        Map.entry(216, List.of("topic")), Map.entry(217, List.of("topic")), Map.entry(219, List.of("namespace")),
        Map.entry(224, List.of("cluster")),
        Map.entry(322, List.of("brokerName", "brokerAddr", "clusterName", "brokerId")),
        Map.entry(901, List.of("clusterName", "brokerName")),
        Map.entry(904, List.of("clusterName", "brokerAddr", "brokerName")));

    static boolean missingRequired(Req r) {
        if (r == null) return false;
        return REQUIRED.getOrDefault(r.code, List.of()).stream().anyMatch(k -> r.ext == null || r.ext.get(k) == null);
    }

    // Request versions (MQVersion ordinals) that matter, see docs/protocol.md §1.8.
    static final int V_CURRENT = 479, V4_9_3 = 399, V4_9_4 = 401, V5_0_0 = 413;
    static final long TS0 = 1_700_000_000_000L;
    static final long TIMEOUT_MS = 5000;
    static final int ASYNC_SETTLE_MS = 600;

    static String javaAddr, oursAddr;
    static NettyRemotingClient reader;
    static final List<NettyRemotingClient> openClients = new ArrayList<>();
    static String seqName;
    static int steps, seqSteps, seqDiffs, seqAllowed, totalDiffs, totalAllowed;
    static final boolean VERBOSE = System.getenv("DIFF_VERBOSE") != null;
    static final boolean SHOW_ALLOWED = VERBOSE || System.getenv("DIFF_SHOW_ALLOWED") != null;

    public static void main(String[] args) throws Exception {
        javaAddr = args[0];
        oursAddr = args[1];
        reader = client();
        long t0 = System.currentTimeMillis();
        runSeq("reads-on-empty", NamesrvDiff::seqEmpty);
        runSeq("master-slave", NamesrvDiff::seqMasterSlave);
        runSeq("route-json-forms", NamesrvDiff::seqRouteForms);
        runSeq("crc-and-compressed", NamesrvDiff::seqCrcCompressed);
        runSeq("dataversion-and-perm", NamesrvDiff::seqDataVersionPerm);
        runSeq("stateversion", NamesrvDiff::seqStateVersion);
        runSeq("single-topic-first", NamesrvDiff::seqSingleTopic);
        runSeq("slave-before-master", NamesrvDiff::seqSlaveFirst);
        runSeq("delete-topic", NamesrvDiff::seqDeleteTopic);
        runSeq("register-topic", NamesrvDiff::seqRegisterTopic);
        runSeq("unregister-and-close", NamesrvDiff::seqUnregister);
        runSeq("acting-master", NamesrvDiff::seqActingMaster);
        runSeq("kv-config", NamesrvDiff::seqKv);
        runSeq("namesrv-config", NamesrvDiff::seqConfig);
        runSeq("binary-headers", NamesrvDiff::seqBinary);
        runSeq("many-topics", NamesrvDiff::seqManyTopics);
        runSeq("expiry", NamesrvDiff::seqExpiry);
        runSeq("misc-and-missing-fields", NamesrvDiff::seqMisc);
        runSeq("raw-frames", NamesrvDiff::seqRawFrames);
        runSeq("table-at-unchanged-version", NamesrvDiff::seqUnchangedVersion);
        runSeq("group-gone-and-back", NamesrvDiff::seqGroupGoneAndBack);
        // Last: Java leaves brokers behind here (quirks of §5.2/§5.5), which would leak into later reads.
        runSeq("shared-names-and-connections", NamesrvDiff::seqShared);
        for (Allowed a : ALLOW) {
            Integer n = allowedCounts.get(a.id);
            if (n != null) System.out.printf("allowed %-24s x%-4d %s%n", a.id, n, a.reason);
        }
        System.out.printf("RESULT: %s — %d steps, %d differences, %d allowed, %.1f s%n",
            totalDiffs == 0 ? "PASS" : "FAIL", steps, totalDiffs, totalAllowed,
            (System.currentTimeMillis() - t0) / 1000.0);
        System.exit(totalDiffs == 0 ? 0 : 1);
    }

    interface Body { void run() throws Exception; }

    static void runSeq(String name, Body body) {
        seqName = name;
        seqSteps = seqDiffs = seqAllowed = 0;
        long t0 = System.nanoTime();
        try {
            body.run();
        } catch (Exception e) {
            report(new Diff(name, "<harness>", null, 0, "exception", e.toString(), "", null, null));
        } finally {
            // Dropping the brokers unregisters them, so the next sequence starts from a clean registry.
            for (NettyRemotingClient c : openClients) c.closeChannels(List.of(javaAddr, oursAddr));
            boolean hadBrokers = !openClients.isEmpty();
            openClients.clear();
            if (hadBrokers) sleep(ASYNC_SETTLE_MS);
        }
        System.out.printf("SEQ %-26s %3d steps %5.1f s  %s%n", name, seqSteps, (System.nanoTime() - t0) / 1e9,
            seqDiffs == 0 ? "OK" + (seqAllowed > 0 ? " (" + seqAllowed + " allowed)" : "")
                : "FAIL: " + seqDiffs + " differences" + (seqAllowed > 0 ? ", " + seqAllowed + " allowed" : ""));
    }

    // ========================================================================================
    // Sequences
    // ========================================================================================

    static void seqEmpty() {
        readAll("empty", "NoSuchTopic", "NoSuchCluster");
    }

    static void seqMasterSlave() {
        Broker m = new Broker("ClusterMS", "broker-ms", 0, "127.0.0.1:10911");
        Broker s = new Broker("ClusterMS", "broker-ms", 1, "127.0.0.1:10921");
        m.reg().topics(t("MsTopicA"), t("MsTopicB", 8, 8, 6, 0), t("MsUnit", 2, 2, 6, 1),
            t("MsUnitSub", 2, 2, 6, 2), t("MsUnitBoth", 2, 2, 6, 3)).dv(1)
            .filterServers("127.0.0.1:30001", "127.0.0.1:30002").send("master register");
        s.reg().topics(t("MsTopicA"), t("MsTopicB")).dv(1).send("slave register (gets masterAddr)");
        m.reg().topics(t("MsTopicA"), t("MsTopicB", 8, 8, 6, 0), t("MsUnit", 2, 2, 6, 1),
            t("MsUnitSub", 2, 2, 6, 2), t("MsUnitBoth", 2, 2, 6, 3)).dv(1)
            .filterServers("127.0.0.1:30001", "127.0.0.1:30002").send("master periodic re-register");
        Broker s2 = new Broker("ClusterMS", "broker-ms", 2, "127.0.0.1:10931");
        s2.reg().topics().dv(1).noFilterServers().send("second slave, empty topic table, no filterServerList");
        readAll("ms", "MsTopicA", "ClusterMS");
        call("route MsTopicB", reader, route("MsTopicB", V_CURRENT));
        call("member group", reader, req(901, "clusterName", "ClusterMS", "brokerName", "broker-ms"));
        call("member group, unknown broker", reader, req(901, "clusterName", "ClusterMS", "brokerName", "nope"));
        call("query data version, same", m.c, m.queryDv(1));
        call("query data version, differs", m.c, m.queryDv(2));
        call("query data version, no body", m.c, m.queryDvRaw(null));
        call("query data version, unknown broker", reader,
            req(322, "brokerName", "x", "brokerAddr", "127.0.0.1:1", "clusterName", "ClusterMS", "brokerId", "0")
                .body(dvJson(1, 0)));
        call("broker heartbeat (sync)", s.c, req(904, "clusterName", "ClusterMS", "brokerAddr", s.addr,
            "brokerName", "broker-ms", "brokerId", "1", "epoch", "0", "maxOffset", "0"));
        call("broker heartbeat, unknown broker", reader, req(904, "clusterName", "ClusterMS",
            "brokerAddr", "127.0.0.1:2", "brokerName", "zz"));
        oneway(m.c, m.queryDv(1));
        oneway(s.c, req(904, "clusterName", "ClusterMS", "brokerAddr", s.addr, "brokerName", "broker-ms"));
        sleep(200);
        call("route after oneway heartbeats", reader, route("MsTopicA", V_CURRENT));
    }

    static void seqRouteForms() {
        // Names with non-ASCII and '/' exercise the escaping differences of the two JSON forms.
        Broker a = new Broker("Clüster/R", "broker-é", 0, "127.0.0.1:11911");
        Broker b = new Broker("Clüster/R", "broker-r2", 0, "127.0.0.1:11921");
        Broker b1 = new Broker("Clüster/R", "broker-r2", 1, "127.0.0.1:11922");
        a.reg().topics(t("RtTopic"), t("RtStatic", 2, 2, 6, 0)).dv(3).zone("zone/1")
            .mapping("RtStatic", "{\"bname\":\"broker-é\",\"currIdMap\":{0:0,1:1,10:3},\"dirty\":false,"
                + "\"epoch\":3,\"scope\":\"__global__\",\"topic\":\"RtStatic\",\"totalQueues\":2}")
            .send("register with zone and static mapping");
        b.reg().topics(t("RtTopic", 2, 2, 6, 0), t("RtOther")).dv(3).zone("zone-2").actingMaster("true")
            .send("register second group");
        b1.reg().topics(t("RtTopic"), t("RtOther")).dv(3).zone("zone-2").actingMaster("true").send("slave of second group");
        for (String topic : List.of("RtTopic", "RtStatic")) {
            for (int v : new int[] {0, 37, V4_9_3, 400, V4_9_4, V_CURRENT, 9999}) {
                call("route " + topic + " v" + v, reader, route(topic, v));
            }
            call("route " + topic + " v399 acceptStandardJsonOnly=true", reader,
                route(topic, V4_9_3).ext("acceptStandardJsonOnly", "true"));
            call("route " + topic + " v399 acceptStandardJsonOnly=TRUE", reader,
                route(topic, V4_9_3).ext("acceptStandardJsonOnly", "TRUE"));
            call("route " + topic + " v479 acceptStandardJsonOnly=false", reader,
                route(topic, V_CURRENT).ext("acceptStandardJsonOnly", "false"));
        }
        call("route, zone filter zone/1", reader,
            route("RtTopic", V_CURRENT).ext("__ZONE_MODE", "true").ext("__ZONE_NAME", "ZONE/1"));
        call("route, zone filter zone-2 v399", reader,
            route("RtTopic", V4_9_3).ext("__ZONE_MODE", "TRUE").ext("__ZONE_NAME", "zone-2"));
        call("route, zone name without zone mode", reader,
            route("RtTopic", V_CURRENT).ext("__ZONE_NAME", "zone-2"));
        call("route with ignored rpc keys", reader,
            route("RtTopic", V_CURRENT).ext("lo", "false").ext("ns", "x").ext("bname", "y"));
        call("cluster info with zone/acting master", reader, req(106));
        call("topics by cluster", reader, req(224, "cluster", "Clüster/R"));
        call("system topics", reader, req(304));
    }

    static void seqCrcCompressed() {
        Broker a = new Broker("ClusterZ", "broker-z", 0, "127.0.0.1:12911");
        a.reg().topics(t("ZTopic1"), t("ZTopic2")).dv(1).crc(12345).send("wrong bodyCrc32");
        call("route after wrong crc", reader, route("ZTopic1", V_CURRENT));
        a.reg().topics(t("ZTopic1"), t("ZTopic2")).dv(1).crc(-1).send("negative wrong bodyCrc32");
        a.reg().topics(t("ZTopic1"), t("ZTopic2")).dv(1).crc(0).send("bodyCrc32=0 (not checked)");
        a.reg().topics(t("ZTopic1"), t("ZTopic2")).dv(2).noCrc().send("no bodyCrc32 field");
        a.reg().topics(t("ZTopic1"), t("ZTopic2")).dv(3).send("right bodyCrc32");
        Broker c = new Broker("ClusterZ", "broker-zc", 0, "127.0.0.1:12921");
        c.reg().topics(t("ZcTopic", 3, 5, 7, 1), t("ZcTopic2")).dv(1).compressed(true).version(V4_9_3)
            .send("compressed v399 (no mapping section)");
        call("route compressed topic (sysflag lost)", reader, route("ZcTopic", V_CURRENT));
        c.reg().topics(t("ZcTopic", 3, 5, 7, 1), t("ZcTopic3")).dv(2).compressed(true).version(V_CURRENT)
            .send("compressed v479 with mapping section");
        call("route compressed topic 3", reader, route("ZcTopic3", V_CURRENT));
        c.reg().topics(t("ZcTopic"), t("ZcTopic4")).dv(3).compressed(true).version(V_CURRENT).omitMappingSection()
            .send("compressed v479 without mapping section");
        c.reg().topics(t("ZcTopic"), t("ZcTopic5")).dv(4).compressed(true).version(V_CURRENT).crc(777)
            .send("compressed with wrong crc");
        c.reg().topics(t("ZcTopic"), t("ZcTopic6")).dv(5).compressed(false).version(V_CURRENT)
            .rawBody(compress("not json".getBytes(StandardCharsets.UTF_8))).send("compressed body, compressed=false");
        c.reg().topics(t("ZcTopic"), t("ZcTopic7")).dv(6).compressed(true).rawBody("{}".getBytes())
            .send("compressed=true, JSON body");
        c.reg().topics().dv(7).rawBody("{\"filterServerList\":[".getBytes()).send("truncated JSON body");
        c.reg().topics().dv(7).rawBody(null).noCrc().send("no body at all");
        c.reg().topics().dv(7).rawBody(null).crc(5).send("no body, non-zero crc");
        Broker old = new Broker("ClusterZ", "broker-old", 0, "127.0.0.1:12931");
        old.reg().topics(t("OldTopic"), t("OldTopic2")).dv(1).version(36).actingMaster(null).oldWrapperBody()
            .send("version 36: bare TopicConfigSerializeWrapper body");
        old.reg().topics(t("OldTopic"), t("OldTopic2")).dv(1).version(0).actingMaster(null).oldWrapperBody()
            .send("version 0: bare wrapper body");
        call("route old topic", reader, route("OldTopic", V_CURRENT));
        // Broker bodies Java parses leniently (docs/protocol.md §3.2), one feature per registration.
        // Not scripted: unquoted property names, which 5.3.3 (and §3.2) accept but 5.5.0 (fastjson2) refuses.
        Broker len = new Broker("ClusterZ", "broker-len", 0, "127.0.0.1:12941");
        len.reg().topics().dv(1).send("lenient: initial empty registration");
        String[][] lenient = {
            {"numbers as strings", "{\"topicName\":\"%s\",\"perm\":\"4\",\"readQueueNums\":\"3\",\"writeQueueNums\":5}"},
            {"missing queue nums and perm (defaults)", "{\"topicName\":\"%s\"}"},
            {"unknown properties", "{\"topicName\":\"%s\",\"perm\":6,\"bogus\":[1,{\"x\":2}],\"order\":true}"},
            {"topicFilterType as ordinal", "{\"topicName\":\"%s\",\"topicFilterType\":1}"},
            {"trailing comma", "{\"topicName\":\"%s\",\"perm\":6,}"},
            {"map key differs from topicName", "{\"topicName\":\"%s\"}"},
        };
        for (int k = 0; k < lenient.length; k++) {
            String topic = "LenTopic" + k;
            String mapKey = k == lenient.length - 1 ? "OtherKey" : topic;
            String body = "{\"filterServerList\":[],\"topicConfigSerializeWrapper\":{\"dataVersion\":" + dvStr(10 + k, 0)
                + ",\"topicConfigTable\":{\"" + mapKey + "\":" + String.format(lenient[k][1], topic) + "}}}";
            len.reg().rawBody(body.getBytes(StandardCharsets.UTF_8)).send("lenient: " + lenient[k][0]);
            call("route lenient topic: " + lenient[k][0], reader, route(topic, V_CURRENT));
        }
        len.reg().rawBody(("{\"topicConfigSerializeWrapper\":{\"dataVersion\":{\"counter\":\"30\",\"stateVersion\":0,"
            + "\"timestamp\":1700000000030},\"topicConfigTable\":{}},\"extra\":1}").getBytes(StandardCharsets.UTF_8))
            .send("lenient: counter as string, no filterServerList, unknown top-level key");
        call("query data version after lenient", len.c, len.queryDv(30));
        len.reg().rawBody("{\"topicConfigSerializeWrapper\":{\"topicConfigTable\":{}}}".getBytes())
            .send("lenient: no dataVersion (Java: timestamp = now)");
        Req q = len.queryDvRaw(dvJson(0, 0));
        q.maskTimestamp = true;
        call("query data version, counter 0", len.c, q);
    }

    static void seqDataVersionPerm() {
        Broker m = new Broker("ClusterP", "broker-p", 0, "127.0.0.1:13911");
        m.reg().topics(t("PTopic"), t("PTopic7", 4, 4, 7, 0), t("PTopicR", 4, 4, 4, 0)).dv(5).send("register dv 5");
        call("wipe write perm", reader, req(205, "brokerName", "broker-p"));
        call("route after wipe", reader, route("PTopic", V_CURRENT));
        call("wipe again (counted anyway)", reader, req(205, "brokerName", "broker-p"));
        m.reg().topics(t("PTopic"), t("PTopic7", 4, 4, 7, 0), t("PTopicR", 4, 4, 4, 0)).dv(5)
            .send("re-register same dv (must not clobber wipe)");
        call("route after same-dv re-register", reader, route("PTopic", V_CURRENT));
        call("add write perm", reader, req(327, "brokerName", "broker-p"));
        call("route PTopic7 after add (7 -> 6)", reader, route("PTopic7", V_CURRENT));
        call("route PTopicR after add (4 -> 6)", reader, route("PTopicR", V_CURRENT));
        call("wipe unknown broker", reader, req(205, "brokerName", "nope"));
        call("add unknown broker", reader, req(327, "brokerName", "nope"));
        m.reg().topics(t("PTopic", 2, 2, 6, 0), t("PTopic7", 4, 4, 7, 0), t("PTopicR", 4, 4, 4, 0)).dv(4)
            .send("stale (older) dv re-register");
        call("route after stale dv", reader, route("PTopic", V_CURRENT));
        call("query dv (stale stored)", m.c, m.queryDv(4));
        m.reg().topics(t("PTopic", 6, 6, 6, 0), t("PTopic7", 4, 4, 7, 0)).dv(6).send("newer dv, one topic dropped");
        call("route after newer dv", reader, route("PTopic", V_CURRENT));
        call("route dropped topic still there", reader, route("PTopicR", V_CURRENT));
        call("query dv same", m.c, m.queryDv(6));
        call("query dv, different stateVersion", m.c, m.queryDvRaw(dvJson(6, 1)));
        call("query dv, different timestamp", m.c,
            m.queryDvRaw("{\"counter\":6,\"stateVersion\":0,\"timestamp\":1}".getBytes()));
    }

    static void seqStateVersion() {
        Broker x = new Broker("ClusterS", "broker-s", 0, "127.0.0.1:14911");
        Broker y = new Broker("ClusterS", "broker-s", 0, "127.0.0.1:14921");
        x.reg().topics(t("STopic"), t("STopic2")).dv(1, 5).send("master X stateVersion 5");
        y.reg().topics(t("STopic", 1, 1, 6, 0), t("STopic2")).dv(1, 3).send("master Y stateVersion 3 (ignored)");
        call("cluster info after stale stateVersion", reader, req(106));
        call("route after stale stateVersion", reader, route("STopic", V_CURRENT));
        call("query dv for ignored Y", y.c, y.queryDv(1, 3));
        Broker sl = new Broker("ClusterS", "broker-s", 1, "127.0.0.1:14931");
        sl.reg().topics(t("STopic"), t("STopic2")).dv(1, 5).send("slave sees X as master");
        y.reg().topics(t("STopic", 1, 1, 6, 0), t("STopic2")).dv(2, 7).send("master Y stateVersion 7 (wins)");
        call("cluster info after newer stateVersion", reader, req(106));
        call("route after newer stateVersion", reader, route("STopic", V_CURRENT));
        sl.reg().topics(t("STopic"), t("STopic2")).dv(1, 5).send("slave now sees Y as master");
        x.reg().topics(t("STopic"), t("STopic2")).dv(3, 6).send("X again with stateVersion 6 (< 7, ignored)");
        call("cluster info end", reader, req(106));
        // X moves to id 1 on the same address: the old id of that address is dropped.
        x.id = 1;
        x.reg().topics(t("STopic"), t("STopic2")).dv(3, 8).send("X re-registers as id 1");
        call("cluster info after id switch", reader, req(106));
        call("member group after id switch", reader, req(901, "clusterName", "ClusterS", "brokerName", "broker-s"));
        // A broker that registers as master at Y's epoch, as a 5.x master does when a demotion races its
        // registration (§10 item 15).
        Broker z = new Broker("ClusterS", "broker-s", 0, "127.0.0.1:14941");
        z.reg().topics(t("STopic"), t("STopic2")).dv(4, 7).send("master Z at Y's stateVersion 7");
        call("cluster info after a same-epoch claim", reader, req(106));
        call("route after a same-epoch claim", reader, route("STopic", V_CURRENT));
    }

    static void seqSingleTopic() {
        Broker a = new Broker("ClusterO", "broker-o", 0, "127.0.0.1:15911");
        a.reg().topics(t("OneTopic")).dv(1).send("first registration with exactly one topic (refused)");
        call("route after refused", reader, route("OneTopic", V_CURRENT));
        call("cluster info after refused (group created, empty)", reader, req(106));
        call("route of a refused group via register-topic", reader, req(217, "topic", "OneTopic")
            .body(("{\"brokerDatas\":[],\"filterServerTable\":{},\"queueDatas\":[{\"brokerName\":\"broker-o\","
                + "\"perm\":6,\"readQueueNums\":1,\"topicSysFlag\":0,\"writeQueueNums\":1}]}").getBytes()));
        call("route after 217 on empty group", reader, route("OneTopic", V_CURRENT));
        a.reg().topics().dv(1).send("zero topics accepted");
        a.reg().topics(t("OneTopic")).dv(2).send("one topic, id already registered");
        call("route after accepted single topic", reader, route("OneTopic", V_CURRENT));
        Broker s = new Broker("ClusterO", "broker-o", 1, "127.0.0.1:15921");
        s.reg().topics(t("OneTopic")).dv(2).send("new slave with one topic (refused)");
        call("cluster info after refused slave", reader, req(106));
    }

    static void seqSlaveFirst() {
        Broker s = new Broker("ClusterF", "broker-f", 1, "127.0.0.1:16921");
        s.reg().topics(t("FTopic"), t("FTopic2")).dv(1).send("5.x slave before master (prime slave)");
        call("route from prime slave", reader, route("FTopic", V_CURRENT));
        Broker s2 = new Broker("ClusterF", "broker-f", 2, "127.0.0.1:16931");
        s2.reg().topics(t("FTopic", 1, 1, 6, 0), t("FTopic3")).dv(1).send("second slave (not prime)");
        call("route unchanged by non-prime slave", reader, route("FTopic", V_CURRENT));
        Broker m = new Broker("ClusterF", "broker-f", 0, "127.0.0.1:16911");
        m.reg().topics(t("FTopic", 8, 8, 6, 0), t("FTopic2")).dv(2).send("master arrives");
        s.reg().topics(t("FTopic"), t("FTopic2")).dv(1).send("slave re-registers, gets master");
        call("route with master", reader, route("FTopic", V4_9_3));
        Broker os = new Broker("ClusterF", "broker-fold", 1, "127.0.0.1:16941");
        os.reg().topics(t("FOldTopic"), t("FOldTopic2")).dv(1).actingMaster(null).version(V4_9_3)
            .send("4.x slave before master (no topic data)");
        call("route of 4.x slave-only topic", reader, route("FOldTopic", V_CURRENT));
        Broker as = new Broker("ClusterF", "broker-fam", 1, "127.0.0.1:16951");
        as.reg().topics(t("FActTopic"), t("FActTopic2", 4, 4, 7, 0)).dv(1).actingMaster("true")
            .hbTimeout("10000").send("acting-master slave before master (write wiped)");
        call("route of acting-master slave topic", reader, route("FActTopic2", V_CURRENT));
        call("cluster info", reader, req(106));
    }

    static void seqDeleteTopic() {
        Broker a = new Broker("ClusterD1", "broker-d1", 0, "127.0.0.1:17911");
        Broker b = new Broker("ClusterD2", "broker-d2", 0, "127.0.0.1:17921");
        a.reg().topics(t("DTopic"), t("DTopic2"), t("DTopic3")).dv(1).send("register d1");
        b.reg().topics(t("DTopic"), t("DTopic2"), t("DTopic3")).dv(1).send("register d2");
        call("delete with clusterName D1", reader, req(216, "topic", "DTopic", "clusterName", "ClusterD1"));
        call("route after cluster delete", reader, route("DTopic", V_CURRENT));
        call("delete with unknown cluster", reader, req(216, "topic", "DTopic", "clusterName", "Nope"));
        call("delete with clusterName D2 (last)", reader, req(216, "topic", "DTopic", "clusterName", "ClusterD2"));
        call("route after last delete", reader, route("DTopic", V_CURRENT));
        call("delete without clusterName", reader, req(216, "topic", "DTopic2"));
        call("route after plain delete", reader, route("DTopic2", V_CURRENT));
        call("delete with empty clusterName", reader, req(216, "topic", "DTopic3", "clusterName", ""));
        call("route after empty-cluster delete", reader, route("DTopic3", V_CURRENT));
        call("delete unknown topic", reader, req(216, "topic", "NeverThere"));
        call("topics by cluster D1", reader, req(224, "cluster", "ClusterD1"));
        a.reg().topics(t("DTopic"), t("DTopic2"), t("DTopic3")).dv(1).send("same-dv re-register brings topics back");
        call("route after re-register", reader, route("DTopic2", V_CURRENT));
        call("all topics", reader, req(206));
    }

    static void seqRegisterTopic() {
        Broker a = new Broker("ClusterT", "broker-t", 0, "127.0.0.1:18911");
        Broker b = new Broker("ClusterT", "broker-t2", 0, "127.0.0.1:18921");
        a.reg().topics(t("TTopic"), t("TTopic0")).dv(1).send("register t");
        b.reg().topics(t("TTopic0"), t("TTopicX")).dv(1).send("register t2");
        call("register topic, known broker", reader, req(217, "topic", "TNew").body(routeBody(qd("broker-t", 6))));
        call("route new topic", reader, route("TNew", V_CURRENT));
        call("register topic, two brokers", reader,
            req(217, "topic", "TNew2").body(routeBody(qd("broker-t", 2), qd("broker-t2", 4))));
        call("route new topic 2", reader, route("TNew2", V4_9_3));
        call("register topic, unknown broker only", reader, req(217, "topic", "TNew3").body(routeBody(qd("ghost", 6))));
        call("route after unknown broker", reader, route("TNew3", V_CURRENT));
        call("register topic, known then unknown (existing topic)", reader,
            req(217, "topic", "TTopic").body(routeBody(qd("broker-t2", 6), qd("ghost", 6))));
        call("route TTopic after partial", reader, route("TTopic", V_CURRENT));
        call("register topic, unknown then known (existing topic)", reader,
            req(217, "topic", "TTopicX").body(routeBody(qd("ghost", 6), qd("broker-t", 6))));
        call("route TTopicX", reader, route("TTopicX", V_CURRENT));
        call("register topic, no body", reader, req(217, "topic", "TNew4"));
        call("register topic, empty queueDatas", reader, req(217, "topic", "TNew4").body(routeBody()));
        call("register topic, bad body", reader, req(217, "topic", "TNew4").body("[1,2".getBytes()));
        call("all topics", reader, req(206));
    }

    static void seqUnregister() {
        Broker m = new Broker("ClusterU", "broker-u", 0, "127.0.0.1:19911");
        Broker s = new Broker("ClusterU", "broker-u", 1, "127.0.0.1:19921");
        Broker o = new Broker("ClusterU", "broker-u2", 0, "127.0.0.1:19931");
        m.reg().topics(t("UTopic"), t("UTopic2")).dv(1).send("master");
        s.reg().topics(t("UTopic"), t("UTopic2")).dv(1).send("slave");
        o.reg().topics(t("UTopic"), t("UOther")).dv(1).send("other group");
        call("unregister slave", reader, m.unregister(s));
        sleep(ASYNC_SETTLE_MS);
        call("route after slave unregister", reader, route("UTopic", V_CURRENT));
        call("unregister master", reader, m.unregister(m));
        sleep(ASYNC_SETTLE_MS);
        call("route after master unregister", reader, route("UTopic", V_CURRENT));
        call("route of vanished group topic", reader, route("UTopic2", V_CURRENT));
        call("cluster info", reader, req(106));
        call("unregister unknown", reader, req(104, "brokerName", "nope", "brokerAddr", "127.0.0.1:1",
            "clusterName", "ClusterU", "brokerId", "0"));
        // Re-register the group on one connection, then again on a second one: only closing the
        // connection the broker registered on last counts.
        m.reg().topics(t("UTopic"), t("UTopic2")).dv(2).send("master back");
        Broker m2 = new Broker("ClusterU", "broker-u", 0, "127.0.0.1:19911");
        m2.reg().topics(t("UTopic"), t("UTopic2")).dv(2).send("master re-registers on a new connection");
        m.close();
        sleep(ASYNC_SETTLE_MS);
        call("route after closing the old connection", reader, route("UTopic2", V_CURRENT));
        m2.close();
        sleep(ASYNC_SETTLE_MS);
        call("route after closing the live connection", reader, route("UTopic2", V_CURRENT));
        call("query dv after close", reader, req(322, "brokerName", "broker-u", "brokerAddr", "127.0.0.1:19911",
            "clusterName", "ClusterU", "brokerId", "0").body(dvJson(2, 0)));
        call("cluster info after close", reader, req(106));
        o.close();
        sleep(ASYNC_SETTLE_MS);
        call("cluster info, all gone", reader, req(106));
        call("system topics, all gone", reader, req(304));
    }

    static void seqActingMaster() {
        updateConfig("enable supportActingMaster", "supportActingMaster=true\n");
        Broker m = new Broker("ClusterA", "broker-a", 0, "127.0.0.1:21911");
        Broker s = new Broker("ClusterA", "broker-a", 1, "127.0.0.1:21921");
        Broker s2 = new Broker("ClusterA", "broker-a", 2, "127.0.0.1:21931");
        m.reg().topics(t("ATopic"), t("ATopic2")).dv(1).actingMaster("true").send("master");
        s.reg().topics(t("ATopic"), t("ATopic2")).dv(1).actingMaster("true").send("slave 1");
        s2.reg().topics(t("ATopic"), t("ATopic2")).dv(1).actingMaster("true").send("slave 2");
        m.close();
        sleep(ASYNC_SETTLE_MS);
        call("route: slave acts as master", reader, route("ATopic", V_CURRENT));
        call("route: sync-member topic is not rewritten", reader,
            req(217, "topic", "rmq_sys_SYNC_BROKER_MEMBER_broker-a").body(routeBody(qd("broker-a", 4))));
        call("route rmq_sys_SYNC_BROKER_MEMBER_", reader, route("rmq_sys_SYNC_BROKER_MEMBER_broker-a", V_CURRENT));
        call("member group", reader, req(901, "clusterName", "ClusterA", "brokerName", "broker-a"));
        call("cluster info (stored table untouched)", reader, req(106));
        updateConfig("disable supportActingMaster", "supportActingMaster=false\n");
        call("route without rewrite", reader, route("ATopic", V_CURRENT));
    }

    static void seqKv() {
        call("get missing", reader, req(101, "namespace", "NsA", "key", "k1"));
        call("list missing namespace", reader, req(219, "namespace", "NsA"));
        call("put", reader, req(100, "namespace", "NsA", "key", "k1", "value", "v1"));
        call("put 2", reader, req(100, "namespace", "NsA", "key", "k2", "value", "v=2 é \"q\""));
        call("put overwrite", reader, req(100, "namespace", "NsA", "key", "k1", "value", "v1b"));
        call("get", reader, req(101, "namespace", "NsA", "key", "k1"));
        call("get non-ascii", reader, req(101, "namespace", "NsA", "key", "k2"));
        call("list", reader, req(219, "namespace", "NsA"));
        call("put without value", reader, req(100, "namespace", "NsA", "key", "k3"));
        call("get null value", reader, req(101, "namespace", "NsA", "key", "k3"));
        call("list after null value", reader, req(219, "namespace", "NsA"));
        call("put without key", reader, req(100, "namespace", "NsA", "value", "x"));
        call("put without namespace", reader, req(100, "key", "k", "value", "x"));
        call("delete", reader, req(102, "namespace", "NsA", "key", "k1"));
        call("delete missing", reader, req(102, "namespace", "NsA", "key", "nope"));
        call("delete in missing namespace", reader, req(102, "namespace", "NsNope", "key", "nope"));
        call("list missing namespace after delete", reader, req(219, "namespace", "NsNope"));
        call("delete last", reader, req(102, "namespace", "NsA", "key", "k2"));
        call("delete null-valued", reader, req(102, "namespace", "NsA", "key", "k3"));
        call("list emptied namespace", reader, req(219, "namespace", "NsA"));
        call("get from emptied namespace", reader, req(101, "namespace", "NsA", "key", "k1"));
        // ORDER_TOPIC_CONFIG feeds REGISTER_BROKER responses and (with orderMessageEnable) routes.
        Broker m = new Broker("ClusterK", "broker-k", 0, "127.0.0.1:22911");
        m.reg().topics(t("KTopic"), t("KTopic2")).dv(1).send("register before order config (no body)");
        call("put order conf", reader, req(100, "namespace", "ORDER_TOPIC_CONFIG", "key", "KTopic",
            "value", "broker-k:4"));
        m.reg().topics(t("KTopic"), t("KTopic2")).dv(1).send("register returns order config");
        call("route without orderMessageEnable", reader, route("KTopic", V_CURRENT));
        updateConfig("orderMessageEnable=true", "orderMessageEnable=true\n");
        call("route with orderTopicConf v479", reader, route("KTopic", V_CURRENT));
        call("route with orderTopicConf v399", reader, route("KTopic", V4_9_3));
        call("route without entry", reader, route("KTopic2", V_CURRENT));
        updateConfig("returnOrderTopicConfigToBroker=false", "returnOrderTopicConfigToBroker=false\n");
        m.reg().topics(t("KTopic"), t("KTopic2")).dv(1).send("register, order config not returned");
        updateConfig("restore", "orderMessageEnable=false\nreturnOrderTopicConfigToBroker=true\n");
        call("delete order conf", reader, req(102, "namespace", "ORDER_TOPIC_CONFIG", "key", "KTopic"));
        m.reg().topics(t("KTopic"), t("KTopic2")).dv(1).send("register returns empty order table");
        call("list order namespace", reader, req(219, "namespace", "ORDER_TOPIC_CONFIG"));
    }

    static void seqConfig() {
        call("get config", reader, req(319));
        for (String k : List.of("kvConfigPath", "configStorePath", "rocketmqHome", "configBlackList")) {
            call("update blacklisted " + k, reader, req(318).body((k + "=/tmp/x\n").getBytes()));
        }
        call("update mixing allowed and blacklisted", reader,
            req(318).body("enableTopicList=false\nkvConfigPath=/tmp/x\n".getBytes()));
        call("topic list still enabled", reader, req(224, "cluster", "x"));
        call("update without body", reader, req(318));
        call("update unknown key", reader, req(318).body("someUnknownKey=1\n".getBytes()));
        call("update with comments and spacing", reader,
            req(318).body("# comment\n! also\nwaitSecondsForService : 50\n".getBytes()));
        call("get config after updates", reader, req(319));
        updateConfig("disable enableAllTopicList", "enableAllTopicList=false\n");
        call("all topics disabled", reader, req(206));
        updateConfig("disable enableTopicList", "enableTopicList=FALSE\n");
        for (int code : new int[] {224, 311, 312, 313, 304}) {
            call("gated read " + code, reader, code == 224 ? req(224, "cluster", "x") : req(code));
        }
        updateConfig("re-enable lists", "enableAllTopicList=true\nenableTopicList=true\nwaitSecondsForService=45\n");
        call("all topics enabled again", reader, req(206));
        // Pruning of topics missing from a registration with a new DataVersion.
        updateConfig("enable deleteTopicWithBrokerRegistration", "deleteTopicWithBrokerRegistration=true\n");
        Broker m = new Broker("ClusterC", "broker-c", 0, "127.0.0.1:23911");
        m.reg().topics(t("CTopic"), t("CTopic2"), t("CTopic3")).dv(1).send("register 3 topics");
        m.reg().topics(t("CTopic"), t("CTopic2")).dv(2).send("register 2 topics (prunes CTopic3)");
        call("route pruned topic", reader, route("CTopic3", V_CURRENT));
        updateConfig("disable deleteTopicWithBrokerRegistration", "deleteTopicWithBrokerRegistration=false\n");
        m.reg().topics(t("CTopic")).dv(3).send("register 1 topic (no pruning)");
        call("route kept topic", reader, route("CTopic2", V_CURRENT));
        call("get config at end", reader, req(319));
    }

    static void seqUnchangedVersion() {
        // Java takes a topic's queues from a registration only when the broker's DataVersion differs
        // from the one stored for its (cluster, address), or when the topic does not list the group
        // yet; otherwise the stored route stands. Here the stored DataVersion belongs to another group
        // on the same address, or the topic table changed without a new DataVersion.
        String a0 = "127.0.0.1:29911";
        Broker g2 = new Broker("ClusterV0", "broker-v2", 0, a0);
        Broker g0 = new Broker("ClusterV1", "broker-v0", 0, a0);
        Broker g2c1 = new Broker("ClusterV1", "broker-v2", 0, a0, g2.c); // g2 moved to cluster V1
        g2.reg().topics(t("VTopic1", 1, 1, 6, 0), t("VTopic0", 1, 1, 6, 0)).dv(0)
            .send("1: g2 in V0 with VTopic1:1, VTopic0:1, counter 0");
        readVTopics("1");
        g0.reg().topics(t("VTopic0", 1, 1, 6, 0), t("VTopic1", 1, 1, 6, 0)).dv(2)
            .send("2: g0 in V1 on the same address with VTopic0:1, VTopic1:1, counter 2");
        readVTopics("2");
        g2c1.reg().topics(t("VTopic0", 3, 3, 6, 0)).dv(2)
            .send("3: g2 now in V1 (same address) with VTopic0:3 only, counter 2");
        readVTopics("3");
        g2c1.reg().topics(t("VTopic0", 3, 3, 6, 0)).dv(0).send("4: g2 in V1 with VTopic0:3 again, counter 0");
        readVTopics("4");
        // Java's closed connections would leave g0 and g2's V0 entry behind (only the live entry
        // still on a connection is found): unregister everything explicitly.
        call("unregister g0 in V1", reader, g0.unregister(g0));
        call("unregister g2 in V1", reader, g0.unregister(g2c1));
        sleep(ASYNC_SETTLE_MS);
        call("cluster info after unregistering V1", reader, req(106));
        g2.reg().topics().dv(1).send("g2 back in V0 with no topics (to unregister its V0 entry)");
        call("unregister g2 in V0", reader, g2.unregister(g2));
        sleep(ASYNC_SETTLE_MS);
        call("cluster info, V0 and V1 gone", reader, req(106));

        // One broker, one connection: a changed topic table under an unchanged DataVersion.
        Broker w = new Broker("ClusterW", "broker-w", 0, "127.0.0.1:29921");
        w.reg().topics(t("WTopic3", 1, 1, 6, 0), t("WTopic2", 1, 1, 6, 0)).dv(0)
            .send("WTopic3:1, WTopic2:1, counter 0");
        call("route WTopic2 after first registration", reader, route("WTopic2", V_CURRENT));
        w.reg().topics(t("WTopic2", 2, 2, 6, 0)).dv(0).send("WTopic2:2 only, counter 0 (unchanged)");
        call("route WTopic2 after unchanged counter", reader, route("WTopic2", V_CURRENT));
        call("route WTopic3 after unchanged counter", reader, route("WTopic3", V_CURRENT));
        w.reg().topics(t("WTopic2", 2, 2, 6, 0)).dv(1).send("WTopic2:2 only, counter 1");
        call("route WTopic2 after new counter", reader, route("WTopic2", V_CURRENT));
        w.close();
        sleep(ASYNC_SETTLE_MS);
        call("cluster info, all gone", reader, req(106));
    }

    static void seqGroupGoneAndBack() {
        // The registry property's counterexample (docs/architecture.md, when a registration is
        // read as a difference): broker-x0's id 1 on address A registers in cluster X1; A takes
        // id 0 in X0; id 0 moves to address B, which unregisters, so the group and its topics are
        // gone; id 1 on A brings the group back in X0; then A's X1 registration lists the table of
        // its first again (XTopic3:3, XTopic0:1), at counter 0. Java decides the route. (B leaves by UNREGISTER_BROKER, not
        // by closing its connection: Java looks a closed connection's group up by the cluster the
        // group was created in, X1, and would leave B routable for good.)
        String a = "127.0.0.1:29931", b = "127.0.0.1:29932";
        Broker x1 = new Broker("ClusterX1", "broker-x0", 1, a);
        Broker x0 = new Broker("ClusterX0", "broker-x0", 0, a, x1.c);
        Broker x0b = new Broker("ClusterX0", "broker-x0", 0, b);
        Broker x0s = new Broker("ClusterX0", "broker-x0", 1, a, x1.c);
        x1.reg().topics(t("XTopic3", 3, 3, 6, 0), t("XTopic0", 1, 1, 6, 0)).dv(1)
            .send("1: id 1 on A in X1 with XTopic3:3, XTopic0:1, counter 1");
        readXTopics("1");
        x0.reg().topics().dv(0).send("2: A as id 0 in X0, no topics, counter 0");
        readXTopics("2");
        x0b.reg().topics().dv(0).send("3: id 0 on B in X0 (its own connection), no topics");
        readXTopics("3");
        call("4: unregister id 0 on B in X0", reader, x0b.unregister(x0b));
        sleep(ASYNC_SETTLE_MS);
        readXTopics("4 (B unregistered)");
        x0s.reg().topics(t("XTopic2", 1, 1, 6, 0), t("XTopic0", 1, 1, 6, 0)).dv(0)
            .send("5: id 1 on A in X0 with XTopic2:1, XTopic0:1, counter 0");
        readXTopics("5");
        x1.reg().topics(t("XTopic3", 3, 3, 6, 0), t("XTopic0", 1, 1, 6, 0)).dv(0)
            .send("6: id 1 on A in X1 with XTopic3:3, XTopic0:1 again, counter 0");
        readXTopics("6");

        // One member in two clusters on one address: its X0 registration changes YTopic0, then
        // its X1 registration lists YTopic0 as its previous X1 registration did, at a new counter.
        String c = "127.0.0.1:29933";
        Broker y0 = new Broker("ClusterY0", "broker-y0", 0, c);
        Broker y1 = new Broker("ClusterY1", "broker-y0", 0, c, y0.c);
        y0.reg().topics(t("YTopic0", 1, 1, 6, 0), t("YTopic1", 1, 1, 6, 0)).dv(0).send("Y0 with YTopic0:1, YTopic1:1");
        y1.reg().topics(t("YTopic0", 1, 1, 6, 0), t("YTopic1", 1, 1, 6, 0)).dv(0).send("Y1 with YTopic0:1, YTopic1:1");
        y0.reg().topics(t("YTopic0", 2, 2, 6, 0), t("YTopic1", 1, 1, 6, 0)).dv(1).send("Y0 with YTopic0:2, counter 1");
        call("route YTopic0 after Y0 changed it", reader, route("YTopic0", V_CURRENT));
        y1.reg().topics(t("YTopic0", 1, 1, 6, 0), t("YTopic1", 1, 1, 6, 0)).dv(1).send("Y1 with YTopic0:1, counter 1");
        call("route YTopic0 after Y1 listed it as before", reader, route("YTopic0", V_CURRENT));

        // Java would find only one live entry per closed connection: unregister each explicitly.
        for (Broker gone : List.of(x1, x0s, y0, y1)) {
            call("unregister " + gone.cluster + " " + gone.addr, reader, gone.unregister(gone));
        }
        sleep(ASYNC_SETTLE_MS);
        call("cluster info, X and Y gone", reader, req(106));
    }

    static void readXTopics(String step) {
        readRoutes(step, "XTopic0", "XTopic1", "XTopic2", "XTopic3");
    }

    static void readVTopics(String step) {
        readRoutes(step, "VTopic0", "VTopic1");
    }

    /** Each topic's route and the cluster info, after `step`. */
    static void readRoutes(String step, String... topics) {
        for (String topic : topics) call("route " + topic + " after step " + step, reader, route(topic, V_CURRENT));
        call("cluster info after step " + step, reader, req(106));
    }

    static void seqShared() {
        // One brokerName in two clusters: Java keeps the first cluster in BrokerData but lists the
        // name under both clusters.
        Broker a = new Broker("ClusterX1", "broker-x", 0, "127.0.0.1:24911");
        Broker b = new Broker("ClusterX2", "broker-x", 1, "127.0.0.1:24921");
        a.reg().topics(t("XTopic"), t("XTopic2")).dv(1).send("broker-x in cluster X1");
        b.reg().topics(t("XTopic"), t("XTopic2")).dv(1).send("broker-x/1 in cluster X2");
        call("cluster info", reader, req(106));
        call("topics by cluster X2", reader, req(224, "cluster", "ClusterX2"));
        call("query dv with the other cluster name", a.c, req(322, "brokerName", "broker-x", "brokerAddr", a.addr,
            "clusterName", "ClusterX2", "brokerId", "0").body(dvJson(1, 0)));
        call("delete topic in cluster X2", reader, req(216, "topic", "XTopic2", "clusterName", "ClusterX2"));
        call("route after delete in X2", reader, route("XTopic2", V_CURRENT));
        // %RETRY%/%DLQ% names and a filter server list that is later emptied.
        Broker r = new Broker("ClusterX1", "broker-y", 0, "127.0.0.1:24931");
        r.reg().topics(t("%RETRY%group-1", 1, 1, 6, 0), t("%DLQ%group-1", 1, 1, 6, 0), t("rmq_sys_wheel_timer"))
            .dv(1).filterServers("127.0.0.1:30003").send("retry/dlq topics with a filter server");
        call("route retry topic", reader, route("%RETRY%group-1", V_CURRENT));
        r.reg().topics(t("%RETRY%group-1", 1, 1, 6, 0), t("%DLQ%group-1", 1, 1, 6, 0), t("rmq_sys_wheel_timer"))
            .dv(1).send("filter server list emptied");
        call("route after emptied filter list", reader, route("%RETRY%group-1", V4_9_3));
        // Several brokers on one connection (the Java "broker container"): Java unregisters only
        // the first it finds when that connection closes.
        Broker c1 = new Broker("ClusterX3", "broker-c1", 0, "127.0.0.1:24941");
        Broker c2 = new Broker("ClusterX3", "broker-c2", 0, "127.0.0.1:24951", c1.c);
        c1.reg().topics(t("CtTopic"), t("CtTopic1")).dv(1).send("container broker 1");
        c2.reg().topics(t("CtTopic"), t("CtTopic2")).dv(1).send("container broker 2, same connection");
        call("route with both container brokers", reader, route("CtTopic", V_CURRENT));
        c1.close();
        sleep(ASYNC_SETTLE_MS);
        call("topics of the cluster after the shared connection closed", reader, req(224, "cluster", "ClusterX3"));

        call("route after the shared connection closed", reader, route("CtTopic", V_CURRENT));
    }

    static void seqBinary() {
        // Requests in the ROCKETMQ (binary) header form; Java still answers in JSON (§1.3).
        Broker m = new Broker("ClusterB", "broker-b", 0, "127.0.0.1:25911");
        Reg reg = m.reg().topics(t("BTopic"), t("BTopic2")).dv(1);
        reg.binary = true;
        reg.send("binary register");
        call("binary route v479", reader, route("BTopic", V_CURRENT).binary());
        call("binary route v399", reader, route("BTopic", V4_9_3).binary());
        call("binary kv put", reader, req(100, "namespace", "BinNs", "key", "k", "value", "välue").binary());
        call("binary kv put, empty value (decodes as null)", reader,
            req(100, "namespace", "BinNs", "key", "k2", "value", "").binary());
        call("binary kv list", reader, req(219, "namespace", "BinNs").binary());
        call("binary kv get empty value", reader, req(101, "namespace", "BinNs", "key", "k2").binary());
        call("json kv put, empty value", reader, req(100, "namespace", "BinNs", "key", "k3", "value", ""));
        call("json kv get empty value", reader, req(101, "namespace", "BinNs", "key", "k3"));
        call("binary unknown code", reader, req(777).binary());
        call("binary cluster info", reader, req(106).binary());
        call("binary delete topic, empty clusterName", reader,
            req(216, "topic", "BTopic2", "clusterName", "").binary());
        call("route after binary delete", reader, route("BTopic2", V_CURRENT));
        call("binary, no extFields", reader, req(206).noExt().binary());
    }

    static void seqManyTopics() {
        Broker m = new Broker("ClusterN", "broker-n", 0, "127.0.0.1:26911");
        Topic[] topics = new Topic[400];
        for (int k = 0; k < topics.length; k++) topics[k] = t("NTopic-" + k, 1 + k % 8, 1 + k % 5, k % 8, k % 4);
        m.reg().topics(topics).dv(1).send("400 topics");
        call("all topics", reader, req(206));
        call("topics by cluster", reader, req(224, "cluster", "ClusterN"));
        call("unit topics", reader, req(311));
        call("unit-sub topics", reader, req(312));
        call("unit-sub non-unit topics", reader, req(313));
        call("route NTopic-7", reader, route("NTopic-7", V_CURRENT));
        call("wipe 400", reader, req(205, "brokerName", "broker-n"));
        call("route NTopic-6 after wipe", reader, route("NTopic-6", V4_9_3));
        Topic[] fewer = Arrays.copyOf(topics, 10);
        m.reg().topics(fewer).dv(2).send("10 topics, new dv (others stay)");
        call("route NTopic-300", reader, route("NTopic-300", V_CURRENT));
    }

    static void seqExpiry() {
        // Per-broker heartbeatTimeoutMillis: a silent broker expires at the next scan (every 5 s);
        // QUERY_DATA_VERSION and BROKER_HEARTBEAT refresh it.
        Broker silent = new Broker("ClusterE", "broker-e1", 0, "127.0.0.1:27911");
        Broker chatty = new Broker("ClusterE", "broker-e2", 0, "127.0.0.1:27921");
        Broker chatty2 = new Broker("ClusterE", "broker-e3", 0, "127.0.0.1:27931");
        silent.reg().topics(t("ETopic"), t("ETopic1")).dv(1).hbTimeout("1500").send("silent, timeout 1.5 s");
        chatty.reg().topics(t("ETopic"), t("ETopic2")).dv(1).hbTimeout("1500").send("heartbeats, timeout 1.5 s");
        chatty2.reg().topics(t("ETopic"), t("ETopic3")).dv(1).hbTimeout("1500").send("queries dv, timeout 1.5 s");
        for (int k = 0; k < 16; k++) {
            sleep(500);
            oneway(chatty.c, req(904, "clusterName", "ClusterE", "brokerAddr", chatty.addr, "brokerName", "broker-e2"));
            oneway(chatty2.c, chatty2.queryDv(1));
        }
        call("route after 8 s", reader, route("ETopic", V_CURRENT));
        call("topics of the cluster after 8 s", reader, req(224, "cluster", "ClusterE"));
    }

    static void seqRawFrames() {
        // Hand-made frames on a fresh socket: header variants the Java client never sends, oneway
        // requests (no answer), stray responses (dropped) and malformed frames (connection closed).
        String go = "{\"code\":105,\"language\":\"GO\",\"version\":317,\"opaque\":11,\"flag\":0,\"remark\":\"\","
            + "\"extFields\":{\"topic\":\"%s\"}}";
        raw("Go-style header, route", jsonFrame(String.format(go, "NoSuchTopic"), null));
        raw("Go-style header, cluster info", jsonFrame("{\"code\":106,\"language\":\"GO\",\"version\":317,"
            + "\"opaque\":12,\"flag\":0,\"remark\":\"\",\"extFields\":{}}", null));
        raw("language as number, no version, no flag", jsonFrame("{\"code\":206,\"language\":9,\"opaque\":13}", null));
        raw("unknown language name, numeric ext value", jsonFrame("{\"code\":101,\"language\":\"COBOL\",\"opaque\":14,"
            + "\"flag\":0,\"extFields\":{\"namespace\":\"n\",\"key\":5}}", null));
        raw("oneway unknown code, then a request", jsonFrame("{\"code\":999,\"flag\":2,\"opaque\":15}", null),
            jsonFrame("{\"code\":206,\"flag\":0,\"opaque\":16}", null));
        raw("oneway route, then a request", jsonFrame("{\"code\":105,\"flag\":2,\"opaque\":17,"
            + "\"extFields\":{\"topic\":\"x\"}}", null), jsonFrame("{\"code\":206,\"opaque\":18}", null));
        raw("stray response frame, then a request", jsonFrame("{\"code\":0,\"flag\":1,\"opaque\":19}", null),
            jsonFrame("{\"code\":206,\"opaque\":20}", null));
        raw("two pipelined requests", jsonFrame("{\"code\":206,\"opaque\":21}", null),
            jsonFrame("{\"code\":999,\"opaque\":22}", null));
        raw("negative opaque", jsonFrame("{\"code\":999,\"opaque\":-7}", null));
        raw("unknown serialization type byte", frame(5, "{\"code\":206,\"opaque\":23}".getBytes(), null));
        raw("header length beyond the frame", ByteBufferish.of(0, 0, 0, 8, 0, 0, 0, 100, '{', '}', ' ', ' '));
        raw("header that is not JSON", jsonFrame("not json at all", null));
        raw("negative frame length, then a request", ByteBufferish.of(0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 2, '{', '}'),
            jsonFrame("{\"code\":206,\"opaque\":26}", null));
        raw("frame length above 16 MiB, then a request", ByteBufferish.of(0x01, 0x00, 0x00, 0x00, 0, 0, 0, 2, '{', '}'),
            jsonFrame("{\"code\":206,\"opaque\":27}", null));
        raw("binary header, unknown language byte", frame(1, binaryHeader(206, 99, V_CURRENT, 24, 0, null), null));
        raw("binary header, empty remark and ext value", new Req(101).ext("key", "k"), frame(1, binaryHeader(101, 0, V_CURRENT, 25, 0,
            new String[] {"namespace", "", "key", "k"}), null));
    }

    /** A byte array literal helper for malformed frames. */
    static final class ByteBufferish {
        static byte[] of(int... v) {
            byte[] b = new byte[v.length];
            for (int k = 0; k < v.length; k++) b[k] = (byte) v[k];
            return b;
        }
    }

    static byte[] jsonFrame(String header, byte[] body) {
        return frame(0, header.getBytes(StandardCharsets.UTF_8), body);
    }

    static byte[] frame(int serType, byte[] header, byte[] body) {
        int bodyLen = body == null ? 0 : body.length;
        java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(8 + header.length + bodyLen);
        b.putInt(4 + header.length + bodyLen).putInt((serType << 24) | header.length).put(header);
        if (body != null) b.put(body);
        return b.array();
    }

    static byte[] binaryHeader(int code, int lang, int version, int opaque, int flag, String[] ext) {
        ByteArrayOutputStream bos = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bos);
        try {
            out.writeShort(code);
            out.writeByte(lang);
            out.writeShort(version);
            out.writeInt(opaque);
            out.writeInt(flag);
            out.writeInt(0); // empty remark
            ByteArrayOutputStream map = new ByteArrayOutputStream();
            DataOutputStream m = new DataOutputStream(map);
            for (int k = 0; ext != null && k < ext.length; k += 2) {
                byte[] key = ext[k].getBytes(StandardCharsets.UTF_8), val = ext[k + 1].getBytes(StandardCharsets.UTF_8);
                m.writeShort(key.length);
                m.write(key);
                m.writeInt(val.length);
                m.write(val);
            }
            out.writeInt(map.size());
            out.write(map.toByteArray());
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        return bos.toByteArray();
    }

    /** Sends the frames on one new connection to each server and compares what comes back. */
    static void raw(String step, byte[]... frames) {
        raw(step, new Req(-1), frames);
    }

    /** logical: the request the frames amount to, for the allow-list. */
    static void raw(String step, Req logical, byte[]... frames) {
        steps++;
        seqSteps++;
        Req r = logical;
        String a = rawTranscript(javaAddr, frames);
        curJava = lastRaw;
        String b = rawTranscript(oursAddr, frames);
        curOurs = lastRaw;
        if (VERBOSE) System.out.printf("  [%s] %s -> java %s%n", seqName, step, a);
        diff(step, r, "transcript", a, b);
    }

    static RemotingCommand lastRaw;

    static String rawTranscript(String addr, byte[][] frames) {
        lastRaw = null;
        String[] hp = addr.split(":");
        StringBuilder t = new StringBuilder();
        try (java.net.Socket sock = new java.net.Socket(hp[0], Integer.parseInt(hp[1]))) {
            sock.setSoTimeout(300); // loopback answers take well under a millisecond
            for (byte[] f : frames) sock.getOutputStream().write(f);
            java.io.DataInputStream in = new java.io.DataInputStream(sock.getInputStream());
            List<String> answers = new ArrayList<>();
            while (true) {
                int len;
                try {
                    len = in.readInt();
                } catch (java.net.SocketTimeoutException e) {
                    answers.add("no more answers");
                    break;
                } catch (java.io.EOFException | java.net.SocketException e) {
                    answers.add("connection closed");
                    break;
                }
                byte[] rest = new byte[len];
                in.readFully(rest);
                int serType = rest[0] & 0xff;
                RemotingCommand c = RemotingCommand.decode(java.nio.ByteBuffer.wrap(rest));
                lastRaw = c;
                byte[] body = c.getBody();
                String bodyText = body == null ? "-" : new String(body, StandardCharsets.UTF_8);
                String canon = body == null ? "-" : Objects.requireNonNullElse(Json.canonical(bodyText), bodyText);
                answers.add("serType=" + serType + " code=" + c.getCode() + " flag=" + c.getFlag() + " opaque="
                    + c.getOpaque() + " remark=" + c.getRemark() + " ext=" + (c.getExtFields() == null ? null
                    : new java.util.TreeMap<>(c.getExtFields())) + " body=" + canon);
            }
            // Pipelined answers may come in any order (§1.1).
            answers.sort(null);
            t.append(String.join(" | ", answers));
        } catch (Exception e) {
            t.append("error ").append(e);
        }
        return t.toString();
    }

    static void seqMisc() {
        call("unknown request code", reader, req(999));
        call("unknown request code with body", reader, req(12345, "a", "b").body("x".getBytes()));
        call("route without topic", reader, route(null, V_CURRENT));
        call("route without extFields", reader, req(105).noExt());
        call("kv get without extFields", reader, req(101).noExt());
        call("kv list without extFields", reader, req(219).noExt());
        call("topics by cluster without extFields", reader, req(224).noExt());
        call("member group without extFields", reader, req(901).noExt());
        call("wipe without extFields", reader, req(205).noExt());
        call("delete topic without extFields", reader, req(216).noExt());
        call("query dv without extFields", reader, req(322).noExt());
        call("heartbeat without extFields", reader, req(904).noExt());
        call("cluster info with junk ext", reader, req(106, "junk", "1"));
        call("register with non-numeric brokerId", reader, req(103, "brokerAddr", "127.0.0.1:28911",
            "brokerId", "abc", "brokerName", "broker-m", "clusterName", "ClusterM", "haServerAddr", "127.0.0.1:28912")
            .body("{\"filterServerList\":[]}".getBytes()));
        call("unregister without brokerId", reader, req(104, "brokerName", "broker-m", "brokerAddr", "127.0.0.1:28911",
            "clusterName", "ClusterM"));
        call("register without extFields", reader, req(103).noExt().body("{}".getBytes()));
        call("register with negative version", reader, req(103, "brokerAddr", "127.0.0.1:28921", "brokerId", "0",
            "brokerName", "broker-m2", "clusterName", "ClusterM", "haServerAddr", "127.0.0.1:28922").version(-5));
        call("update config, bad \\u escape", reader, req(318).body("productEnvName=\\uZZZZ\n".getBytes()));
        call("update config, non-live value shows in get", reader,
            req(318).body("serverWorkerThreads=4\nproductEnvName=pröd\n".getBytes()));
        call("get config after non-live update", reader, req(319));
        call("restore", reader, req(318).body("serverWorkerThreads=8\nproductEnvName=center\n".getBytes()));
        readAll("end", "NoSuchTopic", "NoSuchCluster");
    }

    /** Every read code, against whatever the registry holds now. */
    static void readAll(String tag, String topic, String cluster) {
        call(tag + ": route v479", reader, route(topic, V_CURRENT));
        call(tag + ": route v399", reader, route(topic, V4_9_3));
        call(tag + ": route v399 standard", reader, route(topic, V4_9_3).ext("acceptStandardJsonOnly", "true"));
        call(tag + ": route unknown topic", reader, route("NoSuchTopic-" + tag, V_CURRENT));
        call(tag + ": cluster info (106)", reader, req(106));
        call(tag + ": all topics (206)", reader, req(206));
        call(tag + ": topics by cluster (224)", reader, req(224, "cluster", cluster));
        call(tag + ": topics by unknown cluster (224)", reader, req(224, "cluster", "NoSuchCluster-" + tag));
        call(tag + ": system topics (304)", reader, req(304));
        call(tag + ": unit topics (311)", reader, req(311));
        call(tag + ": unit-sub topics (312)", reader, req(312));
        call(tag + ": unit-sub non-unit topics (313)", reader, req(313));
        call(tag + ": kv list (219)", reader, req(219, "namespace", "NoSuchNs"));
        call(tag + ": namesrv config (319)", reader, req(319));
    }

    static void updateConfig(String step, String props) {
        call("update config: " + step, reader, req(318).body(props.getBytes(StandardCharsets.UTF_8)));
    }

    // ========================================================================================
    // Requests and simulated brokers
    // ========================================================================================

    static final class Req {
        final int code;
        int version = V_CURRENT;
        LinkedHashMap<String, String> ext = new LinkedHashMap<>();
        byte[] body;
        boolean maskTimestamp; // the answer carries a server-made "now"
        boolean binary;        // ROCKETMQ header form instead of JSON

        Req(int code) { this.code = code; }
        Req ext(String k, String v) { ext.put(k, v); return this; }
        Req body(byte[] b) { body = b; return this; }
        Req version(int v) { version = v; return this; }
        Req noExt() { ext = null; return this; }
        Req binary() { binary = true; return this; }

        RemotingCommand toCommand() {
            RemotingCommand cmd = RemotingCommand.createRequestCommand(code, (CommandCustomHeader) null);
            cmd.setVersion(version);
            if (ext != null) {
                HashMap<String, String> m = new HashMap<>();
                ext.forEach((k, v) -> { if (v != null) m.put(k, v); });
                cmd.setExtFields(m);
            }
            cmd.setBody(body);
            if (binary) cmd.setSerializeTypeCurrentRPC(SerializeType.ROCKETMQ);
            return cmd;
        }
    }

    static Req req(int code, String... kv) {
        Req r = new Req(code);
        for (int i = 0; i < kv.length; i += 2) r.ext(kv[i], kv[i + 1]);
        return r;
    }

    static Req route(String topic, int version) {
        return req(105, "topic", topic).version(version);
    }

    record Topic(String name, int read, int write, int perm, int sysFlag) {
        String json() {
            return "{\"attributes\":{},\"order\":false,\"perm\":" + perm + ",\"readQueueNums\":" + read
                + ",\"topicFilterType\":\"SINGLE_TAG\",\"topicName\":" + str(name) + ",\"topicSysFlag\":" + sysFlag
                + ",\"writeQueueNums\":" + write + "}";
        }
        String line() {
            return name + " " + read + " " + write + " " + perm + " SINGLE_TAG {}";
        }
    }

    static Topic t(String name) { return new Topic(name, 4, 4, 6, 0); }
    static Topic t(String name, int r, int w, int perm, int sys) { return new Topic(name, r, w, perm, sys); }

    static String dvStr(long counter, long state) {
        return "{\"counter\":" + counter + ",\"stateVersion\":" + state + ",\"timestamp\":" + (TS0 + counter) + "}";
    }

    static byte[] dvJson(long counter, long state) { return dvStr(counter, state).getBytes(StandardCharsets.UTF_8); }

    static String qd(String broker, int perm) {
        return "{\"brokerName\":" + str(broker) + ",\"perm\":" + perm
            + ",\"readQueueNums\":2,\"topicSysFlag\":0,\"writeQueueNums\":2}";
    }

    static byte[] routeBody(String... queueDatas) {
        return ("{\"brokerDatas\":[],\"filterServerTable\":{},\"queueDatas\":[" + String.join(",", queueDatas) + "]}")
            .getBytes(StandardCharsets.UTF_8);
    }

    static NettyRemotingClient client() {
        NettyClientConfig cfg = new NettyClientConfig();
        cfg.setClientWorkerThreads(1);
        cfg.setClientCallbackExecutorThreads(1);
        NettyRemotingClient c = new NettyRemotingClient(cfg);
        c.start();
        return c;
    }

    static final class Broker {
        final String cluster, name, addr, ha;
        long id;
        final NettyRemotingClient c;

        Broker(String cluster, String name, long id, String addr) {
            this(cluster, name, id, addr, client());
            openClients.add(c);
        }

        /** A broker that shares another one's connections. */
        Broker(String cluster, String name, long id, String addr, NettyRemotingClient shared) {
            this.c = shared;
            this.cluster = cluster;
            this.name = name;
            this.id = id;
            this.addr = addr;
            this.ha = addr.replaceAll(":(\\d+)$", ":1$1");
        }

        Reg reg() { return new Reg(this); }

        Req queryDv(long counter) { return queryDvRaw(dvJson(counter, 0)); }
        Req queryDv(long counter, long state) { return queryDvRaw(dvJson(counter, state)); }
        Req queryDvRaw(byte[] body) {
            return req(322, "brokerName", name, "brokerAddr", addr, "clusterName", cluster, "brokerId", "" + id)
                .body(body);
        }

        Req unregister(Broker b) {
            return req(104, "brokerName", b.name, "brokerAddr", b.addr, "clusterName", b.cluster, "brokerId", "" + b.id);
        }

        /** Closes this broker's connections (a client shutdown would take seconds; the JVM exits anyway). */
        void close() {
            c.closeChannels(List.of(javaAddr, oursAddr));
            openClients.remove(c);
        }
    }

    /** One REGISTER_BROKER request, shaped like a 5.x broker's unless told otherwise. */
    static final class Reg {
        final Broker b;
        List<Topic> topics = List.of();
        long counter, state;
        String filterServers = "[]";
        String mapping = "";
        boolean compressed, oldWrapper, omitMapping, rawSet;
        byte[] raw;
        Integer crc;
        boolean sendCrc = true;
        int version = V_CURRENT;
        boolean binary;
        final LinkedHashMap<String, String> ext = new LinkedHashMap<>();

        Reg(Broker b) {
            this.b = b;
            ext.put("enableActingMaster", "false");
        }

        Reg topics(Topic... ts) { topics = Arrays.asList(ts); return this; }
        Reg dv(long c) { counter = c; return this; }
        Reg dv(long c, long s) { counter = c; state = s; return this; }
        Reg filterServers(String... fs) {
            filterServers = "[" + String.join(",", Arrays.stream(fs).map(NamesrvDiff::str).toList()) + "]";
            return this;
        }
        Reg noFilterServers() { filterServers = null; return this; }
        Reg mapping(String topic, String infoJson) { mapping = str(topic) + ":" + infoJson; return this; }
        Reg compressed(boolean c) { compressed = c; return this; }
        Reg omitMappingSection() { omitMapping = true; return this; }
        Reg oldWrapperBody() { oldWrapper = true; return this; }
        Reg rawBody(byte[] body) { raw = body; rawSet = true; return this; }
        Reg crc(int v) { crc = v; return this; }
        Reg noCrc() { sendCrc = false; return this; }
        Reg version(int v) { version = v; return this; }
        Reg actingMaster(String v) { ext.put("enableActingMaster", v); return this; }
        Reg zone(String z) { ext.put("__ZONE_NAME", z); return this; }
        Reg hbTimeout(String ms) { ext.put("heartbeatTimeoutMillis", ms); return this; }

        byte[] body() throws IOException {
            if (rawSet) return raw;
            String table = String.join(",", topics.stream().map(t -> str(t.name) + ":" + t.json()).toList());
            if (oldWrapper) {
                return ("{\"dataVersion\":" + dvStr(counter, state) + ",\"topicConfigTable\":{" + table + "}}")
                    .getBytes(StandardCharsets.UTF_8);
            }
            if (compressed) {
                ByteArrayOutputStream plain = new ByteArrayOutputStream();
                DataOutputStream out = new DataOutputStream(plain);
                writeChunk(out, dvStr(counter, state));
                out.writeInt(topics.size());
                for (Topic t : topics) writeChunk(out, t.line());
                writeChunk(out, filterServers == null ? "[]" : filterServers);
                if (version >= V5_0_0 && !omitMapping) {
                    out.writeInt(mapping.isEmpty() ? 0 : 1);
                    if (!mapping.isEmpty()) writeChunk(out, mapping.substring(mapping.indexOf(':') + 1));
                }
                return compress(plain.toByteArray());
            }
            String wrapper = "{\"dataVersion\":" + dvStr(counter, state) + ",\"mappingDataVersion\":" + dvStr(0, 0)
                + ",\"topicConfigTable\":{" + table + "},\"topicQueueMappingDetailMap\":{},"
                + "\"topicQueueMappingInfoMap\":{" + mapping + "}}";
            return ((filterServers == null ? "{" : "{\"filterServerList\":" + filterServers + ",")
                + "\"topicConfigSerializeWrapper\":" + wrapper + "}").getBytes(StandardCharsets.UTF_8);
        }

        void send(String step) {
            byte[] body;
            try {
                body = body();
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
            Req r = req(103, "brokerAddr", b.addr, "brokerId", "" + b.id, "brokerName", b.name,
                "clusterName", b.cluster, "haServerAddr", b.ha, "compressed", "" + compressed).version(version);
            ext.forEach(r::ext);
            if (sendCrc) r.ext("bodyCrc32", "" + (crc != null ? crc : crc32(body)));
            r.binary = binary;
            call("register " + b.name + "/" + b.id + ": " + step, b.c, r.body(body));
        }
    }

    static void writeChunk(DataOutputStream out, String s) throws IOException {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        out.writeInt(b.length);
        out.write(b);
    }

    static byte[] compress(byte[] plain) {
        ByteArrayOutputStream bos = new ByteArrayOutputStream();
        try (DeflaterOutputStream z = new DeflaterOutputStream(bos, new Deflater(Deflater.BEST_COMPRESSION))) {
            z.write(plain);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        return bos.toByteArray();
    }

    static int crc32(byte[] body) {
        if (body == null) return 0;
        CRC32 c = new CRC32();
        c.update(body);
        return (int) (c.getValue() & 0x7FFFFFFF);
    }

    static String str(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ========================================================================================
    // Sending and comparing
    // ========================================================================================

    record Answer(RemotingCommand cmd, String error) { }

    static Answer send(NettyRemotingClient c, String addr, Req r) {
        try {
            return new Answer(c.invokeSync(addr, r.toCommand(), TIMEOUT_MS), null);
        } catch (Exception e) {
            return new Answer(null, e.getClass().getSimpleName());
        }
    }

    static void oneway(NettyRemotingClient c, Req r) {
        for (String addr : List.of(javaAddr, oursAddr)) {
            try {
                c.invokeOneway(addr, r.toCommand(), TIMEOUT_MS);
            } catch (Exception e) {
                report(new Diff(seqName, "oneway " + r.code, r, r.code, "send", "ok", e.toString(), null, null));
            }
        }
    }

    static RemotingCommand curJava, curOurs;

    static void call(String step, NettyRemotingClient c, Req r) {
        steps++;
        seqSteps++;
        Answer j = send(c, javaAddr, r);
        Answer o = send(c, oursAddr, r);
        if (VERBOSE) {
            System.out.printf("  [%s] %s -> java %s%n", seqName, step,
                j.cmd == null ? j.error : j.cmd.getCode() + " " + Objects.toString(j.cmd.getRemark(), "")
                    + " " + j.cmd.getExtFields() + " " + bodyText(j.cmd.getBody()));
        }
        if (j.cmd == null || o.cmd == null) {
            curJava = j.cmd;
            curOurs = o.cmd;
            diff(step, r, "transport", j.cmd == null ? j.error : "response", o.cmd == null ? o.error : "response");
            return;
        }
        RemotingCommand a = j.cmd, b = o.cmd;
        curJava = a;
        curOurs = b;
        diff(step, r, "code", "" + a.getCode(), "" + b.getCode());
        diff(step, r, "flag", "" + a.getFlag(), "" + b.getFlag());
        diff(step, r, "language", "" + a.getLanguage(), "" + b.getLanguage());
        diff(step, r, "version", "" + a.getVersion(), "" + b.getVersion());
        diff(step, r, "serializeType", "" + a.getSerializeTypeCurrentRPC(), "" + b.getSerializeTypeCurrentRPC());
        diff(step, r, "remark", a.getRemark(), b.getRemark());
        compareExt(step, r, a.getExtFields(), b.getExtFields());
        compareBody(step, r, a.getBody(), b.getBody());
    }

    static void compareExt(String step, Req r, Map<String, String> a, Map<String, String> b) {
        if (a == null || b == null) {
            // "no extFields" and "extFields:{}" are distinguishable on the wire and both occur in Java.
            diff(step, r, "extFields", a == null ? null : a.toString(), b == null ? null : b.toString());
            return;
        }
        for (String k : new TreeSet<>(union(a.keySet(), b.keySet()))) diff(step, r, "ext." + k, a.get(k), b.get(k));
    }

    // The value of these config keys depends on where and on which port each server runs.
    static final Set<String> CONFIG_LOCAL_KEYS = Set.of("configStorePath", "kvConfigPath", "rocketmqHome", "listenPort");

    static void compareBody(String step, Req r, byte[] a, byte[] b) {
        if (a == null || b == null) {
            diff(step, r, "body", a == null ? null : bodyText(a), b == null ? null : bodyText(b));
            return;
        }
        String ta = new String(a, StandardCharsets.UTF_8), tb = new String(b, StandardCharsets.UTF_8);
        if (r.code == 319) {
            Properties pa = props(ta), pb = props(tb);
            for (String k : new TreeSet<>(union(pa.stringPropertyNames(), pb.stringPropertyNames()))) {
                String va = pa.getProperty(k), vb = pb.getProperty(k);
                if (CONFIG_LOCAL_KEYS.contains(k) && va != null && vb != null) continue;
                diff(step, r, "config." + k, va, vb);
            }
            diff(step, r, "config.sortedLines", "" + sortedLines(ta), "" + sortedLines(tb));
            return;
        }
        String ca = Json.canonical(ta), cb = Json.canonical(tb);
        if (ca == null || cb == null) {
            diff(step, r, "body", ta, tb);
            return;
        }
        if (r.maskTimestamp) {
            ca = ca.replaceAll("\"timestamp\":\\d+", "\"timestamp\":<now>");
            cb = cb.replaceAll("\"timestamp\":\\d+", "\"timestamp\":<now>");
        }
        if (r.code == 304) {
            // Java returns "one address of one broker" in hash-map order: compare presence only.
            ca = ca.replaceAll("\"brokerAddr\":\"[^\"]*\"", "\"brokerAddr\":\"<any>\"");
            cb = cb.replaceAll("\"brokerAddr\":\"[^\"]*\"", "\"brokerAddr\":\"<any>\"");
        }
        diff(step, r, "body", ca, cb);
        diff(step, r, "body.whitespace", "" + Json.hasWhitespace(ta), "" + Json.hasWhitespace(tb));
    }

    static Properties props(String text) {
        Properties p = new Properties();
        try {
            p.load(new StringReader(text));
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        return p;
    }

    static boolean sortedLines(String text) {
        List<String> keys = text.lines().map(l -> l.split("=", 2)[0]).toList();
        List<String> sorted = new ArrayList<>(keys);
        sorted.sort(Comparator.naturalOrder());
        return keys.equals(sorted) && text.endsWith("\n");
    }

    static <T> Set<T> union(Set<T> a, Set<T> b) {
        Set<T> u = new java.util.HashSet<>(a);
        u.addAll(b);
        return u;
    }

    static String bodyText(byte[] b) {
        return b == null ? "<no body>" : new String(b, StandardCharsets.UTF_8);
    }

    static void diff(String step, Req r, String field, String java, String ours) {
        if (Objects.equals(java, ours)) return;
        report(new Diff(seqName, step, r, r.code, field, java, ours, curJava, curOurs));
    }

    static final Map<String, Integer> allowedCounts = new LinkedHashMap<>();

    static void report(Diff d) {
        Allowed allowed = ALLOW.stream().filter(a -> a.matches.test(d)).findFirst().orElse(null);
        String what = allowed == null ? "DIFF" : "ALLOWED(" + allowed.id + ")";
        // Allowed differences repeat a lot (e.g. the version of every answer): show the first of each kind.
        boolean show = allowed == null || allowedCounts.merge(allowed.id, 1, Integer::sum) == 1 || SHOW_ALLOWED;
        if (show) System.out.printf("  %s [%s] %s (request code %d) %s:%n      java: %s%n      ours: %s%n",
            what, d.seq, d.step, d.reqCode, d.field, show(d.java), show(d.ours));
        if (allowed == null) {
            seqDiffs++;
            totalDiffs++;
        } else {
            seqAllowed++;
            totalAllowed++;
        }
    }

    static String show(String s) {
        return s == null ? "<absent>" : s.replace("\n", "\\n");
    }

    // ========================================================================================
    // Canonical text of Java's JSON (also the non-standard form with unquoted numeric keys).
    // Keys, strings and numbers keep their exact source text, so quoting and escaping differences
    // stay visible; only orders that Java leaves unspecified are normalised: map entries (known
    // map-valued properties) and set-like lists are sorted. Bean property order is kept.
    // ========================================================================================

    static final class Json {
        static final Set<String> MAPS = Set.of("brokerAddrs", "filterServerTable", "topicQueueMappingByBroker",
            "currIdMap", "brokerAddrTable", "clusterAddrTable", "table");
        static final Set<String> UNORDERED_LISTS = Set.of("brokerDatas", "queueDatas", "topicList");

        final String s;
        int i;

        Json(String s) { this.s = s; }

        static String canonical(String text) {
            try {
                Json p = new Json(text);
                StringBuilder out = new StringBuilder();
                p.value(out, null, null);
                p.ws();
                return p.i == text.length() ? out.toString() : null;
            } catch (RuntimeException e) {
                return null;
            }
        }

        static boolean hasWhitespace(String text) {
            boolean inStr = false;
            for (int k = 0; k < text.length(); k++) {
                char ch = text.charAt(k);
                if (inStr) {
                    if (ch == '\\') k++;
                    else if (ch == '"') inStr = false;
                } else if (ch == '"') {
                    inStr = true;
                } else if (Character.isWhitespace(ch)) {
                    return true;
                }
            }
            return false;
        }

        void ws() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
        }

        void value(StringBuilder out, String key, String parentKey) {
            ws();
            char ch = s.charAt(i);
            if (ch == '{') {
                object(out, key);
            } else if (ch == '[') {
                array(out, key, parentKey);
            } else if (ch == '"') {
                out.append(string());
            } else {
                int start = i;
                while (i < s.length() && ",:]}".indexOf(s.charAt(i)) < 0 && !Character.isWhitespace(s.charAt(i))) i++;
                if (start == i) throw new IllegalArgumentException("bad JSON at " + i);
                out.append(s, start, i);
            }
        }

        String string() {
            int start = i++;
            while (s.charAt(i) != '"') i += s.charAt(i) == '\\' ? 2 : 1;
            i++;
            return s.substring(start, i);
        }

        void object(StringBuilder out, String key) {
            i++;
            List<String[]> entries = new ArrayList<>();
            ws();
            while (s.charAt(i) != '}') {
                String rawKey;
                if (s.charAt(i) == '"') {
                    rawKey = string();
                } else {
                    int start = i;
                    while (s.charAt(i) != ':' && !Character.isWhitespace(s.charAt(i))) i++;
                    rawKey = s.substring(start, i);
                }
                ws();
                expect(':');
                StringBuilder v = new StringBuilder();
                value(v, unquote(rawKey), key);
                entries.add(new String[] {rawKey, v.toString()});
                ws();
                if (s.charAt(i) == ',') {
                    i++;
                    ws();
                }
            }
            i++;
            if (key != null && MAPS.contains(key)) entries.sort(Comparator.comparing((String[] e) -> unquote(e[0]), Json::keyOrder));
            out.append('{');
            for (int k = 0; k < entries.size(); k++) {
                if (k > 0) out.append(',');
                out.append(entries.get(k)[0]).append(':').append(entries.get(k)[1]);
            }
            out.append('}');
        }

        void array(StringBuilder out, String key, String parentKey) {
            i++;
            List<String> items = new ArrayList<>();
            ws();
            while (s.charAt(i) != ']') {
                StringBuilder v = new StringBuilder();
                value(v, null, key);
                items.add(v.toString());
                ws();
                if (s.charAt(i) == ',') {
                    i++;
                    ws();
                }
            }
            i++;
            // clusterAddrTable values are sets of broker names.
            if ((key != null && UNORDERED_LISTS.contains(key)) || "clusterAddrTable".equals(parentKey)) items.sort(null);
            out.append('[').append(String.join(",", items)).append(']');
        }

        void expect(char c) {
            if (s.charAt(i) != c) throw new IllegalArgumentException("expected " + c + " at " + i);
            i++;
        }

        /** Undoes the escapes of fastjson's BrowserCompatible mode: \\uXXXX (non-ASCII only) and \\/. */
        static String unescapeBrowserCompatible(String text) {
            StringBuilder out = new StringBuilder();
            for (int k = 0; k < text.length(); k++) {
                char ch = text.charAt(k);
                if (ch == '\\' && k + 1 < text.length()) {
                    char next = text.charAt(k + 1);
                    if (next == '/') {
                        out.append('/');
                        k++;
                        continue;
                    }
                    if (next == 'u' && k + 5 < text.length()) {
                        char u = (char) Integer.parseInt(text.substring(k + 2, k + 6), 16);
                        if (u >= 0x80) {
                            out.append(u);
                            k += 5;
                            continue;
                        }
                    }
                    out.append(ch).append(next);
                    k++;
                    continue;
                }
                out.append(ch);
            }
            return out.toString();
        }

        static String unquote(String k) {
            return k.startsWith("\"") && k.endsWith("\"") && k.length() >= 2 ? k.substring(1, k.length() - 1) : k;
        }

        static int keyOrder(String a, String b) {
            boolean na = a.matches("-?\\d+"), nb = b.matches("-?\\d+");
            if (na && nb) return Long.compare(Long.parseLong(a), Long.parseLong(b));
            return a.compareTo(b);
        }
    }
}
