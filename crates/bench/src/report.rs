//! The human table and the JSON document of a memcache benchmark.

use std::fmt::Write as _;

use crate::memcache::{rate, Config, Latency, PhaseReport, Stop};

/// One line describing the settings.
pub fn describe(config: &Config) -> String {
    let stop = match config.stop {
        Stop::Duration(d) => format!("{} s", d.as_secs_f64()),
        Stop::Requests(n) => format!("{n} requests"),
    };
    format!(
        "{proto} bench: {server}, {conns} connections on {threads} threads, pipeline {depth}, \
         get:set {g}:{s}{miss}, {bytes}-byte values, {keys} keys ({dist}), {stop}",
        proto = match config.protocol {
            crate::Protocol::Memcache => "memcache",
            crate::Protocol::Resp => "resp",
        },
        server = config.server,
        conns = config.connections,
        threads = config.threads.min(config.connections),
        depth = config.pipeline,
        g = config.ratio.0,
        s = config.ratio.1,
        bytes = config.value_bytes,
        keys = config.keys,
        dist = config.distribution,
        miss = if config.set_on_miss {
            " + set on miss"
        } else {
            ""
        },
    )
}

/// The preload in one line.
pub fn preload_line(r: &PhaseReport, value_bytes: usize) -> String {
    let mib = (r.sets * value_bytes as u64) as f64 / f64::from(1 << 20);
    format!(
        "preload: {} sets in {:.2} s: {:.0} sets/s, {:.1} MiB/s of values, {} errors, {} not stored{}",
        r.sets,
        r.seconds,
        r.ops_per_sec(),
        mib / r.seconds.max(1e-9),
        r.errors,
        r.not_stored,
        first_error(r),
    )
}

fn first_error(r: &PhaseReport) -> String {
    r.first_error
        .as_ref()
        .map(|e| format!(" (first: {e})"))
        .unwrap_or_default()
}

/// The measured phase as a few lines and a latency table.
pub fn run_table(r: &PhaseReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "run: {} ops in {:.2} s: {:.0} ops/s ({:.0} gets/s, {:.0} sets/s)",
        r.ops(),
        r.seconds,
        r.ops_per_sec(),
        rate(r.gets, r.seconds),
        rate(r.sets, r.seconds),
    );
    let _ = writeln!(
        out,
        "hit ratio {:.4} ({} hits / {} gets); verified {} values, {} mismatches; \
         {} errors, {} not stored{}",
        r.hit_ratio(),
        r.hits,
        r.gets,
        r.verified,
        r.mismatches,
        r.errors,
        r.not_stored,
        first_error(r),
    );
    let _ = writeln!(
        out,
        "{:<4} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "op", "count", "ops/s", "mean_us", "p50_us", "p99_us", "p99.9_us", "max_us"
    );
    for (name, l) in [("get", &r.get_latency), ("set", &r.set_latency)] {
        let _ = writeln!(
            out,
            "{:<4} {:>10} {:>10.0} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
            name,
            l.count,
            rate(l.count, r.seconds),
            l.mean_us,
            l.p50_us,
            l.p99_us,
            l.p999_us,
            l.max_us
        );
    }
    out
}

/// The whole benchmark as a JSON object (no external serializer: the
/// fields are numbers and a few plain strings).
pub fn json(config: &Config, preload: Option<&PhaseReport>, run: Option<&PhaseReport>) -> String {
    let (duration, requests) = match config.stop {
        Stop::Duration(d) => (d.as_secs_f64().to_string(), "null".to_owned()),
        Stop::Requests(n) => ("null".to_owned(), n.to_string()),
    };
    let mut out = String::from("{\n");
    let _ = writeln!(
        out,
        "  \"config\": {{\"server\": {}, \"connections\": {}, \"threads\": {}, \"pipeline\": {}, \
         \"ratio_get\": {}, \"ratio_set\": {}, \"value_bytes\": {}, \"keys\": {}, \
         \"distribution\": {}, \"set_on_miss\": {}, \"duration_seconds\": {}, \
         \"requests\": {}, \"verify_fraction\": {}, \"seed\": {}}},",
        quote(&config.server.to_string()),
        config.connections,
        config.threads.min(config.connections),
        config.pipeline,
        config.ratio.0,
        config.ratio.1,
        config.value_bytes,
        config.keys,
        quote(&config.distribution.to_string()),
        config.set_on_miss,
        duration,
        requests,
        config.verify_fraction,
        config.seed,
    );
    let _ = writeln!(out, "  \"preload\": {},", phase_json(preload));
    let _ = writeln!(out, "  \"run\": {}", phase_json(run));
    out.push_str("}\n");
    out
}

fn phase_json(r: Option<&PhaseReport>) -> String {
    let Some(r) = r else {
        return "null".to_owned();
    };
    format!(
        "{{\"seconds\": {:.6}, \"ops\": {}, \"ops_per_sec\": {:.1}, \"gets\": {}, \"sets\": {}, \
         \"hits\": {}, \"misses\": {}, \"hit_ratio\": {:.6}, \"verified\": {}, \
         \"mismatches\": {}, \"errors\": {}, \"not_stored\": {}, \"first_error\": {}, \
         \"get\": {}, \"set\": {}}}",
        r.seconds,
        r.ops(),
        r.ops_per_sec(),
        r.gets,
        r.sets,
        r.hits,
        r.misses,
        r.hit_ratio(),
        r.verified,
        r.mismatches,
        r.errors,
        r.not_stored,
        r.first_error.as_deref().map_or("null".to_owned(), quote),
        latency_json(&r.get_latency),
        latency_json(&r.set_latency),
    )
}

fn latency_json(l: &Latency) -> String {
    format!(
        "{{\"count\": {}, \"mean_us\": {:.3}, \"p50_us\": {:.3}, \"p99_us\": {:.3}, \
         \"p999_us\": {:.3}, \"max_us\": {:.3}}}",
        l.count, l.mean_us, l.p50_us, l.p99_us, l.p999_us, l.max_us
    )
}

/// A JSON string literal.
pub(crate) fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("a\"b\\c\r\n"), "\"a\\\"b\\\\c\\u000d\\u000a\"");
    }

    #[test]
    fn json_shape() {
        let config = Config::new("127.0.0.1:11211".parse().unwrap());
        let run = PhaseReport {
            seconds: 2.0,
            gets: 90,
            sets: 10,
            hits: 45,
            first_error: Some("SERVER_ERROR \"x\"".into()),
            ..PhaseReport::default()
        };
        let text = json(&config, None, Some(&run));
        assert!(text.contains("\"preload\": null"));
        assert!(text.contains("\"ops_per_sec\": 50.0"));
        assert!(text.contains("\"hit_ratio\": 0.500000"));
        assert!(text.contains("\"first_error\": \"SERVER_ERROR \\\"x\\\"\""));
        assert!(text.contains("\"duration_seconds\": 10,"));
        let table = run_table(&run);
        assert!(table.contains("50 ops/s"), "{table}");
    }
}
