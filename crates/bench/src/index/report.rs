//! The human tables and the JSON document of `bench index`.
//!
//! Repetitions are summarised as min / median / max per (scenario,
//! threads, structure); the goal lines compare medians measured in the
//! same process, which is what survives a noisy shared machine.

use std::fmt::Write as _;

use super::{IndexReport, Latency, Run, Scenario, Structure};
use crate::report::quote;

/// One line describing the settings.
pub fn describe(report: &IndexReport) -> String {
    let c = &report.config;
    let scenarios: Vec<String> = c.scenarios().iter().map(|s| s.name()).collect();
    let structures: Vec<&str> = c.structures().iter().map(|s| s.name()).collect();
    format!(
        "index bench: {} keys (64-bit hashes, 8-byte values), threads {:?}, scenarios {}, \
         structures {}, {} repetition(s), 1 op in {} timed, seed {}",
        c.keys,
        c.threads,
        scenarios.join(" "),
        structures.join(" "),
        c.repeats,
        c.latency_sample,
        c.seed,
    )
}

/// One run in one line (printed as it ends).
pub fn run_line(r: &Run) -> String {
    format!(
        "rep {} {:<8} T={} {:<16} insert {:6.2} M/s/thread ({:.2} s, {} grows, p99.99 {:.1} us) \
         lookup {:6.2} M/s/thread ({:.2} s)  {:.2} B/key (min {:.2}, rss {:.2})",
        r.repetition + 1,
        r.scenario.name(),
        r.threads,
        r.structure.name(),
        r.insert.mops_per_thread(r.threads),
        r.insert.seconds,
        r.grows,
        us(r.insert.latency.p9999_ns),
        r.lookup.mops_per_thread(r.threads),
        r.lookup.seconds,
        r.bytes_per_key,
        r.min_bytes_per_key,
        r.rss_bytes_per_key,
    )
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// min, median, max (the mean of the middle two for an even count).
pub fn spread(mut values: Vec<f64>) -> (f64, f64, f64) {
    if values.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = (values[(n - 1) / 2] + values[n / 2]) / 2.0;
    (values[0], median, values[n - 1])
}

/// The runs of one (scenario, threads, structure), over repetitions.
pub struct Group<'a> {
    pub scenario: Scenario,
    pub threads: usize,
    pub structure: Structure,
    pub runs: Vec<&'a Run>,
}

impl Group<'_> {
    pub fn spread(&self, f: impl Fn(&Run) -> f64) -> (f64, f64, f64) {
        spread(self.runs.iter().map(|r| f(r)).collect())
    }

    pub fn insert_mops(&self) -> (f64, f64, f64) {
        self.spread(|r| r.insert.mops_per_thread(r.threads))
    }

    pub fn lookup_mops(&self) -> (f64, f64, f64) {
        self.spread(|r| r.lookup.mops_per_thread(r.threads))
    }

    /// Median of a latency percentile, in microseconds.
    fn latency_us(&self, f: impl Fn(&Latency) -> u64, insert: bool) -> f64 {
        let phase = |r: &Run| if insert { r.insert } else { r.lookup };
        self.spread(|r| us(f(&phase(r).latency))).1
    }
}

/// Runs grouped in the order they were first made.
pub fn groups(report: &IndexReport) -> Vec<Group<'_>> {
    let mut out: Vec<Group<'_>> = Vec::new();
    for r in &report.runs {
        let same = |g: &&mut Group<'_>| {
            g.scenario == r.scenario && g.threads == r.threads && g.structure == r.structure
        };
        match out.iter_mut().find(same) {
            Some(g) => g.runs.push(r),
            None => out.push(Group {
                scenario: r.scenario,
                threads: r.threads,
                structure: r.structure,
                runs: vec![r],
            }),
        }
    }
    out
}

fn fmt3((lo, mid, hi): (f64, f64, f64)) -> String {
    format!("{lo:.2} / {mid:.2} / {hi:.2}")
}

