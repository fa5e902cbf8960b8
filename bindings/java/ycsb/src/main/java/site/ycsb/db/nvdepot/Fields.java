package site.ycsb.db.nvdepot;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;

/**
 * A YCSB record's fields in one value: [name length][name][value length][value]...
 * (4-byte big-endian lengths), as YCSB's RocksDB binding lays them out. Both
 * clients use it, so both stores hold the same bytes.
 */
final class Fields {
    private Fields() {}

    static byte[] encode(Map<String, ByteIterator> values) {
        int size = 0;
        Map<byte[], byte[]> raw = new java.util.LinkedHashMap<>();
        for (Map.Entry<String, ByteIterator> e : values.entrySet()) {
            byte[] k = e.getKey().getBytes(StandardCharsets.UTF_8);
            byte[] v = e.getValue().toArray();
            raw.put(k, v);
            size += 8 + k.length + v.length;
        }
        ByteBuffer out = ByteBuffer.allocate(size);
        for (Map.Entry<byte[], byte[]> e : raw.entrySet()) {
            out.putInt(e.getKey().length).put(e.getKey()).putInt(e.getValue().length).put(e.getValue());
        }
        return out.array();
    }

    static Map<String, byte[]> decode(byte[] record) {
        Map<String, byte[]> m = new HashMap<>();
        ByteBuffer in = ByteBuffer.wrap(record);
        while (in.remaining() >= 4) {
            byte[] k = new byte[in.getInt()];
            in.get(k);
            byte[] v = new byte[in.getInt()];
            in.get(v);
            m.put(new String(k, StandardCharsets.UTF_8), v);
        }
        return m;
    }

    /** The wanted fields (all if {@code fields} is null) into YCSB's result. */
    static void select(byte[] record, Set<String> fields, Map<String, ByteIterator> result) {
        for (Map.Entry<String, byte[]> e : decode(record).entrySet()) {
            if (fields == null || fields.contains(e.getKey())) {
                result.put(e.getKey(), new ByteArrayByteIterator(e.getValue()));
            }
        }
    }

    /** {@code record} with {@code values} written over it. */
    static byte[] merge(byte[] record, Map<String, ByteIterator> values) {
        Map<String, ByteIterator> all = new HashMap<>();
        for (Map.Entry<String, byte[]> e : decode(record).entrySet()) {
            all.put(e.getKey(), new ByteArrayByteIterator(e.getValue()));
        }
        all.putAll(values);
        return encode(all);
    }
}
