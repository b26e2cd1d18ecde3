package kafkaharness;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One process's history file, history format v1 (docs/history-format.md), as the Python
 * {@code history.Recorder} writes it: created exclusively, a header line, then one op per line,
 * each handed to the kernel with one {@code write(2)} on an {@code O_APPEND} descriptor and no
 * user-space buffer, so a crash can tear at most the line being written.
 *
 * <p>{@code time} is {@link System#nanoTime()}, which HotSpot on Linux reads from
 * {@code CLOCK_MONOTONIC}: the clock of Python's {@code time.monotonic_ns()}, so ops of Java and
 * Python processes merge in one order. One writer: the thread that runs the client's loop
 * (rebalance callbacks run on that thread too, inside {@code poll}).
 */
final class History implements AutoCloseable {
    static final int FORMAT_VERSION = 1;
    private static final DateTimeFormatter WALL =
            DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'").withZone(ZoneOffset.UTC);

    private final FileChannel channel;
    private final Object process;
    private long index;

    /** A history that records nothing: only to measure what recording costs (bench/). */
    static History disabled(Object process) {
        return new History(process);
    }

    private History(Object process) {
        this.process = process;
        this.channel = null;
    }

    History(String path, Object process, Map<String, Object> meta) throws IOException {
        this.process = process;
        Map<String, Object> clock = Json.obj(
                "time", "monotonic_ns",
                "boot_id", readTrimmed("/proc/sys/kernel/random/boot_id"),
                "host", hostname(),
                "pid", ProcessHandle.current().pid(),
                "started_wall", wallNow());
        Map<String, Object> header = Json.obj(
                "history_format", FORMAT_VERSION,
                "kind", "process",
                "process", process,
                "meta", meta,
                "clock", clock);
        // Encoded before the file exists, so a meta that is not JSON leaves nothing behind.
        byte[] line = (Json.encode(header) + "\n").getBytes(StandardCharsets.US_ASCII);
        channel = FileChannel.open(Paths.get(path), StandardOpenOption.CREATE_NEW,
                StandardOpenOption.WRITE, StandardOpenOption.APPEND);
        write(line);
    }

    static String wallNow() {
        return WALL.format(Instant.now());
    }

    private static String readTrimmed(String path) {
        try {
            String text = Files.readString(Path.of(path)).trim();
            return text.isEmpty() ? null : text;
        } catch (IOException e) {
            return null;
        }
    }

    private static String hostname() {
        String name = readTrimmed("/proc/sys/kernel/hostname");
        return name != null ? name : "localhost";
    }

    private void write(byte[] data) throws IOException {
        if (channel == null) {
            return;
        }
        ByteBuffer buf = ByteBuffer.wrap(data);
        while (buf.hasRemaining()) {
            channel.write(buf);
        }
    }

    /** Write one op; {@code error} must be null on invoke and ok, and given on fail. */
    Map<String, Object> record(String type, String f, Object value, Object error,
            Map<String, Object> extra) {
        if (error != null && (type.equals("invoke") || type.equals("ok"))) {
            throw new IllegalArgumentException("an " + type + " op cannot carry an error");
        }
        if (error == null && type.equals("fail")) {
            throw new IllegalArgumentException("a fail op needs an error");
        }
        Map<String, Object> op = new LinkedHashMap<>();
        op.put("index", index);
        op.put("time", System.nanoTime());
        op.put("wall", wallNow());
        op.put("process", process);
        op.put("type", type);
        op.put("f", f);
        op.put("value", value);
        if (error != null) {
            op.put("error", error);
        }
        if (extra != null) {
            for (Map.Entry<String, Object> e : extra.entrySet()) {
                if (op.containsKey(e.getKey())) {
                    throw new IllegalArgumentException("extra key " + e.getKey() + " is fixed");
                }
                op.put(e.getKey(), e.getValue());
            }
        }
        byte[] line = (Json.encode(op) + "\n").getBytes(StandardCharsets.US_ASCII);
        try {
            write(line);
        } catch (IOException e) {
            throw new IllegalStateException("history write failed: " + e.getMessage(), e);
        }
        index++;
        return op;
    }

    Map<String, Object> invoke(String f, Object value) {
        return record("invoke", f, value, null, null);
    }

    Map<String, Object> ok(String f, Object value) {
        return record("ok", f, value, null, null);
    }

    Map<String, Object> fail(String f, Object value, Object error) {
        return record("fail", f, value, error, null);
    }

    Map<String, Object> info(String f, Object value, Object error) {
        return record("info", f, value, error, null);
    }

    @Override
    public void close() {
        if (channel == null) {
            return;
        }
        try {
            channel.close();
        } catch (IOException e) {
            // Every op is in the kernel already; nothing is lost by a failed close.
        }
    }
}