/// Throughput and memory: min / median / max over repetitions.
pub fn summary_table(report: &IndexReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "throughput per thread, M ops/s, min / median / max of {} repetition(s)",
        report.config.repeats
    );
    let _ = writeln!(
        out,
        "{:<9} {:>2} {:<16} {:>23} {:>23} {:>6} {:>6} {:>6} {:>5}",
        "scenario", "T", "structure", "insert", "lookup", "B/key", "min", "rss", "grows"
    );
    for g in groups(report) {
        let _ = writeln!(
            out,
            "{:<9} {:>2} {:<16} {:>23} {:>23} {:>6.2} {:>6.2} {:>6.2} {:>5}",
            g.scenario.name(),
            g.threads,
            g.structure.name(),
            fmt3(g.insert_mops()),
            fmt3(g.lookup_mops()),
            g.spread(|r| r.bytes_per_key).1,
            g.spread(|r| r.min_bytes_per_key).1,
            g.spread(|r| r.rss_bytes_per_key).1,
            g.spread(|r| f64::from(r.grows)).1,
        );
    }
    out.push_str(
        "B/key: at the end (nvdepot: memory_bytes/len; others: bucket arithmetic); \
         min: lowest during the load; rss: resident-set growth per key\n",
    );
    out
}

/// Picks one percentile out of a [`Latency`].
type Percentile = fn(&Latency) -> u64;

/// Latency percentiles in microseconds (medians over repetitions), laid out
/// like uDepot's Fig. 5c: one column per operation and scenario.
pub fn latency_table(report: &IndexReport) -> String {
    let mut out = String::new();
    let scenarios = report.config.scenarios();
    let _ = writeln!(
        out,
        "latency, us (median over repetitions; 1 op in {} timed)",
        report.config.latency_sample
    );
    let mut header = format!("{:>2} {:<16} {:<7}", "T", "structure", "pct");
    for op in ["lookup", "insert"] {
        for s in &scenarios {
            let _ = write!(header, " {:>16}", format!("{op}/{}", s.name()));
        }
    }
    let _ = writeln!(out, "{header}");
    let all = groups(report);
    let percentiles: [(&str, Percentile); 5] = [
        ("p50", |l| l.p50_ns),
        ("p99", |l| l.p99_ns),
        ("p99.9", |l| l.p999_ns),
        ("p99.99", |l| l.p9999_ns),
        ("max", |l| l.max_ns),
    ];
    for &threads in &report.config.threads {
        for structure in report.config.structures() {
            for (name, f) in percentiles {
                let mut line = format!("{threads:>2} {:<16} {name:<7}", structure.name());
                for insert in [false, true] {
                    for &s in &scenarios {
                        let g = all.iter().find(|g| {
                            g.scenario == s && g.threads == threads && g.structure == structure
                        });
                        let v = g.map_or(f64::NAN, |g| g.latency_us(f, insert));
                        let _ = write!(line, " {v:>16.2}");
                    }
                }
                let _ = writeln!(out, "{line}");
            }
        }
    }
    out
}

/// The variants compared with dashmap: nvdepot's, and the bound.
const COMPARED: [Structure; 3] = [
    Structure::Nvdepot,
    Structure::NvdepotPrefetch,
    Structure::ProbeBound,
];

/// A variant's per-thread median over dashmap's, for each scenario and
/// thread count.
pub struct Ratio {
    pub structure: Structure,
    pub scenario: Scenario,
    pub threads: usize,
    pub insert: f64,
    pub lookup: f64,
}

/// [`Ratio`]s of every variant of [`COMPARED`] measured.
pub fn ratios(report: &IndexReport) -> Vec<Ratio> {
    let all = groups(report);
    let find = |s, t, st| {
        all.iter()
            .find(|g| g.scenario == s && g.threads == t && g.structure == st)
    };
    let mut out = Vec::new();
    for structure in COMPARED {
        for s in report.config.scenarios() {
            for &t in &report.config.threads {
                if let (Some(n), Some(d)) = (find(s, t, structure), find(s, t, Structure::DashMap))
                {
                    out.push(Ratio {
                        structure,
                        scenario: s,
                        threads: t,
                        insert: n.insert_mops().1 / d.insert_mops().1,
                        lookup: n.lookup_mops().1 / d.lookup_mops().1,
                    });
                }
            }
        }
    }
    out
}

