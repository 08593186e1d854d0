//! Latency histograms, db_bench's result line and the JSON form of a result.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// A latency histogram in nanoseconds.
#[derive(Debug, Clone)]
pub struct Hist(pub Histogram<u64>);

impl Default for Hist {
    fn default() -> Self {
        Self::new()
    }
}

impl Hist {
    /// 1 ns .. 1 hour, 3 significant digits.
    pub fn new() -> Self {
        Hist(
            Histogram::new_with_bounds(1, 3_600_000_000_000, 3).unwrap_or_else(|_| {
                // The bounds above are valid; fall back to an auto-resizing histogram anyway.
                let mut h = Histogram::new(3).unwrap_or_else(|_| unreachable_hist());
                h.auto(true);
                h
            }),
        )
    }
    /// Records one latency.
    pub fn record_nanos(&mut self, ns: u64) {
        self.0.saturating_record(ns.max(1));
    }
    /// Adds another histogram.
    pub fn merge(&mut self, other: &Hist) {
        let _ = self.0.add(&other.0);
    }
    /// Count of samples.
    pub fn count(&self) -> u64 {
        self.0.len()
    }
    /// Percentile (0-100) in microseconds.
    pub fn pct_us(&self, p: f64) -> f64 {
        self.0.value_at_quantile(p / 100.0) as f64 / 1000.0
    }
    /// Summary in microseconds.
    pub fn summary(&self) -> Latency {
        if self.count() == 0 {
            return Latency::default();
        }
        Latency {
            count: self.count(),
            avg_us: self.0.mean() / 1000.0,
            stddev_us: self.0.stdev() / 1000.0,
            min_us: self.0.min() as f64 / 1000.0,
            max_us: self.0.max() as f64 / 1000.0,
            p50_us: self.pct_us(50.0),
            p75_us: self.pct_us(75.0),
            p90_us: self.pct_us(90.0),
            p99_us: self.pct_us(99.0),
            p999_us: self.pct_us(99.9),
            p9999_us: self.pct_us(99.99),
        }
    }
}

fn unreachable_hist() -> Histogram<u64> {
    // sigfig 3 is always accepted by hdrhistogram; this only satisfies the type checker.
    Histogram::new_with_max(1 << 40, 2).unwrap_or_else(|_| std::process::abort())
}

/// Latency summary in microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    /// Samples.
    pub count: u64,
    /// Mean.
    pub avg_us: f64,
    /// Standard deviation.
    pub stddev_us: f64,
    /// Minimum.
    pub min_us: f64,
    /// Maximum.
    pub max_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 75th percentile.
    pub p75_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// 99.99th percentile.
    pub p9999_us: f64,
}

impl Latency {
    /// db_bench's histogram header (RocksDB's `HistogramImpl::ToString` first lines).
    pub fn db_bench_text(&self, what: &str) -> String {
        format!(
            "Microseconds per {what}:\nCount: {} Average: {:.4}  StdDev: {:.2}\nMin: {:.2}  Median: {:.4}  Max: {:.2}\nPercentiles: P50: {:.2} P75: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}\n------------------------------------------------------\n",
            self.count,
            self.avg_us,
            self.stddev_us,
            self.min_us,
            self.p50_us,
            self.max_us,
            self.p50_us,
            self.p75_us,
            self.p99_us,
            self.p999_us,
            self.p9999_us
        )
    }
}

