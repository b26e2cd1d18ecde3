package kafkaharness;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.api.RecordMetadata;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * One instance of the streams workload's Kafka Streams application (docs/history-format.md,
 * workload "streams"): a stateless map of every input to the output topic, and a running
 * count and sum per group key in a persistent store (RocksDB, with its changelog) written to
 * the aggregate topic. Each output carries the input it came from in headers, so a checker
 * can tell a value processed twice (a second output, an aggregate counted twice) from one
 * processed once, and the aggregate of a key after an input can be compared with the key's
 * inputs up to it.
 *
 * <p>What Streams lets the application see is recorded: the instance's state transitions,
 * the tasks of each thread whenever it is RUNNING again, every task the stateful processor
 * was opened and closed for. The transactions are Streams' own and invisible here; the
 * checkers judge what the final reads hold.
 *
 * <p>Exit status: 0 clean stop (SIGTERM), 2 bad configuration, 4 the instance failed (ERROR),
 * 7 parent went away, 8 a thread died refused by the cluster's authorizer (the contract's
 * not-authorized exit, reason {@code not-authorized CODE}).
 */
public final class StreamsApp {
    static final int EXIT_OK = 0;
    static final int EXIT_BAD_CONFIG = 2;
    static final int EXIT_FAILED = 4;
    static final int EXIT_ORPHANED = 7;
    static final int EXIT_NOT_AUTHORIZED = 8;
    static final String STORE = "aggregates";
    /** How often the instance records how many inputs it has processed. */
    static final long PROGRESS_NS = 2_000_000_000L;
    static final String[] GUARANTEES = {"exactly_once_v2", "at_least_once"};

    // History format v1, workload streams: the output headers (history/streams_records.py).
    static final String H_SRC_PARTITION = "src-partition";
    static final String H_SRC_OFFSET = "src-offset";
    static final String H_SRC_VALUE = "src-value";
    static final String H_INSTANCE = "instance";
    static final String H_TASK = "task";
    static final String H_THREAD = "thread";

    private final Config cfg;
    private final long instance;
    private final int groups;
    private final History rec;
    private final long parent;
    private volatile String stopping;
    /** The refusal a thread died of ({@code *_AUTHORIZATION_FAILED}, a failed login), or null. */
    private volatile String refused;
    private final CountDownLatch ended = new CountDownLatch(1);
    /** Inputs the stateless processor has seen (replays after an abort count again). */
    private final AtomicLong processed = new AtomicLong();

    StreamsApp(Config cfg) throws Exception {
        this.cfg = cfg;
        this.instance = cfg.integer("instance");
        this.groups = (int) cfg.integer("groups", 4);
        String guarantee = cfg.str("guarantee");
        if (!List.of(GUARANTEES).contains(guarantee)) {
            throw new IllegalArgumentException("guarantee must be one of "
                    + String.join(", ", GUARANTEES));
        }
        parent = Clients.parentPid();
        rec = new History(cfg.str("history_path"), instance, Json.obj(
                "workload", "streams",
                "role", "instance",
                "instance", instance,
                "slot", cfg.integer("slot"),
                "client", "java-streams",
                "config", cfg.raw));
    }

    /** The one writer of the history: Streams calls back from many threads. */
    private synchronized void record(String f, Map<String, Object> value) {
        rec.invoke(f, value);
        rec.ok(f, value);
    }

    /** The group key of an input value {@code vNNNNNN} (history/streams_records.py). */
    static String groupOf(String value, int partition, int groups) {
        return "p" + partition + "-g" + (number(value) / 7 % groups);
    }

    static long number(String value) {
        return Long.parseLong(value.substring(1));
    }

    private Headers headers(ProcessorContext<String, String> ctx, RecordMetadata meta,
            String value) {
        Headers h = new RecordHeaders();
        h.add(H_SRC_PARTITION, utf8(Integer.toString(meta.partition())));
        h.add(H_SRC_OFFSET, utf8(Long.toString(meta.offset())));
        h.add(H_SRC_VALUE, utf8(value));
        h.add(H_INSTANCE, utf8(Long.toString(instance)));
        h.add(H_TASK, utf8(ctx.taskId().toString()));
        h.add(H_THREAD, utf8(Thread.currentThread().getName()));
        return h;
    }

    /** Input value v to output "out-" + v, with the input's identity in headers. */
    final class MapProcessor implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> ctx;

        @Override
        public void init(ProcessorContext<String, String> context) {
            ctx = context;
        }

