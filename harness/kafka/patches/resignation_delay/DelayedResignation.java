package kafkaharness.patches;

import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.security.ProtectionDomain;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassVisitor;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;

/**
 * A Java agent that makes a broker slow to give up a group coordinator: every call of
 * {@code GroupCoordinatorService.onResignation} first sleeps the agent's argument in
 * milliseconds, then runs as released. Nothing else changes.
 *
 * <p>The broker's metadata publisher calls it right after the replica manager has made the
 * broker a follower of a {@code __consumer_offsets} partition (truncation and fetching from
 * the new leader start then, on the fetcher thread). A busy CPU or a GC pause can delay that
 * call by tens of milliseconds; the agent delays it every time, so the new leader's high
 * watermark always reaches the broker while its coordinator is still active. Whether the
 * coordinator then applies it to commits it wrote itself is the broker's own code: Kafka
 * 4.3.0 does (KAFKA-20634), 4.3.1 and later ignore it. The broker logs one line when the
 * class is patched.
 */
public final class DelayedResignation {
    static final String SERVICE = "org/apache/kafka/coordinator/group/GroupCoordinatorService";
    static final String METHOD = "onResignation";
    static final String DESC = "(ILjava/util/OptionalInt;)V";

    private DelayedResignation() {}

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
                    + (out == null ? " NOT patched (method not found)" : " patched, " + delayMs + " ms"));
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
                        // Thread.sleep(delayMs): a checked exception is no matter to bytecode.
                        super.visitLdcInsn(delayMs);
                        super.visitMethodInsn(Opcodes.INVOKESTATIC, "java/lang/Thread", "sleep", "(J)V", false);
                    }
                };
            }
        }, 0);
        return found[0] ? writer.toByteArray() : null;
    }
}