/// The goals, checked on medians: ≥ 2× dashmap per thread, ≤ 9
/// bytes per key, and the insert p99.99 during grows.
pub fn goals(report: &IndexReport) -> String {
    let mut out = String::new();
    for r in ratios(report) {
        let _ = writeln!(
            out,
            "{} / dashmap per thread, {} T={}: inserts {:.2}x, lookups {:.2}x ({})",
            r.structure.name(),
            r.scenario.name(),
            r.threads,
            r.insert,
            r.lookup,
            if r.structure == Structure::ProbeBound {
                "the bound: no 32-slot neighbourhood table does less work"
            } else if r.insert >= 2.0 && r.lookup >= 2.0 {
                "goal >= 2x met"
            } else {
                "goal >= 2x NOT met"
            },
        );
    }
    for g in groups(report) {
        if g.structure != Structure::Nvdepot {
            continue;
        }
        let (end, min) = (
            g.spread(|r| r.bytes_per_key).1,
            g.spread(|r| r.min_bytes_per_key).1,
        );
        let mut line = format!(
            "nvdepot {} T={}: {end:.2} B/key at {} keys, {min:.2} B/key at its fullest",
            g.scenario.name(),
            g.threads,
            report.config.keys,
        );
        if let Scenario::Grows(_) = g.scenario {
            let _ = write!(
                line,
                "; insert p99.99 during grows {:.1} us (max {:.1} us)",
                g.latency_us(|l| l.p9999_ns, true),
                g.latency_us(|l| l.max_ns, true),
            );
        }
        let _ = writeln!(out, "{line}");
    }
    out.push_str(&ratio_line(report));
    out.push('\n');
    out
}

/// The one line, each figure the worst over scenarios and thread
/// counts: `vs_dashmap` the lower of the insert and lookup ratios of the
/// batched variant (the plain one's beside it), `bytes_per_key_fullest`
/// the plain index's B/key just before a grow, `grow_p9999_ms` its insert
/// p99.99 while growing, `bound_vs_dashmap` the same as `vs_dashmap` for
/// `h32-probe` (the most a table with uDepot's neighbourhoods reaches).
/// `n/a` where the run did not measure it.
pub fn ratio_line(report: &IndexReport) -> String {
    let ratios = ratios(report);
    let worst = |st: Structure| {
        ratios
            .iter()
            .filter(|r| r.structure == st)
            .map(|r| r.insert.min(r.lookup))
            .reduce(f64::min)
    };
    let groups = groups(report);
    let grows = || {
        groups.iter().filter(|g| {
            g.structure == Structure::Nvdepot && matches!(g.scenario, Scenario::Grows(_))
        })
    };
    let fullest = grows()
        .map(|g| g.spread(|r| r.min_bytes_per_key).1)
        .reduce(f64::max);
    let p9999 = grows()
        .map(|g| g.latency_us(|l| l.p9999_ns, true) / 1000.0)
        .reduce(f64::max);
    let show =
        |v: Option<f64>, digits: usize| v.map_or("n/a".to_owned(), |v| format!("{v:.digits$}"));
    format!(
        "ratio vs_dashmap={} vs_dashmap_unbatched={} bytes_per_key_fullest={} grow_p9999_ms={} \
         bound_vs_dashmap={}",
        show(worst(Structure::NvdepotPrefetch), 2),
        show(worst(Structure::Nvdepot), 2),
        show(fullest, 2),
        show(p9999, 2),
        show(worst(Structure::ProbeBound), 2),
    )
}

