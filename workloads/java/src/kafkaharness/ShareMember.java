package kafkaharness;

import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One member of the share workload's share group on the Java client: the twin of
 * {@code workloads/share/member.py}, reading the same configuration ({@code --config JSON}) and
 * writing the same ops (docs/history-format.md, workload "share"): {@code poll}, {@code process},
 * {@code ack}, {@code drain}, {@code exit}.
 *
 * <p>Each loop: poll (explicit acknowledgement); decide each record's acknowledgement with a
 * generator seeded from (seed, process): accept, release or reject; work on the records to
 * accept ({@code process_ms}, simulated), write them to the output topic with an idempotent
 * {@code acks=all} producer and wait for every acknowledgement ({@code process}, no op when
 * nothing is accepted); acknowledge every record and commit the acknowledgements
 * ({@code ack}). The {@code accept-before-process} variant acknowledges first. When the writes
 * of a {@code process} were not all acknowledged, the records it meant to accept are released
 * instead (they come back; some may be in the output already): accepting them would claim
 * outputs that may not exist, and leaving them unacknowledged makes the next poll throw.
 *
 * <p>The share-group API ({@code KafkaShareConsumer}, {@code AcknowledgeType},
 * {@code ConsumerRecord.deliveryCount()}) is reached by reflection: every source of this
 * directory is compiled against each run's Kafka jars, 3.7 included, which have none of it.
 * Against a Kafka without it the member exits 3.
 *
 * <p>Signals: SIGTERM and SIGINT end the loop once the current poll's ops are recorded (poll,
 * process, ack), then the member records {@code exit}, closes its clients and exits 0. The
 * project's JVM clients take SIGTERM through {@code sun.misc.Signal} ({@link Signals}) rather
 * than a shutdown hook: a hook runs while the JVM is already going down, which a loop that must
 * finish its op and record its exit cannot wait on.
 *
 * <p>Exit status: 0 SIGTERM or time limit, 2 bad configuration, 3 the clients could not start
 * (or this Kafka has no share consumer), 4 an unexpected error in the loop, 7 the parent went
 * away.
 */
public final class ShareMember {
    static final int EXIT_OK = 0;
    static final int EXIT_BAD_CONFIG = 2;
    static final int EXIT_INIT = 3;
    static final int EXIT_FATAL = 4;
    static final int EXIT_ORPHANED = 7;
    static final String CORRECT = "correct";
    static final String ACCEPT_BEFORE_PROCESS = "accept-before-process";
    static final String ACCEPT = "accept";
    static final String RELEASE = "release";
    static final String REJECT = "reject";
    /** Kafka 4.x refuses these in a share consumer (ShareConsumerConfig); the fallback when its
     * own list cannot be read. */
    static final List<String> SHARE_UNSUPPORTED = List.of("auto.offset.reset",
            "enable.auto.commit", "group.instance.id", "isolation.level",
            "partition.assignment.strategy", "interceptor.classes", "session.timeout.ms",
            "heartbeat.interval.ms", "group.protocol", "group.remote.assignor");

    private final Config cfg;
    private final long process;
    private final ArmFile armFile;
    private long rounds;
    private final String inputTopic;
    private final String outputTopic;
    private final String variant;
    private final double releaseP;
    private final double rejectP;
    private final int maxRecords;
    private final long pollTimeoutMs;
    private final long processMs;
    private final long commitTimeoutMs;
    private final Path drainPath;
    private final long endNs;
    private final Map<String, String> clientConfig;
    private final Random rng;
    private final long parent;

    private History rec;
    private ShareApi consumer;
    private KafkaProducer<byte[], byte[]> producer;
    private volatile String stopping;
    private boolean draining;
    private long polled;
    private long accepted;

