package interop;

import static interop.Interop.await;
import static interop.Interop.brokerData;
import static interop.Interop.check;
import static interop.Interop.expectCode;
import static interop.Interop.log;
import static interop.Interop.queueData;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.UtilAll;
import org.apache.rocketmq.common.namesrv.DefaultTopAddressing;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.netty.TlsSystemConfig;
import org.apache.rocketmq.remoting.protocol.DataVersion;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.body.RegisterBrokerBody;
import org.apache.rocketmq.remoting.protocol.body.TopicConfigAndMappingSerializeWrapper;
import org.apache.rocketmq.remoting.protocol.body.TopicConfigSerializeWrapper;
import org.apache.rocketmq.remoting.protocol.header.namesrv.RegisterBrokerRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.namesrv.UnRegisterBrokerRequestHeader;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Scenarios 8 (TLS), 9 (authenticated writes) and 10 (address server): features of our NameServer that the
 * Java NameServer lacks, proved with the real 5.x client, admin and remoting code. Each scenario talks to a
 * NameServer instance the driver started for it (8: tls.server.mode=enforcing, 9: authenticationEnabled) or
 * to the main one through its HTTP port (10).
 *
 * Usage: Secure tls|auth|nsaddr key=value... ; exit code 0 = pass.
 */
public final class Secure {
    private static final int PERM_READ = 4;
    private static final int PERM_RW = 6;

    private final Map<String, String> args;
    private final List<DefaultMQAdminExt> admins = new ArrayList<>();

    private Secure(Map<String, String> args) {
        this.args = args;
    }

    public static void main(String[] argv) {
        Map<String, String> args = Interop.keyValues(argv);
        int rc = 0;
        Secure it = new Secure(args);
        try {
            switch (argv[0]) {
                case "tls": it.tls(); break;
                case "auth": it.auth(); break;
                case "nsaddr": it.nsaddr(); break;
                default: throw new IllegalArgumentException("unknown scenario " + argv[0]);
            }
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.out.println("FAILED: " + e);
            rc = 1;
        } finally {
            for (DefaultMQAdminExt a : it.admins) {
                a.shutdown();
            }
        }
        System.exit(rc);
    }

    // ---- scenario 8: TLS (tls.server.mode=enforcing, self-signed certificate) ----
    private void tls() throws Exception {
        String ns = arg("ns"), plainNs = arg("plainNs"), cluster = arg("cluster"), broker = arg("broker");
        String brokerAddr = arg("brokerAddr");
        check(TlsSystemConfig.tlsEnable && TlsSystemConfig.tlsTestModeEnable,
            "the JVM must run with -Dtls.enable=true and the default tls.test.mode.enable=true");

        // A client started with -Dtls.enable=true (useTLS comes from it) works against the enforcing instance.
        DefaultMQAdminExt tls = admin("interop-tls", ns, null, null);
        check(tls.isUseTLS(), "-Dtls.enable=true did not turn on useTLS");
        ClusterInfo ci = await("cluster info (over TLS) lists " + broker + " = {0: " + brokerAddr + "} in " + cluster,
            60_000, () -> {
                ClusterInfo c = tls.examineBrokerClusterInfo();
                BrokerData bd = c.getBrokerAddrTable().get(broker);
                return bd != null && brokerAddr.equals(bd.getBrokerAddrs().get(0L))
                    && c.getClusterAddrTable().getOrDefault(cluster, Collections.emptySet()).contains(broker) ? c : null;
            });
        log("over TLS: clusterList %s -> %s (the broker registered over TLS)", cluster, ci.getClusterAddrTable().get(cluster));
        TopicRouteData route = tls.examineTopicRouteInfo(broker);
        BrokerData rb = brokerData(route, broker);
        check(rb != null && brokerAddr.equals(rb.getBrokerAddrs().get(0L)) && queueData(route, broker) != null,
            "route of topic %s over TLS: %s", broker, route);
        check(tls.fetchAllTopicList().getTopicList().contains(broker), "topic list over TLS lacks %s", broker);
        tls.createAndUpdateKvConfig("INTEROP_TLS", "k", "v-tls");
        String kv = tls.getKVConfig("INTEROP_TLS", "k");
        check("v-tls".equals(kv), "getKVConfig over TLS = %s, expected v-tls", kv);
        log("over TLS: topicRoute, topicList, updateKvConfig/getKvConfig ok");

        // The same client without TLS gets no answer from the enforcing instance.
        DefaultMQAdminExt plain = admin("interop-tls-plain", ns, null, false);
        expectNoAnswer("plaintext examineBrokerClusterInfo against the enforcing instance", plain::examineBrokerClusterInfo);
        expectNoAnswer("plaintext getKVConfig against the enforcing instance", () -> plain.getKVConfig("INTEROP_TLS", "k"));

        // Control: the plaintext client works against a permissive NameServer (the main one), so the failure
        // above is the enforcing mode; and the main one (permissive) accepts TLS clients too.
        List<String> plainList = Collections.singletonList(plainNs);
        DefaultMQAdminExt plainMain = admin("interop-plain-main", plainNs, null, false);
        Properties conf = plainMain.getNameServerConfig(plainList).get(plainNs);
        check(conf != null && conf.containsKey("listenPort"), "plaintext getNamesrvConfig from %s: %s", plainNs, conf);
        DefaultMQAdminExt tlsMain = admin("interop-tls-main", plainNs, null, true);
        conf = tlsMain.getNameServerConfig(plainList).get(plainNs);
        check(conf != null && conf.containsKey("listenPort"), "TLS getNamesrvConfig from %s: %s", plainNs, conf);
        log("control: the permissive NameServer %s answers both plaintext and TLS clients", plainNs);
    }

