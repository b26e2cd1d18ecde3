package kafkaharness;

import java.util.Random;

/**
 * The pause of {@code --txn-delay-ms} between the steps of a transaction (Jepsen's recipe for
 * KAFKA-17754): a fault the client inflicts on itself, not a wait for anything. Seeded, so a
 * replayed run pauses the same way.
 */
final class TxnDelay {
    private final long maxMs;
    private final Random rng;

    TxnDelay(long maxMs, String seed) {
        this.maxMs = maxMs;
        this.rng = new Random(seed.hashCode());
    }

    long maxMs() {
        return maxMs;
    }

    /** Sleep a seeded fraction of {@code maxMs} (nothing when the option is off). */
    void pause() {
        if (maxMs <= 0) {
            return;
        }
        try {
            Thread.sleep((long) (rng.nextDouble() * maxMs));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
