package kafkaharness;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * What both Java clients (the eos processor and the queue client) do the same way with the Java
 * client: one (transactional) producer and one consumer in a group, blocking transactional calls
 * retried while the client calls the error retriable within a budget, errors as the history's
 * JSON objects, and the process-level moves the nemeses rely on (signals, stopping itself).
 * The Java twin of {@code workloads/clients.py}.
 */
final class Clients {
    private Clients() {}

    /** A client call failed for good; {@code info} is the JSON that goes in the history. */
    static final class ClientError extends Exception {
        final Map<String, Object> info;

        ClientError(Map<String, Object> info) {
            super(String.valueOf(info.get("message")));
            this.info = info;
        }
    }

    /** Leave the loop and exit with {@code code}, recording {@code reason}. */
    static final class Exit extends Exception {
        final int code;
        final String reason;

        Exit(int code, String reason) {
            super(reason);
            this.code = code;
            this.reason = reason;
        }
    }

    /** Leave the group (revocation is recorded) and drop the producer without waiting long. */
    static void close(KafkaConsumer<?, ?> consumer, KafkaProducer<?, ?> producer, String who) {
        if (consumer != null) {
            try {
                consumer.close(Duration.ofSeconds(5));
            } catch (RuntimeException e) {
                warn(who + ": consumer close failed: " + e);
            }
        }
        if (producer != null) {
            try {
                producer.close(Duration.ofSeconds(1));
            } catch (RuntimeException e) {
                warn(who + ": producer close failed: " + e);
            }
        }
    }

    static void warn(String text) {
        System.err.println(text);
        System.err.flush();
    }

