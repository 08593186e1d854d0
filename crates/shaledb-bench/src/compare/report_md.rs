//! report.md: the substitutions used, the summary of ratios, and one table per workload.

use super::machine::today;
use super::suite::{suite_note, Substitution, Workload, SUBSTITUTIONS};
use super::Cell;
use crate::dbbench::report::BenchResult;
use std::fmt::Write as _;

/// A figure as the reports print it: thousands grouped from 100 up, two decimals below.
pub(super) fn fmt_num(x: f64) -> String {
    if x >= 100.0 {
        crate::ycsb::group_thousands(x.round() as u64)
    } else {
        format!("{x:.2}")
    }
}

/// report.md.
pub fn report_md(
    suite: &str,
    cells: &[Cell],
    wls: &[Workload],
    engines: &[String],
    facts: &str,
    command: &str,
) -> String {
    let mut s = format!("# shale-bench compare --suite={suite} ({})\n\n```\n{command}\n```\n\n{}\n\nEngines: {}. Each cell ran in its own process on a fresh database directory; engines alternate within each workload. Figures are one run on a shared machine: compare ratios, not absolutes.\n", today(), suite_note(suite), engines.join(", "));
    s.push_str(&substitutions_md(cells));
    s.push_str(&summary_md(cells, wls, engines));
    let _ = write!(s, "\n## Machine\n\n```\n{facts}```\n");
    for wl in wls {
        workload_md(&mut s, wl, cells);
    }
    s.push_str("\n## Commands\n\nSee commands.txt; raw per-cell JSON and stdout in raw/.\n");
    s
}

/// The Substitutions section: every substitution a cell of this report ran with.
fn substitutions_md(cells: &[Cell]) -> String {
    let mut s = String::new();
    let mut used: Vec<&Substitution> = Vec::new();
    for c in cells {
        for sub in SUBSTITUTIONS {
            let hit = sub.engine == c.engine && c.substitutions.iter().any(|l| l == sub.label);
            if hit && !used.iter().any(|u| std::ptr::eq(*u, sub)) {
                used.push(sub);
            }
        }
    }
    if !used.is_empty() {
        s.push_str("\n## Substitutions\n\nA cell labelled `engine (label)` ran with a stand-in for an option that engine does not have (table `SUBSTITUTIONS` in crates/shaledb-bench/src/compare/suite.rs; docs/benchmarks.md, \"Substitutions\"):\n\n| engine | workload option | ran with | label | why |\n| --- | --- | --- | --- | --- |\n");
        for u in used {
            let _ = writeln!(
                s,
                "| {} | {}={} | {}={} | {} | {} |",
                u.engine, u.flag, u.when[0], u.flag, u.with, u.label, u.why
            );
        }
    }
    s
}

/// One workload's section: its failed cells, then per benchmark one row per engine (with
/// per-operation latencies, size and write-amplification rows), then the notes of its figures.
fn workload_md(s: &mut String, wl: &Workload, cells: &[Cell]) {
    let _ = write!(s, "\n## {} — {}\n\n| benchmark | engine | ops/sec | MB/s | P50 us | P99 us | P99.9 us | ShaleDB / engine |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n", wl.id, wl.title);
    let mine: Vec<&Cell> = cells.iter().filter(|c| c.workload == wl.id).collect();
    let shale = mine.iter().find(|c| c.engine == "shaledb");
    let mut notes: Vec<String> = Vec::new();
    for c in &mine {
        if let Some(e) = &c.error {
            let _ = writeln!(
                s,
                "| (all) | {} | FAILED: {} | | | | | |",
                c.label(),
                e.replace('|', "/")
            );
        }
    }
    for (bn, nth) in bench_order(&mine) {
        // The n-th occurrence of a repeated benchmark name pairs with the n-th.
        let pick = |c: &Cell| nth_result(c, &bn, nth).cloned();
        let b = if nth > 0 {
            format!("{bn} ({})", nth + 1)
        } else {
            bn.clone()
        };
        let base = shale.and_then(|c| pick(c));
        for c in &mine {
            if c.error.is_some() {
                continue;
            }
            let Some(r) = pick(c) else { continue };
            result_rows(s, &b, &c.label(), &r, base.as_ref());
            if let Some(n) = &r.note {
                notes.push(format!("- † {b} on {}: {n}", c.label()));
            }
            if let (Some(sz), Some(wa)) = (r.size_on_disk, r.write_amp) {
                let space = r.space_amp.map_or(String::new(), |a| format!("{a:.2}x"));
                let _ = writeln!(
                    s,
                    "| {b} size / write-amp / space-amp | {} | {:.1} MB | {wa:.2}x | {space} | | | |",
                    c.label(),
                    sz as f64 / 1048576.0
                );
            }
        }
    }
    if !notes.is_empty() {
        let _ = write!(s, "\n{}\n", notes.join("\n"));
    }
}

/// The rows of one result of benchmark `b` on the engine column `label`: ops/sec and latency
/// with the ratio to ShaleDB's `base`, then per-operation latencies.
fn result_rows(s: &mut String, b: &str, label: &str, r: &BenchResult, base: Option<&BenchResult>) {
    let ratio = match base {
        Some(b0) if r.ops_per_sec > 0.0 => {
            let (x, dagger) = ratio_text(b0, r);
            format!("{x}{dagger}")
        }
        _ => "-".into(),
    };
    let l = &r.latency;
    let _ = writeln!(
        s,
        "| {b} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {ratio} |",
        label,
        fmt_num(r.ops_per_sec),
        r.mb_per_sec,
        l.p50_us,
        l.p99_us,
        l.p999_us
    );
    for (op, ol) in &r.per_op {
        let _ = writeln!(
            s,
            "| {b} {op} | {} | | | {:.1} | {:.1} | {:.1} | |",
            label, ol.p50_us, ol.p99_us, ol.p999_us
        );
    }
}

