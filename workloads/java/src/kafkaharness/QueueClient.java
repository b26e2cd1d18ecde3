package kafkaharness;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import kafkaharness.Clients.Calls;
import kafkaharness.Clients.ClientError;
import kafkaharness.Clients.Exit;
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

/**
 * One client of the Jepsen-style queue workload on the Java client: the twin of
 * {@code workloads/queue/client.py}, reading the same configuration ({@code ClientConfig} as
 * JSON, {@code --config}) and writing the same ops (docs/history-format.md, workload "queue"):
 * send / poll / txn micro-op lists, assign / subscribe, crash, with {@code rebalance_log}.
 *
 * <p>Key k is partition k of the one topic; value {@code process * 10000000 + n} as decimal text.
 * The op mix comes from a seeded generator with the same probabilities as the Python client's
 * (a different random sequence: Java's generator, not Python's).
 *
 * <p>Exit status: 0 time limit or SIGTERM, 2 bad configuration, 3 clients could not start,
 * 7 the supervisor went away, 10 deliberate crash, 11 an op's outcome is unknown, 12 the
 * producer or consumer is unusable, 13 the consumer could not rewind after an abort.
 */
public final class QueueClient {
    static final int EXIT_OK = 0;
    static final int EXIT_BAD_CONFIG = 2;
    static final int EXIT_INIT = 3;
    static final int EXIT_ORPHANED = 7;
    static final int EXIT_CRASH = 10;
    static final int EXIT_UNCERTAIN = 11;
    static final int EXIT_UNUSABLE = 12;
    static final int EXIT_REWIND = 13;
    static final long VALUE_STRIDE = 10_000_000L;
    static final String[] OP_FS = {"send", "poll", "txn"};

    private final Config cfg;
    private final long process;
    private final String topic;
    private final int keys;
    private final boolean txn;
    private final String subVia;
    private final Map<String, Object> weights;
    private final int maxTxnLen;
    private final double subP;
    private final double abortP;
    private final double crashP;
    private final double rate;
    private final long pollMs;
    private final long opTimeoutMs;
    private final String transactionalId;
    private final Random rng;
    /** {@code --txn-delay-ms}: a seeded pause of up to this many ms between an op's steps. */
    private final TxnDelay txnDelay;
    private final History rec;
    private final long parent;
    private final long endNs;
    private final CountDownLatch wake = new CountDownLatch(1);

    private volatile String stopping;
    private long nextValue;
    private KafkaProducer<byte[], byte[]> producer;
    private KafkaConsumer<byte[], byte[]> consumer;
    private Calls calls;
    private final Set<Integer> assigned = new HashSet<>();
    private boolean subscribed;
    private List<Object> rebalanceLog = new ArrayList<>();

    QueueClient(Config cfg) throws Exception {
        this.cfg = cfg;
        process = cfg.integer("process");
        topic = cfg.str("topic");
        keys = (int) cfg.integer("keys");
        txn = cfg.bool("txn", true);
        subVia = cfg.has("sub_via") ? cfg.str("sub_via") : "assign";
        Map<String, Object> w = cfg.objOrNull("weights");
        weights = w != null ? w : Json.obj("send", 1.0, "poll", 1.0, "txn", 1.0);
        maxTxnLen = (int) cfg.integer("max_txn_len", 4);
        subP = cfg.number("sub_p", 1.0 / 16);
        abortP = cfg.number("abort_p", 0.0);
        crashP = cfg.number("crash_p", 0.0);
        rate = cfg.number("rate", 10.0);
        pollMs = cfg.integer("poll_ms", 100);
        opTimeoutMs = (long) (cfg.number("op_timeout_s", 10.0) * 1000);
        transactionalId = cfg.strOrNull("transactional_id");
        if (process < 0 || keys < 1) {
            throw new IllegalArgumentException("process must be >= 0 and keys >= 1");
        }
        if (txn && transactionalId == null) {
            throw new IllegalArgumentException("transactions need a transactional_id");
        }
        rng = new Random(("queue:" + cfg.integer("seed", 0) + ":" + process).hashCode());
        txnDelay = new TxnDelay(cfg.integer("txn_delay_ms", 0),
                "txn-delay:" + cfg.integer("seed", 0) + ":" + process);
        parent = Clients.parentPid();
        long started = System.nanoTime();
        long end = started + (long) (cfg.number("time_limit", 30.0) * 1e9);
        if (cfg.has("end_monotonic_ns")) {
            end = Math.min(end, cfg.integer("end_monotonic_ns"));
        }
        endNs = end;
        rec = new History(cfg.str("history_path"), process, Json.obj(
                "workload", "queue",
                "role", "client",
                "pid", ProcessHandle.current().pid(),
                "client", "java",
                "config", cfg.raw));
    }

