//! report.html: self-contained, one inline SVG bar chart per benchmark and figure.

use super::machine::today;
use super::report_md::{bench_order, fmt_num, nth_result};
use super::suite::{suite_note, Workload};
use super::Cell;
use std::fmt::Write as _;

/// A horizontal bar chart; ShaleDB's bars are green.
fn svg_bars(title: &str, bars: &[(String, f64)], unit: &str) -> String {
    let max = bars.iter().map(|b| b.1).fold(0.0f64, f64::max).max(1e-9);
    let h = 22 * bars.len() + 30;
    let mut s = format!("<svg xmlns='http://www.w3.org/2000/svg' width='720' height='{h}' font-family='sans-serif' font-size='12'><text x='4' y='14' font-weight='bold'>{}</text>", esc(title));
    for (i, (label, v)) in bars.iter().enumerate() {
        let y = 24 + i * 22;
        let wdt = (v / max * 440.0).max(1.0);
        let _ = write!(s, "<text x='4' y='{}'>{}</text><rect x='200' y='{y}' width='{wdt:.1}' height='16' fill='{}'/><text x='{:.1}' y='{}'>{} {unit}</text>", y + 12, esc(label), if label.contains("shaledb") { "#2a7" } else { "#58a" }, 204.0 + wdt, y + 12, fmt_num(*v));
    }
    s.push_str("</svg>");
    s
}

/// `s` escaped for HTML text and single-quoted attributes.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&#39;")
}

/// report.html: self-contained, inline SVG.
pub fn report_html(
    suite: &str,
    cells: &[Cell],
    wls: &[Workload],
    facts: &str,
    command: &str,
) -> String {
    let mut s = format!("<!doctype html><html><head><meta charset='utf-8'><title>shale-bench {suite}</title><style>body{{font-family:sans-serif;max-width:800px;margin:auto}}pre{{background:#eee;padding:8px}}</style></head><body><h1>shale-bench compare --suite={suite} ({})</h1><pre>{}</pre><p>{}</p><p>A label in parentheses after an engine names a substitution for an option that engine lacks (see report.md and docs/benchmarks.md, Substitutions).</p><pre>{}</pre>", today(), esc(command), esc(suite_note(suite)), esc(facts));
    for wl in wls {
        let _ = write!(s, "<h2>{} — {}</h2>", esc(&wl.id), esc(&wl.title));
        let mine: Vec<&Cell> = cells.iter().filter(|c| c.workload == wl.id).collect();
        for c in &mine {
            if let Some(e) = &c.error {
                let _ = write!(s, "<p><b>{}</b> failed: {}</p>", esc(&c.label()), esc(e));
            }
        }
        let shale = mine.iter().find(|c| c.engine == "shaledb");
        for (bn, nth) in bench_order(&mine) {
            let get = |c: &Cell| nth_result(c, &bn, nth).cloned();
            let b = if nth > 0 {
                format!("{bn} ({})", nth + 1)
            } else {
                bn.clone()
            };
            let base = shale.and_then(|c| get(c)).map(|r| r.ops_per_sec);
            let ops: Vec<(String, f64)> = mine
                .iter()
                .filter_map(|c| get(c).map(|r| (c.label(), r.ops_per_sec)))
                .collect();
            s.push_str(&svg_bars(&format!("{b}: ops/sec"), &ops, "ops/s"));
            for c in &mine {
                if let Some(n) = get(c).and_then(|r| r.note) {
                    let _ = write!(
                        s,
                        "<p>† {} on {}: {}</p>",
                        esc(&b),
                        esc(&c.label()),
                        esc(&n)
                    );
                }
            }
            if let Some(b0) = base {
                let ratios: Vec<(String, f64)> = ops
                    .iter()
                    .filter(|(e, v)| e != "shaledb" && *v > 0.0)
                    .map(|(e, v)| (format!("shaledb / {e}"), b0 / v))
                    .collect();
                if !ratios.is_empty() {
                    s.push_str(&svg_bars(
                        &format!("{b}: ShaleDB / peer (ops/sec ratio)"),
                        &ratios,
                        "x",
                    ));
                }
            }
            let mut lat = Vec::new();
            for c in &mine {
                if let Some(r) = get(c) {
                    for (p, v) in [
                        ("P50", r.latency.p50_us),
                        ("P99", r.latency.p99_us),
                        ("P99.9", r.latency.p999_us),
                    ] {
                        if v > 0.0 {
                            lat.push((format!("{} {p}", c.label()), v));
                        }
                    }
                }
            }
            if !lat.is_empty() {
                s.push_str(&svg_bars(&format!("{b}: latency percentiles"), &lat, "us"));
            }
        }
    }
    s.push_str("</body></html>\n");
    s
}