/// ShaleDB's ops/sec over a peer's as `1.23x`, and `†` when either figure carries a note.
fn ratio_text(shale: &BenchResult, peer: &BenchResult) -> (String, &'static str) {
    let noted = shale.note.is_some() || peer.note.is_some();
    (
        format!("{:.2}x", shale.ops_per_sec / peer.ops_per_sec),
        if noted { "†" } else { "" },
    )
}

/// The benchmarks of a workload in run order, each with its occurrence number (a workload may
/// run `readrandom` twice: before and after a compaction).
pub(super) fn bench_order(mine: &[&Cell]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for c in mine {
        let mut seen: Vec<&str> = Vec::new();
        for r in c.results.iter().filter(|r| r.error.is_none()) {
            let nth = seen.iter().filter(|b| **b == r.benchmark).count();
            seen.push(&r.benchmark);
            if !out.iter().any(|(b, n)| *b == r.benchmark && *n == nth) {
                out.push((r.benchmark.clone(), nth));
            }
        }
    }
    out
}

/// The `nth` successful result of benchmark `bench` in cell `c`.
pub(super) fn nth_result<'a>(c: &'a Cell, bench: &str, nth: usize) -> Option<&'a BenchResult> {
    c.results
        .iter()
        .filter(|r| r.benchmark == bench && r.error.is_none())
        .nth(nth)
}

/// The headline table: ShaleDB's ops/sec over each peer's, per workload and benchmark.
fn summary_md(cells: &[Cell], wls: &[Workload], engines: &[String]) -> String {
    let peers: Vec<&String> = engines.iter().filter(|e| *e != "shaledb").collect();
    if peers.is_empty() || !engines.iter().any(|e| e == "shaledb") {
        return String::new();
    }
    let mut s = String::from("\n## Summary: ShaleDB ops/sec ÷ peer ops/sec\n\nAbove 1 ShaleDB is faster. `*`: one of the two cells ran with a substitution (see above); `†`: one of the two figures has a note under its workload's table (a phase stopped at its time limit); `F`: a cell failed; `-`: not run.\n\n| workload | benchmark |");
    for p in &peers {
        let _ = write!(s, " {p} |");
    }
    s.push_str("\n| --- | --- |");
    for _ in &peers {
        s.push_str(" ---: |");
    }
    s.push('\n');
    for wl in wls {
        let mine: Vec<&Cell> = cells.iter().filter(|c| c.workload == wl.id).collect();
        let Some(shale) = mine.iter().find(|c| c.engine == "shaledb") else {
            continue;
        };
        for (b, nth) in bench_order(&mine) {
            let name = if nth > 0 {
                format!("{b} ({})", nth + 1)
            } else {
                b.clone()
            };
            let _ = write!(s, "| {} | {name} |", wl.id);
            let base = nth_result(shale, &b, nth);
            for p in &peers {
                let cell = mine.iter().find(|c| &&c.engine == p);
                let text = match (cell, base) {
                    (None, _) => "-".to_string(),
                    (Some(c), _) if c.error.is_some() => "F".to_string(),
                    (_, None) if shale.error.is_some() => "F".to_string(),
                    (Some(c), Some(b0)) => match nth_result(c, &b, nth) {
                        Some(r) if r.ops_per_sec > 0.0 => {
                            let star =
                                if c.substitutions.is_empty() && shale.substitutions.is_empty() {
                                    ""
                                } else {
                                    "*"
                                };
                            let (x, dagger) = ratio_text(b0, r);
                            format!("{x}{star}{dagger}")
                        }
                        _ => "-".to_string(),
                    },
                    _ => "-".to_string(),
                };
                let _ = write!(s, " {text} |");
            }
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::compare::report_html::report_html;
    use crate::compare::suite::suite;

    #[test]
    fn a_noted_figure_is_marked_in_the_summary_and_explained_under_its_table() {
        let wls: Vec<Workload> = suite("tiny")
            .unwrap()
            .into_iter()
            .filter(|w| w.id == "Y1-8t")
            .collect();
        let result = |ops: f64, note: Option<&str>| BenchResult {
            benchmark: "ycsb-a-load".into(),
            ops_per_sec: ops,
            note: note.map(String::from),
            ..Default::default()
        };
        let cell = |e: &str, r: BenchResult| Cell {
            workload: "Y1-8t".into(),
            engine: e.into(),
            command: String::new(),
            results: vec![r],
            error: None,
            secs: 1.0,
            substitutions: Vec::new(),
        };
        let cells = vec![
            cell("shaledb", result(300.0, None)),
            cell(
                "wiredtiger",
                result(
                    100.0,
                    Some("stopped at --maxexecutiontime=9: 5 of 50 records loaded"),
                ),
            ),
            cell("fjall", result(150.0, None)),
        ];
        let cols: Vec<String> = ["shaledb", "wiredtiger", "fjall"]
            .map(String::from)
            .to_vec();
        let md = report_md("tiny", &cells, &wls, &cols, "", "cmd");
        assert!(
            md.contains("| Y1-8t | ycsb-a-load | 3.00x† | 2.00x |"),
            "{md}"
        );
        assert!(
            md.contains("| ycsb-a-load | wiredtiger | 100 | 0.0 | 0.0 | 0.0 | 0.0 | 3.00x† |"),
            "{md}"
        );
        assert!(md.contains("\n- † ycsb-a-load on wiredtiger: stopped at --maxexecutiontime=9: 5 of 50 records loaded\n"), "{md}");
        let html = report_html("tiny", &cells, &wls, "", "cmd");
        assert!(
            html.contains("<p>† ycsb-a-load on wiredtiger: stopped at"),
            "{html}"
        );
    }
}