    // --- clients --------------------------------------------------------------------------

    private void makeClients() throws Exit {
        String bootstrap = cfg.str("bootstrap");
        // A send that cannot be acknowledged within the op budget is reported, not retried
        // for ever: the op then completes as info (or fail, inside an aborted transaction).
        Map<String, Object> extra = Json.obj(
                "linger.ms", 0,
                "delivery.timeout.ms", opTimeoutMs,
                "request.timeout.ms", Math.min(30000, opTimeoutMs));
        // --client-config goes last, over the client's own settings, to both clients.
        Map<String, Object> userSettings = cfg.objOrNull("client_config");
        if (userSettings != null) {
            extra.putAll(userSettings);
        }
        producer = Clients.producer(bootstrap, "queue-p" + process, txn ? transactionalId : null,
                cfg.integer("transaction_timeout_ms", 10000), Math.max(500, opTimeoutMs / 2),
                extra);
        consumer = Clients.consumer(bootstrap, "queue-c" + process, cfg.str("group_id"),
                cfg.bool("read_committed", true),
                cfg.has("group_protocol") ? cfg.str("group_protocol") : "classic",
                cfg.integer("session_timeout_ms", 6000),
                (int) cfg.integer("max_poll_records", 200),
                userSettings == null ? Map.of() : userSettings);
        calls = new Calls("process " + process, opTimeoutMs, producer);
        if (txn) {
            try {
                calls.run("init", producer::initTransactions);
            } catch (ClientError e) {
                throw new Exit(EXIT_INIT, "init_transactions failed: " + e.info.get("message"));
            }
        }
    }

    private void close() {
        Clients.close(consumer, producer, "process " + process);
    }

    // --- the generator --------------------------------------------------------------------

    private long value() throws Exit {
        if (nextValue >= VALUE_STRIDE) {
            throw new Exit(EXIT_OK, "value space exhausted");
        }
        return process * VALUE_STRIDE + nextValue++;
    }

    private List<Object> randomKeys() {
        List<Integer> all = new ArrayList<>();
        for (int k = 0; k < keys; k++) {
            all.add(k);
        }
        Collections.shuffle(all, rng);
        List<Integer> picked = new ArrayList<>(all.subList(0, 1 + rng.nextInt(keys)));
        Collections.sort(picked);
        return new ArrayList<>(picked);
    }

    private double weight(String f) {
        Object w = weights.get(f);
        return w instanceof Number ? ((Number) w).doubleValue() : 0.0;
    }

