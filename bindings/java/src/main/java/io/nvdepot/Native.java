package io.nvdepot;

/**
 * The native half of every call (bindings/java/native/src/lib.rs). Handles are
 * {@code long}s the native side owns; namespaces are {@code int} ids.
 */
final class Native {
    private Native() {}

    /** Where the jar carries the library for this platform. */
    private static final String BUNDLED = "/io/nvdepot/native/linux-x86_64/libnvdepot_jni.so";

    static {
        // -Dnvdepot.library=/path/to/libnvdepot_jni.so, else the system's
        // library path (-Djava.library.path, LD_LIBRARY_PATH), else the
        // copy inside the jar (extracted to a temporary file).
        String explicit = System.getProperty("nvdepot.library");
        if (explicit != null && !explicit.isEmpty()) {
            System.load(explicit);
        } else {
            try {
                System.loadLibrary("nvdepot_jni");
            } catch (UnsatisfiedLinkError notOnPath) {
                loadBundled(notOnPath);
            }
        }
    }

    private static void loadBundled(UnsatisfiedLinkError notOnPath) {
        try (java.io.InputStream in = Native.class.getResourceAsStream(BUNDLED)) {
            if (in == null) {
                throw notOnPath;
            }
            java.nio.file.Path file = java.nio.file.Files.createTempFile("libnvdepot_jni", ".so");
            file.toFile().deleteOnExit();
            java.nio.file.Files.copy(in, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            System.load(file.toString());
        } catch (java.io.IOException e) {
            UnsatisfiedLinkError err = new UnsatisfiedLinkError(
                    "cannot extract the bundled libnvdepot_jni.so: " + e.getMessage());
            err.addSuppressed(notOnPath);
            throw err;
        }
    }

    static native long open(String path, String[] optionNames, String[] optionValues);

    static native void close(long store);

    static native void free(long store);

    static native void destroy(String path);

    static native void flush(long store);

    static native int namespace(long store, String name, boolean create);

    static native void dropNamespace(long store, String name);

    static native String[] namespaceNames(long store);

    static native long count(long store, int ns);

    static native void clear(long store, int ns);

    static native byte[] get(long store, int ns, byte[] key, long[] version);

    static native long put(long store, int ns, byte[] key, byte[] value, int mode, long version);

    static native int delete(long store, int ns, byte[] key, boolean hasVersion, long version);

    static native byte[] getRange(long store, int ns, byte[] key, long offset, int length);

    static native long putRange(long store, int ns, byte[] key, long offset, byte[] data);

    static native byte[][] getMany(long store, int ns, byte[][] keys);

    static native void writeBatch(long store, int ns, byte[][] keys, byte[][] values);

    static native long cursorOpen(long store, int ns, long at);

    static native boolean cursorNext(long cursor);

    static native byte[] cursorBytes(long cursor, int which);

    static native int cursorNamespace(long cursor);

    static native long[] cursorResumeAt(long cursor);

    static native void cursorFree(long cursor);

    static native long[] stats(long store);
}