    /**
     * The kafka-clients version on the classpath, e.g. {@code 4.3.1}: read from the properties
     * file every kafka-clients jar carries, because the class that exposes it moved between
     * releases (a client that must build against every version the matrix runs uses no
     * internal class for it).
     */
    static String clientVersion() {
        try (java.io.InputStream in =
                KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in == null) {
                return "unknown";
            }
            Properties props = new Properties();
            props.load(in);
            return props.getProperty("version", "unknown").trim();
        } catch (java.io.IOException e) {
            return "unknown";
        }
    }

    // --- the clients ------------------------------------------------------------------------

    /**
     * An idempotent (with {@code transactionalId}: transactional) producer of byte arrays.
     * {@code maxBlockMs} bounds every blocking producer call (transactional calls included);
     * {@link Calls} retries within its own budget.
     */
    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String clientId,
            String transactionalId, long transactionTimeoutMs, long maxBlockMs,
            Map<String, Object> extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, Long.toString(maxBlockMs));
        if (transactionalId != null) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
            p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, Long.toString(transactionTimeoutMs));
        }
        for (Map.Entry<String, Object> e : extra.entrySet()) {
            p.put(e.getKey(), String.valueOf(e.getValue()));
        }
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    /**
     * A consumer in {@code groupId} that commits nothing by itself and starts from the earliest
     * offset where the group has none. The session settings apply to the classic group protocol
     * only (KIP-848's consumer protocol takes them from the broker).
     */
    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String clientId,
            String groupId, boolean readCommitted, String groupProtocol, long sessionTimeoutMs,
            int maxPollRecords, Map<String, Object> extra) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG,
                readCommitted ? "read_committed" : "read_uncommitted");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(maxPollRecords));
        if (groupProtocol.equals("classic")) {
            c.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, Long.toString(sessionTimeoutMs));
            c.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG,
                    Long.toString(Math.max(100, Math.min(3000, sessionTimeoutMs / 3))));
            c.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG,
                    Long.toString(Math.max(60000, sessionTimeoutMs)));
        } else {
            // Named by its key, not the constant: 3.x clients before 3.7 have no constant.
            c.put("group.protocol", groupProtocol);
        }
        for (Map.Entry<String, Object> e : extra.entrySet()) {
            c.put(e.getKey(), String.valueOf(e.getValue()));
        }
        return new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    /** Generation and member id the consumer reports now, as the history records them. */
    static Map<String, Object> group(KafkaConsumer<?, ?> consumer) {
        ConsumerGroupMetadata md;
        try {
            md = consumer.groupMetadata();
        } catch (RuntimeException e) {
            return Json.obj("generation", -1, "member_id", "");
        }
        return Json.obj("generation", md.generationId(), "member_id", md.memberId());
    }

    // --- errors -----------------------------------------------------------------------------

    /** The error a client call raised, unwrapped from futures and "in an error state" wrappers. */
    static Throwable root(Throwable e) {
        Throwable t = e;
        while ((t instanceof ExecutionException
                || (t.getClass() == KafkaException.class && t.getCause() != null))
                && t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t;
    }

    /** The error's name: Kafka's protocol error name where it has one, else its class. */
    static String code(Throwable t) {
        if (t instanceof ApiException) {
            Errors err = Errors.forException(t);
            if (err != Errors.UNKNOWN_SERVER_ERROR) {
                return err.name();
            }
        }
        return t.getClass().getSimpleName();
    }

    /**
     * A JSON description of a client error: where, what, and how the client rates it. The
     * producer's own classification (its transaction manager entered an abortable or a fatal
     * error state) is read when {@code producer} is given and this client version exposes it;
     * otherwise the exception's type decides.
     */
    static Map<String, Object> errorInfo(Throwable e, String stage, KafkaProducer<?, ?> producer) {
        Throwable t = root(e);
        Boolean fatal = null;
        Boolean abortable = null;
        Object tm = producer == null ? null : transactionManager(producer);
        if (tm != null) {
            fatal = callBoolean(tm, "hasFatalError");
            abortable = callBoolean(tm, "hasAbortableError");
        }
        if (fatal == null || abortable == null) {
            fatal = t instanceof ProducerFencedException || t instanceof OutOfOrderSequenceException
                    || t instanceof AuthorizationException || t instanceof AuthenticationException
                    || t instanceof UnsupportedVersionException;
            abortable = !fatal && t instanceof KafkaException && !(t instanceof RetriableException);
        }
        String message = t.getMessage() == null ? t.toString() : t.getMessage();
        return Json.obj(
                "stage", stage,
                "code", code(t),
                "message", message,
                "fatal", fatal,
                "abortable", abortable,
                "retriable", t instanceof RetriableException);
    }

    /**
     * Java client settings for the contract's {@code security} object (null: plaintext, none):
     * TLS with PEM files, and for SASL_SSL a SCRAM login whose password is read from its file.
     */
    static Map<String, Object> security(Map<String, Object> sec) {
        Map<String, Object> out = new java.util.LinkedHashMap<>();
        if (sec == null) {
            return out;
        }
        String protocol = String.valueOf(sec.get("protocol"));
        out.put("security.protocol", protocol);
        out.put("ssl.truststore.type", "PEM");
        out.put("ssl.truststore.location", String.valueOf(sec.get("ca")));
        if (protocol.equals("SASL_SSL")) {
            String password;
            try {
                password = java.nio.file.Files.readString(
                        java.nio.file.Path.of(String.valueOf(sec.get("password_file")))).strip();
            } catch (java.io.IOException e) {
                throw new IllegalArgumentException("security.password_file: " + e.getMessage());
            }
            out.put("sasl.mechanism", String.valueOf(sec.get("mechanism")));
            out.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule"
                    + " required username=\"" + sec.get("username") + "\" password=\""
                    + password + "\";");
        } else {
            out.put("ssl.keystore.type", "PEM");
            out.put("ssl.keystore.location", String.valueOf(sec.get("keystore")));
        }
        return out;
    }

    /** Did another producer (or the coordinator) take this producer's transactional id away? */
    static boolean isFenced(Map<String, Object> info) {
        Object code = info.get("code");
        return "PRODUCER_FENCED".equals(code) || "INVALID_PRODUCER_EPOCH".equals(code)
                || "TRANSACTIONAL_ID_NOT_FOUND".equals(code)
                || "ProducerFencedException".equals(code);
    }

    static boolean flag(Map<String, Object> info, String key) {
        return Boolean.TRUE.equals(info.get(key));
    }

    // --- what the producer decided (read from its internals; null when not readable) ---------

    private static Object transactionManager(KafkaProducer<?, ?> producer) {
        try {
            Field f = KafkaProducer.class.getDeclaredField("transactionManager");
            f.setAccessible(true);
            return f.get(producer);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    private static Boolean callBoolean(Object target, String method) {
        try {
            Method m = target.getClass().getDeclaredMethod(method);
            m.setAccessible(true);
            return (Boolean) m.invoke(target);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    /**
     * Whether this producer runs transactions with KIP-890's transaction version 2, as its
     * transaction manager decided from the cluster's finalized {@code transaction.version}
     * (the 4.x client decides during {@code initTransactions}); false for a client without
     * TV2 (3.x); null when it cannot be read.
     */
    static Boolean transactionV2(KafkaProducer<?, ?> producer) {
        Object tm = transactionManager(producer);
        if (tm == null) {
            return null;
        }
        try {
            tm.getClass().getMethod("isTransactionV2Enabled");
        } catch (NoSuchMethodException e) {
            return false;
        }
        return callBoolean(tm, "isTransactionV2Enabled");
    }

    /** The cluster's finalized {@code transaction.version} as the producer last saw it. */
    static Integer finalizedTransactionVersion(KafkaProducer<?, ?> producer) {
        try {
            Field f = KafkaProducer.class.getDeclaredField("apiVersions");
            f.setAccessible(true);
            Object api = f.get(producer);
            Object info = api.getClass().getMethod("getFinalizedFeaturesInfo").invoke(api);
            Object features = info.getClass().getField("finalizedFeatures").get(info);
            Object level = ((Map<?, ?>) features).get("transaction.version");
            return level == null ? 0 : ((Number) level).intValue();
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    // --- bounded, retried calls -------------------------------------------------------------

    /**
     * Blocking client calls of one process, retried while the client calls the error
     * retriable (and neither abortable nor fatal) within {@code budgetMs}. Each attempt is
     * bounded by the producer's {@code max.block.ms}; a retried commit resumes the same
     * commit, it does not repeat it.
     */
    static final class Calls {
        final String who;
        final long budgetMs;
        final KafkaProducer<?, ?> producer;

        Calls(String who, long budgetMs, KafkaProducer<?, ?> producer) {
            this.who = who;
            this.budgetMs = budgetMs;
            this.producer = producer;
        }

        <T> T call(String stage, Supplier<T> fn) throws ClientError {
            long deadline = System.nanoTime() + budgetMs * 1_000_000L;
            while (true) {
                try {
                    return fn.get();
                } catch (KafkaException | IllegalStateException e) {
                    Map<String, Object> info = errorInfo(e, stage, producer);
                    boolean retry = flag(info, "retriable") && !flag(info, "fatal")
                            && !flag(info, "abortable");
                    if (!retry || System.nanoTime() >= deadline) {
                        throw new ClientError(info);
                    }
                    warn(who + ": " + stage + ": retriable error: " + info.get("message"));
                    sleepQuietly(100); // back-off between attempts, not synchronisation
                }
            }
        }

        void run(String stage, Runnable fn) throws ClientError {
            call(stage, () -> {
                fn.run();
                return null;
            });
        }
    }

    static void sleepQuietly(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // --- the process ------------------------------------------------------------------------

    /** The parent's pid now (it changes when the harness that started us goes away). */
    static long parentPid() {
        return ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(1L);
    }

    /**
     * Send {@code signal} (KILL or STOP) to this very process and wait until it took effect.
     * The JVM can raise only signals it has a handler for, so a {@code kill} process does it;
     * with STOP this returns once someone sends SIGCONT.
     */
    static void signalSelf(String signal) {
        long pid = ProcessHandle.current().pid();
        try {
            Process p = new ProcessBuilder("kill", "-" + signal, Long.toString(pid))
                    .redirectErrorStream(true).start();
            p.waitFor();
        } catch (Exception e) {
            warn("could not send SIG" + signal + " to myself: " + e);
            if (signal.equals("KILL")) {
                Runtime.getRuntime().halt(137);
            }
        }
    }
}
