// Scenario 4 of the interop suite: the Go client (apache/rocketmq-client-go/v2) against a NameServer.
// Its admin API creates a topic on a broker and must then find it in the NameServer's topic list; a
// producer and a push consumer, configured with nothing but the NameServer address, exchange messages.
// The Go client reads routes in the non-standard JSON form (it announces version 317), and parses
// brokerAddrs by splitting text, so this is the peer most sensitive to the exact route encoding.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func main() {
	ns := flag.String("ns", "", "NameServer address host:port")
	broker := flag.String("broker", "", "address of the broker master that gets the topic")
	topic := flag.String("topic", "GoTopic", "topic to create and use")
	count := flag.Int("count", 200, "messages to exchange")
	flag.Parse()
	rlog.SetLogLevel("error")
	if err := run(*ns, *broker, *topic, *count); err != nil {
		fmt.Println("FAILED:", err)
		os.Exit(1)
	}
}

func run(ns, broker, topic string, count int) error {
	resolver := primitive.NewPassthroughResolver([]string{ns})
	ctx := context.Background()

	adm, err := admin.NewAdmin(admin.WithResolver(resolver))
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	defer adm.Close()
	err = adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(broker),
		admin.WithReadQueueNums(4), admin.WithWriteQueueNums(4))
	if err != nil {
		return fmt.Errorf("create topic on %s: %w", broker, err)
	}
	// The broker registers the new topic with the NameServer right after creating it.
	var listed []string
	err = await(15*time.Second, func() (bool, error) {
		list, err := adm.FetchAllTopicList(ctx)
		if err != nil {
			return false, err
		}
		listed = list.TopicList
		return contains(listed, topic), nil
	})
	if err != nil {
		return fmt.Errorf("topic list from the NameServer never showed %s: %w (%d topics: %v)", topic, err, len(listed), listed)
	}
	fmt.Printf("admin topic list has %d topics, including %s\n", len(listed), topic)

	var mu sync.Mutex
	seen := map[string]bool{}
	pc, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(resolver),
		consumer.WithGroupName("interop-go-consumer"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		return fmt.Errorf("push consumer: %w", err)
	}
	err = pc.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			seen[m.GetKeys()] = true
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if err := pc.Start(); err != nil {
		return fmt.Errorf("start push consumer: %w", err)
	}
	defer pc.Shutdown()

	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(resolver),
		producer.WithGroupName("interop-go-producer"),
		producer.WithRetry(2),
	)
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	if err := p.Start(); err != nil {
		return fmt.Errorf("start producer: %w", err)
	}
	defer p.Shutdown()

	start := time.Now()
	brokers := map[string]bool{}
	for i := 0; i < count; i++ {
		msg := primitive.NewMessage(topic, []byte("go message "+strconv.Itoa(i)))
		msg.WithKeys([]string{topic + "-" + strconv.Itoa(i)})
		res, err := p.SendSync(ctx, msg)
		if err != nil {
			return fmt.Errorf("send %d: %w", i, err)
		}
		if res.Status != primitive.SendOK {
			return fmt.Errorf("send %d: status %v", i, res.Status)
		}
		brokers[res.MessageQueue.BrokerName] = true
	}
	fmt.Printf("sent %d messages via %v in %v\n", count, keys(brokers), time.Since(start).Round(time.Millisecond))

	received := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	err = await(90*time.Second, func() (bool, error) { return received() >= count, nil })
	fmt.Printf("consumed %d of %d distinct messages in %v\n", received(), count, time.Since(start).Round(time.Millisecond))
	if err != nil {
		return fmt.Errorf("push consumer received only %d of %d messages", received(), count)
	}

	// Without a broker address the Go admin finds the broker through the route (its own parser of
	// brokerAddrs), then sends DELETE_TOPIC_IN_NAMESRV with the topic only.
	if err := adm.DeleteTopic(ctx, admin.WithTopicDelete(topic)); err != nil {
		return fmt.Errorf("delete topic: %w", err)
	}
	list, err := adm.FetchAllTopicList(ctx)
	if err != nil {
		return fmt.Errorf("topic list after delete: %w", err)
	}
	if contains(list.TopicList, topic) {
		return fmt.Errorf("topic list still has %s after DeleteTopic", topic)
	}
	fmt.Printf("admin DeleteTopic removed %s from the NameServer\n", topic)
	return nil
}

// await polls cond until it holds; the last error it returned is reported on timeout.
func await(timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	if last != nil {
		return fmt.Errorf("timed out after %v, last error: %w", timeout, last)
	}
	return fmt.Errorf("timed out after %v", timeout)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