    ShareMember(Config cfg) {
        this.cfg = cfg;
        process = cfg.integer("process");
        armFile = new ArmFile(cfg.str("history_path"));
        cfg.integer("slot");
        cfg.str("history_path");
        cfg.str("bootstrap");
        cfg.str("group_id");
        inputTopic = cfg.str("input_topic");
        outputTopic = cfg.str("output_topic");
        long seed = cfg.integer("seed");
        releaseP = cfg.number("release_p");
        rejectP = cfg.number("reject_p");
        variant = cfg.str("variant");
        maxRecords = (int) cfg.integer("max_records");
        pollTimeoutMs = cfg.integer("poll_timeout_ms");
        processMs = cfg.integer("process_ms", 0);
        commitTimeoutMs = cfg.integer("commit_timeout_ms");
        String drain = cfg.strOrNull("drain_path");
        drainPath = drain == null || drain.isEmpty() ? null : Path.of(drain);
        double timeLimit = cfg.number("time_limit_s");
        if (process < 0) {
            throw new IllegalArgumentException("process must be >= 0");
        }
        if (!variant.equals(CORRECT) && !variant.equals(ACCEPT_BEFORE_PROCESS)) {
            throw new IllegalArgumentException("variant must be " + CORRECT + " or "
                    + ACCEPT_BEFORE_PROCESS + ", got " + variant);
        }
        if (!(releaseP >= 0 && rejectP >= 0 && releaseP + rejectP <= 1)) {
            throw new IllegalArgumentException(
                    "release_p and reject_p must be >= 0 with a sum of at most 1");
        }
        if (maxRecords < 1 || pollTimeoutMs < 0 || commitTimeoutMs < 1 || processMs < 0) {
            throw new IllegalArgumentException("max_records and commit_timeout_ms must be >= 1, "
                    + "poll_timeout_ms and process_ms >= 0");
        }
        if (!(timeLimit > 0) || Double.isInfinite(timeLimit)) {
            throw new IllegalArgumentException("time_limit_s must be a positive number");
        }
        clientConfig = clientSettings(cfg.objOrNull("client_config"));
        rng = new Random(("share:" + seed + ":" + process).hashCode());
        parent = Clients.parentPid();
        endNs = System.nanoTime() + (long) (timeLimit * 1e9);
    }

