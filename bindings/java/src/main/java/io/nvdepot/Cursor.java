package io.nvdepot;

import java.util.Iterator;
import java.util.NoSuchElementException;

/**
 * A walk over a namespace's (or every namespace's) keys and values, unordered.
 * Every key present and unmodified for the whole walk comes exactly once;
 * {@link #resumeAt()} gives a position to go on from later (keys of the page under
 * way may then come again). Holds the store open: close it.
 */
public final class Cursor implements Iterator<Cursor.Entry>, AutoCloseable {
    /** A key, its value and its namespace's id. */
    public record Entry(byte[] key, byte[] value, int namespace) {}

    private final Store store;
    private long handle;
    private Entry next;
    private boolean done;

    Cursor(Store store, long handle) {
        this.store = store;
        this.handle = handle;
    }

    @Override
    public synchronized boolean hasNext() {
        if (next == null && !done && handle != 0) {
            if (Native.cursorNext(handle)) {
                next = new Entry(
                        Native.cursorBytes(handle, 0),
                        Native.cursorBytes(handle, 1),
                        Native.cursorNamespace(handle));
            } else {
                done = true;
                close();
            }
        }
        return next != null;
    }

    @Override
    public synchronized Entry next() {
        if (!hasNext()) {
            throw new NoSuchElementException();
        }
        Entry e = next;
        next = null;
        return e;
    }

    /**
     * Where to resume from ({@link Namespace#cursor(long)}), or null when nothing is
     * left. A cursor is any 64-bit pattern, negative ones included.
     */
    public synchronized Long resumeAt() {
        if (done || handle == 0) {
            return null;
        }
        long[] r = Native.cursorResumeAt(handle);
        return r[0] == 0 ? null : r[1];
    }

    @Override
    public synchronized void close() {
        if (handle != 0) {
            Native.cursorFree(handle);
            handle = 0;
        }
    }
}
