package kafkaharness;

import java.util.Map;
import sun.misc.Signal;

/**
 * The signals a client handles itself, in one place because the only way to do it in Java is
 * {@code sun.misc.Signal} (module {@code jdk.unsupported}). Handlers run on the JVM's signal
 * dispatcher thread: they set flags, nothing more.
 *
 * <p>Never SIGUSR2: HotSpot on Linux suspends and resumes threads with it, and a JVM that gets
 * one from outside dies in that handler (SIGSEGV in {@code SR_handler}, exit 134).
 */
final class Signals {
    private Signals() {}

    /** Run {@code action} when {@code name} (TERM, INT, USR1) arrives. */
    static void on(String name, Runnable action) {
        Signal.handle(new Signal(name), s -> action.run());
    }

    /** Every thread's stack to stderr (the client's log): what SIGUSR1 asks a stuck client. */
    static void dumpStacks() {
        StringBuilder sb = new StringBuilder("thread dump (SIGUSR1):\n");
        for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
            sb.append('"').append(e.getKey().getName()).append("\" ")
                    .append(e.getKey().getState()).append('\n');
            for (StackTraceElement frame : e.getValue()) {
                sb.append("    at ").append(frame).append('\n');
            }
        }
        System.err.print(sb);
        System.err.flush();
    }
}
