package io.nvdepot;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

/**
 * Options for {@link Store#open}, by name, as the C API and the Python package
 * spell them: {@code create_bytes} ("1G": create a store when there is none),
 * {@code segment_bytes}, {@code grain_bytes}, {@code key_bytes_max},
 * {@code value_bytes_max}, {@code sync} ("true"/"false"), {@code flush_interval_ms},
 * {@code location_cache_entries}, {@code cache_mode}, {@code eviction},
 * {@code background_gc}, {@code salvage}, {@code buffered_io}, {@code write_behind},
 * {@code unlock_before_durable}. Checked when the store opens.
 */
public final class Options {
    private final Map<String, String> values = new LinkedHashMap<>();

    public Options set(String name, String value) {
        values.put(name, value);
        return this;
    }

    public Options set(String name, long value) {
        return set(name, Long.toString(value));
    }

    public Options set(String name, boolean value) {
        return set(name, Boolean.toString(value));
    }

    /** Every property whose name starts with {@code prefix}, the prefix removed. */
    public static Options fromProperties(Properties p, String prefix) {
        Options o = new Options();
        for (String name : p.stringPropertyNames()) {
            if (name.startsWith(prefix)) {
                o.set(name.substring(prefix.length()), p.getProperty(name));
            }
        }
        return o;
    }

    String[] names() {
        return values.keySet().toArray(new String[0]);
    }

    String[] texts() {
        return values.values().toArray(new String[0]);
    }
}
