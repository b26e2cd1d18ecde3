package kafkaharness;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import kafkaharness.Clients.Calls;
import kafkaharness.Clients.ClientError;
import kafkaharness.Clients.Exit;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * One consume-transform-produce processor instance on the Java client: the twin of
 * {@code workloads/eos/processor.py}, reading the same configuration ({@code ProcessorConfig}
 * as JSON, {@code --config}) and writing the same history ops, output headers and exit codes,
 * so the eos checkers judge its runs unchanged (docs/history-format.md, workload "eos").
 *
 * <p>The loop (KIP-447): poll a batch, begin, produce one output per input, add the consumer's
 * positions to the transaction with {@code consumer.groupMetadata()} captured with the batch,
 * commit. The broken-on-purpose variants change the same single step as in Python.
 *
 * <p>Signals: SIGTERM/SIGINT ask for a clean stop after the current transaction; SIGUSR1 asks
 * for a zombie (stop at the next offset commit); protocol moments are armed through the arm
 * file ({@link ArmFile}), never SIGUSR2, which belongs to the JVM.
 *
 * <p>Exit status: 0 clean stop, 2 bad configuration, 3 fenced, 4 fatal client error, 5 outcome
 * of a commit unknown, 6 could not rewind after an abort, 7 parent went away, 8 refused for
 * want of an ACL, 70 hook exit.
 */
public final class EosProcessor {
    static final int EXIT_OK = 0;
    static final int EXIT_BAD_CONFIG = 2;
    static final int EXIT_FENCED = 3;
    static final int EXIT_FATAL = 4;
    static final int EXIT_UNCERTAIN = 5;
    static final int EXIT_REWIND_FAILED = 6;
    static final int EXIT_ORPHANED = 7;
    static final int EXIT_NOT_AUTHORIZED = 8;
    static final int EXIT_HOOK = 70;
    static final String[] VARIANTS = {
        "eos", "at-least-once", "offsets-outside-txn", "read-uncommitted", "no-rewind"};

    // History format v1, workload eos: the output headers (history/eos_records.py).
    static final String H_SRC_TOPIC = "src-topic";
    static final String H_SRC_PARTITION = "src-partition";
    static final String H_SRC_OFFSET = "src-offset";
    static final String H_INSTANCE = "instance";
    static final String H_TXN_ID = "transactional-id";
    static final String H_GENERATION = "generation";
    static final String H_MEMBER_ID = "member-id";
    static final String H_TXN_SEQ = "txn-seq";
    static final String OUTPUT_PREFIX = "out-";

    private final Config cfg;
    private final long instance;
    private final long slot;
    private final String variant;
    private final String tid;
    private final boolean transactional;
    private final String inputTopic;
    private final String outputTopic;
    private final int outputPartitions;
    private final int txnSize;
    private final long commitIntervalMs;
    private final double abortProbability;
    private final long callTimeoutMs;
    private final Map<String, Object> hook;
    private final Random rng;
    /** {@code --txn-delay-ms}: a seeded pause of up to this many ms between a transaction's operations. */
    private final TxnDelay txnDelay;
    private final History rec;
    private final ArmFile armFile;
    private final long parent;

    private volatile String stopping;
    private volatile boolean zombieRequested;
    private boolean hookFired;
    private long seq;
    private long committed;
    private long failed;
    private KafkaConsumer<byte[], byte[]> consumer;
    private KafkaProducer<byte[], byte[]> producer;
    private Calls calls;

