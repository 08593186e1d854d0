//! Running one cell: a workload on an engine, each step in its own process (`shale-bench` or
//! RocksDB's `db_bench`), its results read back from the step's JSON or stdout.

use super::suite::{substitute, Kind, Workload};
use super::Cell;
use crate::dbbench::report::{parse_db_bench_output, BenchResult};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// RocksDB's own `db_bench`, if installed (Debian `rocksdb-tools`).
pub(super) fn find_db_bench() -> Option<PathBuf> {
    [
        "/usr/bin/db_bench",
        "/usr/local/bin/db_bench",
        "/usr/bin/rocksdb_db_bench",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

/// `a` quoted for a POSIX shell where it needs quoting.
pub(super) fn shell_quote(a: &str) -> String {
    if a.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_=./,:".contains(c))
    {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// Runs one process of a cell; returns its command, and its results or an error.
fn run_step(
    prog: &Path,
    args: &[String],
    json: &Path,
    stdout_path: &Path,
    db_bench: bool,
) -> (String, Result<Vec<BenchResult>, String>) {
    let command = std::iter::once(prog.display().to_string())
        .chain(args.iter().map(|a| shell_quote(a)))
        .collect::<Vec<_>>()
        .join(" ");
    let res = match Command::new(prog).args(args).output() {
        Err(e) => Err(format!("could not start: {e}")),
        Ok(o) => {
            let stdout = String::from_utf8_lossy(&o.stdout).to_string();
            let _ = std::fs::write(stdout_path, &stdout);
            if !o.status.success() {
                let err = String::from_utf8_lossy(&o.stderr);
                let last = err
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("failed");
                Err(format!(
                    "exit {}: {}",
                    o.status.code().unwrap_or(-1),
                    last.trim()
                ))
            } else if db_bench {
                let r = parse_db_bench_output(&stdout);
                let _ = std::fs::write(json, serde_json::to_string_pretty(&r).unwrap_or_default());
                Ok(r)
            } else {
                std::fs::read_to_string(json)
                    .map_err(|e| e.to_string())
                    .and_then(|t| {
                        serde_json::from_str::<serde_json::Value>(&t).map_err(|e| e.to_string())
                    })
                    .and_then(|v| {
                        serde_json::from_value::<Vec<BenchResult>>(v["results"].clone())
                            .map_err(|e| e.to_string())
                    })
                    .map_err(|e| format!("no JSON results: {e}"))
            }
        }
    };
    (command, res)
}

/// Runs every step of workload `wl` on `engine` with a database under `dir`; raw outputs go to
/// `raw`.
pub(super) fn run_cell(exe: &Path, wl: &Workload, engine: &str, dir: &Path, raw: &Path) -> Cell {
    let db = dir.join(format!("{}-{engine}", wl.id));
    let db_bench = engine == "rocksdb-db_bench";
    let prog = if db_bench {
        find_db_bench().unwrap_or_default()
    } else {
        exe.to_path_buf()
    };
    // The load step, then (if the workload has one) the measured step on the same database.
    let mut steps = vec![wl.args.clone()];
    if !wl.then.is_empty() {
        let mut t = wl.then.clone();
        t.push("--use_existing_db=1".into());
        steps.push(t);
    }
    let mut used: Vec<String> = Vec::new();
    let mut commands = Vec::new();
    let mut results = Vec::new();
    let mut error = None;
    let t0 = Instant::now();
    for (i, step) in steps.iter().enumerate() {
        let suffix = if i == 0 {
            String::new()
        } else {
            format!(".step{}", i + 1)
        };
        let json = raw.join(format!("{}-{engine}{suffix}.json", wl.id));
        let stdout_path = raw.join(format!("{}-{engine}{suffix}.stdout.txt", wl.id));
        let mut args: Vec<String> = Vec::new();
        if db_bench {
            args.extend(step.iter().filter(|a| !a.starts_with("--engine")).cloned());
            args.push("--histogram=1".into());
            args.push(format!("--db={}", db.display()));
        } else {
            match wl.kind {
                Kind::Ycsb => args.push("ycsb".into()),
                Kind::Tpch => args.push("tpch".into()),
                Kind::DbBench => {}
            }
            let (wargs, subs) = substitute(engine, step);
            for s in subs {
                if !used.iter().any(|u| u == s.label) {
                    used.push(s.label.to_string());
                }
            }
            args.extend(wargs);
            args.push(format!("--engine={engine}"));
            args.push(format!("--db={}", db.display()));
            args.push(format!("--json={}", json.display()));
        }
        let (command, res) = run_step(&prog, &args, &json, &stdout_path, db_bench);
        commands.push(command);
        match res {
            Ok(r) => results.extend(r),
            Err(e) => {
                error = Some(if steps.len() > 1 {
                    format!("step {}: {e}", i + 1)
                } else {
                    e
                });
                break;
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&db);
    Cell {
        workload: wl.id.clone(),
        engine: engine.into(),
        command: commands.join(" && "),
        results: if error.is_some() { Vec::new() } else { results },
        error,
        secs,
        substitutions: used,
    }
}
