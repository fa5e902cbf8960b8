package io.nvdepot;

import java.lang.ref.Cleaner;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * An open nvdepot store: {@code try (Store s = Store.open(path, options)) {...}}.
 * Thread-safe. Its data calls act on the default namespace; {@link #namespace}
 * gives others.
 */
public final class Store extends Namespace implements AutoCloseable {
    private static final Cleaner CLEANER = Cleaner.create();

    /** Frees the native handle once the Store is unreachable. */
    private static final class Free implements Runnable {
        private final long handle;

        Free(long handle) {
            this.handle = handle;
        }

        @Override
        public void run() {
            Native.free(handle);
        }
    }

    private final long nativeHandle;
    private final String path;

    private Store(long handle, String path, int defaultId) {
        super(null, defaultId, "default");
        this.nativeHandle = handle;
        this.path = path;
        CLEANER.register(this, new Free(handle));
    }

    /**
     * Opens (with the option {@code create_bytes}, creates) the store at {@code path}:
     * a directory of data files, a data file or a block device.
     */
    public static Store open(String path, Options options) {
        Options o = options == null ? new Options() : options;
        long h = Native.open(path, o.names(), o.texts());
        int defaultId;
        try {
            defaultId = Native.namespace(h, "default", false);
        } catch (RuntimeException e) {
            Native.free(h);
            throw e;
        }
        return new Store(h, path, defaultId);
    }

    long handle() {
        return nativeHandle;
    }

    /** The default namespace (this store's own data calls act on it). */
    public Namespace defaultNamespace() {
        return namespace("default", false);
    }

    /** Namespace {@code name}; created if absent and {@code create}. */
    public Namespace namespace(String name, boolean create) {
        return new Namespace(this, Native.namespace(nativeHandle, name, create), name);
    }

    public void dropNamespace(String name) {
        Native.dropNamespace(nativeHandle, name);
    }

    /** Every namespace's name and key count. */
    public Map<String, Long> namespaces() {
        Map<String, Long> m = new LinkedHashMap<>();
        for (String name : Native.namespaceNames(nativeHandle)) {
            m.put(name, namespace(name, false).count());
        }
        return m;
    }

    /** A walk over every namespace from {@code cursor}. Close it. */
    public Cursor cursorAll(long cursor) {
        return new Cursor(this, Native.cursorOpen(nativeHandle, -1, cursor));
    }

    /** Counters: keys, namespaces, capacity_bytes, live_bytes, gets, puts, ... */
    public Map<String, Long> stats() {
        String[] names = {
            "keys", "namespaces", "capacity_bytes", "live_bytes", "gets", "puts", "deletes",
            "user_bytes_written", "device_bytes_written", "gc_bytes_written", "flushes",
            "index_memory_bytes", "value_cache_hits", "value_cache_misses"
        };
        long[] v = Native.stats(nativeHandle);
        Map<String, Long> m = new LinkedHashMap<>();
        for (int i = 0; i < names.length; i++) {
            m.put(names[i], v[i]);
        }
        return m;
    }

    /** Makes every write acknowledged so far durable (with sync off). */
    public void flush() {
        Native.flush(nativeHandle);
    }

    public String path() {
        return path;
    }

    /**
     * Writes everything out, saves the index checkpoint and closes; later calls throw
     * CLOSED. Throws BUSY, the store still open, while cursors of it are open.
     */
    @Override
    public void close() {
        Native.close(nativeHandle);
    }

    /** Removes the store at {@code path} (not open); other files are left alone. */
    public static void destroy(String path) {
        Native.destroy(path);
    }
}
