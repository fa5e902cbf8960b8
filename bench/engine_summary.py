#!/usr/bin/env python3
"""Summarises a run of bench/engine-vs-fio.sh.

usage: engine_summary.py WORKDIR PREFIX

Reads WORKDIR/runs.tsv (kind engine op qd rep path) and WORKDIR/meta.tsv;
writes PREFIX.json, PREFIX.md, PREFIX-throughput.png and PREFIX-latency.png
(gnuplot, if installed) and prints one line per comparison, the `ratio ...`
line last.

Numbers:
  fio      IOPS and total latency (submission + completion, --lat_percentiles)
           p50/p99 from fio's JSON; sequential write bandwidth in 4 KiB ops.
  nvdepot  `nvdepot bench engine --json`: ops/s, p50/p99 per operation (HDR).
  rocksdb  db_bench readrandom's ops/sec line.
Every point has REPS repetitions: min/median/max; ratios use medians.
"""
import json
import os
import re
import statistics
import subprocess
import sys


# The ratio line, in its order.
HEADLINE = ("get_qd128", "get_qd1_latency_delta_us", "put_durable_vs_fio", "put_unflushed_vs_fio",
            "vs_rocksdb")


def series_points(work):
    """{(series, op, qd): {"ops": [...], "p50": [...], "p99": [...]}}"""
    pts = {}

    def add(series, op, qd, ops, p50=None, p99=None):
        d = pts.setdefault((series, op, int(qd)), {"ops": [], "p50": [], "p99": []})
        d["ops"].append(ops)
        if p50 is not None:
            d["p50"].append(p50)
        if p99 is not None:
            d["p99"].append(p99)

    with open(os.path.join(work, "runs.tsv")) as f:
        for line in f:
            kind, engine, op, qd, _rep, path = line.rstrip("\n").split("\t")
            if kind == "fio":
                j = json.load(open(path))["jobs"][0]
                side = j["read"] if op == "get" else j["write"]
                pct = side["lat_ns"].get("percentile", {})
                if op == "seqwrite":
                    add("fio-seqwrite", "put", qd, side["bw_bytes"] / 4096)
                elif op.startswith("write4k"):
                    add("fio-" + op, "put", qd, side["iops"],
                        pct.get("50.000000", 0) / 1000, pct.get("99.000000", 0) / 1000)
                else:
                    add("fio-" + engine, op, qd, side["iops"],
                        pct.get("50.000000", 0) / 1000, pct.get("99.000000", 0) / 1000)
            elif kind.startswith("nvdepot"):
                for r in json.load(open(path))["runs"]:
                    name = kind if kind != "nvdepot" else "nvdepot-" + r["backend"]
                    if kind != "nvdepot" and r["backend"] != "uring":
                        name += "-" + r["backend"]
                    elif kind == "nvdepot-page":
                        name += "-uring"
                    add(name, r["op"], r["qd"], r["ops_per_sec"], r["p50_us"], r["p99_us"])
            elif kind == "rocksdb":
                text = open(path).read()
                m = re.search(r"readrandom\s*:\s*([\d.]+) micros/op\s+(\d+) ops/sec", text)
                if m:
                    add("rocksdb", "get", qd, float(m.group(2)))
    return pts


def mmm(xs):
    if not xs:
        return None
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "n": len(xs)}


def fmt(m, digits=0):
    if m is None:
        return "-"
    f = "{:.%df}" % digits
    if m["n"] == 1:
        return f.format(m["median"])
    return "%s (%s..%s)" % (f.format(m["median"]), f.format(m["min"]), f.format(m["max"]))


