"""A parameter table on flash (seed 003's parameter servers): one NumPy
array per key, workers reading and updating slices of them in place.

    python examples/parameter_server.py ./params [--keys 64] [--rows 256]
        [--cols 256] [--workers 4] [--rounds 20]

Each worker owns a band of every array's rows (as a sharded parameter
server does), and per round reads its band of each array with
`get_range_into` (straight into a NumPy buffer), applies an update, and
writes the band back with `put_range` (durable on return). At the end the
table is checked against what the updates must have made.
"""

import argparse
import threading
import time

import numpy as np

import nvdepot


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path")
    p.add_argument("--keys", type=int, default=64)
    p.add_argument("--rows", type=int, default=256)
    p.add_argument("--cols", type=int, default=256)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--rounds", type=int, default=20)
    a = p.parse_args()
    row_bytes = a.cols * 4  # float32
    band = a.rows // a.workers
    with nvdepot.Store(a.path, create_bytes="1G") as store:
        table = store.namespace("parameters", create=True)
        for k in range(a.keys):
            table[b"w%d" % k] = np.zeros((a.rows, a.cols), dtype=np.float32)

        def worker(w: int) -> None:
            band_buf = np.empty((band, a.cols), dtype=np.float32)
            offset = w * band * row_bytes
            for _ in range(a.rounds):
                for k in range(a.keys):
                    key = b"w%d" % k
                    n = table.get_range_into(key, offset, band_buf)
                    assert n == band_buf.nbytes
                    band_buf += 1.0  # the "gradient step"
                    table.put_range(key, offset, band_buf)

        start = time.perf_counter()
        threads = [threading.Thread(target=worker, args=(w,)) for w in range(a.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - start
        updates = a.workers * a.rounds * a.keys
        for k in range(a.keys):
            arr = np.frombuffer(table[b"w%d" % k], dtype=np.float32).reshape(a.rows, a.cols)
            assert (arr[: band * a.workers] == a.rounds).all(), f"w{k} lost an update"
        print(
            f"{updates} slice updates of {band * row_bytes} bytes by {a.workers} threads "
            f"in {seconds:.2f} s ({updates / seconds:.0f}/s); every update is in the table"
        )
        store.drop_namespace("parameters")


if __name__ == "__main__":
    main()