    /** The call must fail without any answer from the server (connection closed, timeout), not with a response code. */
    private static void expectNoAnswer(String what, Callable<?> call) throws Exception {
        long t0 = System.currentTimeMillis();
        Object r;
        try {
            r = call.call();
        } catch (MQClientException e) {
            check(e.getResponseCode() <= 0, "%s: the server answered with code %d (%s)", what, e.getResponseCode(),
                e.getErrorMessage());
            log("%s: refused after %d ms (%s)", what, System.currentTimeMillis() - t0, rootCause(e));
            return;
        } catch (MQBrokerException e) {
            throw new AssertionError(what + ": the server answered with code " + e.getResponseCode() + " ("
                + e.getErrorMessage() + ")");
        } catch (Exception e) {
            log("%s: refused after %d ms (%s)", what, System.currentTimeMillis() - t0, rootCause(e));
            return;
        }
        throw new AssertionError(what + ": expected the connection to be refused, got an answer: " + r);
    }

    private static String rootCause(Throwable e) {
        while (e.getCause() != null && e.getCause() != e) {
            e = e.getCause();
        }
        return e.getClass().getSimpleName() + ": " + e.getMessage();
    }

    // ---- scenario 9: authenticated writes (authenticationEnabled, AclClientRPCHook signatures) ----
    private void auth() throws Exception {
        String ns = arg("ns"), cluster = arg("cluster"), broker = arg("broker"), brokerAddr = arg("brokerAddr");
        String ak = arg("accessKey"), sk = arg("secretKey");
        List<String> nsList = Collections.singletonList(ns);
        DefaultMQAdminExt signed = admin("interop-signed", ns, hook(ak, sk), false);
        DefaultMQAdminExt unsigned = admin("interop-unsigned", ns, null, false);
        // Every way of not holding the credentials: no signature, the wrong secret, an unknown access key.
        Map<String, DefaultMQAdminExt> refused = new LinkedHashMap<>();
        refused.put("unsigned", unsigned);
        refused.put("wrong secret", admin("interop-wrong-secret", ns, hook(ak, sk + "-wrong"), false));
        refused.put("unknown access key", admin("interop-unknown-key", ns, hook(ak + "Unknown", sk), false));

        // A real 5.x broker with innerClientAuthenticationCredentials signs its registrations (BrokerOuterAPI's
        // AclClientRPCHook) and so appears; reads need no credentials.
        ClusterInfo ci = await("cluster info (unsigned read) lists the signed broker " + broker + " = {0: " + brokerAddr
            + "}", 60_000, () -> {
                ClusterInfo c = unsigned.examineBrokerClusterInfo();
                BrokerData bd = c.getBrokerAddrTable().get(broker);
                return bd != null && brokerAddr.equals(bd.getBrokerAddrs().get(0L)) ? c : null;
            });
        log("signed REGISTER_BROKER of the real broker accepted: clusterList %s -> %s", cluster,
            ci.getClusterAddrTable().get(cluster));
        TopicRouteData route = unsigned.examineTopicRouteInfo(broker);
        check(brokerData(route, broker) != null && queueData(route, broker) != null, "unsigned topicRoute of %s: %s", broker, route);
        check(unsigned.fetchAllTopicList().getTopicList().contains(broker), "unsigned topic list lacks %s", broker);
        Properties conf = unsigned.getNameServerConfig(nsList).get(ns);
        check(conf != null && "true".equals(conf.getProperty("authenticationEnabled")), "unsigned getNamesrvConfig: %s", conf);
        log("reads without credentials ok: clusterList, topicRoute, topicList, getNamesrvConfig");

        // KV writes.
        String kvNs = "INTEROP_AUTH";
        signed.createAndUpdateKvConfig(kvNs, "k", "v1");
        check("v1".equals(unsigned.getKVConfig(kvNs, "k")), "getKVConfig after the signed put");
        for (Map.Entry<String, DefaultMQAdminExt> e : refused.entrySet()) {
            DefaultMQAdminExt a = e.getValue();
            expectCode(ResponseCode.NO_PERMISSION, e.getKey() + " putKVConfig", () -> {
                a.createAndUpdateKvConfig(kvNs, "k", "v2");
                return null;
            });
            expectCode(ResponseCode.NO_PERMISSION, e.getKey() + " deleteKVConfig", () -> {
                a.deleteKvConfig(kvNs, "k");
                return null;
            });
        }
        String kv = unsigned.getKVConfig(kvNs, "k");
        check("v1".equals(kv), "KV changed by refused writes: %s", kv);
        signed.deleteKvConfig(kvNs, "k");
        expectCode(ResponseCode.QUERY_NOT_FOUND, "getKVConfig after the signed delete", () -> unsigned.getKVConfig(kvNs, "k"));
        log("KV: signed put/delete applied; unsigned, wrong-secret and unknown-key put/delete refused with %d",
            ResponseCode.NO_PERMISSION);

        // Live config writes.
        Properties upd = new Properties();
        upd.setProperty("waitSecondsForService", "21");
        signed.updateNameServerConfig(upd, nsList);
        for (Map.Entry<String, DefaultMQAdminExt> e : refused.entrySet()) {
            Properties evil = new Properties();
            evil.setProperty("waitSecondsForService", "22");
            expectCode(ResponseCode.NO_PERMISSION, e.getKey() + " updateNamesrvConfig", () -> {
                e.getValue().updateNameServerConfig(evil, nsList);
                return null;
            });
        }
        String wait = unsigned.getNameServerConfig(nsList).get(ns).getProperty("waitSecondsForService");
        check("21".equals(wait), "waitSecondsForService = %s, expected 21 (signed update applied, refused ones not)", wait);
        log("updateNamesrvConfig: signed applied, others refused with %d", ResponseCode.NO_PERMISSION);

        // Broker-level writes, on a broker registered through the 5.x remoting client (no periodic
        // re-registration to race with): REGISTER_BROKER, WIPE/ADD_WRITE_PERM, DELETE_TOPIC_IN_NAMESRV,
        // UNREGISTER_BROKER.
        String fake = "broker-auth-fake", fakeAddr = "127.0.0.9:10911", topic = "AuthFakeTopic";
        for (Map.Entry<String, DefaultMQAdminExt> e : refused.entrySet()) {
            RemotingCommand resp = invoke(e.getValue(), ns, registerRequest(cluster, fake, fakeAddr, topic));
            check(resp.getCode() == ResponseCode.NO_PERMISSION, "%s REGISTER_BROKER: code %d (%s)", e.getKey(),
                resp.getCode(), resp.getRemark());
        }
        check(!unsigned.examineBrokerClusterInfo().getBrokerAddrTable().containsKey(fake),
            "refused REGISTER_BROKER registered %s anyway", fake);
        RemotingCommand resp = invoke(signed, ns, registerRequest(cluster, fake, fakeAddr, topic));
        check(resp.getCode() == ResponseCode.SUCCESS, "signed REGISTER_BROKER: code %d (%s)", resp.getCode(), resp.getRemark());
        BrokerData bd = unsigned.examineBrokerClusterInfo().getBrokerAddrTable().get(fake);
        check(bd != null && fakeAddr.equals(bd.getBrokerAddrs().get(0L)), "cluster info after signed REGISTER_BROKER: %s", bd);
        check(permOf(unsigned, topic, fake) == PERM_RW, "route of %s after registration", topic);
        log("REGISTER_BROKER: refused ones registered nothing (%d); signed one registered %s", ResponseCode.NO_PERMISSION, fake);

        for (Map.Entry<String, DefaultMQAdminExt> e : refused.entrySet()) {
            expectCode(ResponseCode.NO_PERMISSION, e.getKey() + " wipeWritePerm",
                () -> e.getValue().wipeWritePermOfBroker(ns, fake));
        }
        check(permOf(unsigned, topic, fake) == PERM_RW, "perm changed by refused wipeWritePerm");
        int wiped = signed.wipeWritePermOfBroker(ns, fake);
        check(wiped == 2 && permOf(unsigned, topic, fake) == PERM_READ, "signed wipeWritePerm: count %d, perm %d", wiped,
            permOf(unsigned, topic, fake));
        for (Map.Entry<String, DefaultMQAdminExt> e : refused.entrySet()) {
            expectCode(ResponseCode.NO_PERMISSION, e.getKey() + " addWritePerm",
                () -> e.getValue().addWritePermOfBroker(ns, fake));
        }
        check(permOf(unsigned, topic, fake) == PERM_READ, "perm changed by refused addWritePerm");
        int added = signed.addWritePermOfBroker(ns, fake);
        check(added == 2 && permOf(unsigned, topic, fake) == PERM_RW, "signed addWritePerm: count %d, perm %d", added,
            permOf(unsigned, topic, fake));
        log("wipe/addWritePerm: signed applied (count 2, perm 6 -> 4 -> 6), others refused with %d", ResponseCode.NO_PERMISSION);

        for (Map.Entry<String, DefaultMQAdminExt> e : refused.entrySet()) {
            expectCode(ResponseCode.NO_PERMISSION, e.getKey() + " deleteTopicInNameServer", () -> {
                e.getValue().deleteTopicInNameServer(Collections.singleton(ns), cluster, topic);
                return null;
            });
        }
        check(permOf(unsigned, topic, fake) == PERM_RW, "route of %s gone after refused deletes", topic);
        signed.deleteTopicInNameServer(Collections.singleton(ns), cluster, topic);
        expectCode(ResponseCode.TOPIC_NOT_EXIST, "topicRoute after the signed delete", () -> unsigned.examineTopicRouteInfo(topic));
        log("deleteTopicInNameServer: signed applied, others refused with %d", ResponseCode.NO_PERMISSION);

        for (Map.Entry<String, DefaultMQAdminExt> e : refused.entrySet()) {
            resp = invoke(e.getValue(), ns, unregisterRequest(cluster, fake, fakeAddr));
            check(resp.getCode() == ResponseCode.NO_PERMISSION, "%s UNREGISTER_BROKER: code %d (%s)", e.getKey(),
                resp.getCode(), resp.getRemark());
        }
        check(unsigned.examineBrokerClusterInfo().getBrokerAddrTable().containsKey(fake), "refused UNREGISTER_BROKER removed %s", fake);
        resp = invoke(signed, ns, unregisterRequest(cluster, fake, fakeAddr));
        check(resp.getCode() == ResponseCode.SUCCESS, "signed UNREGISTER_BROKER: code %d (%s)", resp.getCode(), resp.getRemark());
        // Unregistration is queued and applied by the server's housekeeping: allow it a moment.
        await(fake + " gone from cluster info after the signed UNREGISTER_BROKER", 5_000,
            () -> unsigned.examineBrokerClusterInfo().getBrokerAddrTable().containsKey(fake) ? null : Boolean.TRUE);
        check(unsigned.examineBrokerClusterInfo().getBrokerAddrTable().containsKey(broker), "the real broker %s vanished", broker);
        log("UNREGISTER_BROKER: signed applied, others refused with %d", ResponseCode.NO_PERMISSION);
    }

