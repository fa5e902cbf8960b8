package io.nvdepot;

import java.util.ArrayList;
import java.util.List;

/** Puts and deletes applied together by {@link Namespace#write}. */
public final class WriteBatch {
    private final List<byte[]> keys = new ArrayList<>();
    private final List<byte[]> values = new ArrayList<>();

    public WriteBatch put(byte[] key, byte[] value) {
        if (value == null) {
            throw new NullPointerException("value");
        }
        keys.add(key);
        values.add(value);
        return this;
    }

    public WriteBatch delete(byte[] key) {
        keys.add(key);
        values.add(null);
        return this;
    }

    public int size() {
        return keys.size();
    }

    byte[][] keys() {
        return keys.toArray(new byte[0][]);
    }

    byte[][] values() {
        return values.toArray(new byte[0][]);
    }
}