        @Override
        public void process(Record<String, String> r) {
            RecordMetadata meta = ctx.recordMetadata().orElseThrow();
            processed.incrementAndGet();
            ctx.forward(new Record<>(r.key(), "out-" + r.value(), r.timestamp(),
                    headers(ctx, meta, r.value())));
        }
    }

    /** Count and sum per group key; every update is written out as "count,sum". */
    final class AggregateProcessor implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> ctx;
        private KeyValueStore<String, String> store;

        @Override
        public void init(ProcessorContext<String, String> context) {
            ctx = context;
            store = context.getStateStore(STORE);
            record("task-open", Json.obj("task", context.taskId().toString(),
                    "thread", Thread.currentThread().getName()));
        }

        @Override
        public void process(Record<String, String> r) {
            RecordMetadata meta = ctx.recordMetadata().orElseThrow();
            String key = groupOf(r.value(), meta.partition(), groups);
            String old = store.get(key);
            long count = 0;
            long sum = 0;
            if (old != null) {
                String[] parts = old.split(",");
                count = Long.parseLong(parts[0]);
                sum = Long.parseLong(parts[1]);
            }
            String updated = (count + 1) + "," + (sum + number(r.value()));
            store.put(key, updated);
            ctx.forward(new Record<>(key, updated, r.timestamp(), headers(ctx, meta, r.value())));
        }

        @Override
        public void close() {
            record("task-close", Json.obj("task", ctx.taskId().toString(),
                    "thread", Thread.currentThread().getName()));
        }
    }

    private StreamsBuilder topology() {
        StreamsBuilder builder = new StreamsBuilder();
        builder.addStateStore(Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore(STORE), Serdes.String(), Serdes.String()));
        KStream<String, String> input = builder.stream(cfg.str("input_topic"),
                Consumed.with(Serdes.String(), Serdes.String()));
        Produced<String, String> produced = Produced.with(Serdes.String(), Serdes.String());
        input.process(MapProcessor::new).to(cfg.str("output_topic"), produced);
        input.process(AggregateProcessor::new, STORE).to(cfg.str("aggregate_topic"), produced);
        return builder;
    }

    private Properties settings() {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, cfg.str("application_id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, cfg.str("bootstrap"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, cfg.str("guarantee"));
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, (int) cfg.integer("threads"));
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, (int) cfg.integer("standby"));
        if (cfg.has("commit_interval_ms") && cfg.raw.get("commit_interval_ms") != null) {
            p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, cfg.integer("commit_interval_ms"));
        }
        p.put(StreamsConfig.STATE_DIR_CONFIG, cfg.str("state_dir"));
        p.put(StreamsConfig.CLIENT_ID_CONFIG, "streams-i" + instance);
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"),
                (int) cfg.integer("session_timeout_ms"));
        p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"),
                (int) cfg.integer("transaction_timeout_ms"));
        p.put(StreamsConfig.producerPrefix("acks"), "all");
        String protocol = cfg.strOrNull("group_protocol");
        if (protocol != null && !protocol.equals("classic")) {
            p.put("group.protocol", protocol);
        }
        p.putAll(Clients.security(cfg.objOrNull("security")));
        Map<String, Object> user = cfg.objOrNull("client_config");
        if (user != null) {
            for (Map.Entry<String, Object> e : user.entrySet()) {
                p.put(e.getKey(), String.valueOf(e.getValue()));
            }
        }
        return p;
    }

    private Map<String, Object> tasks(KafkaStreams streams) {
        List<Object> threads = new ArrayList<>();
        for (ThreadMetadata t : streams.metadataForLocalThreads()) {
            threads.add(Json.obj("thread", t.threadName(),
                    "active", taskIds(t.activeTasks()),
                    "standby", taskIds(t.standbyTasks())));
        }
        return Json.obj("threads", threads);
    }

    private static List<Object> taskIds(Set<TaskMetadata> tasks) {
        TreeSet<String> ids = new TreeSet<>();
        for (TaskMetadata t : tasks) {
            ids.add(t.taskId().toString());
        }
        return new ArrayList<>(ids);
    }

    int run() {
        Signals.on("TERM", () -> {
            stopping = "sigterm";
            ended.countDown();
        });
        Signals.on("INT", () -> {
            stopping = "sigint";
            ended.countDown();
        });
        Map<String, Object> start = Json.obj(
                "instance", instance,
                "slot", cfg.integer("slot"),
                "pid", ProcessHandle.current().pid(),
                "application_id", cfg.str("application_id"),
                "guarantee", cfg.str("guarantee"),
                "threads", cfg.integer("threads"),
                "standby", cfg.integer("standby"),
                "groups", groups,
                "input_topic", cfg.str("input_topic"),
                "output_topic", cfg.str("output_topic"),
                "aggregate_topic", cfg.str("aggregate_topic"));
        synchronized (this) {
            rec.invoke("start", start);
        }
        KafkaStreams streams;
        try {
            streams = new KafkaStreams(topology().build(), settings());
        } catch (Exception e) {
            synchronized (this) {
                rec.fail("start", start, Json.obj("code", e.getClass().getSimpleName(),
                        "message", String.valueOf(e.getMessage())));
                rec.close();
            }
            System.err.println("error: " + e.getMessage());
            return EXIT_BAD_CONFIG;
        }
        // Streams keeps its process id in the state directory (a restarted instance of the
        // slot reuses it); under exactly_once_v2 thread i's producer is
        // <application id>-<process id>-<i>: what a hijack fault takes over.
        String processId = processId();
        start.put("process_id", processId);
        List<Object> tids = new ArrayList<>();
        if (processId != null && cfg.str("guarantee").equals("exactly_once_v2")) {
            for (long i = 1; i <= cfg.integer("threads"); i++) {
                tids.add(cfg.str("application_id") + "-" + processId + "-" + i);
            }
        }
        start.put("transactional_ids", tids);
        streams.setStateListener((now, old) -> {
            record("state", Json.obj("old", old.name(), "new", now.name()));
            if (now == KafkaStreams.State.RUNNING) {
                record("tasks", tasks(streams));
            }
            if (now == KafkaStreams.State.ERROR) {
                if (stopping == null) {
                    stopping = "error";
                }
                ended.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            record("uncaught", Json.obj("code", e.getClass().getSimpleName(),
                    "message", String.valueOf(e.getMessage()),
                    "thread", Thread.currentThread().getName()));
            // Streams wraps a client's error (StreamsException, TaskMigrated...): look down
            // the whole chain for the authorizer's refusal.
            for (Throwable t = e; t != null && refused == null;
                    t = t.getCause() == t ? null : t.getCause()) {
                if (t instanceof AuthorizationException || t instanceof AuthenticationException) {
                    refused = Clients.code(t);
                }
            }
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        synchronized (this) {
            rec.ok("start", start);
        }
        long reported = 0;
        long nextReport = System.nanoTime() + PROGRESS_NS;
        try {
            while (!ended.await(500, TimeUnit.MILLISECONDS)) {
                if (Clients.parentPid() != parent) {
                    stopping = "orphaned";
                    break;
                }
                long now = processed.get();
                if (System.nanoTime() >= nextReport && now != reported) {
                    record("progress", Json.obj("processed", now));
                    reported = now;
                    nextReport = System.nanoTime() + PROGRESS_NS;
                }
            }
        } catch (InterruptedException e) {
            stopping = "interrupted";
        }
        String reason = stopping;
        streams.close(Duration.ofSeconds(20));
        int code = reason.equals("error") ? EXIT_FAILED
                : reason.equals("orphaned") ? EXIT_ORPHANED : EXIT_OK;
        if (reason.equals("error") && refused != null) {
            reason = "not-authorized " + refused;
            code = EXIT_NOT_AUTHORIZED;
        }
        synchronized (this) {
            rec.invoke("exit", Json.obj("reason", reason));
            rec.ok("exit", Json.obj("reason", reason, "code", code,
                    "state", streams.state().name(), "processed", processed.get()));
            rec.close();
        }
        return code;
    }

    private String processId() {
        Path file = Paths.get(cfg.str("state_dir"), cfg.str("application_id"),
                "kafka-streams-process-metadata");
        try {
            Matcher m = Pattern.compile("\"processId\"\\s*:\\s*\"([0-9a-f-]+)\"")
                    .matcher(Files.readString(file));
            return m.find() ? m.group(1) : null;
        } catch (IOException e) {
            return null;
        }
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    public static void main(String[] args) {
        StreamsApp app;
        try {
            app = new StreamsApp(Config.fromArgs(args));
        } catch (IllegalArgumentException e) {
            System.err.println("error: " + e.getMessage());
            System.exit(EXIT_BAD_CONFIG);
            return;
        } catch (Exception e) {
            System.err.println("error: cannot start: " + e);
            System.exit(EXIT_BAD_CONFIG);
            return;
        }
        int code = app.run();
        System.err.flush();
        System.exit(code);
    }
}
