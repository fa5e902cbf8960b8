"""nvdepot: an embedded key-value store for fast NVMe storage.

    import nvdepot
    with nvdepot.Store("./data", create_bytes="1G") as store:
        store[b"hello"] = b"world"          # durable when it returns
        assert store[b"hello"] == b"world"  # one device read

A `Store` is its default namespace; `store.namespace("name", create=True)`
gives others (NVMKV's pools). Keys and values are bytes (a `str` is taken
as UTF-8; any C-contiguous buffer, a NumPy array included, is read in
place). `get_range_into` fills a writable buffer in place, `put_range`
rewrites part of a value. Device IO releases the GIL. Errors raise
subclasses of `nvdepot.Error`.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from ._nvdepot import (
    OPTIONS,
    BusyError,
    ClosedError,
    ConfigError,
    CorruptError,
    DamagedError,
    Error,
    FormatVersionError,
    InternalError,
    InvalidArgumentError,
    IoError,
    KeyTooLargeError,
    Namespace,
    NamespaceExistsError,
    NoSuchNamespaceError,
    NotAStoreError,
    Scan,
    Store,
    StoreFullError,
    UnusableError,
    ValueTooLargeError,
    destroy,
)


class Batch:
    """Writes gathered by `batch()` and applied atomically on exit."""

    def __init__(self) -> None:
        self.ops: list = []

    def put(self, key, value) -> None:
        self.ops.append((key, value))

    def delete(self, key) -> None:
        self.ops.append((key, None))


@contextmanager
def batch(namespace: Namespace) -> Iterator[Batch]:
    """`with nvdepot.batch(store) as b: b.put(k, v); b.delete(k2)` applies
    the writes atomically (all or none after a crash) with one flush when
    the block ends without an exception, and none of them otherwise."""
    b = Batch()
    yield b
    namespace.write_batch(b.ops)


__all__ = [
    "OPTIONS",
    "Batch",
    "BusyError",
    "ClosedError",
    "ConfigError",
    "CorruptError",
    "DamagedError",
    "Error",
    "FormatVersionError",
    "InternalError",
    "InvalidArgumentError",
    "IoError",
    "KeyTooLargeError",
    "Namespace",
    "NamespaceExistsError",
    "NoSuchNamespaceError",
    "NotAStoreError",
    "Scan",
    "Store",
    "StoreFullError",
    "UnusableError",
    "ValueTooLargeError",
    "batch",
    "destroy",
]