    private static RPCHook hook(String ak, String sk) {
        return new AclClientRPCHook(new SessionCredentials(ak, sk));
    }

    private static int permOf(DefaultMQAdminExt a, String topic, String broker) throws Exception {
        return queueData(a.examineTopicRouteInfo(topic), broker).getPerm();
    }

    /** A request through the admin's own remoting client, so it is signed exactly when the admin's calls are. */
    private static RemotingCommand invoke(DefaultMQAdminExt a, String ns, RemotingCommand req) throws Exception {
        return Interop.remotingOf(a).invokeSync(ns, req, 5000);
    }

    /** REGISTER_BROKER exactly as BrokerOuterAPI.registerBrokerAll builds it (uncompressed body, CRC32). */
    private static RemotingCommand registerRequest(String cluster, String broker, String addr, String topic) {
        RegisterBrokerRequestHeader h = new RegisterBrokerRequestHeader();
        h.setBrokerAddr(addr);
        h.setBrokerId(0L);
        h.setBrokerName(broker);
        h.setClusterName(cluster);
        h.setHaServerAddr(addr);
        h.setEnableActingMaster(false);
        h.setCompressed(false);
        TopicConfigSerializeWrapper w = new TopicConfigSerializeWrapper();
        ConcurrentMap<String, TopicConfig> topics = new ConcurrentHashMap<>();
        topics.put(topic, new TopicConfig(topic, 4, 4, PERM_RW));
        // A first registration carrying a single topic is refused (Java's rule): add the broker-name topic.
        topics.put(broker, new TopicConfig(broker, 1, 1, PERM_RW));
        w.setTopicConfigTable(topics);
        w.setDataVersion(new DataVersion());
        RegisterBrokerBody body = new RegisterBrokerBody();
        body.setTopicConfigSerializeWrapper(TopicConfigAndMappingSerializeWrapper.from(w));
        body.setFilterServerList(new ArrayList<>());
        byte[] bytes = body.encode(false);
        h.setBodyCrc32(UtilAll.crc32(bytes));
        RemotingCommand req = RemotingCommand.createRequestCommand(RequestCode.REGISTER_BROKER, h);
        req.setBody(bytes);
        return req;
    }