    EosProcessor(Config cfg) throws Exception {
        this.cfg = cfg;
        instance = cfg.integer("instance");
        slot = cfg.integer("slot");
        variant = cfg.has("variant") ? cfg.str("variant") : "eos";
        if (!List.of(VARIANTS).contains(variant)) {
            throw new IllegalArgumentException("variant must be one of " + String.join(", ",
                    VARIANTS));
        }
        transactional = !variant.equals("at-least-once");
        String prefix = cfg.has("txn_id_prefix") ? cfg.str("txn_id_prefix") : "eos";
        String strategy = cfg.has("txn_id_strategy") ? cfg.str("txn_id_strategy") : "unique";
        if (!transactional) {
            tid = null;
        } else if (strategy.equals("static")) {
            tid = prefix + "-slot-" + slot;
        } else {
            tid = prefix + "-p" + instance;
        }
        inputTopic = cfg.str("input_topic");
        outputTopic = cfg.str("output_topic");
        outputPartitions = (int) cfg.integer("output_partitions");
        txnSize = (int) cfg.integer("txn_size", 50);
        commitIntervalMs = cfg.integer("commit_interval_ms", 200);
        abortProbability = cfg.number("abort_probability", 0.0);
        callTimeoutMs = (long) (cfg.number("call_timeout_s", 30.0) * 1000);
        hook = cfg.objOrNull("hook");
        rng = new Random(cfg.integer("seed", 0));
        txnDelay = new TxnDelay(cfg.integer("txn_delay_ms", 0),
                "txn-delay:" + cfg.integer("seed", 0));
        armFile = new ArmFile(cfg.str("history_path"));
        parent = Clients.parentPid();
        rec = !cfg.bool("record_history", true) ? History.disabled(instance)
                : new History(cfg.str("history_path"), instance, Json.obj(
                "workload", "eos",
                "role", "processor",
                "instance", instance,
                "slot", slot,
                "variant", variant,
                "transactional_id", tid,
                "client", "java",
                "config", cfg.raw));
    }

    // --- signals and hooks --------------------------------------------------------------

    private void installSignals() {
        // Only flags: the current transaction finishes (or aborts) before the loop exits.
        Signals.on("TERM", () -> stopping = "sigterm");
        Signals.on("INT", () -> stopping = "sigint");
        // A nemesis asks for a zombie: stop at the next offset commit, mid-transaction.
        Signals.on("USR1", () -> zombieRequested = true);
    }

    /** Act at the moment a nemesis armed: say where (the fired file), then act. */
    private void fireArmed(String point) throws ClientError {
        Map<String, Object> fired = armFile.fire(point, seq);
        if (fired == null) {
            return;
        }
        String at = String.valueOf(fired.get("at"));
        String action = String.valueOf(fired.get("action"));
        Clients.warn("instance " + instance + ": armed " + action + " at " + at + " of txn " + seq);
        if (action.equals("abort")) {
            throw deliberateAbort("INJECTED_ABORT", "an abortable failure armed at " + at);
        }
        ArmFile.signal(fired);
    }

    private void hook(String point) throws ClientError {
        fireArmed(point);
        // The zombie stops where a GC pause hurts most: outputs produced, offsets not yet sent.
        if (zombieRequested && (point.equals("before-offsets") || point.equals("before-commit"))) {
            zombieRequested = false;
            Clients.warn("instance " + instance + ": pausing itself before offsets (zombie)");
            Clients.signalSelf("STOP");
            return;
        }
        if (hook == null || hookFired || !point.equals(hook.get("at"))) {
            return;
        }
        long hookTxn = hook.get("txn") instanceof Number ? ((Number) hook.get("txn")).longValue()
                : 1;
        if (seq < hookTxn) {
            return;
        }
        hookFired = true;
        String action = String.valueOf(hook.get("action"));
        Clients.warn("instance " + instance + ": hook " + action + " at " + point + " of txn "
                + seq);
        if (action.equals("kill")) {
            Clients.signalSelf("KILL");
        } else if (action.equals("stop")) {
            Clients.signalSelf("STOP");
        } else {
            Runtime.getRuntime().halt(EXIT_HOOK);
        }
    }

    // --- clients --------------------------------------------------------------------------

    private void makeClients() {
        String bootstrap = cfg.str("bootstrap");
        long maxBlockMs = Math.max(1000, callTimeoutMs / 3);
        // --client-config goes last, over the processor's own settings, to both clients.
        Map<String, Object> userSettings = cfg.objOrNull("client_config");
        // A secured cluster's settings (docs/client-contract.md, security), under the user's.
        Map<String, Object> shared = Clients.security(cfg.objOrNull("security"));
        if (userSettings != null) {
            shared.putAll(userSettings);
        }
        Map<String, Object> producerSettings = Json.obj("linger.ms", 5);
        producerSettings.putAll(shared);
        producer = Clients.producer(bootstrap, "eos-p" + instance, transactional ? tid : null,
                cfg.integer("transaction_timeout_ms", 10000), maxBlockMs, producerSettings);
        consumer = Clients.consumer(bootstrap, "eos-c" + instance, cfg.str("group_id"),
                !variant.equals("read-uncommitted"),
                cfg.has("group_protocol") ? cfg.str("group_protocol") : "classic",
                cfg.integer("session_timeout_ms", 10000), txnSize, shared);
        calls = new Calls("instance " + instance, callTimeoutMs, producer);
    }