    /** Jepsen's mix: mostly send/poll/txn over random keys, sometimes a consumer change or a
     * crash. The first op always sets up the consumer, or its polls would read nothing. */
    private Object[] nextOp(boolean first) throws Exit {
        if (first) {
            return new Object[] {subVia, randomKeys()};
        }
        double r = rng.nextDouble();
        if (r < crashP) {
            return new Object[] {"crash", null};
        }
        if (r < crashP + subP) {
            return new Object[] {subVia, randomKeys()};
        }
        double total = 0;
        for (String f : OP_FS) {
            total += weight(f);
        }
        double pick = rng.nextDouble() * total;
        String f = OP_FS[OP_FS.length - 1];
        for (String g : OP_FS) {
            if (weight(g) <= 0) {
                continue;
            }
            if (pick < weight(g)) {
                f = g;
                break;
            }
            pick -= weight(g);
        }
        List<Object> mops = new ArrayList<>();
        if (f.equals("poll")) {
            mops.add(Json.list("poll"));
        } else if (f.equals("send")) {
            int n = 1 + rng.nextInt(maxTxnLen);
            for (int i = 0; i < n; i++) {
                mops.add(Json.list("send", rng.nextInt(keys), value()));
            }
        } else {
            int n = 2 + rng.nextInt(maxTxnLen - 1);
            List<String> kinds = new ArrayList<>(List.of("send", "poll"));
            for (int i = 0; i < n - 2; i++) {
                kinds.add(rng.nextBoolean() ? "send" : "poll");
            }
            Collections.shuffle(kinds, rng);
            for (String kind : kinds) {
                mops.add(kind.equals("send") ? Json.list("send", rng.nextInt(keys), value())
                        : Json.list("poll"));
            }
        }
        return new Object[] {f, mops};
    }

    // --- micro-ops ------------------------------------------------------------------------

    private static Map<String, Object> timedOut(String stage, String message) {
        return Json.obj("stage", stage, "code", "TIMED_OUT", "message", message,
                "fatal", false, "abortable", false, "retriable", true);
    }

