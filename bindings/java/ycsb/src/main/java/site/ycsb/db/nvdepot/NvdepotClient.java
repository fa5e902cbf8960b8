package site.ycsb.db.nvdepot;

import io.nvdepot.Namespace;
import io.nvdepot.NvdepotException;
import io.nvdepot.Options;
import io.nvdepot.Store;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.Vector;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * YCSB over nvdepot's embedded store (io.nvdepot). Properties: {@code nvdepot.dir}
 * (the store), {@code nvdepot.option.NAME} (any store option, e.g.
 * {@code nvdepot.option.create_bytes=8G}, {@code nvdepot.option.sync=false}). One
 * store is shared by every client thread; a YCSB table is a namespace.
 */
public class NvdepotClient extends DB {
    private static final Object LOCK = new Object();
    private static Store store;
    private static int users;
    private static final Map<String, Namespace> TABLES = new HashMap<>();

    @Override
    public void init() throws DBException {
        synchronized (LOCK) {
            if (store == null) {
                String dir = getProperties().getProperty("nvdepot.dir");
                if (dir == null) {
                    throw new DBException("set nvdepot.dir to the store's path");
                }
                try {
                    store = Store.open(dir, Options.fromProperties(getProperties(), "nvdepot.option."));
                } catch (NvdepotException e) {
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
                TABLES.clear();
                try {
                    store.close();
                } catch (NvdepotException e) {
                    throw new DBException(e);
                } finally {
                    store = null;
                }
            }
        }
    }

    private static Namespace table(String name) {
        synchronized (LOCK) {
            return TABLES.computeIfAbsent(name, n -> store.namespace(n, true));
        }
    }

    private static byte[] key(String key) {
        return key.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
        try {
            byte[] record = table(table).get(key(key));
            if (record == null) {
                return Status.NOT_FOUND;
            }
            Fields.select(record, fields, result);
            return Status.OK;
        } catch (NvdepotException e) {
            return Status.ERROR;
        }
    }

    @Override
    public Status scan(String table, String startkey, int recordcount, Set<String> fields,
            Vector<HashMap<String, ByteIterator>> result) {
        return Status.NOT_IMPLEMENTED; // the index is a hash: no ordered scan
    }

    @Override
    public Status update(String table, String key, Map<String, ByteIterator> values) {
        try {
            Namespace t = table(table);
            byte[] k = key(key);
            byte[] record = t.get(k);
            if (record == null) {
                return Status.NOT_FOUND;
            }
            t.put(k, Fields.merge(record, values));
            return Status.OK;
        } catch (NvdepotException e) {
            return Status.ERROR;
        }
    }

    @Override
    public Status insert(String table, String key, Map<String, ByteIterator> values) {
        try {
            table(table).put(key(key), Fields.encode(values));
            return Status.OK;
        } catch (NvdepotException e) {
            return Status.ERROR;
        }
    }

    @Override
    public Status delete(String table, String key) {
        try {
            return table(table).delete(key(key)) ? Status.OK : Status.NOT_FOUND;
        } catch (NvdepotException e) {
            return Status.ERROR;
        }
    }
}
