package interop;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListSet;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.impl.producer.TopicPublishInfo;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Produce N messages and consume them with a push consumer, knowing nothing but the NameServer address.
 *
 * This class runs on the 5.x and on the 4.9.x client classpath (scenario 3), so it may only touch
 * client API that both lines share: no admin classes, no route/protocol types (their packages moved in 5.0).
 *
 * Usage: Exchange NAMESRV TOPIC COUNT GROUP ordered|concurrent [BROKER,BROKER...]
 * NAMESRV "-" (or null for {@link #run}) sets no address: the clients then ask the address server
 * ({@code -Drocketmq.namesrv.domain}) at start, as in scenario 10.
 * The optional broker list must equal the set of brokers the sends landed on.
 */
public final class Exchange {
    private Exchange() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            throw new IllegalArgumentException("usage: Exchange NAMESRV TOPIC COUNT GROUP ordered|concurrent [BROKERS]");
        }
        Set<String> brokers = args.length > 5 ? new TreeSet<>(Arrays.asList(args[5].split(","))) : null;
        try {
            run("-".equals(args[0]) ? null : args[0], args[1], Integer.parseInt(args[2]), args[3], "ordered".equals(args[4]), brokers);
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.out.println("FAILED: " + e);
            System.exit(1);
        }
        // Client threads are non-daemon; a clean exit must not depend on their shutdown.
        System.exit(0);
    }

    public static void run(String namesrv, String topic, int count, String group, boolean ordered,
        Set<String> expectBrokers) throws Exception {
        Map<String, Boolean> seen = new ConcurrentHashMap<>();
        Set<String> orderViolations = new ConcurrentSkipListSet<>();
        Map<Integer, Integer> lastSeqByQueue = new ConcurrentHashMap<>();

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        if (namesrv != null) {
            consumer.setNamesrvAddr(namesrv);
        }
        consumer.setInstanceName(group + "-consumer");
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        if (ordered) {
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    int seq = Integer.parseInt(m.getUserProperty("seq"));
                    Integer last = lastSeqByQueue.put(m.getQueueId(), seq);
                    if (last != null && seq <= last) {
                        orderViolations.add("queue " + m.getQueueId() + ": " + seq + " after " + last);
                    }
                    seen.put(m.getKeys(), Boolean.TRUE);
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    seen.put(m.getKeys(), Boolean.TRUE);
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }

        DefaultMQProducer producer = new DefaultMQProducer(group + "-producer");
        if (namesrv != null) {
            producer.setNamesrvAddr(namesrv);
        }
        producer.setInstanceName(group + "-producer");
        producer.setSendMsgTimeout(5000);
        consumer.start();
        producer.start();
        try {
            Set<String> usedBrokers = new TreeSet<>();
            long t0 = System.currentTimeMillis();
            for (int i = 0; i < count; i++) {
                Message msg = new Message(topic, "interop", topic + "-" + i, ("message " + i).getBytes(StandardCharsets.UTF_8));
                msg.putUserProperty("seq", Integer.toString(i));
                SendResult r = ordered
                    ? producer.send(msg, (mqs, m, arg) -> mqs.get((Integer) arg % mqs.size()), i)
                    : producer.send(msg);
                if (r.getSendStatus() != SendStatus.SEND_OK) {
                    throw new AssertionError("send " + i + " returned " + r.getSendStatus());
                }
                usedBrokers.add(r.getMessageQueue().getBrokerName());
            }
            System.out.printf("sent %d messages to %s via %s in %d ms%n", count, topic, usedBrokers,
                System.currentTimeMillis() - t0);
            if (expectBrokers != null && !expectBrokers.equals(usedBrokers)) {
                throw new AssertionError("messages went to " + usedBrokers + ", expected " + expectBrokers);
            }
            if (ordered) {
                // The queue list of an ordered topic comes from the route's orderTopicConf, not from queueDatas.
                TopicPublishInfo info = producer.getDefaultMQProducerImpl().getTopicPublishInfoTable().get(topic);
                if (info == null || !info.isOrderTopic()) {
                    throw new AssertionError("producer does not treat " + topic + " as an order topic (route lacks orderTopicConf?)");
                }
            }

            long deadline = System.currentTimeMillis() + 90_000;
            while (seen.size() < count && System.currentTimeMillis() < deadline) {
                Thread.sleep(100);
            }
            System.out.printf("consumed %d of %d distinct messages from %s in %d ms%n", seen.size(), count, topic,
                System.currentTimeMillis() - t0);
            if (seen.size() < count) {
                throw new AssertionError("consumer received only " + seen.size() + " of " + count + " messages");
            }
            if (!orderViolations.isEmpty()) {
                throw new AssertionError("order violated: " + orderViolations);
            }
        } finally {
            producer.shutdown();
            consumer.shutdown();
        }
    }
}
