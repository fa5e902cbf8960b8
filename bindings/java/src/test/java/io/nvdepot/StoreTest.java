package io.nvdepot;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class StoreTest {
    @TempDir Path dir;

    static byte[] b(String s) {
        return s.getBytes(UTF_8);
    }

    Store create() {
        return Store.open(dir.resolve("store").toString(),
                new Options().set("create_bytes", "64M").set("segment_bytes", "1M"));
    }

    @Test
    void putGetDeleteAndVersions() {
        try (Store s = create()) {
            long v1 = s.put(b("k"), b("one"));
            assertArrayEquals(b("one"), s.get(b("k")));
            assertNull(s.get(b("absent")));
            assertTrue(s.exists(b("k")));
            assertFalse(s.putIfAbsent(b("k"), b("x")));
            assertFalse(s.putIfPresent(b("new"), b("x")));
            assertTrue(s.putIfAbsent(b("new"), b("x")));
            Versioned got = s.getVersioned(b("k"));
            assertEquals(v1, got.version());
            long v2 = s.putIfVersion(b("k"), b("two"), v1);
            assertTrue(v2 >= 0 && v2 != v1);
            assertEquals(-1, s.putIfVersion(b("k"), b("three"), v1));
            assertFalse(s.deleteIfVersion(b("k"), v1));
            assertTrue(s.deleteIfVersion(b("k"), v2));
            assertFalse(s.delete(b("k")));
            s.put(new byte[0], new byte[0]); // the empty key and value
            assertArrayEquals(new byte[0], s.get(new byte[0]));
        }
    }

    @Test
    void rangesBatchesAndMany() {
        try (Store s = create()) {
            s.put(b("r"), b("0123456789"));
            assertEquals(10, s.putRange(b("r"), 3, b("abc")));
            assertArrayEquals(b("2abc6"), s.getRange(b("r"), 2, 5));
            assertArrayEquals(b("89"), s.getRange(b("r"), 8, 100));
            assertNull(s.getRange(b("none"), 0, 4));
            assertEquals(6, s.putRange(b("fresh"), 4, b("ab")));
            assertArrayEquals(new byte[] {0, 0, 0, 0, 'a', 'b'}, s.get(b("fresh")));
            s.write(new WriteBatch().put(b("a"), b("1")).put(b("b"), b("2")).put(b("c"), b("3")).delete(b("b")));
            byte[][] many = s.getMany(List.of(b("a"), b("b"), b("c")));
            assertArrayEquals(b("1"), many[0]);
            assertNull(many[1]);
            assertArrayEquals(b("3"), many[2]);
        }
    }

    @Test
    void namespacesAndWalks() {
        try (Store s = create()) {
            Namespace pool = s.namespace("pool", true);
            pool.put(b("k"), b("in pool"));
            s.put(b("k"), b("in default"));
            assertArrayEquals(b("in pool"), s.namespace("pool", false).get(b("k")));
            assertArrayEquals(b("in default"), s.defaultNamespace().get(b("k")));
            assertEquals(1L, s.namespaces().get("pool"));
            NvdepotException e = assertThrows(NvdepotException.class, () -> s.namespace("nope", false));
            assertEquals(NvdepotException.NO_SUCH_NAMESPACE, e.code());
            for (int i = 0; i < 3000; i++) {
                pool.put(b("key" + i), b("v" + i));
            }
            Set<String> seen = new HashSet<>();
            Long resume;
            try (Cursor c = pool.cursor(0)) {
                for (int i = 0; i < 1000; i++) {
                    Cursor.Entry entry = c.next();
                    seen.add(new String(entry.key(), UTF_8));
                }
                resume = c.resumeAt();
            }
            assertNotNull(resume);
            try (Cursor c = pool.cursor(resume)) {
                while (c.hasNext()) {
                    seen.add(new String(c.next().key(), UTF_8));
                }
                assertNull(c.resumeAt());
            }
            assertEquals(3001, seen.size());
            int all = 0;
            try (Cursor c = s.cursorAll(0)) {
                while (c.hasNext()) {
                    c.next();
                    all++;
                }
            }
            assertEquals(3002, all);
            pool.clear();
            assertEquals(0, pool.count());
            s.dropNamespace("pool");
            e = assertThrows(NvdepotException.class, () -> pool.put(b("k"), b("v")));
            assertEquals(NvdepotException.NO_SUCH_NAMESPACE, e.code());
        }
    }

    @Test
    void errorsAreExceptionsWithCodes() throws Exception {
        String path = dir.resolve("store").toString();
        NvdepotException e = assertThrows(NvdepotException.class, () -> Store.open(path, null));
        assertEquals(NvdepotException.NOT_A_STORE, e.code());
        assertTrue(e.getMessage().contains("no nvdepot store here"), e.getMessage());
        e = assertThrows(NvdepotException.class,
                () -> Store.open(path, new Options().set("create_bytes", "64M").set("no_such_option", 1)));
        assertEquals(NvdepotException.INVALID_ARGUMENT, e.code());
        Store s = create();
        e = assertThrows(NvdepotException.class, () -> s.put(new byte[70000], b("v")));
        assertEquals(NvdepotException.KEY_TOO_LARGE, e.code());
        assertThrows(NvdepotException.class, () -> s.put(null, b("v")));
        Cursor open = s.cursor(0);
        e = assertThrows(NvdepotException.class, s::close);
        assertEquals(NvdepotException.BUSY, e.code());
        open.close();
        s.close();
        e = assertThrows(NvdepotException.class, () -> s.get(b("k")));
        assertEquals(NvdepotException.CLOSED, e.code());
        Path precious = dir.resolve("precious.txt");
        Files.writeString(precious, "keep me");
        e = assertThrows(NvdepotException.class, () -> Store.destroy(precious.toString()));
        assertEquals(NvdepotException.NOT_A_STORE, e.code());
        assertEquals("keep me", Files.readString(precious));
    }

    @Test
    void dataSurvivesReopenAndDestroyRemovesIt() {
        String path = dir.resolve("store").toString();
        try (Store s = create()) {
            s.put(b("kept"), b("across a reopen"));
            assertTrue(s.stats().get("puts") >= 1);
        }
        try (Store s = Store.open(path, null)) {
            assertArrayEquals(b("across a reopen"), s.get(b("kept")));
        }
        Store.destroy(path);
        assertFalse(Files.exists(Path.of(path)));
    }

    @Test
    void valueCacheServesHotKeysAndNeverStaleValues() {
        try (Store s = Store.open(dir.resolve("cached").toString(), new Options()
                .set("create_bytes", "64M").set("segment_bytes", "1M").set("value_cache_bytes", "1M"))) {
            s.put(b("k"), b("one"));
            assertArrayEquals(b("one"), s.get(b("k")));
            assertArrayEquals(b("one"), s.get(b("k")));
            s.put(b("k"), b("two"));
            assertArrayEquals(b("two"), s.get(b("k")));
            assertTrue(s.delete(b("k")));
            assertNull(s.get(b("k")));
            assertTrue(s.stats().get("value_cache_hits") >= 1);
        }
    }

    @Test
    void threadsShareAStore() throws Exception {
        try (Store s = create()) {
            AtomicInteger errors = new AtomicInteger();
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                final int id = t;
                Thread th = new Thread(() -> {
                    for (int i = 0; i < 200; i++) {
                        byte[] key = b("t" + id + "-" + i);
                        s.put(key, key);
                        if (!java.util.Arrays.equals(key, s.get(key))) {
                            errors.incrementAndGet();
                        }
                    }
                });
                threads.add(th);
                th.start();
            }
            for (Thread th : threads) {
                th.join();
            }
            assertEquals(0, errors.get());
            assertEquals(800, s.count());
        }
    }
}