    private void rebalance(String event, Collection<TopicPartition> partitions) {
        List<Object> parts = sortedParts(partitions);
        rec.invoke("rebalance", Json.obj("event", event, "partitions", parts));
        Map<String, Object> value = Json.obj("event", event, "partitions", parts);
        value.putAll(Clients.group(consumer));
        rec.ok("rebalance", value);
    }

    private static List<Object> sortedParts(Collection<TopicPartition> partitions) {
        TreeMap<String, TopicPartition> sorted = new TreeMap<>();
        for (TopicPartition tp : partitions) {
            sorted.put(tp.topic() + "\u0000" + String.format("%010d", tp.partition()), tp);
        }
        List<Object> out = new ArrayList<>();
        for (TopicPartition tp : sorted.values()) {
            out.add(Json.list(tp.topic(), tp.partition()));
        }
        return out;
    }

    // --- the loop -------------------------------------------------------------------------

    int run() {
        installSignals();
        int code = EXIT_OK;
        String reason = "stopped";
        try {
            start();
            while (stopping == null) {
                if (Clients.parentPid() != parent) {
                    throw new Exit(EXIT_ORPHANED, "orphaned");
                }
                step();
            }
            reason = stopping;
        } catch (Exit stop) {
            code = stop.code;
            reason = stop.reason;
        }
        close();
        rec.invoke("exit", Json.obj("reason", reason));
        rec.ok("exit", Json.obj("reason", reason, "code", code, "txns", seq,
                "committed", committed, "failed", failed));
        rec.close();
        return code;
    }

