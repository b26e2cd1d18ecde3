package kafkaharness;

import java.util.List;
import java.util.Map;

/**
 * A client's configuration: the JSON object the harness passes with {@code --config}, the same
 * text the Python client of the workload reads (the harness has validated it already).
 */
final class Config {
    final Map<String, Object> raw;

    private Config(Map<String, Object> raw) {
        this.raw = raw;
    }

    /** The configuration from a command line {@code --config JSON}. */
    @SuppressWarnings("unchecked")
    static Config fromArgs(String[] args) {
        for (int i = 0; i + 1 < args.length; i++) {
            if (args[i].equals("--config")) {
                Object parsed = Json.parse(args[i + 1]);
                if (!(parsed instanceof Map)) {
                    throw new IllegalArgumentException("the configuration must be a JSON object");
                }
                return new Config((Map<String, Object>) parsed);
            }
        }
        throw new IllegalArgumentException("usage: --config JSON");
    }

    private Object get(String key) {
        if (!raw.containsKey(key)) {
            throw new IllegalArgumentException("configuration key " + key + " is missing");
        }
        return raw.get(key);
    }

    private IllegalArgumentException bad(String key, String want) {
        return new IllegalArgumentException("configuration key " + key + " must be " + want
                + ", got " + Json.encode(raw.get(key)));
    }

    boolean has(String key) {
        return raw.containsKey(key) && raw.get(key) != null;
    }

    String str(String key) {
        Object v = get(key);
        if (!(v instanceof String)) {
            throw bad(key, "a string");
        }
        return (String) v;
    }

    /** A string, or null when the key is absent or null. */
    String strOrNull(String key) {
        return has(key) ? str(key) : null;
    }

    long integer(String key) {
        Object v = get(key);
        if (v instanceof Long) {
            return (Long) v;
        }
        if (v instanceof Double && (Double) v == Math.rint((Double) v)) {
            return ((Double) v).longValue();
        }
        throw bad(key, "an integer");
    }

    long integer(String key, long dflt) {
        return has(key) ? integer(key) : dflt;
    }

    double number(String key) {
        Object v = get(key);
        if (!(v instanceof Number)) {
            throw bad(key, "a number");
        }
        return ((Number) v).doubleValue();
    }

    double number(String key, double dflt) {
        return has(key) ? number(key) : dflt;
    }

    boolean bool(String key, boolean dflt) {
        if (!has(key)) {
            return dflt;
        }
        Object v = raw.get(key);
        if (!(v instanceof Boolean)) {
            throw bad(key, "true or false");
        }
        return (Boolean) v;
    }

    /** A nested object, or null when absent or null. */
    @SuppressWarnings("unchecked")
    Map<String, Object> objOrNull(String key) {
        if (!has(key)) {
            return null;
        }
        Object v = raw.get(key);
        if (!(v instanceof Map)) {
            throw bad(key, "an object");
        }
        return (Map<String, Object>) v;
    }

    @SuppressWarnings("unchecked")
    List<Object> listOrNull(String key) {
        if (!has(key)) {
            return null;
        }
        Object v = raw.get(key);
        if (!(v instanceof List)) {
            throw bad(key, "an array");
        }
        return (List<Object>) v;
    }
}
