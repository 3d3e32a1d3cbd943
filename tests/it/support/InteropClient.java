// A Java Kafka client for the interoperability tests (tests/it/interop_tests.rs), compiled at test
// time by support/java.rs against the kafka-clients jar of the Kafka release under test. Kafka's
// console consumer is not among the jars scripts/kafka fetches (4.x moved it to kafka-tools), and
// this also reports what the tests check: which partitions the consumer got, in which generation,
// and whether it computed the assignment itself.
//
//   produce BOOTSTRAP TOPIC PARTITIONS PER_PARTITION [COMPRESSION]
//       writes PER_PARTITION records to each partition explicitly (value "p<partition>-<i>"),
//       prints "produced N" and exits. With COMPRESSION (a compression.type: none, gzip, snappy,
//       lz4, zstd) the records are batched (linger.ms 50) and compressed so, and also carry key
//       "k<partition>-<i>" and headers ("i", "<i>") and ("nothing", null).
//   consume BOOTSTRAP TOPIC GROUP CLIENT_ID [GROUP_INSTANCE_ID]
//       joins GROUP with the range assignor (static if GROUP_INSTANCE_ID is given) and runs until
//       killed, printing "# assigned generation=G leader=L partitions=0,1" after each rebalance
//       and "<partition> <offset> <value>" for each record.
//
// Either command may be preceded by --config FILE: a Java properties file whose entries (security
// settings: security.protocol, ssl.*, sasl.*; partition.assignment.strategy; group.protocol) are
// added to the client's configuration. With group.protocol=consumer (KIP-848) the assignor and
// the session and heartbeat settings are left out, as that protocol has the coordinator decide.

import java.io.FileReader;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class InteropClient {
    /** The entries of the --config file, if one was given; added to every client's properties. */
    static final Properties EXTRA = new Properties();

    public static void main(String[] args) throws Exception {
        if (args.length > 1 && args[0].equals("--config")) {
            try (Reader r = new FileReader(args[1], StandardCharsets.UTF_8)) {
                EXTRA.load(r);
            } catch (IOException e) {
                System.err.println("--config " + args[1] + ": " + e);
                System.exit(2);
            }
            args = java.util.Arrays.copyOfRange(args, 2, args.length);
        }
        switch (args.length > 0 ? args[0] : "") {
            case "produce":
                produce(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                        args.length > 5 ? args[5] : null);
                break;
            case "consume":
                consume(args[1], args[2], args[3], args[4], args.length > 5 ? args[5] : null);
                break;
            default:
                System.err.println("usage: InteropClient [--config FILE] produce|consume ...");
                System.exit(2);
        }
    }

    static void produce(String bootstrap, String topic, int partitions, int perPartition, String compression)
            throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        if (compression != null) {
            p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
            // Many records per batch, so that the compressed batches hold more than one.
            p.put(ProducerConfig.LINGER_MS_CONFIG, "50");
        }
        p.putAll(EXTRA);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int partition = 0; partition < partitions; partition++) {
                for (int i = 0; i < perPartition; i++) {
                    String value = "p" + partition + "-" + i;
                    if (compression == null) {
                        sent.add(producer.send(new ProducerRecord<>(topic, partition, null, value)));
                    } else {
                        ProducerRecord<String, String> r =
                                new ProducerRecord<>(topic, partition, "k" + partition + "-" + i, value);
                        r.headers().add("i", String.valueOf(i).getBytes(StandardCharsets.UTF_8));
                        r.headers().add("nothing", null);
                        sent.add(producer.send(r));
                    }
                }
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) {
                f.get();
            }
            System.out.println("produced " + sent.size());
        }
    }

    /** Set by the assignor when this consumer led the rebalance, read by the listener after it. */
    static final AtomicBoolean LED = new AtomicBoolean();

    /**
     * Kafka's RangeAssignor, unchanged (same name "range", same assignment), except that it notes
     * that this consumer was the leader, which the tests cannot see otherwise.
     */
    public static final class ReportingRangeAssignor extends RangeAssignor {
        @Override
        public GroupAssignment assign(Cluster metadata, GroupSubscription groupSubscription) {
            LED.set(true);
            return super.assign(metadata, groupSubscription);
        }
    }

    static void consume(String bootstrap, String topic, String group, String clientId, String instanceId) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        // The classic protocol (JoinGroup/SyncGroup), which our members speak; already the default.
        p.put("group.protocol", "classic");
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, ReportingRangeAssignor.class.getName());
        if (instanceId != null) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "20000");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.putAll(EXTRA);
        if ("consumer".equals(p.get("group.protocol"))) {
            // KIP-848: the coordinator assigns and sets the session and heartbeat timings; the
            // Java client refuses these with group.protocol=consumer.
            p.remove(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG);
            p.remove(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG);
            p.remove(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG);
        }
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                System.out.println("# revoked " + list(partitions));
                System.out.flush();
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                System.out.println("# assigned generation=" + consumer.groupMetadata().generationId()
                        + " leader=" + LED.getAndSet(false) + " partitions=" + list(partitions));
                System.out.flush();
            }
        });
        // Runs until the test kills it.
        while (true) {
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                System.out.println(r.partition() + " " + r.offset() + " " + r.value());
            }
            System.out.flush();
        }
    }

    static String list(Collection<TopicPartition> partitions) {
        return partitions.stream()
                .map(TopicPartition::partition)
                .sorted()
                .map(String::valueOf)
                .collect(Collectors.joining(","));
    }
}
