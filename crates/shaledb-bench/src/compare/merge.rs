//! Writing a run's outputs, and merging a run into the results of earlier parts (`--append`).

use super::report_html::report_html;
use super::report_md::report_md;
use super::suite::Workload;
use super::Cell;
use std::path::Path;

/// The report's columns: this run's and the earlier parts', in the usual engine order.
pub(super) fn all_columns(kept: &[Cell], columns: &[String]) -> Vec<String> {
    const ORDER: [&str; 6] = [
        "shaledb",
        "rocksdb",
        "leveldb",
        "wiredtiger",
        "fjall",
        "rocksdb-db_bench",
    ];
    let mut all: Vec<String> = columns.to_vec();
    for c in kept {
        if !all.contains(&c.engine) {
            all.push(c.engine.clone());
        }
    }
    let rank = |e: &String| ORDER.iter().position(|o| o == e).unwrap_or(ORDER.len());
    all.sort_by_key(rank);
    all
}

/// Cells and part commands already in `dir` (from `runs.txt` and `results.json`), less the
/// cells of `rerun` workloads on `engines` (which this run measures again).
pub(super) fn earlier_parts(
    dir: &Path,
    rerun: &[Workload],
    engines: &[String],
) -> Result<(Vec<Cell>, String), String> {
    let results = dir.join("results.json");
    if !results.exists() {
        return Ok((Vec::new(), String::new()));
    }
    let text = std::fs::read_to_string(&results)
        .map_err(|e| format!("reading {}: {e}", results.display()))?;
    let mut cells: Vec<Cell> = serde_json::from_str(&text).map_err(|e| {
        format!(
            "--append: {} is not a compare result: {e}",
            results.display()
        )
    })?;
    cells.retain(|c| !(rerun.iter().any(|w| w.id == c.workload) && engines.contains(&c.engine)));
    let mut command = std::fs::read_to_string(dir.join("runs.txt")).unwrap_or_default();
    if !command.is_empty() && !command.ends_with('\n') {
        command.push('\n');
    }
    Ok((cells, command))
}

/// Writes report.md, report.html, results.json, commands.txt, runs.txt and machine.txt.
pub(super) fn write_outputs(
    dir: &Path,
    suite: &str,
    cells: &[Cell],
    wls: &[Workload],
    cols: &[String],
    facts: &str,
    command: &str,
) -> Result<(), String> {
    let wr = |name: &str, text: String| {
        std::fs::write(dir.join(name), text).map_err(|e| format!("writing {name}: {e}"))
    };
    wr(
        "report.md",
        report_md(suite, cells, wls, cols, facts, command),
    )?;
    wr(
        "report.html",
        report_html(suite, cells, wls, facts, command),
    )?;
    wr(
        "results.json",
        serde_json::to_string_pretty(cells).map_err(|e| e.to_string())?,
    )?;
    wr(
        "commands.txt",
        cells
            .iter()
            .map(|c| format!("# {} on {}\n{}\n", c.workload, c.engine, c.command))
            .collect(),
    )?;
    wr("runs.txt", format!("{command}\n"))?;
    wr("machine.txt", facts.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::compare::suite::suite;

    #[test]
    fn append_keeps_the_cells_of_workloads_not_rerun() {
        let dir = tempfile::tempdir().unwrap();
        let wls = suite("tiny").unwrap();
        let cell = |w: &str, e: &str| Cell {
            workload: w.into(),
            engine: e.into(),
            command: format!("run {w} {e}"),
            results: Vec::new(),
            error: None,
            secs: 1.0,
            substitutions: Vec::new(),
        };
        let both = vec!["shaledb".to_string(), "rocksdb".to_string()];
        assert!(earlier_parts(dir.path(), &wls, &both).unwrap().0.is_empty());
        let cells = vec![
            cell("R1", "shaledb"),
            cell("R1", "rocksdb"),
            cell("R2", "shaledb"),
        ];
        let cols = vec!["shaledb".to_string(), "rocksdb".to_string()];
        write_outputs(
            dir.path(),
            "tiny",
            &cells,
            &wls,
            &cols,
            "facts\n",
            "part one",
        )
        .unwrap();
        let r1: Vec<Workload> = wls.iter().filter(|w| w.id == "R1").cloned().collect();
        let (kept, command) = earlier_parts(dir.path(), &r1, &both).unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(
            (kept[0].workload.as_str(), kept[0].command.as_str()),
            ("R2", "run R2 shaledb")
        );
        assert_eq!(command, "part one\n");
        // A part that reruns R1 on RocksDB alone keeps ShaleDB's R1 cell.
        let rocks = vec!["rocksdb".to_string()];
        let (kept, _) = earlier_parts(dir.path(), &r1, &rocks).unwrap();
        assert_eq!(kept.len(), 2);
        assert!(kept
            .iter()
            .any(|c| (c.workload.as_str(), c.engine.as_str()) == ("R1", "shaledb")));
        assert_eq!(
            all_columns(&kept, &["fjall".to_string(), "rocksdb".to_string()]),
            ["shaledb", "rocksdb", "fjall"]
        );
        std::fs::write(dir.path().join("results.json"), "not json").unwrap();
        assert!(earlier_parts(dir.path(), &r1, &both).is_err());
    }
}