    /** Produce one record and wait for its acknowledgement: Jepsen's sends are synchronous. */
    private Long send(int k, long v) throws ClientError {
        RecordMetadata md;
        try {
            md = producer.send(new ProducerRecord<>(topic, k, null,
                    Long.toString(v).getBytes(StandardCharsets.US_ASCII)))
                    .get(opTimeoutMs, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            throw new ClientError(timedOut("send",
                    "no acknowledgement within " + opTimeoutMs / 1000.0 + "s"));
        } catch (ExecutionException | KafkaException | IllegalStateException e) {
            throw new ClientError(Clients.errorInfo(e, "send", txn ? producer : null));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ClientError(Clients.errorInfo(e, "send", null));
        }
        return md.hasOffset() && md.offset() >= 0 ? md.offset() : null;
    }

    static Object decodeValue(byte[] raw) {
        if (raw == null) {
            return null;
        }
        String text = new String(raw, StandardCharsets.UTF_8);
        if (!text.isEmpty() && text.length() <= 18 && text.chars().allMatch(c -> c >= '0'
                && c <= '9')) {
            return Long.parseLong(text);
        }
        return text;
    }

    /** One consumer poll: records per key in offset order (what Kafka returned). */
    private Map<String, Object> poll() throws ClientError {
        ConsumerRecords<byte[], byte[]> records;
        try {
            records = consumer.poll(Duration.ofMillis(pollMs));
        } catch (KafkaException | IllegalStateException e) {
            throw new ClientError(Clients.errorInfo(e, "poll", null));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        for (ConsumerRecord<byte[], byte[]> m : records) {
            if (!m.topic().equals(topic)) {
                continue;
            }
            @SuppressWarnings("unchecked")
            List<Object> pairs = (List<Object>) out.computeIfAbsent(
                    Integer.toString(m.partition()), key -> new ArrayList<>());
            pairs.add(Json.list(m.offset(), decodeValue(m.value())));
        }
        return out;
    }

    // --- rebalance callbacks and recording --------------------------------------------------

    private void rebalanced(String type, Collection<TopicPartition> partitions) {
        List<Integer> ks = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            if (tp.topic().equals(topic)) {
                ks.add(tp.partition());
            }
        }
        Collections.sort(ks);
        rebalanceLog.add(Json.obj("type", type, "keys", new ArrayList<Object>(ks)));
    }

    private void complete(String type, String f, Object value, Object error) {
        Map<String, Object> extra = null;
        if (!rebalanceLog.isEmpty()) {
            extra = Json.obj("rebalance_log", rebalanceLog);
            rebalanceLog = new ArrayList<>();
        }
        rec.record(type, f, value, error, extra);
    }

    // --- ops ------------------------------------------------------------------------------

    @SuppressWarnings("unchecked")
    private void perform(String f, Object value) throws Exit {
        rebalanceLog = new ArrayList<>();
        rec.invoke(f, value);
        if (f.equals("crash")) {
            complete("info", f, value, Json.obj("code", "crash", "message", "deliberate crash"));
            throw new Exit(EXIT_CRASH, "crash");
        }
        if (f.equals("assign") || f.equals("subscribe")) {
            changeConsumer(f, (List<Object>) value);
        } else if (txn) {
            transaction(f, (List<Object>) value);
        } else {
            plain(f, (List<Object>) value);
        }
    }

    private void changeConsumer(String f, List<Object> ks) throws Exit {
        try {
            if (f.equals("assign")) {
                // The Java client's assign() keeps the position of partitions that stay
                // assigned; new ones start at the group's committed offset (or the beginning).
                List<TopicPartition> tps = new ArrayList<>();
                Set<Integer> now = new HashSet<>();
                for (Object k : ks) {
                    int key = ((Number) k).intValue();
                    now.add(key);
                    tps.add(new TopicPartition(topic, key));
                }
                consumer.assign(tps);
                assigned.clear();
                assigned.addAll(now);
            } else if (!subscribed) {
                // Every key lives in the one topic: subscribing to it is what "subscribe to
                // these keys" means, and re-subscribing to the same topic changes nothing.
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                        rebalanced("assigned", parts);
                    }

                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                        rebalanced("revoked", parts);
                    }

                    @Override
                    public void onPartitionsLost(Collection<TopicPartition> parts) {
                        rebalanced("lost", parts);
                    }
                });
                subscribed = true;
            }
        } catch (KafkaException | IllegalStateException | IllegalArgumentException e) {
            // Possibly half applied: outcome unknown.
            complete("info", f, ks, Clients.errorInfo(e, f, null));
            throw new Exit(EXIT_UNCERTAIN, f + " failed");
        }
        complete("ok", f, ks);
    }

    private void complete(String type, String f, Object value) {
        complete(type, f, value, null);
    }

    /** Execute micro-ops in order, writing each completed form into {@code done} as it runs,
     * so an op that fails half-way still records what it did (Jepsen's mutable value). */
    @SuppressWarnings("unchecked")
    private void runMops(List<Object> mops, List<Object> done, Map<Integer, Long> first)
            throws ClientError {
        for (int i = 0; i < mops.size(); i++) {
            if (i > 0) {
                txnDelay.pause();
            }
            List<Object> mop = (List<Object>) mops.get(i);
            if (mop.get(0).equals("send")) {
                int k = ((Number) mop.get(1)).intValue();
                long v = ((Number) mop.get(2)).longValue();
                Long offset = send(k, v);
                done.set(i, Json.list("send", k, Json.list(offset, v)));
            } else {
                Map<String, Object> result = poll();
                done.set(i, Json.list("poll", result));
                for (Map.Entry<String, Object> e : result.entrySet()) {
                    List<Object> pairs = (List<Object>) e.getValue();
                    long firstOffset = ((Number) ((List<Object>) pairs.get(0)).get(0)).longValue();
                    first.putIfAbsent(Integer.parseInt(e.getKey()), firstOffset);
                }
            }
        }
    }

    private static List<Object> copyOf(List<Object> mops) {
        List<Object> done = new ArrayList<>();
        for (Object m : mops) {
            done.add(new ArrayList<>((List<?>) m));
        }
        return done;
    }

    /** The highest offset each key's polls returned in this op: what it consumed. */
    @SuppressWarnings("unchecked")
    static Map<Integer, Long> lastOffsets(List<Object> done) {
        Map<Integer, Long> last = new TreeMap<>();
        for (Object o : done) {
            List<Object> mop = (List<Object>) o;
            if (!mop.get(0).equals("poll") || mop.size() != 2) {
                continue;
            }
            for (Map.Entry<String, Object> e : ((Map<String, Object>) mop.get(1)).entrySet()) {
                List<Object> pairs = (List<Object>) e.getValue();
                if (pairs.isEmpty()) {
                    continue;
                }
                long off = ((Number) ((List<Object>) pairs.get(pairs.size() - 1)).get(0))
                        .longValue();
                last.merge(Integer.parseInt(e.getKey()), off, Math::max);
            }
        }
        return last;
    }

    private Map<TopicPartition, OffsetAndMetadata> positions(Map<Integer, Long> last) {
        Map<TopicPartition, OffsetAndMetadata> out = new LinkedHashMap<>();
        for (Map.Entry<Integer, Long> e : last.entrySet()) {
            out.put(new TopicPartition(topic, e.getKey()), new OffsetAndMetadata(e.getValue() + 1));
        }
        return out;
    }

    /** Without transactions: sends are acknowledged one by one, polls just read. */
    private void plain(String f, List<Object> mops) throws Exit {
        List<Object> done = copyOf(mops);
        Map<Integer, Long> first = new TreeMap<>();
        try {
            runMops(mops, done, first);
        } catch (ClientError e) {
            // A failed send may still have been written (timeouts); earlier sends were.
            complete("info", f, done, e.info);
            throw new Exit(EXIT_UNCERTAIN, "op outcome unknown");
        }
        if (subscribed && !first.isEmpty()) {
            // Jepsen commits a subscribed consumer's position after each poll outside
            // transactions, so the group resumes there after a rebalance.
            try {
                consumer.commitSync(positions(lastOffsets(done)), Duration.ofMillis(opTimeoutMs));
            } catch (KafkaException | IllegalStateException e) {
                // The reads happened whatever the commit did; Jepsen records such an op ok.
                Clients.warn("process " + process + ": offset commit after poll failed: " + e);
            }
        }
        complete("ok", f, done);
    }

    /** One op = one Kafka transaction: begin, micro-ops, offsets, commit (or abort). */
    private void transaction(String f, List<Object> mops) throws Exit {
        List<Object> done = copyOf(mops);
        Map<Integer, Long> first = new TreeMap<>();
        try {
            producer.beginTransaction();
        } catch (KafkaException | IllegalStateException e) {
            complete("fail", f, done, Clients.errorInfo(e, "begin", producer));
            throw new Exit(EXIT_UNUSABLE, "begin_transaction failed");
        }
        try {
            runMops(mops, done, first);
            Map<Integer, Long> last = lastOffsets(done);
            if (!last.isEmpty()) {
                Map<TopicPartition, OffsetAndMetadata> positions = positions(last);
                txnDelay.pause();
                calls.run("send-offsets", () -> producer.sendOffsetsToTransaction(positions,
                        consumer.groupMetadata()));
            }
        } catch (ClientError e) {
            // The commit was never requested, so the transaction cannot have committed.
            abort(f, done, first, e.info, false);
            return;
        }
        if (abortP > 0 && rng.nextDouble() < abortP) {
            abort(f, done, first, Json.obj("code", "deliberate-abort",
                    "message", "aborted on purpose"), false);
            return;
        }
        txnDelay.pause();
        try {
            calls.run("commit", producer::commitTransaction);
        } catch (ClientError e) {
            if (Clients.flag(e.info, "abortable") && !Clients.flag(e.info, "fatal")) {
                abort(f, done, first, e.info, true);
                return;
            }
            // Fatal (e.g. fenced) or still timing out: the commit may or may not have landed.
            complete("info", f, done, e.info);
            throw new Exit(EXIT_UNCERTAIN, "commit outcome unknown");
        }
        complete("ok", f, done);
    }

    /** Abort, record the outcome, and rewind the consumer to where the op started. */
    private void abort(String f, List<Object> done, Map<Integer, Long> first,
            Map<String, Object> reason, boolean committing) throws Exit {
        try {
            calls.run("abort", producer::abortTransaction);
        } catch (ClientError e) {
            Map<String, Object> info = new LinkedHashMap<>(reason);
            info.put("abort_error", e.info);
            if (committing) {
                // A commit was requested and the abort did not go through: unknown.
                complete("info", f, done, info);
                throw new Exit(EXIT_UNCERTAIN, "abort after commit failed");
            }
            // No commit was ever requested: the coordinator can only abort it (on timeout or
            // when fenced), so the failure is definite; but this producer is unusable.
            complete("fail", f, done, info);
            throw new Exit(EXIT_UNUSABLE, "abort failed");
        }
        complete("fail", f, done, reason);
        if (Clients.flag(reason, "fatal")) {
            throw new Exit(EXIT_UNUSABLE, "fatal client error");
        }
        rewind(first);
    }

    /** After an abort the polled records were not consumed: seek back to the first offset
     * this op read from each partition, so the next poll re-reads them. */
    private void rewind(Map<Integer, Long> first) throws Exit {
        if (first.isEmpty()) {
            return;
        }
        try {
            Set<TopicPartition> current = consumer.assignment();
            for (Map.Entry<Integer, Long> e : first.entrySet()) {
                TopicPartition tp = new TopicPartition(topic, e.getKey());
                if (current.contains(tp)) {
                    consumer.seek(tp, e.getValue());
                }
            }
        } catch (KafkaException | IllegalStateException e) {
            Clients.warn("process " + process + ": rewind failed: " + e);
            throw new Exit(EXIT_REWIND, "rewind failed");
        }
    }

    // --- the loop -------------------------------------------------------------------------

    /** Rate limiting, not synchronisation: wait for the op's slot (or a stop request). */
    private void pace(long dueNs) {
        long delay = dueNs - System.nanoTime();
        if (delay > 0) {
            try {
                wake.await(delay, TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    int run() {
        Signals.on("TERM", () -> {
            stopping = "sigterm";
            wake.countDown();
        });
        Signals.on("INT", () -> {
            stopping = "sigint";
            wake.countDown();
        });
        int code = EXIT_OK;
        String reason = "time limit";
        try {
            makeClients();
            long interval = rate > 0 ? (long) (1e9 / rate) : 0;
            long due = System.nanoTime();
            boolean first = true;
            while (true) {
                if (stopping != null) {
                    reason = stopping;
                    break;
                }
                if (Clients.parentPid() != parent) {
                    throw new Exit(EXIT_ORPHANED, "orphaned");
                }
                if (System.nanoTime() >= endNs) {
                    break;
                }
                pace(due);
                if (stopping != null || System.nanoTime() >= endNs) {
                    continue;
                }
                due = Math.max(due + interval, System.nanoTime() - interval);
                Object[] op = nextOp(first);
                first = false;
                perform((String) op[0], op[1]);
            }
        } catch (Exit stop) {
            code = stop.code;
            reason = stop.reason;
        }
        if (code != EXIT_OK) {
            Clients.warn("process " + process + ": exiting with " + code + ": " + reason);
        }
        if (code != EXIT_ORPHANED) {
            close();
        }
        rec.close();
        return code;
    }

    public static void main(String[] args) {
        // A client stuck inside a client call cannot explain itself; SIGUSR1 (sent by the
        // supervisor to a client still running after the time limit) dumps every thread's
        // stack into the client's log. First, so SIGUSR1 never kills a client.
        Signals.on("USR1", Signals::dumpStacks);
        QueueClient client;
        try {
            client = new QueueClient(Config.fromArgs(args));
        } catch (Exception e) {
            System.err.println("queue client: bad configuration: " + e.getMessage());
            System.exit(EXIT_BAD_CONFIG);
            return;
        }
        int code = client.run();
        System.err.flush();
        System.exit(code);
    }
}
