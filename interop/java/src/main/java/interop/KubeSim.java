package interop;

import static interop.Interop.await;
import static interop.Interop.log;

import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.RemotingClient;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RemotingSerializable;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.header.namesrv.GetKVConfigRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.namesrv.GetRouteInfoRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.namesrv.PutKVConfigRequestHeader;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The clients of the pod simulation (interop/kube): they know the NameServers only by their pod names, as
 * clients on Kubernetes do, and run while the harness restarts, moves and deletes the NameServer pods.
 *
 * traffic ns=N1;N2;N3 topic=T broker=B sample=PREFIX:COUNT out=DIR
 *   Until DIR/stop exists: a producer sends a message to T every 20 ms (DIR/sends: epoch ms, ok or the error);
 *   a push consumer receives them; a KV writer puts a new key in namespace KUBE_SIM every 250 ms through each
 *   NameServer in turn (DIR/kv: the keys whose put was answered SUCCESS); and a route watcher asks each
 *   NameServer on its own, every 100 ms, for the route of one of the COUNT topics PREFIX0..PREFIX(COUNT-1)
 *   in turn (DIR/routes: epoch ms, NameServer and state, at every change of a NameServer's state: ok = the
 *   route lists B; missing = TOPIC_NOT_EXIST or a route without B; refused = any other code; down = no
 *   answer). Then it waits (60 s) until the consumer has received every message whose send was acknowledged,
 *   and writes DIR/result: "acknowledged N received M".
 * kv-kept ns=N1;N2;N3 file=DIR/kv
 *   Every key of the file (KUBE_SIM namespace) is answered by every NameServer, each asked on its own.
 * master ns=N1;N2;N3 broker=B addr=HOST:PORT|any timeoutMs=MS
 *   Waits until the cluster info names HOST:PORT (or anyone, with "any") the master of B.
 */
public final class KubeSim {
    static final String KV_NAMESPACE = "KUBE_SIM";

    public static void main(String[] argv) {
        Map<String, String> args = Interop.keyValues(argv);
        int rc = 0;
        try {
            switch (argv[0]) {
                case "traffic": traffic(args); break;
                case "kv-kept": kvKept(args); break;
                case "master": master(args); break;
                default: throw new IllegalArgumentException("unknown step " + argv[0]);
            }
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.out.println("FAILED: " + e);
            rc = 1;
        }
        System.exit(rc);
    }

    private static List<String> namesrvs(Map<String, String> args) {
        return Arrays.asList(args.get("ns").split(";"));
    }

    /** One line appended to a file, flushed at once (the harness reads these files while this runs). */
    private static final class Journal {
        private final PrintWriter out;

        Journal(Path path) throws IOException {
            this.out = new PrintWriter(new FileWriter(path.toFile(), StandardCharsets.UTF_8, true));
        }

        synchronized void line(String format, Object... values) {
            out.printf(format + "%n", values);
            out.flush();
        }
    }

    private static void traffic(Map<String, String> args) throws Exception {
        List<String> ns = namesrvs(args);
        String topic = args.get("topic"), broker = args.get("broker");
        String[] sample = args.get("sample").split(":");
        int sampleCount = Integer.parseInt(sample[1]);
        Path out = Paths.get(args.get("out"));
        Path stop = out.resolve("stop");
        Journal sends = new Journal(out.resolve("sends"));
        Journal kv = new Journal(out.resolve("kv"));
        Journal routes = new Journal(out.resolve("routes"));
        String nsList = String.join(";", ns);

        Set<String> received = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("KubeSimConsumer");
        consumer.setNamesrvAddr(nsList);
        consumer.setInstanceName("kube-sim-consumer");
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                received.add(m.getKeys());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        DefaultMQProducer producer = new DefaultMQProducer("KubeSimProducer");
        producer.setNamesrvAddr(nsList);
        producer.setInstanceName("kube-sim-producer");
        producer.setSendMsgTimeout(3000);
        consumer.start();
        producer.start();
        DefaultMQAdminExt admin = Interop.startedAdmin(nsList, "kube-sim-watch", 3000);
        RemotingClient remoting = Interop.remotingOf(admin);

        Set<String> acknowledged = ConcurrentHashMap.newKeySet();
        List<Thread> threads = new ArrayList<>();
        threads.add(new Thread(() -> {
            for (long i = 0; !Files.exists(stop); i++) {
                String key = "kube-sim-" + i;
                try {
                    SendResult r = producer.send(new Message(topic, "sim", key, key.getBytes(StandardCharsets.UTF_8)));
                    if (r.getSendStatus() == SendStatus.SEND_OK) {
                        acknowledged.add(key);
                        sends.line("%d ok %s", System.currentTimeMillis(), r.getMessageQueue().getBrokerName());
                    } else {
                        sends.line("%d failed %s", System.currentTimeMillis(), r.getSendStatus());
                    }
                } catch (Exception e) {
                    sends.line("%d failed %s", System.currentTimeMillis(), oneLine(e));
                }
                sleep(20);
            }
        }, "producer"));
        threads.add(new Thread(() -> {
            for (long i = 0; !Files.exists(stop); i++) {
                String addr = ns.get((int) (i % ns.size()));
                PutKVConfigRequestHeader h = new PutKVConfigRequestHeader();
                h.setNamespace(KV_NAMESPACE);
                h.setKey("k" + i);
                h.setValue("v" + i);
                try {
                    RemotingCommand r = remoting.invokeSync(addr,
                        RemotingCommand.createRequestCommand(RequestCode.PUT_KV_CONFIG, h), 3000);
                    if (r.getCode() == ResponseCode.SUCCESS) {
                        kv.line("k%d v%d %d %s", i, i, System.currentTimeMillis(), addr);
                    }
                } catch (Exception e) {
                    // Not acknowledged: nothing is owed for it.
                }
                sleep(250);
            }
        }, "kv-writer"));
        for (String addr : ns) {
            threads.add(new Thread(() -> {
                String last = null;
                for (long i = 0; !Files.exists(stop); i++) {
                    String state = routeState(remoting, addr, sample[0] + (i % sampleCount), broker);
                    if (!state.equals(last)) {
                        routes.line("%d %s %s", System.currentTimeMillis(), addr, state);
                        last = state;
                    }
                    sleep(100);
                }
            }, "route-watch-" + addr));
        }
        threads.forEach(Thread::start);
        for (Thread t : threads) {
            t.join();
        }
        producer.shutdown();
        long deadline = System.currentTimeMillis() + 60_000;
        while (!received.containsAll(acknowledged) && System.currentTimeMillis() < deadline) {
            sleep(200);
        }
        long got = acknowledged.stream().filter(received::contains).count();
        Files.write(out.resolve("result"), String.format("acknowledged %d received %d%n", acknowledged.size(), got)
            .getBytes(StandardCharsets.UTF_8));
        log("acknowledged %d messages, the consumer received %d of them", acknowledged.size(), got);
        consumer.shutdown();
        admin.shutdown();
    }