    /** {@code client_config}: Java client settings; one neither client knows, or one a share
     * consumer refuses, is a bad configuration. */
    static Map<String, String> clientSettings(Map<String, Object> raw) {
        Map<String, String> out = new LinkedHashMap<>();
        if (raw == null) {
            return out;
        }
        Set<String> unsupported = shareUnsupported();
        for (Map.Entry<String, Object> e : raw.entrySet()) {
            String key = e.getKey();
            Object v = e.getValue();
            if (!(v instanceof String || v instanceof Number || v instanceof Boolean)) {
                throw new IllegalArgumentException("client_config " + key
                        + " must be a string, got " + Json.encode(v));
            }
            if (!ConsumerConfig.configNames().contains(key)
                    && !ProducerConfig.configNames().contains(key)) {
                throw new IllegalArgumentException("client_config: unknown Java client setting "
                        + key);
            }
            if (unsupported.contains(key)) {
                throw new IllegalArgumentException("client_config: " + key
                        + " is not a share consumer setting (the share group's configuration "
                        + "decides it)");
            }
            String value = String.valueOf(v);
            if (key.equals("share.acknowledgement.mode") && !value.equals("explicit")) {
                throw new IllegalArgumentException(
                        "client_config: the member acknowledges explicitly");
            }
            out.put(key, value);
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    private static Set<String> shareUnsupported() {
        Set<String> out = new HashSet<>(SHARE_UNSUPPORTED);
        try {
            Field f = Class.forName("org.apache.kafka.clients.consumer.ShareConsumerConfig")
                    .getDeclaredField("SHARE_GROUP_UNSUPPORTED_CONFIGS");
            f.setAccessible(true);
            out.addAll((Collection<String>) f.get(null));
        } catch (ReflectiveOperationException | RuntimeException e) {
            // An older or newer client: the list above.
        }
        return out;
    }

    // --- the share consumer, by reflection ------------------------------------------------

    /**
     * The few calls of {@code KafkaShareConsumer<byte[], byte[]>} the member makes, by reflection
     * (this source compiles against Kafka jars that have no share consumer).
     */
    static final class ShareApi {
        private final Object consumer;
        private final Method subscribe;
        private final Method poll;
        private final Method acknowledge;
        private final Method commitSync;
        private final Method close;
        private final Method deliveryCount;
        private final Map<String, Object> ackTypes = new LinkedHashMap<>();

        @SuppressWarnings({"unchecked", "rawtypes"})
        ShareApi(Properties props) throws ReflectiveOperationException {
            Class<?> cls = Class.forName("org.apache.kafka.clients.consumer.KafkaShareConsumer");
            Class<?> ackType = Class.forName("org.apache.kafka.clients.consumer.AcknowledgeType");
            deliveryCount = ConsumerRecord.class.getMethod("deliveryCount");
            subscribe = cls.getMethod("subscribe", Collection.class);
            poll = cls.getMethod("poll", Duration.class);
            acknowledge = cls.getMethod("acknowledge", ConsumerRecord.class, ackType);
            commitSync = cls.getMethod("commitSync", Duration.class);
            close = cls.getMethod("close", Duration.class);
            ackTypes.put(ACCEPT, Enum.valueOf((Class) ackType, "ACCEPT"));
            ackTypes.put(RELEASE, Enum.valueOf((Class) ackType, "RELEASE"));
            ackTypes.put(REJECT, Enum.valueOf((Class) ackType, "REJECT"));
            consumer = construct(cls.getConstructor(Properties.class,
                    org.apache.kafka.common.serialization.Deserializer.class,
                    org.apache.kafka.common.serialization.Deserializer.class),
                    props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        }

        private static Object construct(java.lang.reflect.Constructor<?> ctor, Object... args)
                throws ReflectiveOperationException {
            try {
                return ctor.newInstance(args);
            } catch (InvocationTargetException e) {
                throw rethrow(e);
            }
        }

        private static RuntimeException rethrow(InvocationTargetException e) {
            Throwable t = e.getCause();
            if (t instanceof RuntimeException) {
                return (RuntimeException) t;
            }
            if (t instanceof Error) {
                throw (Error) t;
            }
            return new KafkaException(t);
        }

        private Object call(Method m, Object... args) {
            try {
                return m.invoke(consumer, args);
            } catch (InvocationTargetException e) {
                throw rethrow(e);
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }

        void subscribe(List<String> topics) {
            call(subscribe, topics);
        }

        @SuppressWarnings("unchecked")
        ConsumerRecords<byte[], byte[]> poll(Duration timeout) {
            return (ConsumerRecords<byte[], byte[]>) call(poll, timeout);
        }

        void acknowledge(ConsumerRecord<byte[], byte[]> record, String kind) {
            call(acknowledge, record, ackTypes.get(kind));
        }

        @SuppressWarnings("unchecked")
        Map<TopicIdPartition, Optional<KafkaException>> commitSync(Duration timeout) {
            return (Map<TopicIdPartition, Optional<KafkaException>>) call(commitSync, timeout);
        }

        void close(Duration timeout) {
            call(close, timeout);
        }

        Integer deliveryCount(ConsumerRecord<byte[], byte[]> record) {
            try {
                Optional<?> n = (Optional<?>) deliveryCount.invoke(record);
                return n.isPresent() ? ((Number) n.get()).intValue() : null;
            } catch (ReflectiveOperationException e) {
                return null;
            }
        }
    }

    // --- clients --------------------------------------------------------------------------

    private Properties consumerProps() {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cfg.str("bootstrap"));
        c.put(ConsumerConfig.CLIENT_ID_CONFIG, "share-m" + process);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, cfg.str("group_id"));
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(maxRecords));
        // By its key: kafka-clients 3.x, which this compiles against too, has no constant.
        c.put("share.acknowledgement.mode", "explicit");
        // max.poll.records bounds a poll only in the record_limit acquire mode (4.4's default,
        // batch_optimized, hands out whole batches); a version without the setting ignores it.
        if (ConsumerConfig.configNames().contains("share.acquire.mode")) {
            c.put("share.acquire.mode", "record_limit");
        }
        for (Map.Entry<String, String> e : clientConfig.entrySet()) {
            if (ConsumerConfig.configNames().contains(e.getKey())) {
                c.put(e.getKey(), e.getValue());
            }
        }
        return c;
    }

    private void makeClients() throws ReflectiveOperationException {
        // A write that cannot be acknowledged within the commit budget is reported (the
        // process op completes as info) rather than retried for ever.
        // (The producer refuses a delivery timeout below linger.ms + request.timeout.ms.)
        long deliveryMs = Math.max(1000, commitTimeoutMs);
        long lingerMs = 0;
        if (clientConfig.containsKey("linger.ms")) {
            try {
                lingerMs = Math.max(0, Long.parseLong(clientConfig.get("linger.ms").trim()));
            } catch (NumberFormatException e) {
                // The producer names the bad value itself.
            }
        }
        Map<String, Object> extra = Json.obj(
                "linger.ms", lingerMs,
                "delivery.timeout.ms", deliveryMs + lingerMs,
                "request.timeout.ms", deliveryMs);
        for (Map.Entry<String, String> e : clientConfig.entrySet()) {
            if (ProducerConfig.configNames().contains(e.getKey())) {
                extra.put(e.getKey(), e.getValue());
            }
        }
        producer = Clients.producer(cfg.str("bootstrap"), "share-p" + process, null, 0,
                deliveryMs, extra);
        consumer = new ShareApi(consumerProps());
        consumer.subscribe(List.of(inputTopic));
    }

    private void close(boolean quick) {
        if (consumer != null) {
            try {
                // Commits acknowledgements still pending (none between two loops) and leaves.
                consumer.close(Duration.ofMillis(quick ? 1000 : Math.max(5000, commitTimeoutMs)));
            } catch (RuntimeException e) {
                Clients.warn("member " + process + ": consumer close failed: " + e);
            }
        }
        if (producer != null) {
            try {
                producer.close(Duration.ofSeconds(1));
            } catch (RuntimeException e) {
                Clients.warn("member " + process + ": producer close failed: " + e);
            }
        }
    }

    // --- ops ------------------------------------------------------------------------------

    private static Map<String, Object> error(Throwable e) {
        Throwable t = Clients.root(e);
        String message = t.getMessage() == null ? t.toString() : t.getMessage();
        return Json.obj("code", Clients.code(t), "message", message);
    }

    private static String text(byte[] raw) {
        return raw == null ? null : new String(raw, StandardCharsets.UTF_8);
    }

    private String decide() {
        if (draining) {
            return ACCEPT;
        }
        double r = rng.nextDouble();
        if (r < releaseP) {
            return RELEASE;
        }
        if (r < releaseP + rejectP) {
            return REJECT;
        }
        return ACCEPT;
    }

    private void checkDrain() {
        if (draining || drainPath == null || !Files.exists(drainPath)) {
            return;
        }
        rec.invoke("drain", Json.obj());
        draining = true;
        rec.ok("drain", Json.obj());
    }

    /** One poll; null when it raised (recorded as info). */
    private List<ConsumerRecord<byte[], byte[]>> poll() {
        rec.invoke("poll", null);
        ConsumerRecords<byte[], byte[]> got;
        try {
            got = consumer.poll(Duration.ofMillis(pollTimeoutMs));
        } catch (KafkaException | IllegalStateException | IllegalArgumentException e) {
            rec.info("poll", null, error(e));
            return null;
        }
        List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
        List<Object> value = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : got) {
            records.add(r);
            value.add(Json.list(r.partition(), r.offset(), text(r.value()),
                    consumer.deliveryCount(r)));
        }
        polled += records.size();
        rec.ok("poll", Json.obj("records", value));
        return records;
    }

