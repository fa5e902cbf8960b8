"""nvdepot's Python package as a Python program uses it."""

import threading

import numpy as np
import pytest

import nvdepot


@pytest.fixture
def path(tmp_path):
    return tmp_path / "store"


@pytest.fixture
def store(path):
    with nvdepot.Store(path, create_bytes="64M", segment_bytes="1M") as s:
        yield s


def test_dict_style_use(store):
    store[b"k"] = b"v"
    assert store[b"k"] == b"v"
    assert b"k" in store and b"absent" not in store
    assert store.get(b"absent") is None
    assert store.get(b"absent", b"dflt") == b"dflt"
    with pytest.raises(KeyError):
        store[b"absent"]
    with pytest.raises(KeyError):
        del store[b"absent"]
    store["text"] = "utf-8 ✓"  # str is taken as UTF-8
    assert store[b"text"] == "utf-8 ✓".encode()
    store[b""] = b""  # the empty key and value
    assert store[b""] == b""
    assert len(store) == 3
    del store[b"k"]
    assert len(store) == 2
    assert sorted(store.keys()) == [b"", b"text"]
    assert dict(store.items())[b"text"] == "utf-8 ✓".encode()


def test_conditional_writes_and_versions(store):
    v1 = store.put(b"k", b"one")
    assert store.put(b"k", b"x", only_if="absent") is None
    assert store.put(b"new", b"x", only_if="present") is None
    assert store.put(b"new", b"x", only_if="absent") is not None
    value, version = store.get_versioned(b"k")
    assert (value, version) == (b"one", v1)
    v2 = store.put(b"k", b"two", version=v1)
    assert v2 is not None and v2 != v1
    assert store.put(b"k", b"three", version=v1) is None
    assert store[b"k"] == b"two"
    assert not store.delete(b"k", version=v1)
    assert store.delete(b"k", version=v2)
    assert not store.delete(b"k")
    assert store.get_versioned(b"k") is None
    with pytest.raises(ValueError):
        store.put(b"k", b"v", only_if="sometimes")


def test_ranges_fill_numpy_arrays_in_place(store):
    table = np.arange(1000, dtype=np.float64)
    store[b"params"] = table  # any buffer, read in place
    out = np.zeros(10, dtype=np.float64)
    n = store.get_range_into(b"params", 100 * 8, out)
    assert n == 80 and (out == np.arange(100, 110)).all()
    # Update a slice in place on the device.
    assert store.put_range(b"params", 5 * 8, np.full(3, -1.0)) == 8000
    back = np.frombuffer(store[b"params"], dtype=np.float64)
    assert (back[5:8] == -1.0).all() and back[4] == 4.0 and back[8] == 8.0
    assert store.get_range(b"params", 7990, 100) == table.tobytes()[7990:]
    assert store.get_range(b"none", 0, 4) is None
    assert store.get_range_into(b"none", 0, bytearray(4)) is None
    ba = bytearray(4)
    assert store.get_range_into(b"params", 0, memoryview(ba)) == 4
    with pytest.raises(TypeError):
        store.get_range_into(b"params", 0, b"read-only")
    with pytest.raises(TypeError, match="C-contiguous"):
        store.put_range(b"params", 0, np.arange(10)[::2])
    assert store.put_range(b"fresh", 4, b"ab") == 6
    assert store[b"fresh"] == b"\0\0\0\0ab"


def test_batches_and_many(store):
    store.write_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"b", None)])
    assert store.get_many([b"a", b"b", b"c"]) == [b"1", None, b"3"]
    with nvdepot.batch(store) as b:
        b.put(b"d", b"4")
        b.delete(b"a")
    assert store.get_many([b"a", b"d"]) == [None, b"4"]
    with pytest.raises(RuntimeError):
        with nvdepot.batch(store) as b:
            b.put(b"e", b"5")
            raise RuntimeError("abandon")
    assert b"e" not in store


