"""Turns run.sh's runs.jsonl (one or more files, pooled) into the markdown
table of docs/RUNTIME.md: per variant and queue depth, min/median/max ops/s
over the repetitions, the median ops/s relative to the raw io-uring loop's
at the same depth and mode, and the medians of the per-run p50/p99
latencies and CPU cost per op."""
import json
import statistics
import sys
from collections import OrderedDict

rows = [json.loads(l) for path in sys.argv[1:] for l in open(path) if l.strip()]
groups = OrderedDict()
for r in rows:
    groups.setdefault((r["variant"], r["qd"]), []).append(r)

loads = [r["load1"] for r in rows if r.get("load1", -1) >= 0]
if loads:
    print(f"load average (1 min) at run starts: min {min(loads):.2f}, "
          f"median {statistics.median(loads):.2f}, max {max(loads):.2f}\n")

def median_iops(v, qd):
    ok = [r["iops"] for r in groups.get((v, qd), []) if "error" not in r]
    return statistics.median(ok) if ok else None


def raw_of(v):
    # The raw loop in the same mode: "nv+cached" compares with "raw+cached".
    return "raw" + (v[v.index("+"):] if "+" in v else "")


print("| variant | QD | ops/s min | median | max | vs raw | p50 µs | p99 µs | CPU µs/op | runs |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
ORDER = ["fio", "raw", "raw-fixed", "raw-taskrun", "nv", "nv-regfile", "nv-fixed", "monoio"]


def key(item):
    (v, qd), _ = item
    base, _, mode = v.partition("+")
    return (qd, mode, ORDER.index(base) if base in ORDER else len(ORDER), v)


for (v, qd), rs in sorted(groups.items(), key=key):
    ok = [r for r in rs if "error" not in r]
    if not ok:
        print(f"| {v} | {qd} | error: {rs[0]['error']} | | | | | | | {len(rs)} |")
        continue
    iops = sorted(r["iops"] for r in ok)
    med = lambda k: statistics.median(r[k] for r in ok)
    base = median_iops(raw_of(v), qd)
    rel = f"{statistics.median(iops) / base * 100:.0f}%" if base else ""
    print(f"| {v} | {qd} | {iops[0]:,.0f} | {statistics.median(iops):,.0f} | {iops[-1]:,.0f} "
          f"| {rel} | {med('p50_us'):.1f} | {med('p99_us'):.1f} | {med('cpu_us_per_op'):.2f} | {len(ok)} |")