def main():
    work, prefix = sys.argv[1], sys.argv[2]
    meta = {}
    with open(os.path.join(work, "meta.tsv")) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("\t")
            meta[k] = v
    pts = series_points(work)
    summary = {
        f"{s}/{op}/qd{qd}": {k: mmm(v) for k, v in d.items()}
        for (s, op, qd), d in sorted(pts.items())
    }

    def med(series, op, qd, what="ops"):
        d = pts.get((series, op, qd))
        return statistics.median(d[what]) if d and d[what] else None

    lines = []
    lines.append("%-24s %-5s %5s %28s %26s %26s" % ("series", "op", "qd", "ops/s median (min..max)",
                                                   "p50 us", "p99 us"))
    for (s, op, qd), d in sorted(pts.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        lines.append("%-24s %-5s %5d %28s %26s %26s" % (s, op, qd, fmt(mmm(d["ops"])),
                                                       fmt(mmm(d["p50"]), 1), fmt(mmm(d["p99"]), 1)))
    lines.append("")

    ratios = {}
    cmp_lines = []
    for qd in (1, 32, 128):
        f = med("fio-io_uring", "get", qd)
        for backend in ("uring", "sync"):
            n = med("nvdepot-" + backend, "get", qd)
            if f and n:
                cmp_lines.append("get qd%-3d nvdepot-%-5s %8.0f ops/s vs fio io_uring %8.0f: %.3f"
                                 % (qd, backend, n, f, n / f))
        fl = med("fio-io_uring", "get", qd, "p50")
        nl = med("nvdepot-uring", "get", qd, "p50")
        if fl and nl:
            cmp_lines.append("get qd%-3d p50 nvdepot-uring %.1f us vs fio io_uring %.1f us: %+.1f us"
                             % (qd, nl, fl, nl - fl))
    for qd in (1, 32, 128):
        f = med("fio-io_uring-4608", "get", qd)
        n = med("nvdepot-uring", "get", qd)
        if f and n:
            cmp_lines.append("get qd%-3d nvdepot-uring %8.0f ops/s vs fio 4608 B reads %8.0f: %.3f (like for like)"
                             % (qd, n, f, n / f))
        f = med("fio-io_uring", "get", qd)
        n = med("nvdepot-page-uring", "get", qd)
        if f and n:
            cmp_lines.append("get qd%-3d nvdepot-page-uring %8.0f ops/s vs fio io_uring 4k %8.0f: %.3f (page-sized records)"
                             % (qd, n, f, n / f))
        fl = med("fio-io_uring", "get", qd, "p50")
        nl = med("nvdepot-page-uring", "get", qd, "p50")
        if fl and nl:
            cmp_lines.append("get qd%-3d p50 nvdepot-page-uring %.1f us vs fio io_uring %.1f us: %+.1f us"
                             % (qd, nl, fl, nl - fl))
    f128, n128 = med("fio-io_uring", "get", 128), med("nvdepot-uring", "get", 128)
    r128, p128 = med("fio-io_uring-4608", "get", 128), med("nvdepot-page-uring", "get", 128)
    if r128 and n128:
        ratios["get_qd128_vs_record_reads"] = round(n128 / r128, 3)
    if f128 and p128:
        ratios["get_qd128_page_records"] = round(p128 / f128, 3)
    fp1, np1 = med("fio-io_uring", "get", 1, "p50"), med("nvdepot-page-uring", "get", 1, "p50")
    if fp1 and np1:
        ratios["get_qd1_latency_delta_us_page_records"] = round(np1 - fp1, 1)
    if f128 and n128:
        ratios["get_qd128"] = round(n128 / f128, 3)
    f1, n1 = med("fio-io_uring", "get", 1, "p50"), med("nvdepot-uring", "get", 1, "p50")
    if f1 and n1:
        ratios["get_qd1_latency_delta_us"] = round(n1 - f1, 1)
    # PUTs. The headline rows are inserts (new keys into a fresh store),
    # as uDepot measures PUTs; overwrites of loaded keys follow, with the
    # device reads each cost (the check that a fingerprint's entry is this
    # key, when the location cache does not know it).
    seq = med("fio-seqwrite", "put", 32)
    w4 = med("fio-write4k", "put", 128)
    w4s = med("fio-write4k-fdatasync64", "put", 128)
    ins = med("nvdepot-insert", "insert", 128)
    ins_ns = med("nvdepot-insert-nosync", "insert", 128)
    put = med("nvdepot-uring", "put", 128)
    put_ns = med("nvdepot-nosync", "put", 128)
    if w4s and ins:
        ratios["put_durable_vs_fio"] = round(ins / w4s, 3)
        cmp_lines.append("insert qd128 durable nvdepot %.0f ops/s vs fio 4k writes qd128 fdatasync/64 %.0f: %.3f"
                         % (ins, w4s, ins / w4s))
    if w4 and ins_ns:
        ratios["put_unflushed_vs_fio"] = round(ins_ns / w4, 3)
        cmp_lines.append("insert qd128 unflushed nvdepot %.0f ops/s vs fio 4k writes qd128 %.0f: %.3f"
                         % (ins_ns, w4, ins_ns / w4))
    reads = {}
    reads_path = os.path.join(work, "put-reads.tsv")
    if os.path.exists(reads_path):
        with open(reads_path) as f:
            for line in f:
                series, _rep, n, path = line.rstrip("\n").split("\t")
                try:
                    ops = sum(r["ops"] for r in json.load(open(path))["runs"])
                except (OSError, ValueError, KeyError):
                    continue
                if ops:
                    reads.setdefault(series, []).append(int(n) / ops)
    for name, value, ref, ref_name, key in (
            ("durable", put, w4s, "fio 4k writes qd128 fdatasync/64", "put_overwrite_durable_vs_fio"),
            ("unflushed", put_ns, w4, "fio 4k writes qd128", "put_overwrite_unflushed_vs_fio")):
        if not (value and ref):
            continue
        ratios[key] = round(value / ref, 3)
        series = "nvdepot-uring" if name == "durable" else "nvdepot-nosync"
        per = reads.get(series)
        note = " (%.2f device reads per put)" % statistics.median(per) if per else ""
        cmp_lines.append("put qd128 %s overwrites nvdepot %.0f ops/s vs %s %.0f: %.3f%s"
                         % (name, value, ref_name, ref, value / ref, note))
        if per:
            ratios[key.replace("_vs_fio", "_reads_per_put")] = round(statistics.median(per), 2)
    if seq and ins:
        ratios["put_durable_vs_seqwrite"] = round(ins / seq, 3)
        cmp_lines.append("insert qd128 durable nvdepot %.0f ops/s vs fio 1 MiB seq writes %.0f 4KiB-ops/s: %.3f"
                         % (ins, seq, ins / seq))
    s128 = med("nvdepot-2files", "get", 128)
    if s128 and n128:
        ratios["stripe2_vs_1_qd128"] = round(s128 / n128, 3)
        cmp_lines.append("get qd128 2 striped files %.0f ops/s vs 1 file %.0f: %.3f" % (s128, n128, s128 / n128))
    rdb = med("rocksdb", "get", 128)
    if rdb and n128:
        ratios["vs_rocksdb"] = round(n128 / rdb, 3)
        cmp_lines.append("get qd128 nvdepot-uring %.0f ops/s vs rocksdb db_bench 128 threads %.0f: %.3f"
                         % (n128, rdb, n128 / rdb))
    ratio_line = "ratio " + " ".join(
        "%s=%s" % (k, ratios.get(k, "n/a"))
        for k in HEADLINE)
    extra = " ".join("%s=%s" % (k, v) for k, v in ratios.items() if k not in HEADLINE)

    out = "\n".join(lines + cmp_lines + ([extra] if extra else []) + [ratio_line])
    print(out)
    with open(prefix + ".json", "w") as f:
        json.dump({"meta": meta, "points": summary, "ratios": ratios}, f, indent=1, sort_keys=True)
    with open(prefix + ".md", "w") as f:
        f.write("# engine vs fio (%s)\n\n" % os.path.basename(prefix))
        f.write("Machine and run: " + "; ".join("%s: %s" % kv for kv in meta.items()) + "\n\n")
        f.write("Command: `%sbash bench/engine-vs-fio.sh`\n\n" % ("QUICK=1 " if "quick" in prefix else ""))
        f.write("```\n" + out + "\n```\n")
    plot(pts, prefix, work)


def plot(pts, prefix, work):
    series = ["fio-io_uring", "fio-libaio", "fio-io_uring-4608", "nvdepot-uring", "nvdepot-sync",
              "nvdepot-page-uring", "nvdepot-page-sync"]
    dat = {}
    for s in series:
        path = os.path.join(work, "plot-%s.dat" % s)
        rows = []
        for qd in (1, 32, 128):
            d = pts.get((s, "get", qd))
            if d and d["ops"]:
                rows.append("%d %f %f" % (qd, statistics.median(d["ops"]) / 1000,
                                          statistics.median(d["p50"]) if d["p50"] else 0))
        if rows:
            with open(path, "w") as f:
                f.write("\n".join(rows) + "\n")
            dat[s] = path
    if not dat:
        return
    for what, col, ylabel in (("throughput", 2, "kops/s"), ("latency", 3, "p50 latency (us)")):
        plots = ", ".join("'%s' using 1:%d with linespoints title '%s'" % (p, col, s) for s, p in dat.items())
        script = ("set terminal png size 800,500 noenhanced; set output '%s-%s.png'; set logscale x 2;"
                  "set xlabel 'queue depth'; set ylabel '%s'; set key left top; set grid;"
                  "set title '4 KiB random GET: nvdepot vs fio (%s)'; plot %s\n"
                  % (prefix, what, ylabel, what, plots))
        try:
            subprocess.run(["gnuplot"], input=script, text=True, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except (OSError, subprocess.CalledProcessError) as e:
            print("plot failed: %s" % e, file=sys.stderr)


if __name__ == "__main__":
    main()