/// One benchmark's result, as printed and as written to `--json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BenchResult {
    /// Benchmark name (`fillrandom`, `ycsb-a-run`, ...).
    pub benchmark: String,
    /// Engine name.
    pub engine: String,
    /// Threads that did the measured operations.
    pub threads: usize,
    /// Operations done.
    pub ops: u64,
    /// Wall seconds.
    pub elapsed_secs: f64,
    /// db_bench's micros/op (thread-seconds per op).
    pub micros_per_op: f64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Key+value bytes moved.
    pub bytes: u64,
    /// MB/s (MiB, as db_bench).
    pub mb_per_sec: f64,
    /// Extra text (`(found of total)`).
    pub message: String,
    /// Latency summary of the measured operations.
    pub latency: Latency,
    /// Per-operation-type latencies (YCSB), name -> summary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_op: Vec<(String, Latency)>,
    /// Size on disk after the benchmark (fills only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_on_disk: Option<u64>,
    /// Bytes the engine wrote by flush and compaction during the benchmark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_bytes_written: Option<u64>,
    /// Key+value bytes the benchmark wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_bytes_written: Option<u64>,
    /// compaction_bytes_written / user_bytes_written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_amp: Option<f64>,
    /// size_on_disk / key and value bytes of the distinct live keys (space amplification;
    /// below 1 where compression saves more than the garbage costs). Only where the run wrote
    /// every key the database holds (a fresh database, no deletes or merges).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space_amp: Option<f64>,
    /// Why this figure is not like for like with the others (a phase stopped at its time
    /// limit, or ran on fewer records); the report lists it under the table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Set when the benchmark was skipped or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl BenchResult {
    /// db_bench's result line: `fillrandom   :       6.365 micros/op 157087 ops/sec;  121.3 MB/s`.
    pub fn line(&self) -> String {
        // LevelDB's db_bench: rate "%6.1f MB/s", AppendWithSpace(message), then "; " + extra.
        let mut extra = String::new();
        if self.bytes > 0 {
            extra.push_str(&format!("{:6.1} MB/s", self.mb_per_sec));
        }
        if !self.message.is_empty() {
            if !extra.is_empty() {
                extra.push(' ');
            }
            extra.push_str(&self.message);
        }
        let sep = if extra.is_empty() { "" } else { " " };
        format!(
            "{:<12} : {:>11.3} micros/op {} ops/sec;{sep}{extra}",
            self.benchmark,
            self.micros_per_op,
            self.ops_per_sec.round() as u64,
        )
    }
}

/// Writes the `--json` file of a run: `{"tool", "engine", "results"}`, the shape `compare` reads
/// back.
pub fn write_results_json(
    path: &str,
    tool: &str,
    engine: &str,
    results: &[BenchResult],
) -> Result<(), String> {
    let doc = serde_json::json!({"tool": tool, "engine": engine, "results": results});
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| format!("writing {path}: {e}"))
}