    /** The work on the records (simulated: {@code process_ms}), then write them to the output
     * and wait for every acknowledgement; true when all were acknowledged. No op when there is
     * nothing to accept. */
    private boolean process(List<ConsumerRecord<byte[], byte[]>> records) {
        if (records.isEmpty()) {
            return true;
        }
        List<Object> value = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : records) {
            value.add(Json.list(r.partition(), r.offset(), text(r.value())));
        }
        Map<String, Object> recorded = Json.obj("records", value);
        rec.invoke("process", recorded);
        if (processMs > 0) {
            Clients.sleepQuietly(processMs); // the work itself, simulated
        }
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        Throwable first = null;
        List<Object> unacknowledged = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : records) {
            ProducerRecord<byte[], byte[]> out =
                    new ProducerRecord<>(outputTopic, r.value(), r.value());
            out.headers().add("src-partition", utf8(Integer.toString(r.partition())));
            out.headers().add("src-offset", utf8(Long.toString(r.offset())));
            out.headers().add("member", utf8(Long.toString(process)));
            Integer dc = consumer.deliveryCount(r);
            out.headers().add("delivery-count", utf8(dc == null ? "" : dc.toString()));
            try {
                sent.add(producer.send(out));
            } catch (KafkaException | IllegalStateException e) {
                sent.add(null);
                first = first == null ? e : first;
            }
        }
        // The producer expires a write after its delivery timeout; this bound is only a backstop.
        long deadline = System.nanoTime()
                + (2 * Math.max(1000, commitTimeoutMs) + 5000) * 1_000_000L;
        for (int i = 0; i < records.size(); i++) {
            Future<RecordMetadata> f = sent.get(i);
            Throwable failed = null;
            if (f == null) {
                failed = first;
            } else {
                try {
                    f.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                } catch (ExecutionException e) {
                    failed = e.getCause();
                } catch (TimeoutException e) {
                    failed = new org.apache.kafka.common.errors.TimeoutException(
                            "no acknowledgement of the write in time");
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    failed = e;
                }
            }
            if (failed != null) {
                first = first == null ? failed : first;
                unacknowledged.add(value.get(i));
            }
        }
        if (first != null) {
            Map<String, Object> err = error(first);
            err.put("unacknowledged", unacknowledged);
            rec.info("process", recorded, err);
            return false;
        }
        rec.ok("process", recorded);
        return true;
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** Acknowledge each record with its kind, then commit the acknowledgements. */
    private void ack(List<ConsumerRecord<byte[], byte[]>> records, List<String> kinds) {
        List<Object> value = new ArrayList<>();
        for (int i = 0; i < records.size(); i++) {
            ConsumerRecord<byte[], byte[]> r = records.get(i);
            value.add(Json.list(r.partition(), r.offset(), text(r.value()), kinds.get(i)));
        }
        rec.invoke("ack", Json.obj("acks", value));
        // acknowledge() only updates the consumer; one it refuses (the record is no longer
        // waiting for an acknowledgement) is that record's error, and the others still go.
        String[] refused = new String[records.size()];
        Map<TopicIdPartition, Optional<KafkaException>> results;
        try {
            for (int i = 0; i < records.size(); i++) {
                try {
                    consumer.acknowledge(records.get(i), kinds.get(i));
                } catch (IllegalStateException e) {
                    refused[i] = Clients.code(Clients.root(e));
                    Clients.warn("member " + process + ": acknowledge refused: " + e);
                }
            }
            results = consumer.commitSync(Duration.ofMillis(commitTimeoutMs));
        } catch (KafkaException | IllegalStateException | IllegalArgumentException e) {
            rec.info("ack", Json.obj("acks", value), error(e));
            return;
        }
        Map<String, Object> byPartition = new LinkedHashMap<>();
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : results.entrySet()) {
            if (!e.getKey().topic().equals(inputTopic)) {
                continue;
            }
            Optional<KafkaException> err = e.getValue();
            byPartition.put(Integer.toString(e.getKey().partition()),
                    err.isPresent() ? Clients.code(Clients.root(err.get())) : null);
        }
        List<Object> done = new ArrayList<>();
        for (int i = 0; i < records.size(); i++) {
            ConsumerRecord<byte[], byte[]> r = records.get(i);
            String key = Integer.toString(r.partition());
            String err = refused[i];
            if (err == null && !byPartition.containsKey(key)) {
                // commitSync answered nothing for the partition: the outcome is not known.
                err = "NO_RESULT";
            } else if (err == null) {
                err = (String) byPartition.get(key);
            }
            if (err == null && kinds.get(i).equals(ACCEPT)) {
                accepted++;
            }
            done.add(Json.list(r.partition(), r.offset(), text(r.value()), kinds.get(i), err));
        }
        rec.ok("ack", Json.obj("acks", done));
    }

    /** One loop: poll, then process and ack (the variant: ack, then process). */
    /**
     * Act at the moment a nemesis armed (the arm file beside the history, as the eos processors
     * read it): say where (the fired file), then act. A share member's moments: after its writes
     * (after-produce, after-flush), before its acknowledgements' commit (before-offsets,
     * before-commit; during-commit a timer into it) and after it (after-commit). An armed abort
     * releases the round's records instead of acknowledging them as decided.
     */
    private void hook(String point, List<String> kinds) {
        Map<String, Object> fired = armFile.fire(point, rounds);
        if (fired == null) {
            return;
        }
        String at = String.valueOf(fired.get("at"));
        String action = String.valueOf(fired.get("action"));
        Clients.warn("member " + process + ": armed " + action + " at " + at + " of round " + rounds);
        if (action.equals("abort")) {
            for (int i = 0; i < kinds.size(); i++) {
                kinds.set(i, RELEASE);
            }
            return;
        }
        ArmFile.signal(fired);
    }

    private void hooks(List<String> kinds, String... points) {
        for (String point : points) {
            hook(point, kinds);
        }
    }

    private void step() {
        checkDrain();
        List<ConsumerRecord<byte[], byte[]>> records = poll();
        if (records == null) {
            // A poll that raised: a short back-off so a persistent error does not spin.
            Clients.sleepQuietly(Math.min(100, Math.max(10, pollTimeoutMs)));
            return;
        }
        if (records.isEmpty()) {
            return;
        }
        List<String> kinds = new ArrayList<>();
        List<ConsumerRecord<byte[], byte[]>> toAccept = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : records) {
            String kind = decide();
            kinds.add(kind);
            if (kind.equals(ACCEPT)) {
                toAccept.add(r);
            }
        }
        rounds++;
        if (variant.equals(ACCEPT_BEFORE_PROCESS)) {
            hooks(kinds, "before-offsets", "before-commit");
            ack(records, kinds);
            hooks(kinds, "after-commit");
            process(toAccept);
            hooks(kinds, "after-produce", "after-flush");
            return;
        }
        boolean written = process(toAccept);
        hooks(kinds, "after-produce", "after-flush", "before-offsets", "before-commit");
        if (!written) {
            // Some outputs may be missing: release what was to be accepted, so it comes back.
            for (int i = 0; i < kinds.size(); i++) {
                if (kinds.get(i).equals(ACCEPT)) {
                    kinds.set(i, RELEASE);
                }
            }
        }
        ack(records, kinds);
        hooks(kinds, "after-commit");
    }

    // --- the loop -------------------------------------------------------------------------

    int run() {
        Signals.on("TERM", () -> stopping = "sigterm");
        Signals.on("INT", () -> stopping = "sigterm");
        try {
            rec = new History(cfg.str("history_path"), process, Json.obj(
                    "workload", "share",
                    "role", "member",
                    "pid", ProcessHandle.current().pid(),
                    "client", "java",
                    "config", cfg.raw));
        } catch (Exception e) {
            System.err.println("share member: cannot create the history: " + e);
            return EXIT_BAD_CONFIG;
        }
        int code = EXIT_OK;
        String reason;
        try {
            makeClients();
        } catch (ReflectiveOperationException | LinkageError e) {
            Clients.warn("member " + process + ": this Kafka client has no share consumer: " + e);
            return finish(EXIT_INIT, "error");
        } catch (RuntimeException e) {
            Clients.warn("member " + process + ": the clients could not start: " + e
                    + (e.getCause() != null ? " (" + e.getCause() + ")" : ""));
            return finish(hasConfigError(e) ? EXIT_BAD_CONFIG : EXIT_INIT, "error");
        }
        try {
            while (true) {
                if (stopping != null) {
                    reason = stopping;
                    break;
                }
                if (Clients.parentPid() != parent) {
                    code = EXIT_ORPHANED;
                    reason = "orphaned";
                    break;
                }
                if (System.nanoTime() >= endNs) {
                    reason = "time-limit";
                    break;
                }
                step();
            }
        } catch (RuntimeException e) {
            Clients.warn("member " + process + ": unexpected error: " + e);
            e.printStackTrace();
            code = EXIT_FATAL;
            reason = "error";
        }
        return finish(code, reason);
    }

    private int finish(int code, String reason) {
        rec.invoke("exit", Json.obj("reason", reason));
        rec.ok("exit", Json.obj("reason", reason, "polled", polled, "accepted", accepted));
        close(code != EXIT_OK);
        rec.close();
        if (code != EXIT_OK) {
            Clients.warn("member " + process + ": exiting with " + code + ": " + reason);
        }
        return code;
    }

    private static boolean hasConfigError(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof ConfigException) {
                return true;
            }
        }
        return false;
    }

    public static void main(String[] args) {
        // A member stuck inside a client call cannot explain itself: SIGUSR1 dumps every
        // thread's stack into its log. First, so SIGUSR1 never kills it.
        Signals.on("USR1", Signals::dumpStacks);
        ShareMember member;
        try {
            member = new ShareMember(Config.fromArgs(args));
        } catch (RuntimeException e) {
            System.err.println("share member: bad configuration: " + e.getMessage());
            System.exit(EXIT_BAD_CONFIG);
            return;
        }
        int code = member.run();
        System.err.flush();
        System.exit(code);
    }
}