/// Every run and the summary as a JSON object.
pub fn json(report: &IndexReport) -> String {
    let c = &report.config;
    let mut out = String::from("{\n");
    let scenarios: Vec<String> = c.scenarios().iter().map(|s| quote(&s.name())).collect();
    let _ = writeln!(
        out,
        "  \"config\": {{\"keys\": {}, \"threads\": {:?}, \"scenarios\": [{}], \"grows\": {}, \
         \"competitors\": {}, \"latency_sample\": {}, \"repeats\": {}, \"seed\": {}}},",
        c.keys,
        c.threads,
        scenarios.join(", "),
        c.grows,
        c.competitors,
        c.latency_sample,
        c.repeats,
        c.seed,
    );
    out.push_str("  \"runs\": [\n");
    let runs: Vec<String> = report.runs.iter().map(run_json).collect();
    out.push_str(&runs.join(",\n"));
    out.push_str("\n  ],\n  \"summary\": [\n");
    let summary: Vec<String> = groups(report).iter().map(group_json).collect();
    out.push_str(&summary.join(",\n"));
    out.push_str("\n  ],\n  \"nvdepot_over_dashmap\": [");
    let ratios: Vec<String> = ratios(report)
        .into_iter()
        .map(|r| {
            format!(
                "{{\"structure\": {}, \"scenario\": {}, \"threads\": {}, \
                 \"insert\": {:.4}, \"lookup\": {:.4}}}",
                quote(r.structure.name()),
                quote(&r.scenario.name()),
                r.threads,
                r.insert,
                r.lookup,
            )
        })
        .collect();
    out.push_str(&ratios.join(", "));
    out.push_str("]\n}\n");
    out
}

fn run_json(r: &Run) -> String {
    format!(
        "    {{\"repetition\": {}, \"scenario\": {}, \"threads\": {}, \"structure\": {}, \
         \"grows\": {}, \"bytes_per_key\": {:.4}, \"min_bytes_per_key\": {:.4}, \
         \"rss_bytes_per_key\": {:.4}, \"fingerprint_conflicts\": {}, \
         \"insert\": {}, \"lookup\": {}}}",
        r.repetition + 1,
        quote(&r.scenario.name()),
        r.threads,
        quote(r.structure.name()),
        r.grows,
        r.bytes_per_key,
        r.min_bytes_per_key,
        r.rss_bytes_per_key,
        r.fingerprint_conflicts,
        phase_json(&r.insert, r.threads),
        phase_json(&r.lookup, r.threads),
    )
}

fn phase_json(p: &super::Phase, threads: usize) -> String {
    let l = &p.latency;
    format!(
        "{{\"ops\": {}, \"seconds\": {:.6}, \"mops_per_thread\": {:.4}, \"timed\": {}, \
         \"p50_us\": {:.3}, \"p99_us\": {:.3}, \"p999_us\": {:.3}, \"p9999_us\": {:.3}, \
         \"max_us\": {:.3}}}",
        p.ops,
        p.seconds,
        p.mops_per_thread(threads),
        l.count,
        us(l.p50_ns),
        us(l.p99_ns),
        us(l.p999_ns),
        us(l.p9999_ns),
        us(l.max_ns),
    )
}

fn group_json(g: &Group<'_>) -> String {
    let triple = |(lo, mid, hi): (f64, f64, f64)| {
        format!("{{\"min\": {lo:.4}, \"median\": {mid:.4}, \"max\": {hi:.4}}}")
    };
    format!(
        "    {{\"scenario\": {}, \"threads\": {}, \"structure\": {}, \"repetitions\": {}, \
         \"insert_mops_per_thread\": {}, \"lookup_mops_per_thread\": {}, \
         \"bytes_per_key\": {}, \"min_bytes_per_key\": {}, \"rss_bytes_per_key\": {}, \
         \"insert_p9999_us\": {}, \"lookup_p9999_us\": {}}}",
        quote(&g.scenario.name()),
        g.threads,
        quote(g.structure.name()),
        g.runs.len(),
        triple(g.insert_mops()),
        triple(g.lookup_mops()),
        triple(g.spread(|r| r.bytes_per_key)),
        triple(g.spread(|r| r.min_bytes_per_key)),
        triple(g.spread(|r| r.rss_bytes_per_key)),
        triple(g.spread(|r| us(r.insert.latency.p9999_ns))),
        triple(g.spread(|r| us(r.lookup.latency.p9999_ns))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads() {
        assert_eq!(spread(vec![3.0, 1.0, 2.0]), (1.0, 2.0, 3.0));
        assert_eq!(spread(vec![4.0, 1.0, 2.0, 3.0]), (1.0, 2.5, 4.0));
    }
}