    private static RemotingCommand unregisterRequest(String cluster, String broker, String addr) {
        UnRegisterBrokerRequestHeader h = new UnRegisterBrokerRequestHeader();
        h.setBrokerAddr(addr);
        h.setBrokerId(0L);
        h.setBrokerName(broker);
        h.setClusterName(cluster);
        return RemotingCommand.createRequestCommand(RequestCode.UNREGISTER_BROKER, h);
    }

    // ---- scenario 10: clients without a NameServer address find it through the HTTP address server ----
    private void nsaddr() throws Exception {
        String expectNs = arg("expectNs"), broker = arg("broker"), domain = arg("domain");
        int count = Integer.parseInt(args.getOrDefault("count", "100"));
        check(domain.equals(System.getProperty("rocketmq.namesrv.domain")), "run with -Drocketmq.namesrv.domain=%s", domain);
        check(System.getProperty("rocketmq.namesrv.addr") == null && System.getenv("NAMESRV_ADDR") == null,
            "a NameServer address is configured (rocketmq.namesrv.addr / NAMESRV_ADDR): discovery would not be tested");
        String url = MixAll.getWSAddr();
        check(url.equals("http://" + domain + "/rocketmq/nsaddr"), "MixAll.getWSAddr() = %s", url);
        String fetched = new DefaultTopAddressing(url).fetchNSAddr();
        check(expectNs.equals(fetched), "DefaultTopAddressing(%s).fetchNSAddr() = %s, expected %s", url, fetched, expectNs);
        log("address server %s answers %s", url, fetched);

        // An admin client with no NameServer address fetches it at start.
        DefaultMQAdminExt admin = admin("interop-nsaddr-admin", null, null, false);
        List<String> list = admin.getDefaultMQAdminExtImpl().getMqClientInstance().getMQClientAPIImpl().getNameServerAddressList();
        check(Collections.singletonList(expectNs).equals(list), "the admin discovered NameServers %s, expected [%s]", list, expectNs);
        String master = await("master address of " + broker + " in cluster info", 30_000, () -> {
            BrokerData bd = admin.examineBrokerClusterInfo().getBrokerAddrTable().get(broker);
            return bd == null ? null : bd.getBrokerAddrs().get(0L);
        });
        String topic = "AddrServerTopic";
        admin.createAndUpdateTopicConfig(master, new TopicConfig(topic, 4, 4, PERM_RW));
        await("route of " + topic, 15_000, () -> {
            TopicRouteData r = admin.examineTopicRouteInfo(topic);
            return queueData(r, broker) != null ? r : null;
        });
        log("admin without a NameServer address: discovered %s, clusterList and topicRoute ok", list);

        // A producer and a push consumer with no NameServer address exchange messages.
        Exchange.run(null, topic, count, "interop-nsaddr", false, Collections.singleton(broker));

        // advertisedAddresses replaces the answer: a second instance advertises the main NameServer.
        String advDomain = args.get("advertisedDomain");
        if (advDomain != null) {
            String advUrl = "http://" + advDomain + "/rocketmq/nsaddr";
            String adv = new DefaultTopAddressing(advUrl).fetchNSAddr();
            check(expectNs.equals(adv), "advertisedAddresses: %s answers %s, expected %s", advUrl, adv, expectNs);
            System.setProperty("rocketmq.namesrv.domain", advDomain);  // read when the next client starts
            DefaultMQAdminExt advAdmin = admin("interop-nsaddr-advertised", null, null, false);
            List<String> advList = advAdmin.getDefaultMQAdminExtImpl().getMqClientInstance().getMQClientAPIImpl()
                .getNameServerAddressList();
            check(Collections.singletonList(expectNs).equals(advList), "discovered %s through %s", advList, advUrl);
            check(queueData(advAdmin.examineTopicRouteInfo(topic), broker) != null, "route of %s via %s", topic, advList);
            log("advertisedAddresses: %s answers %s; an admin discovered it and fetched a route", advUrl, adv);
        }
    }

    // ---- helpers ----
    /** A started admin client; ns null = no address (address server); useTls null = the JVM default. */
    private DefaultMQAdminExt admin(String instance, String ns, RPCHook hook, Boolean useTls) throws MQClientException {
        DefaultMQAdminExt a = hook == null ? new DefaultMQAdminExt(5000) : new DefaultMQAdminExt(hook, 5000);
        a.setInstanceName(instance);
        if (ns != null) {
            a.setNamesrvAddr(ns);
        } else {
            check(a.getNamesrvAddr() == null, "admin %s has a NameServer address %s without being given one", instance,
                a.getNamesrvAddr());
        }
        if (useTls != null) {
            a.setUseTLS(useTls);
        }
        a.start();
        admins.add(a);
        return a;
    }

    private String arg(String key) {
        String v = args.get(key);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException("missing argument " + key + "=");
        }
        return v;
    }
}
