// Java peer for scripts/bench-peers (org.apache.kafka:kafka-clients): produce, consume or
// measure end-to-end latency, and print one JSON line, as the other peers do.
//
//   Peer produce BOOTSTRAP TOPIC RECORDS SIZE [-X key=value]...
//   Peer consume BOOTSTRAP TOPIC RECORDS SIZE [-X key=value]...
//   Peer latency BOOTSTRAP TOPIC RATE SECONDS SIZE [-X key=value]...
//   Peer produce-txn BOOTSTRAP TOPIC RECORDS SIZE [-X key=value]...
//   Peer ctp BOOTSTRAP INPUT OUTPUT GROUP RECORDS [-X key=value]...
//
// -X sets a producer (produce, latency) or consumer (consume) property; everything else is the
// client's default, except acks=all (which is also Kafka's default since 3.0). produce-txn sends in
// transactions (transactional.id), each committed once 100 ms passed since it began; ctp reads
// RECORDS records of INPUT in GROUP (isolation.level=read_committed) and writes each, reversed,
// to OUTPUT in such transactions with sendOffsetsToTransaction. Both print commit p50/p99.

import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class Peer {
    static final String CLIENT = "kafka-clients " + version();
    static final long T0 = System.nanoTime();
    /** A fresh JVM runs its first million records mostly interpreted; a long-running service's
     * client is JIT-compiled. So produce and consume first do the same work once untimed, in
     * this JVM (PEER_JAVA_WARMUP=0: not). */
    static final boolean WARM = !"0".equals(System.getenv("PEER_JAVA_WARMUP"));
    static final String WARMED = WARM ? ",\"jvm_warmup\":\"one untimed pass\"" : ",\"jvm_warmup\":\"none\"";

    /** The release, from the properties file the jar carries (its parser class is internal). */
    static String version() {
        Properties p = new Properties();
        try (var in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            p.load(in);
        } catch (Exception e) {
            return "?";
        }
        return p.getProperty("version", "?");
    }

    static double cpu() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime() / 1e9;
    }

    /** Values as every peer makes them: a 16-letter alphabet drawn by xorshift64, so lz4 has
     * work but no long repeats; up to 65,536 values are cycled (a batch never sees one twice). */
    static byte[][] pool(int n, int size) {
        long x = 0x9e3779b97f4a7c15L;
        byte[] alphabet = "abcdefghijklmnop".getBytes(StandardCharsets.US_ASCII);
        byte[][] out = new byte[n][size];
        for (byte[] v : out) {
            for (int j = 0; j < size; j++) {
                x ^= x << 13;
                x ^= x >>> 7;
                x ^= x << 17;
                v[j] = alphabet[(int) (x & 15)];
            }
        }
        return out;
    }

    static Properties props(String bootstrap, List<String> xs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        for (String kv : xs) {
            int eq = kv.indexOf('=');
            if (eq < 0) throw new IllegalArgumentException("-X expects key=value: " + kv);
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return p;
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, List<String> xs, StringBuilder settings) {
        Properties p = props(bootstrap, xs);
        p.put("acks", "all");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        ProducerConfig c = new ProducerConfig(p);
        for (String k : new String[] {"acks", "batch.size", "linger.ms", "compression.type", "enable.idempotence"}) {
            settings.append(settings.length() == 0 ? "" : ",").append('"').append(k).append("\":\"")
                    .append(c.originals().containsKey(k) ? c.originals().get(k) : c.values().get(k)).append('"');
        }
        return new KafkaProducer<>(p);
    }

    static Properties consumerProps(String bootstrap, List<String> xs) {
        Properties p = props(bootstrap, xs);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("auto.offset.reset", "earliest");
        return p;
    }

    /** A consumer of every partition of the topic from the beginning, without a group. */
    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String topic, List<String> xs) {
        KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bootstrap, xs));
        List<TopicPartition> parts = new ArrayList<>();
        c.partitionsFor(topic).forEach(i -> parts.add(new TopicPartition(topic, i.partition())));
        c.assign(parts);
        return c;
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], topic = args[2];
        int fixed = mode.equals("latency") || mode.equals("ctp") ? 6 : 5;
        List<String> xs = new ArrayList<>();
        for (int i = fixed; i + 1 < args.length; i += 2) xs.add(args[i + 1]);
        switch (mode) {
            case "produce" -> {
                if (WARM) produce(bootstrap, topic, Integer.parseInt(args[3]), Integer.parseInt(args[4]), xs, false);
                produce(bootstrap, topic, Integer.parseInt(args[3]), Integer.parseInt(args[4]), xs, true);
            }
            case "consume" -> {
                if (WARM) consume(bootstrap, topic, Integer.parseInt(args[3]), xs, false);
                consume(bootstrap, topic, Integer.parseInt(args[3]), xs, true);
            }
            case "latency" -> latency(bootstrap, topic, Double.parseDouble(args[3]), Double.parseDouble(args[4]),
                    Integer.parseInt(args[5]), xs);
            case "produce-txn" -> {
                if (WARM) produceTxn(bootstrap, topic, Integer.parseInt(args[3]), Integer.parseInt(args[4]), xs, false);
                produceTxn(bootstrap, topic, Integer.parseInt(args[3]), Integer.parseInt(args[4]), xs, true);
            }
            case "ctp" -> {
                // The warm-up pass reads the input in a group of its own.
                if (WARM) ctp(bootstrap, topic, args[3], args[4] + "-warmup", Integer.parseInt(args[5]), xs, false);
                ctp(bootstrap, topic, args[3], args[4], Integer.parseInt(args[5]), xs, true);
            }
            default -> throw new IllegalArgumentException("mode " + mode);
        }
    }

    static void produce(String bootstrap, String topic, int n, int size, List<String> xs, boolean print)
            throws Exception {
        byte[][] values = pool(Math.min(n, 65536), size);
        StringBuilder set = new StringBuilder();
        AtomicReference<Exception> failed = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, xs, set)) {
            // Metadata and connections first, outside the figure.
            p.send(new ProducerRecord<>(topic, "warm-up".getBytes(StandardCharsets.US_ASCII))).get();
            long t = System.nanoTime();
            double c = cpu();
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, values[i % values.length]), (md, e) -> {
                    if (e != null) failed.compareAndSet(null, e);
                });
            }
            p.flush();
            double secs = (System.nanoTime() - t) / 1e9, cs = cpu() - c;
            if (failed.get() != null) throw failed.get();
            if (print) System.out.printf("{\"client\":\"%s\",\"mode\":\"produce\",\"records\":%d,\"bytes\":%d,\"seconds\":%.4f,"
                    + "\"cpu_seconds\":%.3f,\"settings\":{%s%s}}%n", CLIENT, n, (long) n * size, secs, cs, set, WARMED);
        }
    }

    static void consume(String bootstrap, String topic, int n, List<String> xs, boolean print) {
        long t = System.nanoTime(), bytes = 0;
        double c = cpu();
        int got = 0;
        try (KafkaConsumer<byte[], byte[]> cons = consumer(bootstrap, topic, xs)) {
            while (got < n) {
                for (ConsumerRecord<byte[], byte[]> r : cons.poll(Duration.ofSeconds(1))) {
                    got++;
                    bytes += r.value().length;
                }
            }
            double secs = (System.nanoTime() - t) / 1e9, cs = cpu() - c;
            ConsumerConfig cc = new ConsumerConfig(consumerProps(bootstrap, xs));
            if (print) System.out.printf("{\"client\":\"%s\",\"mode\":\"consume\",\"records\":%d,\"bytes\":%d,\"seconds\":%.4f,"
                    + "\"cpu_seconds\":%.3f,\"settings\":{\"max.poll.records\":\"%s\",\"fetch.max.wait.ms\":\"%s\"%s}}%n",
                    CLIENT, got, bytes, secs, cs, cc.values().get("max.poll.records"),
                    cc.values().get("fetch.max.wait.ms"), WARMED);
        }
    }

    /** Sends rate records a second for secs seconds, each value starting with its send time (20
     * digits of nanoseconds since T0), while a thread reads them back. */
    static void latency(String bootstrap, String topic, double rate, double secs, int size, List<String> xs)
            throws Exception {
        int n = (int) (rate * secs);
        double[] lat = new double[n];
        int[] got = {0};
        CountDownLatch ready = new CountDownLatch(1);
        KafkaConsumer<byte[], byte[]> cons = consumer(bootstrap, topic, List.of());
        Thread reader = new Thread(() -> {
            long deadline = System.nanoTime() + (long) ((secs + 60) * 1e9);
            while (got[0] < n && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : cons.poll(Duration.ofMillis(100))) {
                    byte[] v = r.value();
                    if (v.length > 0 && v[0] == 'w') ready.countDown();
                    else if (v.length >= 20 && got[0] < n) {
                        long sent = Long.parseLong(new String(v, 0, 20, StandardCharsets.US_ASCII));
                        lat[got[0]++] = (System.nanoTime() - T0 - sent) / 1e9;
                    }
                }
            }
            cons.close();
        });
        reader.start();
        StringBuilder set = new StringBuilder();
        try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, xs, set)) {
            p.send(new ProducerRecord<>(topic, "warm-up".getBytes(StandardCharsets.US_ASCII))).get();
            ready.await();
            long start = System.nanoTime();
            double c = cpu();
            String pad = "x".repeat(Math.max(0, size - 20));
            for (int i = 0; i < n; i++) {
                long wait = start + (long) (i / rate * 1e9) - System.nanoTime();
                if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                String v = String.format("%020d%s", System.nanoTime() - T0, pad);
                p.send(new ProducerRecord<>(topic, v.getBytes(StandardCharsets.US_ASCII)));
            }
            p.flush();
            reader.join();
            double cs = cpu() - c;
            double[] s = Arrays.copyOf(lat, got[0]);
            Arrays.sort(s);
            System.out.printf("{\"client\":\"%s\",\"mode\":\"latency\",\"records\":%d,\"rate\":%.0f,\"p50_ms\":%.3f,"
                    + "\"p99_ms\":%.3f,\"max_ms\":%.3f,\"cpu_seconds\":%.3f,\"settings\":{%s}}%n", CLIENT, s.length,
                    rate, q(s, 0.5), q(s, 0.99), q(s, 1), cs, set);
            if (s.length < n) throw new IllegalStateException("not every record arrived");
        }
    }

    static double q(double[] s, double p) {
        return s.length == 0 ? 0 : s[Math.max(0, Math.min(s.length - 1, (int) Math.ceil(s.length * p) - 1))] * 1e3;
    }

    /** How long a transaction stays open before it is committed, in ns. */
    static final long TXN_PERIOD = 100_000_000L;
    static int txnIds = 0;

    static KafkaProducer<byte[], byte[]> txnProducer(String bootstrap, String prefix, List<String> xs,
            StringBuilder settings) {
        List<String> all = new ArrayList<>(xs);
        all.add("transactional.id=" + prefix + "-" + ProcessHandle.current().pid() + "-" + txnIds++);
        KafkaProducer<byte[], byte[]> p = producer(bootstrap, all, settings);
        p.initTransactions();
        return p;
    }

    static void produceTxn(String bootstrap, String topic, int n, int size, List<String> xs, boolean print)
            throws Exception {
        byte[][] values = pool(Math.min(n, 65536), size);
        StringBuilder set = new StringBuilder();
        AtomicReference<Exception> failed = new AtomicReference<>();
        double[] commits = new double[n + 1];
        int txns = 0;
        try (KafkaProducer<byte[], byte[]> p = txnProducer(bootstrap, "peer-java", xs, set)) {
            // Metadata, connections and the first AddPartitionsToTxn outside the figure.
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, "warm-up".getBytes(StandardCharsets.US_ASCII)));
            p.commitTransaction();
            long t = System.nanoTime();
            double c = cpu();
            for (int i = 0; i < n;) {
                p.beginTransaction();
                long began = System.nanoTime();
                for (; i < n && System.nanoTime() - began < TXN_PERIOD; i++) {
                    p.send(new ProducerRecord<>(topic, values[i % values.length]), (md, e) -> {
                        if (e != null) failed.compareAndSet(null, e);
                    });
                }
                long at = System.nanoTime();
                p.commitTransaction();
                commits[txns++] = (System.nanoTime() - at) / 1e9;
            }
            double secs = (System.nanoTime() - t) / 1e9, cs = cpu() - c;
            if (failed.get() != null) throw failed.get();
            double[] s = Arrays.copyOf(commits, txns);
            Arrays.sort(s);
            if (print) System.out.printf("{\"client\":\"%s\",\"mode\":\"produce-txn\",\"records\":%d,\"bytes\":%d,\"seconds\":%.4f,"
                    + "\"cpu_seconds\":%.3f,\"transactions\":%d,\"commit_p50_ms\":%.3f,\"commit_p99_ms\":%.3f,"
                    + "\"settings\":{%s%s}}%n", CLIENT, n, (long) n * size, secs, cs, txns, q(s, 0.5), q(s, 0.99), set, WARMED);
        }
    }

    static void ctp(String bootstrap, String input, String output, String group, int n, List<String> xs,
            boolean print) throws Exception {
        StringBuilder set = new StringBuilder();
        AtomicReference<Exception> failed = new AtomicReference<>();
        Properties cp = consumerProps(bootstrap, List.of());
        cp.put("group.id", group);
        cp.put("enable.auto.commit", "false");
        cp.put("isolation.level", "read_committed");
        double[] commits = new double[n + 1];
        int txns = 0, got = 0;
        long bytes = 0, t = 0;
        double c = 0;
        try (KafkaConsumer<byte[], byte[]> cons = new KafkaConsumer<>(cp);
                KafkaProducer<byte[], byte[]> p = txnProducer(bootstrap, "peer-java-ctp", xs, set)) {
            cons.subscribe(List.of(input));
            long deadline = System.nanoTime() + 600_000_000_000L;
            while (got < n) {
                if (System.nanoTime() > deadline) throw new IllegalStateException(got + " of " + n + " records in 600 s");
                p.beginTransaction();
                long began = System.nanoTime();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                while (got < n && System.nanoTime() - began < TXN_PERIOD) {
                    for (ConsumerRecord<byte[], byte[]> r : cons.poll(Duration.ofMillis(20))) {
                        if (t == 0) {
                            t = System.nanoTime();
                            c = cpu();
                        }
                        got++;
                        byte[] v = r.value(), rev = new byte[v.length];
                        for (int j = 0; j < v.length; j++) rev[j] = v[v.length - 1 - j];
                        bytes += v.length;
                        p.send(new ProducerRecord<>(output, rev), (md, e) -> {
                            if (e != null) failed.compareAndSet(null, e);
                        });
                        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                }
                if (!offsets.isEmpty()) p.sendOffsetsToTransaction(offsets, cons.groupMetadata());
                long at = System.nanoTime();
                p.commitTransaction();
                if (t != 0) commits[txns++] = (System.nanoTime() - at) / 1e9;
            }
            double secs = (System.nanoTime() - t) / 1e9, cs = cpu() - c;
            if (failed.get() != null) throw failed.get();
            double[] s = Arrays.copyOf(commits, txns);
            Arrays.sort(s);
            if (print) System.out.printf("{\"client\":\"%s\",\"mode\":\"ctp\",\"records\":%d,\"bytes\":%d,\"seconds\":%.4f,"
                    + "\"cpu_seconds\":%.3f,\"transactions\":%d,\"commit_p50_ms\":%.3f,\"commit_p99_ms\":%.3f,"
                    + "\"settings\":{%s,\"isolation.level\":\"read_committed\"%s}}%n", CLIENT, got, bytes, secs, cs, txns,
                    q(s, 0.5), q(s, 0.99), set, WARMED);
        }
    }
}
