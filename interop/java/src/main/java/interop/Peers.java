package interop;

import static interop.Interop.await;
import static interop.Interop.log;

import java.util.Map;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Scenario 12 of the interop suite: NameServers that list each other in namesrvPeers. The driver
 * writes with the real mqadmin CLI against one NameServer; this reads through the 5.x admin API from
 * each of the others on its own, as a client that knows only that one would.
 *
 * Usage: Peers kv-seen ns=ADDR,ADDR namespace=NS key=K value=V (value "-": the key must be absent);
 *        Peers route-seen ns=ADDR,ADDR topic=T broker=BROKER_NAME (the route lists that broker).
 */
public final class Peers {
    private static final int QUERY_NOT_FOUND = 22;

    public static void main(String[] argv) {
        Map<String, String> args = Interop.keyValues(argv);
        int rc = 0;
        try {
            for (String ns : args.get("ns").split(",")) {
                switch (argv[0]) {
                    case "kv-seen": kvSeen(ns, args.get("namespace"), args.get("key"), args.get("value")); break;
                    case "route-seen": routeSeen(ns, args.get("topic"), args.get("broker")); break;
                    default: throw new IllegalArgumentException("unknown scenario " + argv[0]);
                }
            }
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.out.println("FAILED: " + e);
            rc = 1;
        }
        System.exit(rc);
    }

    /** Waits (10 s) until the NameServer at ns alone routes the topic to the broker. */
    private static void routeSeen(String ns, String topic, String broker) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt(5000);
        admin.setNamesrvAddr(ns);
        admin.setInstanceName("interop-peers-route-" + ns.replace(':', '-'));
        admin.start();
        try {
            await("route of " + topic + " on " + ns + " lists " + broker, 10_000, () ->
                admin.examineTopicRouteInfo(topic).getBrokerDatas().stream()
                    .anyMatch(b -> broker.equals(b.getBrokerName())) ? Boolean.TRUE : null);
            log("%s: route of %s lists %s", ns, topic, broker);
        } finally {
            admin.shutdown();
        }
    }

    /** Waits (5 s) until the NameServer at ns alone answers the KV entry as expected. */
    private static void kvSeen(String ns, String namespace, String key, String value) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt(5000);
        admin.setNamesrvAddr(ns);
        admin.setInstanceName("interop-peers-" + ns.replace(':', '-'));
        admin.start();
        try {
            boolean absent = "-".equals(value);
            await(namespace + " " + key + (absent ? " absent" : " = " + value) + " on " + ns, 5_000, () -> {
                try {
                    String got = admin.getKVConfig(namespace, key);
                    return !absent && value.equals(got) ? got : null;
                } catch (MQClientException e) {
                    if (absent && e.getResponseCode() == QUERY_NOT_FOUND) {
                        return "absent";
                    }
                    throw e;
                }
            });
            log("%s: %s %s %s", ns, namespace, key, absent ? "absent" : "= " + value);
        } finally {
            admin.shutdown();
        }
    }
}
