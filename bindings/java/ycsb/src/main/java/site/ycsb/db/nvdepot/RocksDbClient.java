package site.ycsb.db.nvdepot;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.Vector;
import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.BloomFilter;
import org.rocksdb.LRUCache;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.WriteOptions;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * YCSB over RocksDB's Java API (rocksdbjni), configured as one would for point
 * reads and writes on a small machine: an LRU block cache of
 * {@code rocksdb.block_cache_bytes} (default 256 MiB) holding index and filter
 * blocks too, 10-bit Bloom filters, background jobs for both cores, and
 * {@code rocksdb.sync} (default true) as the write's WAL sync. Records are laid
 * out as NvdepotClient lays them ({@link Fields}). One database shared by every
 * client thread; the table name is ignored (one table, as YCSB's binding).
 */
public class RocksDbClient extends DB {
    private static final Object LOCK = new Object();
    private static RocksDB db;
    private static org.rocksdb.Options options;
    private static WriteOptions writeOptions;
    private static LRUCache cache;
    private static int users;

    @Override
    public void init() throws DBException {
        synchronized (LOCK) {
            if (db == null) {
                RocksDB.loadLibrary();
                String dir = getProperties().getProperty("rocksdb.dir");
                if (dir == null) {
                    throw new DBException("set rocksdb.dir");
                }
                long cacheBytes = Long.parseLong(getProperties().getProperty("rocksdb.block_cache_bytes",
                        Long.toString(256L << 20)));
                boolean sync = Boolean.parseBoolean(getProperties().getProperty("rocksdb.sync", "true"));
                cache = new LRUCache(cacheBytes);
                BlockBasedTableConfig table = new BlockBasedTableConfig()
                        .setBlockCache(cache)
                        .setFilterPolicy(new BloomFilter(10))
                        .setCacheIndexAndFilterBlocks(true)
                        .setPinL0FilterAndIndexBlocksInCache(true);
                options = new org.rocksdb.Options()
                        .setCreateIfMissing(true)
                        .setTableFormatConfig(table)
                        .setMaxBackgroundJobs(2)
                        .setLevelCompactionDynamicLevelBytes(true);
                writeOptions = new WriteOptions().setSync(sync);
                try {
                    db = RocksDB.open(options, dir);
                } catch (RocksDBException e) {
                    throw new DBException(e);
                }
            }
            users++;
        }
    }

    @Override
    public void cleanup() throws DBException {
        synchronized (LOCK) {
            if (--users == 0) {
                db.close();
                db = null;
                writeOptions.close();
                options.close();
                cache.close();
            }
        }
    }

    private static byte[] key(String key) {
        return key.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
        try {
            byte[] record = db.get(key(key));
            if (record == null) {
                return Status.NOT_FOUND;
            }
            Fields.select(record, fields, result);
            return Status.OK;
        } catch (RocksDBException e) {
            return Status.ERROR;
        }
    }

    @Override
    public Status scan(String table, String startkey, int recordcount, Set<String> fields,
            Vector<HashMap<String, ByteIterator>> result) {
        return Status.NOT_IMPLEMENTED; // compared on point operations only
    }

    @Override
    public Status update(String table, String key, Map<String, ByteIterator> values) {
        try {
            byte[] k = key(key);
            byte[] record = db.get(k);
            if (record == null) {
                return Status.NOT_FOUND;
            }
            db.put(writeOptions, k, Fields.merge(record, values));
            return Status.OK;
        } catch (RocksDBException e) {
            return Status.ERROR;
        }
    }

    @Override
    public Status insert(String table, String key, Map<String, ByteIterator> values) {
        try {
            db.put(writeOptions, key(key), Fields.encode(values));
            return Status.OK;
        } catch (RocksDBException e) {
            return Status.ERROR;
        }
    }

    @Override
    public Status delete(String table, String key) {
        try {
            db.delete(writeOptions, key(key));
            return Status.OK;
        } catch (RocksDBException e) {
            return Status.ERROR;
        }
    }
}
