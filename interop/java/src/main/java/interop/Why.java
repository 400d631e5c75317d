package interop;

import static interop.Interop.log;

import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * Scenario 14 of the interop suite: what a real producer meets on each NameServer, so that the driver's
 * explainRoute checks are about a failure a client really had. Each argument TOPIC@NAMESRV=OUTCOME sends one
 * message to TOPIC through a producer that knows only NAMESRV; OUTCOME is "sent" (SEND_OK) or "no-route" (the
 * client refuses to send with "No route info of this topic").
 *
 * Usage: Why TOPIC@ADDR=sent|no-route ... ; exit code 0 = every outcome as expected.
 */
public final class Why {
    private static final String NO_ROUTE = "No route info of this topic";

    public static void main(String[] argv) {
        int rc = 0;
        int n = 0;
        for (String a : argv) {
            int at = a.indexOf('@');
            int eq = a.lastIndexOf('=');
            String topic = a.substring(0, at), ns = a.substring(at + 1, eq), expected = a.substring(eq + 1);
            // One client instance per NameServer: producers of one instance would share its NameServer list.
            DefaultMQProducer p = new DefaultMQProducer("interop-why-" + n);
            p.setNamesrvAddr(ns);
            p.setInstanceName("interop-why-" + n++ + "-" + System.nanoTime());
            p.setSendMsgTimeout(3000);
            String outcome;
            try {
                p.start();
                SendResult r = p.send(new Message(topic, "why".getBytes()));
                outcome = "sent";
                log("%s via %s: %s to %s", topic, ns, r.getSendStatus(), r.getMessageQueue());
            } catch (MQClientException e) {
                String said = String.valueOf(e.getErrorMessage());
                outcome = said.contains(NO_ROUTE) ? "no-route" : "failed";
                log("%s via %s: the client refused: %s", topic, ns, said.split("\n")[0]);
            } catch (Exception e) {
                outcome = "failed";
                log("%s via %s: %s", topic, ns, e);
            } finally {
                p.shutdown();
            }
            if (!outcome.equals(expected)) {
                System.out.println("FAILED: " + topic + " via " + ns + ": " + outcome + ", expected " + expected);
                rc = 1;
            }
        }
        System.exit(rc);
    }
}
