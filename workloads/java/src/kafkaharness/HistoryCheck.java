package kafkaharness;

import java.util.Map;

/**
 * Test-only: {@code HistoryCheck PATH JSON} parses JSON with the clients' reader and writes it
 * back through the history writer (as the header's meta and as op values), so a Python test can
 * hold the Java side to the history format: valid lines, same values, same clock.
 */
public final class HistoryCheck {
    private HistoryCheck() {}

    public static void main(String[] args) throws Exception {
        Object parsed = Json.parse(args[1]);
        try (History rec = new History(args[0], 0, Json.obj("workload", "check",
                "parsed", parsed))) {
            rec.invoke("echo", parsed);
            Map<String, Object> extra = Json.obj("rebalance_log",
                    Json.list(Json.obj("type", "assigned", "keys", Json.list(1, 2))));
            rec.record("ok", "echo", parsed, null, extra);
            rec.invoke("fails", null);
            rec.fail("fails", Json.list(), Json.obj("code", "X", "message", "why \"quoted\"\n"));
            rec.invoke("unknown", 1.5);
            rec.info("unknown", -0.25, null);
        }
    }
}