def test_namespaces(store):
    pool = store.namespace("pool", create=True)
    pool[b"k"] = b"in pool"
    store[b"k"] = b"in default"
    assert pool[b"k"] == b"in pool" and store[b"k"] == b"in default"
    assert store.namespace("pool")[b"k"] == b"in pool"
    assert store.namespaces() == {"default": 1, "pool": 1}
    with pytest.raises(nvdepot.NoSuchNamespaceError):
        store.namespace("nope")
    all_triples = sorted(store.scan_all())
    assert all_triples == [("default", b"k", b"in default"), ("pool", b"k", b"in pool")]
    pool.clear()
    assert len(pool) == 0
    store.drop_namespace("pool")
    with pytest.raises(nvdepot.NoSuchNamespaceError):
        pool[b"k"] = b"v"


def test_a_walk_resumes_from_its_cursor(store):
    for i in range(3000):
        store[b"%d" % i] = b"x"
    walk = store.scan()
    first = [next(walk) for _ in range(1000)]
    cursor = walk.cursor
    assert cursor is not None
    seen = {k for k, _ in first}
    del walk
    rest = store.scan(cursor)
    seen |= {k for k, _ in rest}
    assert rest.cursor is None
    assert len(seen) == 3000


def test_errors_are_classes_with_messages(path, tmp_path):
    with pytest.raises(nvdepot.NotAStoreError, match="no nvdepot store here"):
        nvdepot.Store(path)
    with pytest.raises(nvdepot.InvalidArgumentError, match="unknown option"):
        nvdepot.Store(path, create_bytes="64M", no_such_option=1)
    with pytest.raises(nvdepot.InvalidArgumentError, match="sync"):
        nvdepot.Store(path, create_bytes="64M", sync="perhaps")
    with pytest.raises(TypeError):
        nvdepot.Store(path, create_bytes=1.5)
    s = nvdepot.Store(path, create_bytes="64M", segment_bytes="1M")
    with pytest.raises(nvdepot.KeyTooLargeError):
        s[b"k" * 70000] = b"v"
    assert issubclass(nvdepot.KeyTooLargeError, nvdepot.Error)
    walk = s.scan()
    with pytest.raises(nvdepot.BusyError):
        s.close()
    del walk
    s.close()
    assert s.closed
    with pytest.raises(nvdepot.ClosedError):
        s[b"k"]
    s.close()  # closing twice is harmless
    not_a_store = tmp_path / "precious.txt"
    not_a_store.write_bytes(b"keep me")
    with pytest.raises(nvdepot.NotAStoreError):
        nvdepot.destroy(not_a_store)
    assert not_a_store.read_bytes() == b"keep me"


def test_data_survives_reopen_and_destroy_removes_it(path):
    with nvdepot.Store(path, create_bytes="64M", segment_bytes="1M") as s:
        s[b"kept"] = b"across a reopen"
        assert s.stats()["puts"] >= 1
    with nvdepot.Store(path) as s:
        assert s[b"kept"] == b"across a reopen"
    nvdepot.destroy(path)
    assert not path.exists()


def test_threads_share_a_store(store):
    errors = []

    def work(t):
        try:
            for i in range(200):
                key = b"t%d-%d" % (t, i)
                store[key] = key * 3
                assert store[key] == key * 3
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(store) == 800


def test_options_are_listed():
    assert "create_bytes" in nvdepot.OPTIONS and "sync" in nvdepot.OPTIONS


def test_value_cache_serves_hot_keys_and_never_stale_values(path):
    with nvdepot.Store(path, create_bytes="64M", segment_bytes="1M", value_cache_bytes="1M") as s:
        s[b"k"] = b"one"
        assert s[b"k"] == b"one"  # a miss, filled
        assert s[b"k"] == b"one"  # a hit
        s[b"k"] = b"two"
        assert s[b"k"] == b"two"
        assert s.get_range(b"k", 1, 5) == b"wo"
        s.put_range(b"k", 0, b"T")
        assert s[b"k"] == b"Two"
        del s[b"k"]
        assert s.get(b"k") is None
        stats = s.stats()
        assert stats["value_cache_hits"] >= 1 and stats["value_cache_misses"] >= 1
