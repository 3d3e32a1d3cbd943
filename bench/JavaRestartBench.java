// Kafka's Java consumer in the static-restart benchmark of group_bench.rs (`restart-java`), run in
// source-file mode against the kafka-clients jar of the broker's release: three static members
// (a, b, c) of a group on PROTOCOL (classic, with the range assignor, or consumer); b is closed
// and a new KafkaConsumer with the same group.instance.id is created RESTARTS times, each timed
// from "new KafkaConsumer" to "onPartitionsAssigned with its partitions back" (the same span
// group_bench times for ours: a new client, then the join). Prints one line per protocol:
//   java <protocol>: static restart n=N p50=X ms p99=Y ms min=… max=…
//
//   java -cp 'libs/*' JavaRestartBench.java BOOTSTRAP TOPIC RESTARTS PROTOCOL...

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class JavaRestartBench {
    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String group, String id, String protocol) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, id);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "java-restart-" + id);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (protocol.equals("consumer")) {
            p.put("group.protocol", "consumer");
        } else {
            // As group_bench's classic members: 30 s session, 3 s heartbeat, range.
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "30000");
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "3000");
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                    "org.apache.kafka.clients.consumer.RangeAssignor");
        }
        return new KafkaConsumer<>(p);
    }

    /** Owned partitions, as the listener reports them (incrementally on the consumer protocol). */
    static final class Owned implements ConsumerRebalanceListener {
        final Set<Integer> partitions = Collections.synchronizedSet(new TreeSet<>());

        public void onPartitionsRevoked(Collection<TopicPartition> ps) {
            for (TopicPartition tp : ps) partitions.remove(tp.partition());
        }

        public void onPartitionsAssigned(Collection<TopicPartition> ps) {
            for (TopicPartition tp : ps) partitions.add(tp.partition());
        }

        public void onPartitionsLost(Collection<TopicPartition> ps) {
            onPartitionsRevoked(ps);
        }

        Set<Integer> snapshot() {
            synchronized (partitions) {
                return new TreeSet<>(partitions);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int restarts = Integer.parseInt(args[2]);
        for (int k = 3; k < args.length; k++) {
            run(bootstrap, topic, restarts, args[k]);
        }
    }

    static void run(String bootstrap, String topic, int restarts, String protocol) throws Exception {
        String group = "java-restart-bench-" + protocol + "-" + ProcessHandle.current().pid();
        AtomicBoolean stop = new AtomicBoolean(false);
        List<Thread> others = new ArrayList<>();
        for (String id : new String[] {"a", "c"}) {
            Thread t = new Thread(() -> {
                try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, group, id, protocol)) {
                    c.subscribe(List.of(topic), new Owned());
                    while (!stop.get()) c.poll(Duration.ofMillis(100));
                }
            });
            t.start();
            others.add(t);
        }
        Owned owned = new Owned();
        KafkaConsumer<byte[], byte[]> b = consumer(bootstrap, group, "b", protocol);
        b.subscribe(List.of(topic), owned);
        // Let the three settle.
        long until = System.nanoTime() + 8_000_000_000L;
        while (System.nanoTime() < until) b.poll(Duration.ofMillis(100));
        Set<Integer> expected = owned.snapshot();
        if (expected.isEmpty()) throw new IllegalStateException("b owns nothing after settling");
        List<Long> samples = new ArrayList<>();
        for (int i = 0; i < restarts; i++) {
            b.close();
            long t0 = System.nanoTime();
            owned = new Owned();
            b = consumer(bootstrap, group, "b", protocol);
            b.subscribe(List.of(topic), owned);
            long deadline = t0 + 60_000_000_000L;
            while (!owned.snapshot().equals(expected)) {
                if (System.nanoTime() > deadline)
                    throw new IllegalStateException(protocol + " restart " + i + ": owns " + owned.snapshot()
                            + ", expected " + expected);
                b.poll(Duration.ofMillis(1));
            }
            samples.add(System.nanoTime() - t0);
        }
        b.close();
        stop.set(true);
        for (Thread t : others) t.join();
        Collections.sort(samples);
        int n = samples.size();
        System.out.printf("java %s: static restart n=%d p50=%.2f ms p99=%.2f ms min=%.2f ms max=%.2f ms%n",
                protocol, n, samples.get(n / 2) / 1e6, samples.get(Math.min(n - 1, (int) (n * 0.99))) / 1e6,
                samples.get(0) / 1e6, samples.get(n - 1) / 1e6);
    }
}
