package io.nvdepot;

import java.nio.charset.StandardCharsets;

/**
 * {@code java -jar nvdepot-0.1.0.jar PATH}: a store created at PATH, a key written
 * and read back, the store destroyed. Checks that the jar loads its own native
 * library on this machine.
 */
public final class Main {
    private Main() {}

    public static void main(String[] args) {
        String path = args.length > 0 ? args[0] : "nvdepot-check";
        try (Store s = Store.open(path, new Options().set("create_bytes", "64M").set("segment_bytes", "1M"))) {
            s.put("hello".getBytes(StandardCharsets.UTF_8), "world".getBytes(StandardCharsets.UTF_8));
            System.out.println("hello = " + new String(s.get("hello".getBytes(StandardCharsets.UTF_8)),
                    StandardCharsets.UTF_8));
        }
        Store.destroy(path);
    }
}