/// Parses db_bench result lines (RocksDB's own tool, either the old or the 7.x form) out of its
/// stdout.
pub fn parse_db_bench_output(text: &str) -> Vec<BenchResult> {
    let mut out = Vec::new();
    let mut pending_hist: Option<usize> = None;
    for line in text.lines() {
        if let Some((name, rest)) = line.split_once(" : ") {
            let name = name.trim();
            let words: Vec<&str> = rest.split_whitespace().collect();
            if words.len() >= 4 && words[1] == "micros/op" && words[3].starts_with("ops/sec") {
                let mut r = BenchResult {
                    benchmark: name.to_string(),
                    engine: "rocksdb-db_bench".into(),
                    micros_per_op: words[0].parse().unwrap_or(0.0),
                    ops_per_sec: words[2].parse().unwrap_or(0.0),
                    ..Default::default()
                };
                if let Some(i) = words.iter().position(|w| *w == "MB/s") {
                    r.mb_per_sec = words[i - 1].trim_start_matches(';').parse().unwrap_or(0.0);
                }
                if let Some(i) = words.iter().position(|w| w.starts_with("operations")) {
                    r.ops = words[i - 1].parse().unwrap_or(0);
                }
                if let Some(i) = words.iter().position(|w| *w == "seconds") {
                    r.elapsed_secs = words[i - 1].parse().unwrap_or(0.0);
                }
                // db_bench prints ops/sec as an integer, so a one-operation step such as
                // `compact` reads "0 ops/sec"; take the rate from the count and the time.
                if r.ops_per_sec < 10.0 && r.ops > 0 && r.elapsed_secs > 0.0 {
                    r.ops_per_sec = r.ops as f64 / r.elapsed_secs;
                }
                out.push(r);
                pending_hist = Some(out.len() - 1);
                continue;
            }
        }
        if let (Some(i), Some(rest)) = (pending_hist, line.strip_prefix("Percentiles:")) {
            let w: Vec<&str> = rest.split_whitespace().collect();
            let find = |k: &str| {
                w.iter()
                    .position(|x| *x == k)
                    .and_then(|p| w.get(p + 1))
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            let l = &mut out[i].latency;
            l.p50_us = find("P50:");
            l.p75_us = find("P75:");
            l.p99_us = find("P99:");
            l.p999_us = find("P99.9:");
            l.p9999_us = find("P99.99:");
            pending_hist = None;
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn result_line_matches_db_bench() {
        let r = BenchResult {
            benchmark: "fillrandom".into(),
            micros_per_op: 6.365,
            ops_per_sec: 157087.0,
            bytes: 1,
            mb_per_sec: 121.3,
            ..Default::default()
        };
        assert_eq!(
            r.line(),
            "fillrandom   :       6.365 micros/op 157087 ops/sec;  121.3 MB/s"
        );
        let r = BenchResult {
            benchmark: "readrandom".into(),
            micros_per_op: 2.0,
            ops_per_sec: 500000.0,
            message: "(10 of 10 found)".into(),
            ..Default::default()
        };
        assert_eq!(
            r.line(),
            "readrandom   :       2.000 micros/op 500000 ops/sec; (10 of 10 found)"
        );
    }

    #[test]
    fn histogram_text_has_db_bench_fields() {
        let mut h = Hist::new();
        for us in 1..=1000u64 {
            h.record_nanos(us * 1000);
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert!((s.p50_us - 500.0).abs() < 2.0, "{}", s.p50_us);
        assert!((s.p99_us - 990.0).abs() < 2.0);
        assert!((s.min_us - 1.0).abs() < 0.01);
        let t = s.db_bench_text("write");
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "Microseconds per write:");
        assert!(
            lines[1].starts_with("Count: 1000 Average: 500.5"),
            "{}",
            lines[1]
        );
        assert!(lines[2].starts_with("Min: 1.00  Median: "));
        assert!(lines[3].starts_with("Percentiles: P50: "));
        for k in ["P75:", "P99:", "P99.9:", "P99.99:"] {
            assert!(lines[3].contains(k));
        }
        // Round trip through the db_bench parser.
        let r = BenchResult {
            benchmark: "fillseq".into(),
            micros_per_op: 1.5,
            ops_per_sec: 666666.0,
            bytes: 1,
            mb_per_sec: 80.0,
            ..Default::default()
        };
        let text = format!("{}\n{}", r.line(), t);
        let p = parse_db_bench_output(&text);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].ops_per_sec, 666666.0);
        assert_eq!(p[0].mb_per_sec, 80.0);
        assert!(p[0].latency.p99_us > 900.0);
        let p = parse_db_bench_output(
            "fillseq      :       2.231 micros/op 448188 ops/sec 2.231 seconds 1000000 operations;   49.6 MB/s\n",
        );
        assert_eq!(p[0].ops, 1_000_000);
        assert_eq!(p[0].mb_per_sec, 49.6);
    }

    #[test]
    fn one_operation_steps_get_a_fractional_rate() {
        let p = parse_db_bench_output(
            "compact      : 3348145.000 micros/op 0 ops/sec 3.348 seconds 1 operations;\n",
        );
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].ops, 1);
        assert!(
            (p[0].ops_per_sec - 1.0 / 3.348).abs() < 1e-9,
            "{}",
            p[0].ops_per_sec
        );
    }

    #[test]
    fn results_json_has_the_shape_compare_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let p = path.to_str().unwrap();
        let r = BenchResult {
            benchmark: "fillseq".into(),
            ops: 7,
            ..Default::default()
        };
        write_results_json(p, "shale-bench ycsb", "leveldb", std::slice::from_ref(&r)).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["tool"], "shale-bench ycsb");
        assert_eq!(v["engine"], "leveldb");
        let back: Vec<BenchResult> = serde_json::from_value(v["results"].clone()).unwrap();
        assert_eq!(
            (back.len(), back[0].benchmark.as_str(), back[0].ops),
            (1, "fillseq", 7)
        );
        let e = write_results_json("/nonexistent/dir/r.json", "t", "e", &[]).unwrap_err();
        assert!(e.starts_with("writing /nonexistent/dir/r.json: "), "{e}");
    }
}
