package kafkaharness;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Map;
import java.util.Objects;

/**
 * The moment a nemesis armed in this processor, read from the arm file beside its history
 * ({@code workloads.eos.config.arm_path}), and the fired file that says which moment fired.
 *
 * <p>The Python processor re-reads the arm file when SIGUSR2 arrives. A JVM must not get
 * SIGUSR2: HotSpot on Linux uses it to suspend and resume threads ({@code _JAVA_SR_SIGNUM}), and
 * a stray one crashes the JVM in its handler (seen here: SIGSEGV in {@code SR_handler}, exit
 * 134). So the harness only writes the file for Java processors, and the processor looks at it
 * at every hook point: one {@code stat} there, a read only when the file changed. Each arming
 * replaces the file by a rename, so a changed (inode, mtime, size) is a new arming; an empty
 * file disarms.
 */
final class ArmFile {
    private final Path arm;
    private final Path fired;
    private Object seen;

    ArmFile(String historyPath) {
        this.arm = Paths.get(historyPath + ".arm");
        this.fired = Paths.get(historyPath + ".fired");
    }

    /**
     * What the nemesis armed, if it changed since the last look: the parsed object (at, action,
     * delay_ms), {@link #DISARMED} for an empty file, or null when nothing changed.
     */
    @SuppressWarnings("unchecked")
    Object changed() {
        BasicFileAttributes attrs;
        try {
            attrs = Files.readAttributes(arm, BasicFileAttributes.class);
        } catch (NoSuchFileException e) {
            return null;
        } catch (IOException e) {
            return null;
        }
        Object key = Objects.toString(attrs.fileKey()) + "/" + attrs.lastModifiedTime().toInstant()
                + "/" + attrs.size();
        if (key.equals(seen)) {
            return null;
        }
        seen = key;
        try {
            String text = Files.readString(arm, StandardCharsets.UTF_8).trim();
            if (text.isEmpty()) {
                return DISARMED;
            }
            return (Map<String, Object>) Json.parse(text);
        } catch (IOException | RuntimeException e) {
            Clients.warn("arm file " + arm + " unreadable: " + e);
            return null;
        }
    }

    static final Object DISARMED = new Object();

    /** The moment armed now (at, action, delay_ms), or null. */
    private Map<String, Object> armed;

    /**
     * The armed moment if it fires at {@code point} ({@code during-commit} fires at
     * {@code before-commit}): it is written to the fired file (with {@code txn}, the
     * processor's transaction or round) and disarmed; null when nothing fires here.
     */
    @SuppressWarnings("unchecked")
    Map<String, Object> fire(String point, long txn) {
        Object change = changed();
        if (change == DISARMED) {
            armed = null;
        } else if (change != null) {
            armed = (Map<String, Object>) change;
        }
        if (armed == null) {
            return null;
        }
        String at = String.valueOf(armed.get("at"));
        if (!at.equals(point) && !(at.equals("during-commit") && point.equals("before-commit"))) {
            return null;
        }
        Map<String, Object> fired = armed;
        armed = null;
        writeFired(Json.obj("at", at, "action", String.valueOf(fired.get("action")), "txn", txn,
                "pid", ProcessHandle.current().pid()));
        return fired;
    }

    /**
     * A fired kill or stop: the signal to this process, at once or ({@code during-commit})
     * {@code delay_ms} later from a timer thread, so it lands inside the commit call.
     */
    static void signal(Map<String, Object> fired) {
        String at = String.valueOf(fired.get("at"));
        String sig = "kill".equals(fired.get("action")) ? "KILL" : "STOP";
        if (at.equals("during-commit")) {
            Object delay = fired.get("delay_ms");
            long delayMs = delay instanceof Number ? ((Number) delay).longValue() : 0;
            Thread t = new Thread(() -> {
                Clients.sleepQuietly(delayMs);
                Clients.signalSelf(sig);
            }, "armed-" + at);
            t.setDaemon(true);
            t.start();
        } else {
            Clients.signalSelf(sig); // a stop returns once someone sends SIGCONT
        }
    }

    /** Say where the armed moment fired (written before acting, tmp + rename). */
    void writeFired(Map<String, Object> what) {
        Path tmp = Paths.get(fired + ".tmp");
        try {
            Files.writeString(tmp, Json.encode(what), StandardCharsets.UTF_8);
            Files.move(tmp, fired, StandardCopyOption.REPLACE_EXISTING,
                    StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            Clients.warn("could not write " + fired + ": " + e);
        }
    }
}