    private void start() throws Exit {
        Map<String, Object> value = Json.obj(
                "instance", instance,
                "slot", slot,
                "pid", ProcessHandle.current().pid(),
                "variant", variant,
                "transactional_id", tid,
                "group_id", cfg.str("group_id"),
                "input_topic", inputTopic,
                "output_topic", outputTopic);
        // The knobs of the run, as the Python processors record them.
        value.put("group_protocol", cfg.has("group_protocol") ? cfg.str("group_protocol")
                : "classic");
        Map<String, Object> userSettings = cfg.objOrNull("client_config");
        value.put("client_config", userSettings == null ? Json.obj() : userSettings);
        value.put("txn_delay_ms", txnDelay.maxMs());
        rec.invoke("start", value);
        makeClients();
        if (transactional) {
            try {
                calls.run("init", producer::initTransactions);
            } catch (ClientError e) {
                rec.fail("start", value, e.info);
                refused(e.info);
                boolean fenced = Clients.isFenced(e.info);
                throw new Exit(fenced ? EXIT_FENCED : EXIT_FATAL, "init-failed");
            }
        }
        consumer.subscribe(List.of(inputTopic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                rebalance("assign", parts);
            }

            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                rebalance("revoke", parts);
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> parts) {
                rebalance("lost", parts);
            }
        });
        // What the Java client adds to the start op: which client, and whether its producer
        // speaks transaction version 2 (decided in initTransactions from the cluster's
        // finalized transaction.version).
        Map<String, Object> ok = new java.util.LinkedHashMap<>(value);
        ok.put("client", "java");
        ok.put("client_version", Clients.clientVersion());
        if (transactional) {
            ok.put("transaction_v2", Clients.transactionV2(producer));
            ok.put("transaction_version", Clients.finalizedTransactionVersion(producer));
        }
        rec.ok("start", ok);
    }

    /**
     * Exit 8, naming the error, when the cluster refused an operation for want of an ACL, or
     * the client's login (a rotated password, found out at the next re-authentication).
     */
    private static void refused(Map<String, Object> info) throws Exit {
        String code = String.valueOf(info.get("code"));
        if (code.endsWith("_AUTHORIZATION_FAILED") || code.equals("SASL_AUTHENTICATION_FAILED")) {
            throw new Exit(EXIT_NOT_AUTHORIZED, "not-authorized " + code);
        }
    }

    private void step() throws Exit {
        ConsumerRecords<byte[], byte[]> records;
        try {
            records = consumer.poll(Duration.ofMillis(commitIntervalMs));
        } catch (KafkaException | IllegalStateException e) {
            Clients.warn("instance " + instance + ": poll error: " + e);
            refused(Json.obj("code", Clients.code(e), "stage", "poll"));
            Clients.sleepQuietly(100); // back-off, so a failing poll does not spin
            return;
        }
        if (records.isEmpty()) {
            return;
        }
        List<ConsumerRecord<byte[], byte[]>> batch = new ArrayList<>(records.count());
        for (ConsumerRecord<byte[], byte[]> r : records) {
            batch.add(r);
        }
        // Captured with the batch: these records were consumed in this generation, and that
        // is the generation the group coordinator must check the offset commit against.
        ConsumerGroupMetadata cgmd = consumer.groupMetadata();
        process(batch, cgmd, records.partitions());
    }

    /**
     * This transaction is aborted on purpose: the seeded RNG chose it (abort probability), or a
     * nemesis armed an abortable failure at a protocol moment. Either way it is an abortable
     * client error, and the processor takes that path: abort, read the inputs again, go on.
     */
    private static ClientError deliberateAbort(String code, String message) {
        return new ClientError(Json.obj(
                "stage", "deliberate-abort",
                "code", code,
                "message", message,
                "fatal", false,
                "abortable", true,
                "retriable", false));
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private void process(List<ConsumerRecord<byte[], byte[]>> batch, ConsumerGroupMetadata cgmd,
            Set<TopicPartition> batchParts) throws Exit {
        seq += 1;
        long mySeq = seq;
        int generation = cgmd.generationId();
        String member = cgmd.memberId();
        List<Object> inputs = new ArrayList<>();
        List<List<Object>> outputs = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> m : batch) {
            String v = m.value() == null ? "" : new String(m.value(), StandardCharsets.UTF_8);
            inputs.add(Json.list(m.partition(), m.offset(), v));
            outputs.add(Json.list(null, null, null, m.partition(), m.offset()));
        }
        rec.invoke("txn", Json.obj(
                "txn", mySeq,
                "transactional_id", tid,
                "generation", generation,
                "member_id", member,
                "inputs", inputs));
        Map<String, Object> result = Json.obj("txn", mySeq, "outputs", outputs, "offsets", null);
        String stage = "begin";
        try {
            if (transactional) {
                try {
                    producer.beginTransaction();
                } catch (KafkaException | IllegalStateException e) {
                    throw new ClientError(Clients.errorInfo(e, "begin", producer));
                }
            }
            stage = "produce";
            List<Future<RecordMetadata>> sent = new ArrayList<>(batch.size());
            for (int i = 0; i < batch.size(); i++) {
                if (i > 0) {
                    txnDelay.pause();
                }
                ConsumerRecord<byte[], byte[]> m = batch.get(i);
                String in = m.value() == null ? "" : new String(m.value(), StandardCharsets.UTF_8);
                String out = OUTPUT_PREFIX + in;
                outputs.get(i).set(2, out);
                RecordHeaders headers = new RecordHeaders();
                headers.add(H_SRC_TOPIC, utf8(m.topic()));
                headers.add(H_SRC_PARTITION, utf8(Integer.toString(m.partition())));
                headers.add(H_SRC_OFFSET, utf8(Long.toString(m.offset())));
                headers.add(H_INSTANCE, utf8(Long.toString(instance)));
                headers.add(H_TXN_ID, utf8(tid == null ? "" : tid));
                headers.add(H_GENERATION, utf8(Integer.toString(generation)));
                headers.add(H_MEMBER_ID, utf8(member == null ? "" : member));
                headers.add(H_TXN_SEQ, utf8(Long.toString(mySeq)));
                sent.add(producer.send(new ProducerRecord<>(outputTopic,
                        m.partition() % outputPartitions, m.value(), utf8(out), headers)));
            }
            hook("after-produce");
            stage = "flush";
            waitDelivered(sent, outputs);
            hook("after-flush");
            Map<TopicPartition, OffsetAndMetadata> positions = positions(batchParts);
            List<Object> offsets = new ArrayList<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : positions.entrySet()) {
                offsets.add(Json.list(e.getKey().partition(), e.getValue().offset()));
            }
            result.put("offsets", offsets);
            if (variant.equals("at-least-once")) {
                stage = "commit-offsets";
                txnDelay.pause();
                hook("before-offsets");
                hook("before-commit"); // its offset commit is its only commit step
                commitOffsets(positions);
                hook("after-commit");
            } else {
                if (abortProbability > 0 && rng.nextDouble() < abortProbability) {
                    throw deliberateAbort("DELIBERATE_ABORT",
                            "aborted on purpose (abort probability)");
                }
                if (!variant.equals("offsets-outside-txn")) {
                    stage = "send-offsets";
                    txnDelay.pause();
                    hook("before-offsets");
                    calls.run("send-offsets",
                            () -> producer.sendOffsetsToTransaction(positions, cgmd));
                }
                stage = "commit";
                txnDelay.pause();
                hook("before-commit");
                calls.run("commit", producer::commitTransaction);
                hook("after-commit");
                if (variant.equals("offsets-outside-txn")) {
                    stage = "commit-offsets";
                    txnDelay.pause();
                    commitOffsets(positions);
                }
            }
        } catch (ClientError e) {
            failedTxn(result, e.info);
            return;
        } catch (KafkaException | IllegalStateException e) { // send() refusing a record
            failedTxn(result, Clients.errorInfo(e, stage, producer));
            return;
        }
        committed += 1;
        rec.ok("txn", result);
    }

    /** Wait for every output's acknowledgement (its offset), within the call bound. */
    private void waitDelivered(List<Future<RecordMetadata>> sent, List<List<Object>> outputs)
            throws ClientError {
        long deadline = System.nanoTime() + callTimeoutMs * 1_000_000L;
        Map<String, Object> firstError = null;
        int failures = 0;
        for (int i = 0; i < sent.size(); i++) {
            long left = Math.max(1, (deadline - System.nanoTime()) / 1_000_000L);
            try {
                RecordMetadata md = sent.get(i).get(left, TimeUnit.MILLISECONDS);
                outputs.get(i).set(0, md.partition());
                outputs.get(i).set(1, md.hasOffset() ? md.offset() : null);
            } catch (java.util.concurrent.TimeoutException e) {
                throw new ClientError(Json.obj(
                        "stage", "flush",
                        "code", "_TIMED_OUT",
                        "message", "outputs not acknowledged within the call timeout",
                        "fatal", false,
                        "abortable", true,
                        "retriable", false));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new ClientError(Clients.errorInfo(e, "flush", producer));
            } catch (java.util.concurrent.ExecutionException e) {
                failures += 1;
                if (firstError == null) {
                    firstError = Clients.errorInfo(e, "produce", producer);
                }
            }
        }
        if (firstError != null) {
            // Never commit offsets past an input whose output was not written.
            firstError.put("abortable", true);
            firstError.put("failed_outputs", failures);
            throw new ClientError(firstError);
        }
    }

    /** The consumer's positions in the partitions this batch came from (sorted). */
    private Map<TopicPartition, OffsetAndMetadata> positions(Set<TopicPartition> parts)
            throws ClientError {
        Map<TopicPartition, OffsetAndMetadata> out = new TreeMap<>(
                (a, b) -> Integer.compare(a.partition(), b.partition()));
        Set<TopicPartition> assigned = new HashSet<>(consumer.assignment());
        for (TopicPartition tp : parts) {
            if (!assigned.contains(tp)) {
                continue; // revoked since the poll: its offsets are no longer ours to commit
            }
            try {
                out.put(tp, new OffsetAndMetadata(consumer.position(tp, Duration.ofSeconds(5))));
            } catch (KafkaException | IllegalStateException e) {
                throw new ClientError(Clients.errorInfo(e, "send-offsets", producer));
            }
        }
        return out;
    }

    private void commitOffsets(Map<TopicPartition, OffsetAndMetadata> positions)
            throws ClientError {
        try {
            consumer.commitSync(positions, Duration.ofMillis(callTimeoutMs));
        } catch (KafkaException | IllegalStateException e) {
            throw new ClientError(Clients.errorInfo(e, "commit-offsets", null));
        }
    }

    /**
     * Record how a unit of processing ended when it did not commit cleanly, and react: the same
     * rules as the Python processor's {@code _failed_txn} (fail before the commit step, info when
     * a commit may have happened, exit when fenced or fatal, else abort and rewind).
     */
    private void failedTxn(Map<String, Object> result, Map<String, Object> info) throws Exit {
        failed += 1;
        String stage = String.valueOf(info.get("stage"));
        boolean fenced = Clients.isFenced(info);
        if (stage.equals("commit-offsets") || (!transactional && !stage.equals("begin"))) {
            rec.info("txn", result, info);
            throw new Exit(EXIT_UNCERTAIN, "uncertain");
        }
        if (stage.equals("commit") && !Clients.flag(info, "abortable")) {
            rec.info("txn", result, info);
            throw new Exit(fenced ? EXIT_FENCED : EXIT_UNCERTAIN, "uncertain");
        }
        if (fenced || Clients.flag(info, "fatal")) {
            rec.fail("txn", result, info);
            refused(info);
            throw new Exit(fenced ? EXIT_FENCED : EXIT_FATAL, fenced ? "fenced" : "fatal");
        }
        if (transactional) {
            try {
                calls.run("abort", producer::abortTransaction);
            } catch (ClientError e) {
                Map<String, Object> both = new java.util.LinkedHashMap<>(info);
                both.put("abort_error", e.info);
                rec.fail("txn", result, both);
                boolean abortFenced = Clients.isFenced(e.info);
                throw new Exit(abortFenced ? EXIT_FENCED : EXIT_FATAL,
                        abortFenced ? "fenced" : "fatal");
            }
        }
        rec.fail("txn", result, info);
        if (!variant.equals("no-rewind")) {
            rewind();
        }
    }

    /** Seek back to the group's committed offsets: the aborted inputs must be read again. */
    private void rewind() throws Exit {
        Set<TopicPartition> assignment = consumer.assignment();
        List<Object> parts = sortedParts(assignment);
        rec.invoke("rewind", Json.obj("partitions", parts));
        if (assignment.isEmpty()) {
            rec.ok("rewind", Json.obj("partitions", parts, "offsets", List.of()));
            return;
        }
        TreeMap<Integer, Long> offsets = new TreeMap<>();
        try {
            Map<TopicPartition, OffsetAndMetadata> committedOffsets =
                    consumer.committed(assignment, Duration.ofMillis(callTimeoutMs));
            List<TopicPartition> toBeginning = new ArrayList<>();
            for (TopicPartition tp : assignment) {
                OffsetAndMetadata om = committedOffsets.get(tp);
                if (om == null) {
                    toBeginning.add(tp);
                    offsets.put(tp.partition(), -1001L);
                } else {
                    consumer.seek(tp, om.offset());
                    offsets.put(tp.partition(), om.offset());
                }
            }
            if (!toBeginning.isEmpty()) {
                consumer.seekToBeginning(toBeginning);
            }
        } catch (KafkaException | IllegalStateException e) {
            rec.fail("rewind", Json.obj("partitions", parts),
                    Clients.errorInfo(e, "rewind", null));
            throw new Exit(EXIT_REWIND_FAILED, "rewind-failed");
        }
        List<Object> pairs = new ArrayList<>();
        for (Map.Entry<Integer, Long> e : offsets.entrySet()) {
            pairs.add(Json.list(e.getKey(), e.getValue()));
        }
        rec.ok("rewind", Json.obj("partitions", parts, "offsets", pairs));
    }

    private void close() {
        Clients.close(consumer, producer, "instance " + instance);
    }

    public static void main(String[] args) {
        EosProcessor processor;
        try {
            processor = new EosProcessor(Config.fromArgs(args));
        } catch (IllegalArgumentException e) {
            System.err.println("error: " + e.getMessage());
            System.exit(EXIT_BAD_CONFIG);
            return;
        } catch (Exception e) {
            System.err.println("error: cannot start: " + e);
            System.exit(EXIT_BAD_CONFIG);
            return;
        }
        int code = processor.run();
        System.err.flush();
        System.exit(code);
    }
}
