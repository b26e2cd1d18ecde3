// F5's reproduction on Kafka's Java client: the control for f5_pending_offsets.py.
//
// Needs only kafka-clients (and its dependencies) and a running Kafka; run it as a
// single-file program (Java 11+):
//
//   java -cp '<kafka>/libs/*' F5PendingOffsets.java --bootstrap localhost:9092 \
//       [--protocol classic|consumer] [--tries N]
//
// The same steps as the Python script: offset 3 committed for both partitions of a fresh
// input topic in one transaction, offset 5 for partition 0 pending in a second one left open;
// members B and C join (read_committed); the one given partition 1 leaves, so the member
// waiting on partition 0 is given partition 1 too. The Java consumer fails the whole offset
// fetch on UNSTABLE_OFFSET_COMMIT and sets positions only after a fetch that succeeded, so it
// is expected to keep waiting and start partition 0 at 5 once the transaction commits.
//
// Exit status: 1 when any try started partition 0 while it was pending, 0 when every try
// waited and started at 5, 2 on a setup error.

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class F5PendingOffsets {
    static String bootstrap;
    static String protocol = "classic";

    public static void main(String[] args) {
        int tries = 1;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = args[i + 1];
                case "--protocol" -> protocol = args[i + 1];
                case "--tries" -> tries = Integer.parseInt(args[i + 1]);
                default -> {
                    System.err.println("error: unknown argument " + args[i]);
                    System.exit(2);
                }
            }
        }
        if (bootstrap == null) {
            System.err.println("error: --bootstrap HOST:PORT is required");
            System.exit(2);
        }
        int hits = 0;
        try {
            for (int n = 1; n <= tries; n++) {
                if (oneTry(n)) {
                    hits++;
                }
            }
        } catch (Exception e) {
            System.err.println("error: " + e);
            System.exit(2);
        }
        System.out.println("reproduced in " + hits + " of " + tries + " tries");
        System.exit(hits > 0 ? 1 : 0);
    }

    /** Per (member, partition): the first offset the member read, until a deadline. */
    static void pollUntil(Map<String, KafkaConsumer<byte[], byte[]>> members,
            Map<String, Long> seen, long millis, java.util.function.Predicate<Map<String, Long>> done) {
        long deadline = System.currentTimeMillis() + millis;
        while (System.currentTimeMillis() < deadline && !done.test(seen)) {
            for (var e : members.entrySet()) {
                for (ConsumerRecord<byte[], byte[]> r : e.getValue().poll(Duration.ofMillis(200))) {
                    seen.putIfAbsent(e.getKey() + "/" + r.partition(), r.offset());
                }
            }
        }
    }

    static void topic(Admin admin, String name, int partitions) throws Exception {
        int brokers = admin.describeCluster().nodes().get().size();
        short rf = (short) Math.min(3, brokers);
        NewTopic t = new NewTopic(name, partitions, rf)
                .configs(Map.of("min.insync.replicas", String.valueOf(Math.min(2, rf))));
        admin.createTopics(List.of(t)).all().get();
    }

    static KafkaConsumer<byte[], byte[]> consumer(String group) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("group.protocol", protocol);
        p.put("isolation.level", "read_committed");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        if (protocol.equals("classic")) {
            p.put("session.timeout.ms", "6000");
        }
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static boolean oneTry(int n) throws Exception {
        String tag = UUID.randomUUID().toString().substring(0, 6);
        String src = "f5j-src-" + tag, out = "f5j-out-" + tag, group = "f5j-" + tag;
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            topic(admin, src, 2);
            topic(admin, out, 1);
        }
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        try (var plain = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < 10; i++) {
                for (int part = 0; part < 2; part++) {
                    plain.send(new ProducerRecord<>(src, part, null, String.valueOf(i).getBytes()));
                }
            }
            plain.flush();
        }
        var first = consumer(group);
        first.subscribe(List.of(src));
        Map<String, Long> warm = new HashMap<>();
        pollUntil(Map.of("a", first), warm, 30_000, s -> s.size() == 2);
        Properties tp = new Properties();
        tp.put("bootstrap.servers", bootstrap);
        tp.put("transactional.id", "f5j-" + tag);
        var producer = new KafkaProducer<>(tp, new ByteArraySerializer(), new ByteArraySerializer());
        producer.initTransactions();
        producer.beginTransaction();
        producer.send(new ProducerRecord<>(out, 0, null, "x".getBytes()));
        producer.sendOffsetsToTransaction(Map.of(
                new TopicPartition(src, 0), new OffsetAndMetadata(3),
                new TopicPartition(src, 1), new OffsetAndMetadata(3)), first.groupMetadata());
        producer.commitTransaction();
        producer.beginTransaction();
        producer.send(new ProducerRecord<>(out, 0, null, "x".getBytes()));
        producer.sendOffsetsToTransaction(
                Map.of(new TopicPartition(src, 0), new OffsetAndMetadata(5)), first.groupMetadata());
        producer.flush();
        first.close();

        Map<String, KafkaConsumer<byte[], byte[]>> members = new HashMap<>();
        members.put("b", consumer(group));
        members.put("c", consumer(group));
        members.values().forEach(m -> m.subscribe(List.of(src)));
        Map<String, Long> seen = new HashMap<>();
        pollUntil(members, seen, 30_000, s -> s.containsKey("b/1") || s.containsKey("c/1"));
        String holder = seen.containsKey("b/1") ? "b" : seen.containsKey("c/1") ? "c" : null;
        if (holder == null) {
            throw new IllegalStateException("no member read partition 1 within 30 s");
        }
        String waiter = holder.equals("b") ? "c" : "b";
        members.remove(holder).close();
        pollUntil(members, seen, 20_000, s -> s.containsKey(waiter + "/0"));
        Long early = seen.get(waiter + "/0");
        producer.commitTransaction();
        producer.close();
        Map<String, Long> after = new HashMap<>();
        pollUntil(members, after, 20_000, s -> s.containsKey(waiter + "/0"));
        members.get(waiter).close();
        if (early != null) {
            System.out.println("try " + n + ": REPRODUCED: member " + waiter
                    + " started partition 0 at " + early + " while offset 5 was pending (3 committed)");
            return true;
        }
        System.out.println("try " + n + ": waited: member " + waiter + " started partition 0 at "
                + after.get(waiter + "/0") + " once it committed");
        return false;
    }
}
