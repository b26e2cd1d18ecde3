package kafkaharness.patches;

import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.security.ProtectionDomain;
import java.util.concurrent.atomic.AtomicLong;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassVisitor;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;

/**
 * A Java agent that makes a broker slow to give up its group coordinators once per metadata
 * update: the first call of {@code GroupCoordinatorService.onResignation} after a quiet spell
 * sleeps the agent's argument in milliseconds, then every call runs as released. Nothing else
 * changes.
 *
 * <p>The broker's metadata publisher calls it for each {@code __consumer_offsets} partition
 * the broker follows after an update, one after another, once the replica manager has made
 * the broker a follower of them (truncation and fetching from the new leaders start then, on
 * the fetcher threads). A busy CPU or a GC pause can delay those calls by tens of
 * milliseconds; the agent delays them once, as one such pause would, so the new leaders' high
 * watermarks reach the broker while its coordinators are still active. Whether a coordinator
 * then applies one to commits it wrote itself is the broker's own code: Kafka 4.3.0 does
 * (KAFKA-20634), 4.3.1 and later ignore it. The broker logs one line when the class is
 * patched.
 */
public final class DelayedResignation {
    static final String SERVICE = "org/apache/kafka/coordinator/group/GroupCoordinatorService";
    static final String METHOD = "onResignation";
    static final String DESC = "(ILjava/util/OptionalInt;)V";
    static final String SELF = "kafkaharness/patches/DelayedResignation";
    /** Calls this close after the last pause belong to the same update: no pause. */
    static final long QUIET_NS = 5_000_000_000L;
    /** When the last pause ended (System.nanoTime), or 0 before the first. */
    static final AtomicLong LAST_PAUSE = new AtomicLong(0L);

    private DelayedResignation() {}

    /** Called first thing in every patched onResignation. */
    public static void pause(long delayMs) {
        long last = LAST_PAUSE.get();
        if (last != 0L && System.nanoTime() - last < QUIET_NS) {
            return;
        }
        try {
            Thread.sleep(delayMs);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        LAST_PAUSE.set(System.nanoTime());
    }

    public static void premain(String args, Instrumentation inst) {
        long delayMs = args == null || args.isEmpty() ? 1000L : Long.parseLong(args.trim());
        inst.addTransformer(new ClassFileTransformer() {
            @Override
            public byte[] transform(ClassLoader loader, String name, Class<?> redefined,
                                    ProtectionDomain domain, byte[] bytes) {
                if (!SERVICE.equals(name)) {
                    return null;
                }
                byte[] out = patch(bytes, delayMs);
                System.err.println("kafka-harness broker patch resignation-delay: " + name
                    + (out == null ? " NOT patched (method not found)"
                       : " patched, " + delayMs + " ms once per update"));
                return out;
            }
        });
    }

    static byte[] patch(byte[] bytes, long delayMs) {
        ClassReader reader = new ClassReader(bytes);
        ClassWriter writer = new ClassWriter(reader, ClassWriter.COMPUTE_MAXS);
        boolean[] found = {false};
        reader.accept(new ClassVisitor(Opcodes.ASM9, writer) {
            @Override
            public MethodVisitor visitMethod(int access, String name, String desc, String sig, String[] ex) {
                MethodVisitor mv = super.visitMethod(access, name, desc, sig, ex);
                if (!METHOD.equals(name) || !DESC.equals(desc)) {
                    return mv;
                }
                found[0] = true;
                return new MethodVisitor(Opcodes.ASM9, mv) {
                    @Override
                    public void visitCode() {
                        super.visitCode();
                        // DelayedResignation.pause(delayMs)
                        super.visitLdcInsn(delayMs);
                        super.visitMethodInsn(Opcodes.INVOKESTATIC, SELF, "pause", "(J)V", false);
                    }
                };
            }
        }, 0);
        return found[0] ? writer.toByteArray() : null;
    }
}