    private static String routeState(RemotingClient remoting, String addr, String topic, String broker) {
        GetRouteInfoRequestHeader h = new GetRouteInfoRequestHeader();
        h.setTopic(topic);
        try {
            RemotingCommand r = remoting.invokeSync(addr,
                RemotingCommand.createRequestCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, h), 1000);
            if (r.getCode() == ResponseCode.TOPIC_NOT_EXIST) {
                return "missing";
            }
            if (r.getCode() != ResponseCode.SUCCESS) {
                return "refused";
            }
            TopicRouteData route = RemotingSerializable.decode(r.getBody(), TopicRouteData.class);
            for (BrokerData b : route.getBrokerDatas()) {
                if (broker.equals(b.getBrokerName())) {
                    return "ok";
                }
            }
            return "missing";
        } catch (Exception e) {
            return "down";
        }
    }

    private static void kvKept(Map<String, String> args) throws Exception {
        List<String> lines = Files.readAllLines(Paths.get(args.get("file")), StandardCharsets.UTF_8);
        DefaultMQAdminExt admin = Interop.startedAdmin(String.join(";", namesrvs(args)), "kube-sim-kv", 3000);
        try {
            RemotingClient remoting = Interop.remotingOf(admin);
            int lost = 0;
            for (String addr : namesrvs(args)) {
                for (String line : lines) {
                    String[] f = line.split(" ");
                    GetKVConfigRequestHeader h = new GetKVConfigRequestHeader();
                    h.setNamespace(KV_NAMESPACE);
                    h.setKey(f[0]);
                    RemotingCommand r = remoting.invokeSync(addr,
                        RemotingCommand.createRequestCommand(RequestCode.GET_KV_CONFIG, h), 3000);
                    String value = r.getCode() == ResponseCode.SUCCESS && r.getExtFields() != null
                        ? r.getExtFields().get("value") : null;
                    if (!f[1].equals(value)) {
                        if (lost++ < 10) {
                            log("%s: %s is %s (code %d), acknowledged as %s by %s", addr, f[0], value, r.getCode(),
                                f[1], f[3]);
                        }
                    }
                }
            }
            if (lost > 0) {
                throw new AssertionError(lost + " acknowledged KV writes missing");
            }
            log("every NameServer holds all %d acknowledged KV writes", lines.size());
        } finally {
            admin.shutdown();
        }
    }

    private static void master(Map<String, String> args) throws Exception {
        String broker = args.get("broker"), addr = args.get("addr");
        DefaultMQAdminExt admin = Interop.startedAdmin(String.join(";", namesrvs(args)), "kube-sim-master", 3000);
        try {
            await("cluster info names " + addr + " the master of " + broker,
                Long.parseLong(args.getOrDefault("timeoutMs", "60000")), () -> {
                    BrokerData bd = admin.examineBrokerClusterInfo().getBrokerAddrTable().get(broker);
                    String master = bd == null ? null : bd.getBrokerAddrs().get(0L);
                    return master != null && ("any".equals(addr) || addr.equals(master)) ? bd : null;
                });
            log("%s is the master of %s", addr, broker);
        } finally {
            admin.shutdown();
        }
    }

    private static String oneLine(Throwable e) {
        String s = e.getClass().getSimpleName() + ": " + e.getMessage();
        return s.replaceAll("\\s+", " ");
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
