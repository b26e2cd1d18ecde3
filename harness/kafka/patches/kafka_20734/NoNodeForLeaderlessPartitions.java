package kafkaharness.patches;

import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.security.ProtectionDomain;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassVisitor;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.Label;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;

/**
 * A Java agent that gives a broker KAFKA-20734's behaviour: a partition the metadata knows
 * whose leader has no endpoint (leader -1) answers {@code Node.noNode()} from
 * {@code KRaftMetadataCache.getPartitionLeaderEndpoint} instead of nothing, so a transaction
 * coordinator retries its markers (the answer for "leader not known yet") rather than skipping
 * the partition as deleted (finding F9).
 *
 * <p>The cache's own method is kept under another name and the agent adds one in its place
 * that calls it, and only when that answers empty for a partition the cache contains, answers
 * {@code Optional.of(Node.noNode())}. Every other answer is the cache's own. The broker logs
 * one line when the class is patched, so a run shows that the patch took.
 */
public final class NoNodeForLeaderlessPartitions {
    static final String CACHE = "org/apache/kafka/metadata/KRaftMetadataCache";
    static final String METHOD = "getPartitionLeaderEndpoint";
    static final String DESC =
        "(Ljava/lang/String;ILorg/apache/kafka/common/network/ListenerName;)Ljava/util/Optional;";
    static final String ORIGINAL = "kafkaHarness$cachedLeaderEndpoint";

    private NoNodeForLeaderlessPartitions() {}

    public static void premain(String args, Instrumentation inst) {
        inst.addTransformer(new ClassFileTransformer() {
            @Override
            public byte[] transform(ClassLoader loader, String name, Class<?> redefined,
                                    ProtectionDomain domain, byte[] bytes) {
                if (!CACHE.equals(name)) {
                    return null;
                }
                byte[] out = patch(bytes);
                System.err.println("kafka-harness broker patch kafka-20734: " + name
                    + (out == null ? " NOT patched (method not found)" : " patched"));
                return out;
            }
        });
    }

    static byte[] patch(byte[] bytes) {
        ClassReader reader = new ClassReader(bytes);
        ClassWriter writer = new ClassWriter(reader, ClassWriter.COMPUTE_MAXS | ClassWriter.COMPUTE_FRAMES) {
            @Override
            protected String getCommonSuperClass(String a, String b) {
                return "java/lang/Object"; // only Optional locals meet; no class loading here
            }
        };
        boolean[] found = {false};
        reader.accept(new ClassVisitor(Opcodes.ASM9, writer) {
            @Override
            public MethodVisitor visitMethod(int access, String name, String desc, String sig, String[] ex) {
                if (METHOD.equals(name) && DESC.equals(desc)) {
                    found[0] = true;
                    return super.visitMethod(access, ORIGINAL, desc, sig, ex);
                }
                return super.visitMethod(access, name, desc, sig, ex);
            }

            @Override
            public void visitEnd() {
                if (found[0]) {
                    replacement(cv.visitMethod(Opcodes.ACC_PUBLIC, METHOD, DESC, null, null));
                }
                super.visitEnd();
            }
        }, 0);
        return found[0] ? writer.toByteArray() : null;
    }

    /** {@code found = original(t, p, l); if found is empty and contains(new TopicPartition(t, p))
     * return Optional.of(Node.noNode()); return found}. */
    static void replacement(MethodVisitor mv) {
        mv.visitCode();
        mv.visitVarInsn(Opcodes.ALOAD, 0);
        mv.visitVarInsn(Opcodes.ALOAD, 1);
        mv.visitVarInsn(Opcodes.ILOAD, 2);
        mv.visitVarInsn(Opcodes.ALOAD, 3);
        mv.visitMethodInsn(Opcodes.INVOKEVIRTUAL, CACHE, ORIGINAL, DESC, false);
        mv.visitVarInsn(Opcodes.ASTORE, 4);
        Label asFound = new Label();
        mv.visitVarInsn(Opcodes.ALOAD, 4);
        mv.visitMethodInsn(Opcodes.INVOKEVIRTUAL, "java/util/Optional", "isPresent", "()Z", false);
        mv.visitJumpInsn(Opcodes.IFNE, asFound);
        mv.visitVarInsn(Opcodes.ALOAD, 0);
        mv.visitTypeInsn(Opcodes.NEW, "org/apache/kafka/common/TopicPartition");
        mv.visitInsn(Opcodes.DUP);
        mv.visitVarInsn(Opcodes.ALOAD, 1);
        mv.visitVarInsn(Opcodes.ILOAD, 2);
        mv.visitMethodInsn(Opcodes.INVOKESPECIAL, "org/apache/kafka/common/TopicPartition", "<init>",
            "(Ljava/lang/String;I)V", false);
        mv.visitMethodInsn(Opcodes.INVOKEVIRTUAL, CACHE, "contains",
            "(Lorg/apache/kafka/common/TopicPartition;)Z", false);
        mv.visitJumpInsn(Opcodes.IFEQ, asFound);
        mv.visitMethodInsn(Opcodes.INVOKESTATIC, "org/apache/kafka/common/Node", "noNode",
            "()Lorg/apache/kafka/common/Node;", false);
        mv.visitMethodInsn(Opcodes.INVOKESTATIC, "java/util/Optional", "of",
            "(Ljava/lang/Object;)Ljava/util/Optional;", false);
        mv.visitInsn(Opcodes.ARETURN);
        mv.visitLabel(asFound);
        mv.visitVarInsn(Opcodes.ALOAD, 4);
        mv.visitInsn(Opcodes.ARETURN);
        mv.visitMaxs(0, 0);
        mv.visitEnd();
    }
}
