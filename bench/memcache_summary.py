#!/usr/bin/env python3
"""Summarises a run of bench/memcache-vs-memcached.sh.

usage: memcache_summary.py WORKDIR PREFIX

Reads WORKDIR/runs.tsv (scenario server concurrency rep kind path),
WORKDIR/cpu.tsv (scenario server concurrency rep cpu_seconds: the server's
utime + stime over one memaslap run), WORKDIR/rss.tsv, WORKDIR/memcg.tsv and
WORKDIR/meta.tsv; writes PREFIX.json and PREFIX.md, WORKDIR/plot-SERVER.dat
for gnuplot, and prints the table with the ratio line last:

  ratio vs_memcached=A vs_extstore=B vs_device=C cpu_per_req_vs_memcached=D

  A  hot: the LOWEST nvdepot / memcached ops/s (medians of the repetitions)
     over every concurrency both were measured at.
  B  big: nvdepot GET hits/s / GET hits/s of the memcached + extstore variant
     with the most GET hits/s, medians, at the same concurrency (64).
  C  big: nvdepot GETs/s at 64 / fio 4k randread IOPS at QD 64.
  D  hot: the HIGHEST nvdepot / memcached server CPU us per request over the
     hot concurrencies (per point: cpu_seconds * 1e6 / memaslap's ops; the
     median of the repetitions).
The JSON's `ratios` also has latency_vs_memcached: the HIGHEST nvdepot /
memcached memaslap average latency (avg_us) over the hot concurrencies, and
the concurrency that gave each extreme.

Numbers per kind of measurement:
  memaslap  ops/s and average latency from memaslap.sh's result line; p50/p99
            from memcaslap's log2 latency histogram ("Total Statistics"), so
            they are bucket upper bounds (powers of two, in us); hit ratio =
            1 - get_misses / cmd_get; ops = the result line's `ops=` (total
            requests of the run; ops/s x seconds_per_point when missing).
  bench     `nvdepot bench memcache --json`: ops/s, GET p50/p99 (HDR), hit
            ratio = get hits / gets, GET hits/s = hits / seconds of the run.
  fio       fio_4k.sh's last line (IOPS, p50/p99 completion latency).
"""
import json
import os
import re
import statistics
import sys


def read_tsv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def memaslap_point(log):
    """ops/s, avg_us, p50/p99 bucket bounds, hit ratio from a memaslap log."""
    with open(log + ".result") as f:
        line = f.read().strip().splitlines()[-1]
    fields = dict(re.findall(r"(\w+)=(\S+)", line))
    ops = float(line.split()[1])
    text = open(log, errors="replace").read()
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    p50 = p99 = None
    block = re.search(r"Total Statistics \(\d+ events\).*?Log2 Dist:\n(.*?)\n\s*\n", text, re.S)
    if block:
        counts = {}
        for row in block.group(1).splitlines():
            m = re.match(r"\s*(\d+):\s*(.*)", row)
            if not m:
                continue
            base = int(m.group(1))
            for i, c in enumerate(m.group(2).split()):
                counts[base + i] = int(c)
        total = sum(counts.values())
        if total:
            run = 0
            for k in sorted(counts):
                run += counts[k]
                if p50 is None and run >= 0.5 * total:
                    p50 = 2 ** (k + 1)
                if p99 is None and run >= 0.99 * total:
                    p99 = 2 ** (k + 1)
    gets = re.search(r"^cmd_get: (\d+)", text, re.M)
    misses = int(fields.get("get_misses", "0") or 0)
    hit = None
    if gets and int(gets.group(1)) > 0:
        hit = 1 - misses / int(gets.group(1))
    total = fields.get("ops")
    run_time = fields.get("run_time", "").rstrip("s")
    return {
        "ops_per_sec": ops,
        "ops": int(total) if total and total.isdigit() else None,
        "run_seconds": float(run_time) if re.fullmatch(r"[0-9.]+", run_time) else None,
        "avg_us": float(fields.get("avg_latency_us", "nan")),
        "p50_us": p50,
        "p99_us": p99,
        "hit_ratio": hit,
        "latency_kind": "all ops, log2 bucket upper bound",
    }


