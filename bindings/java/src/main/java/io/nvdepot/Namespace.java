package io.nvdepot;

import java.util.Iterator;
import java.util.List;

/**
 * A namespace of a store (NVMKV's pool): byte-array keys to byte-array values.
 * Thread-safe. Writes are durable when they return (with {@code sync}, the
 * default). {@link Store#defaultNamespace()} is the one every store has.
 */
public class Namespace implements Iterable<Cursor.Entry> {
    static final int ALWAYS = 0;
    static final int IF_ABSENT = 1;
    static final int IF_PRESENT = 2;
    static final int IF_VERSION = 3;

    final Store store;
    final int id;
    private final String name;

    Namespace(Store store, int id, String name) {
        this.store = store;
        this.id = id;
        this.name = name;
    }

    /** The store (a Store is its own default namespace). */
    Store owner() {
        return store != null ? store : (Store) this;
    }

    public String name() {
        return name;
    }

    /** The value, or null if the key is absent. One device read. */
    public byte[] get(byte[] key) {
        return Native.get(owner().handle(), id, key, null);
    }

    /** The value and its version, or null. */
    public Versioned getVersioned(byte[] key) {
        long[] version = new long[1];
        byte[] value = Native.get(owner().handle(), id, key, version);
        return value == null ? null : new Versioned(value, version[0]);
    }

    /** Whether the key is present. */
    public boolean exists(byte[] key) {
        return Native.getRange(owner().handle(), id, key, 0, 0) != null;
    }

    /** Inserts or overwrites; returns the new version. */
    public long put(byte[] key, byte[] value) {
        return Native.put(owner().handle(), id, key, value, ALWAYS, 0);
    }

    /** Writes only if the key is absent; false if it was present. */
    public boolean putIfAbsent(byte[] key, byte[] value) {
        return Native.put(owner().handle(), id, key, value, IF_ABSENT, 0) >= 0;
    }

    /** Writes only if the key is present; false if it was absent. */
    public boolean putIfPresent(byte[] key, byte[] value) {
        return Native.put(owner().handle(), id, key, value, IF_PRESENT, 0) >= 0;
    }

    /**
     * Compare-and-swap: writes only if the key's version is {@code version}. Returns
     * the new version, or -1 if the condition failed (nothing written).
     */
    public long putIfVersion(byte[] key, byte[] value, long version) {
        return Native.put(owner().handle(), id, key, value, IF_VERSION, version);
    }

    /** Deletes the key; false if it was absent. */
    public boolean delete(byte[] key) {
        return Native.delete(owner().handle(), id, key, false, 0) == 0;
    }

    /** Deletes the key only if its version is {@code version}; false otherwise. */
    public boolean deleteIfVersion(byte[] key, long version) {
        return Native.delete(owner().handle(), id, key, true, version) == 0;
    }

    /**
     * Bytes {@code [offset, offset + length)} of the value (clipped to its end), or
     * null if the key is absent. Reads only what the range needs.
     */
    public byte[] getRange(byte[] key, long offset, int length) {
        return Native.getRange(owner().handle(), id, key, offset, length);
    }

    /**
     * Writes {@code data} over the value from {@code offset}, as Redis's SETRANGE:
     * an absent key is empty, a shorter value is padded with zero bytes. Returns
     * the new length. Atomic per key.
     */
    public long putRange(byte[] key, long offset, byte[] data) {
        return Native.putRange(owner().handle(), id, key, offset, data);
    }

    /** The values of several keys (null where absent). */
    public byte[][] getMany(List<byte[]> keys) {
        return Native.getMany(owner().handle(), id, keys.toArray(new byte[0][]));
    }

    /** Applies a batch atomically with one flush (all or none after a crash). */
    public void write(WriteBatch batch) {
        Native.writeBatch(owner().handle(), id, batch.keys(), batch.values());
    }

    /** Keys in the namespace. */
    public long count() {
        return Native.count(owner().handle(), id);
    }

    /** Deletes every key. */
    public void clear() {
        Native.clear(owner().handle(), id);
    }

    /** A resumable walk from {@code cursor} (0: the beginning). Close it. */
    public Cursor cursor(long cursor) {
        return new Cursor(owner(), Native.cursorOpen(owner().handle(), id, cursor));
    }

    /** A walk from the beginning (close it, or exhaust it). */
    @Override
    public Iterator<Cursor.Entry> iterator() {
        return cursor(0);
    }

    @Override
    public String toString() {
        return "Namespace(" + name + ")";
    }
}