def bench_point(path):
    j = json.load(open(path))
    run = j["run"]
    return {
        "ops_per_sec": run["ops_per_sec"],
        "avg_us": (run["get"]["mean_us"] * run["gets"] + run["set"]["mean_us"] * run["sets"])
        / max(1, run["ops"]),
        "p50_us": run["get"]["p50_us"],
        "p99_us": run["get"]["p99_us"],
        "p999_us": run["get"]["p999_us"],
        "set_p99_us": run["set"]["p99_us"],
        "hit_ratio": run["hit_ratio"],
        "gets_per_sec": run["gets"] / run["seconds"] if run["seconds"] else 0,
        "hits_per_sec": (run["hits"] if "hits" in run else run["gets"] * run["hit_ratio"])
        / run["seconds"] if run["seconds"] else 0,
        "mismatches": run["mismatches"],
        "verified": run["verified"],
        "errors": run["errors"],
        "first_error": run["first_error"],
        "latency_kind": "GET, HDR",
    }


def main():
    work, prefix = sys.argv[1], sys.argv[2]
    meta = {k: v for k, v in read_tsv(os.path.join(work, "meta.tsv"))}
    points = {}  # (scenario, server, conc) -> [point]
    preloads, fio, failures = [], None, []
    held = {server: (items, ev) for server, items, ev in read_tsv(os.path.join(work, "items.tsv"))}
    # (scenario, server, conc, rep) -> the server's CPU seconds over that run
    cpu = {}
    for scenario, server, conc, rep, secs, *_ in read_tsv(os.path.join(work, "cpu.tsv")):
        try:
            cpu[(scenario, server, int(conc), int(rep))] = float(secs)
        except ValueError:
            pass
    try:
        seconds_per_point = float(meta.get("seconds_per_point", "").split()[0])
    except (ValueError, IndexError):
        seconds_per_point = None
    for scenario, server, conc, rep, kind, path in read_tsv(os.path.join(work, "runs.tsv")):
        try:
            if kind == "memaslap":
                p = memaslap_point(path)
            elif kind == "bench":
                p = bench_point(path)
            elif kind == "preload":
                j = json.load(open(path))["preload"]
                preloads.append({"scenario": scenario, "server": server, "sets": j["sets"],
                                 "connections": int(conc), "pipeline": int(rep),
                                 "seconds": j["seconds"], "sets_per_sec": j["ops_per_sec"],
                                 "errors": j["errors"], "first_error": j["first_error"],
                                 "curr_items": held.get(server, ("?", "?"))[0],
                                 "evictions": held.get(server, ("?", "?"))[1]})
                continue
            elif kind == "fio":
                line = open(path).read().strip().splitlines()[-1]
                f = dict(re.findall(r"(\w+)=(\S+)", line))
                fio = {"iops": float(f["iops"]), "p50_us": float(f["p50_us"]),
                       "p99_us": float(f["p99_us"]), "qd": int(f["qd"]), "engine": f["engine"],
                       "line": line}
                continue
            elif kind == "failed":
                failures.append({"scenario": scenario, "server": server,
                                 "concurrency": conc, "what": path})
                continue
            else:
                continue
        except (OSError, ValueError, KeyError, IndexError) as e:
            failures.append({"scenario": scenario, "server": server, "concurrency": conc,
                             "what": f"unreadable result {path}: {e}"})
            continue
        p["rep"] = int(rep)
        p["cpu_seconds"] = cpu.get((scenario, server, int(conc), int(rep)))
        # Requests of the run: memaslap's own count, else ops/s x seconds.
        requests = p.get("ops") or (p["ops_per_sec"] * seconds_per_point
                                    if seconds_per_point else None)
        p["cpu_us_per_req"] = (p["cpu_seconds"] * 1e6 / requests
                               if p["cpu_seconds"] is not None and requests else None)
        points.setdefault((scenario, server, int(conc)), []).append(p)

    rows = []
    for (scenario, server, conc), runs in sorted(points.items(),
                                                  key=lambda kv: (kv[0][0] != "hot", kv[0])):
        ops = [r["ops_per_sec"] for r in runs]
        med = statistics.median(ops)
        # The repetition whose throughput is the median gives the latencies.
        mid = min(runs, key=lambda r: abs(r["ops_per_sec"] - med))
        rows.append({
            "scenario": scenario, "server": server, "concurrency": conc,
            "repetitions": len(runs), "ops_min": min(ops), "ops_median": med,
            "ops_max": max(ops), "avg_us": statistics.median(r["avg_us"] for r in runs),
            "p50_us": mid.get("p50_us"), "p99_us": mid.get("p99_us"),
            "hit_ratio": mid.get("hit_ratio"), "latency_kind": mid["latency_kind"],
            "gets_per_sec_median": statistics.median(r.get("gets_per_sec", 0) for r in runs),
            "hits_per_sec_median": (statistics.median(r["hits_per_sec"] for r in runs)
                                    if all("hits_per_sec" in r for r in runs) else None),
            "cpu_us_per_req": median_or_none(r.get("cpu_us_per_req") for r in runs),
            "mismatches": sum(r.get("mismatches", 0) for r in runs),
            "errors": sum(r.get("errors", 0) for r in runs),
            "runs": runs,
        })

    def row(scenario, server, conc):
        for r in rows:
            if (r["scenario"], r["server"], r["concurrency"]) == (scenario, server, conc):
                return r
        return None

    def ratio(a, b):
        return a / b if a is not None and b else None

    def extreme(key, pick):
        """Over the hot concurrencies with both servers: (ratio, concurrency)
        of nvdepot[key] / memcached[key] chosen by pick (min or max), plus
        every concurrency's ratio."""
        per = {}
        for c in sorted({r["concurrency"] for r in rows if r["scenario"] == "hot"}):
            nv, mc = row("hot", "nvdepot", c), row("hot", "memcached", c)
            x = ratio(nv and nv[key], mc and mc[key])
            if x is not None:
                per[c] = x
        if not per:
            return None, None, per
        c = pick(per, key=per.get)
        return per[c], c, per

    vs_mc, vs_mc_c, vs_mc_all = extreme("ops_median", min)
    lat, lat_c, lat_all = extreme("avg_us", max)
    cpu_r, cpu_c, cpu_all = extreme("cpu_us_per_req", max)
    # big: at 64 (both QUICK and full runs measure it), else the lowest
    # concurrency nvdepot was measured at.
    big_concs = sorted(r["concurrency"] for r in rows
                       if r["scenario"] == "big" and r["server"] == "nvdepot")
    big_c = 64 if 64 in big_concs or not big_concs else big_concs[0]
    nv_big = row("big", "nvdepot", big_c)
    # The extstore variant with the most GET hits/s at big_c is the reference.
    exts = [r for r in rows
            if r["scenario"] == "big" and r["server"].startswith("extstore")
            and r["concurrency"] == big_c and r["hits_per_sec_median"] is not None]
    ext_big = max(exts, key=lambda r: r["hits_per_sec_median"]) if exts else None
    ratios = {
        "vs_memcached": vs_mc,
        "vs_memcached_concurrency": vs_mc_c,
        "vs_memcached_by_concurrency": vs_mc_all,
        "latency_vs_memcached": lat,
        "latency_vs_memcached_concurrency": lat_c,
        "latency_vs_memcached_by_concurrency": lat_all,
        "cpu_per_req_vs_memcached": cpu_r,
        "cpu_per_req_vs_memcached_concurrency": cpu_c,
        "cpu_per_req_vs_memcached_by_concurrency": cpu_all,
        "vs_extstore": ratio(nv_big and nv_big["hits_per_sec_median"],
                             ext_big and ext_big["hits_per_sec_median"]),
        "vs_extstore_reference": ext_big and ext_big["server"],
        "vs_extstore_metric": "GET hits/s",
        "vs_device": ratio(nv_big and nv_big["gets_per_sec_median"], fio and fio["iops"]),
        "big_concurrency": big_c,
    }

    rss = []
    for server, items, start_kb, end_kb, *rest in read_tsv(os.path.join(work, "rss.tsv")):
        items, start_kb, end_kb = int(items), int(start_kb), int(end_kb)
        rss.append({"server": server, "items": items, "rss_start_kib": start_kb,
                    "rss_end_kib": end_kb, "config": rest[0] if rest else "",
                    "bytes_per_item": (end_kb - start_kb) * 1024 / items if items else None})
    memcg = [{"name": n, "limit_bytes": int(l), "peak_bytes": int(p), "oom_kills": o}
             for n, l, p, o in read_tsv(os.path.join(work, "memcg.tsv"))]

    def f(x, fmt="{:.0f}"):
        return "-" if x is None else fmt.format(x)

    lines = []
    lines.append(f"| server | scenario | concurrency | ops/s median (min-max, n) | p50 us | p99 us "
                 f"| avg us | hit ratio | GET hits/s | server CPU us/req |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        bound = "<" if r["latency_kind"].startswith("all ops") else ""
        big = r["scenario"] == "big"
        lines.append(
            f"| {r['server']} | {r['scenario']} | {r['concurrency']} | {f(r['ops_median'])} "
            f"({f(r['ops_min'])}-{f(r['ops_max'])}, {r['repetitions']}) | "
            f"{bound}{f(r['p50_us'])} | {bound}{f(r['p99_us'])} | {f(r['avg_us'])} | "
            f"{f(r['hit_ratio'], '{:.3f}')} | "
            f"{f(r['hits_per_sec_median'] if big else None)} | "
            f"{f(None if big else r['cpu_us_per_req'], '{:.2f}')} |")
    if fio:
        lines.append(f"| fio {fio['engine']} 4k randread | big | qd {fio['qd']} | "
                     f"{f(fio['iops'])} IOPS | {f(fio['p50_us'])} | {f(fio['p99_us'])} | - | - "
                     f"| - | - |")
    out = ["## Throughput and latency", "",
           "hot: memaslap.sh (90 % get / 10 % set, 1 KiB, its own small key window); latencies "
           "are memcaslap's log2 buckets (upper bounds, all ops); server CPU us/req = the server "
           "process's utime + stime (all threads, /proc/PID/stat) over the memaslap run / the "
           "run's requests, median of the repetitions. big: `nvdepot bench memcache` "
           "(uniform 9:1 over every preloaded key); latencies are GET percentiles (HDR); "
           "GET hits/s = gets answered with a value per second (gets/s x hit ratio), median "
           "of the repetitions.", ""]
    out += lines
    if preloads:
        out += ["", "## Preload (big scenario)", "",
                "| server | connections x pipeline | sets | seconds | sets/s | errors "
                "| curr_items after | evictions |", "|---|---|---|---|---|---|---|---|"]
        for p in preloads:
            err = f"{p['errors']}" + (f" ({p['first_error']})" if p["first_error"] else "")
            out.append(f"| {p['server']} | {p['connections']} x {p['pipeline']} | {p['sets']} | "
                       f"{p['seconds']:.1f} | {p['sets_per_sec']:.0f} | {err} | "
                       f"{p['curr_items']} | {p['evictions']} |")
    if memcg:
        out += ["", "## Memory cgroups (big scenario)", "", "| cgroup | limit MiB | peak MiB | oom kills |",
                "|---|---|---|---|"]
        for m in memcg:
            out.append(f"| {m['name']} | {m['limit_bytes'] / 2**20:.0f} | "
                       f"{m['peak_bytes'] / 2**20:.0f} | {m['oom_kills']} |")
    if rss:
        out += ["", "## RSS per item", "", "| server | config | items | RSS after start KiB "
                "| RSS after load KiB | bytes/item |", "|---|---|---|---|---|---|"]
        for r in rss:
            out.append(f"| {r['server']} | {r['config']} | {r['items']} | {r['rss_start_kib']} | "
                       f"{r['rss_end_kib']} | {f(r['bytes_per_item'], '{:.1f}')} |")
    bad = [r for r in rows if r["mismatches"] or r["errors"]]
    if failures or bad:
        out += ["", "## Failures and error replies", ""]
        for x in failures:
            out.append(f"- {x['scenario']} {x['server']} c={x['concurrency']}: {x['what']}")
        for r in bad:
            first = next((p.get("first_error") for p in r["runs"] if p.get("first_error")), None)
            out.append(f"- {r['scenario']} {r['server']} c={r['concurrency']}: "
                       f"{r['mismatches']} mismatches, {r['errors']} error replies"
                       + (f" (first: {first})" if first else ""))

    def rf(x):
        return "n/a" if x is None else f"{x:.2f}"

    ratio_line = (f"ratio vs_memcached={rf(ratios['vs_memcached'])} "
                  f"vs_extstore={rf(ratios['vs_extstore'])} vs_device={rf(ratios['vs_device'])} "
                  f"cpu_per_req_vs_memcached={rf(ratios['cpu_per_req_vs_memcached'])}")
    out += ["", "```", ratio_line, "```", ""]
    header = ["# memcache vs memcached: " + ("QUICK run" if meta.get("quick") == "1" else "full run"),
              "", "Generated by bench/memcache-vs-memcached.sh (see README.md here for what each "
              "number means).", ""]
    header += [f"- {k}: {v}" for k, v in meta.items()]

    def at(c):
        return "" if c is None else f" (at concurrency {c})"

    def each(per):
        return ", ".join(f"{c}: {x:.2f}" for c, x in per.items()) or "n/a"

    header += [
        "", "What the ratios mean:", "",
        f"- vs_memcached = {rf(ratios['vs_memcached'])}{at(vs_mc_c)}: the LOWEST, over the hot "
        f"concurrencies, of nvdepot median ops/s / memcached median ops/s (each: {each(vs_mc_all)}).",
        f"- latency_vs_memcached = {rf(lat)}{at(lat_c)}: the HIGHEST, over the hot "
        f"concurrencies, of nvdepot / memcached memaslap average latency (avg us; "
        f"each: {each(lat_all)}). In the JSON, not in the ratio line.",
        f"- cpu_per_req_vs_memcached = {rf(cpu_r)}{at(cpu_c)}: the HIGHEST, over the hot "
        f"concurrencies, of nvdepot / memcached server CPU us per request (utime + stime of the "
        f"server process over a memaslap run / its requests, median of the repetitions; "
        f"each: {each(cpu_all)}).",
        f"- vs_extstore = {rf(ratios['vs_extstore'])}: big nvdepot GET hits/s / GET hits/s of "
        f"{ratios['vs_extstore_reference'] or 'n/a'} (the memcached + extstore variant with the "
        f"most GET hits/s), medians, both at concurrency {big_c}.",
        f"- vs_device = {rf(ratios['vs_device'])}: big nvdepot GETs/s at concurrency {big_c} / "
        f"fio 4k randread IOPS at QD 64.", ""]
    with open(prefix + ".md", "w") as fh:
        fh.write("\n".join(header + out))
    doc = {"meta": meta, "rows": rows, "preload": preloads, "fio": fio, "rss": rss,
           "memcg": memcg, "failures": failures, "ratios": ratios, "ratio_line": ratio_line}
    with open(prefix + ".json", "w") as fh:
        json.dump(doc, fh, indent=1)
    for server in ("memcached", "nvdepot"):
        with open(os.path.join(work, f"plot-{server}.dat"), "w") as fh:
            for r in rows:
                if r["scenario"] == "hot" and r["server"] == server:
                    fh.write(f"{r['concurrency']} {r['ops_median'] / 1000:.3f} "
                             f"{r['ops_min'] / 1000:.3f} {r['ops_max'] / 1000:.3f} {r['avg_us']:.1f}\n")
    print("\n".join(out[:-3]))
    print(ratio_line)


if __name__ == "__main__":
    main()
