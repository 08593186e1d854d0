//! Running one cell: a workload on an engine, each step in its own process (`shale-bench` or
//! RocksDB's `db_bench`), its results read back from the step's JSON or stdout.

use super::suite::{substitute, Kind, Workload};
use super::Cell;
use crate::dbbench::report::{parse_db_bench_output, BenchResult};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// A flag's name (dashes as underscores) if `a` is a flag, `--name[=value]` or `-name[=value]`.
fn flag_name(a: &str) -> Option<String> {
    let body = a.strip_prefix("--").or_else(|| a.strip_prefix('-'))?;
    Some(body.split('=').next().unwrap_or_default().replace('-', "_"))
}

/// The flags RocksDB's db_bench runs a workload step with: the step's own, except the
/// partitioned-index ones it spells differently. db_bench 7.8 has no `--index_type` (gflags
/// stops at an unknown flag): `--index_type=2` becomes its `--partition_index=1`, 0 (its
/// default) is dropped. With a two-level index, `--pin_top_level_index_and_filter=1` pins the
/// top level as ShaleDB and the RocksDB adapter do (db_bench's flag defaults to false).
/// `--partition_index`, `--partition_index_and_filters` and `--metadata_block_size` are
/// db_bench's own and pass as written. `--separate_blobs_at_write` is ShaleDB's alone (the
/// RocksDB adapter ignores it) and is dropped, and so is `--background_cpu_priority` (the
/// adapter's, through RocksDB's C API; db_bench has no flag for it). A step shale-bench cannot parse passes
/// unchanged (db_bench then reports what it thinks of it).
pub(super) fn db_bench_args(step: &[String]) -> Vec<String> {
    let Ok((map, _)) = crate::dbbench::flags::parse_args(step) else {
        return step.to_vec();
    };
    let Ok(flags) = crate::dbbench::Flags::from_map(&map) else {
        return step.to_vec();
    };
    let mut out = Vec::with_capacity(step.len() + 2);
    let mut i = 0;
    while i < step.len() {
        let a = &step[i];
        i += 1;
        if matches!(
            flag_name(a).as_deref(),
            Some("separate_blobs_at_write" | "background_cpu_priority")
        ) {
            if !a.contains('=') && step.get(i).is_some_and(|v| matches!(v.as_str(), "0" | "1")) {
                i += 1;
            }
            continue;
        }
        if flag_name(a).as_deref() == Some("index_type") {
            if !a.contains('=') {
                i += 1; // `--index_type 2`: the value is the next word
            }
            continue;
        }
        out.push(a.clone());
    }
    if map.get("index_type").is_some_and(|v| v.trim() == "2") {
        out.push("--partition_index=1".into());
    }
    if flags.opts.two_level_index {
        out.push("--pin_top_level_index_and_filter=1".into());
    }
    out
}

/// Runs one process of a cell; returns its command, and its results or an error. A process
/// still running after `timeout` is killed and the step fails.
fn run_step(
    prog: &Path,
    args: &[String],
    json: &Path,
    stdout_path: &Path,
    db_bench: bool,
    timeout: Option<Duration>,
) -> (String, Result<Vec<BenchResult>, String>) {
    let command = std::iter::once(prog.display().to_string())
        .chain(args.iter().map(|a| shell_quote(a)))
        .collect::<Vec<_>>()
        .join(" ");
    let res = match output_within(Command::new(prog).args(args), timeout) {
        Err(e) => Err(e),
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

/// `cmd.output()`, except that a process still running after `timeout` is killed and reported
/// as an error (its output so far is dropped).
fn output_within(cmd: &mut Command, timeout: Option<Duration>) -> Result<Output, String> {
    let Some(timeout) = timeout else {
        return cmd.output().map_err(|e| format!("could not start: {e}"));
    };
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not start: {e}"))?;
    // Both pipes are drained while the process runs: a full pipe would stall it.
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "timed out: still running after {} s (--cell_timeout), killed",
                    timeout.as_secs_f64()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for the process: {e}")),
        }
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Reads `pipe` to its end on a thread of its own.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        buf
    })
}

/// Runs every step of workload `wl` on `engine` with a database under `dir`; raw outputs go to
/// `raw`.
pub(super) fn run_cell(
    exe: &Path,
    wl: &Workload,
    engine: &str,
    dir: &Path,
    raw: &Path,
    timeout: Option<Duration>,
) -> Cell {
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
            let step: Vec<String> = step
                .iter()
                .filter(|a| !a.starts_with("--engine"))
                .cloned()
                .collect();
            args.extend(db_bench_args(&step));
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
        let (command, res) = run_step(&prog, &args, &json, &stdout_path, db_bench, timeout);
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

#[cfg(test)]
mod tests {
    use super::{db_bench_args, output_within};
    use std::process::Command;
    use std::time::{Duration, Instant};

    #[test]
    fn a_step_past_its_timeout_is_killed_and_one_within_it_keeps_its_output() {
        let t0 = Instant::now();
        let e = match output_within(
            Command::new("sleep").arg("30"),
            Some(Duration::from_millis(300)),
        ) {
            Ok(o) => panic!("not timed out: {o:?}"),
            Err(e) => e,
        };
        assert_eq!(
            e,
            "timed out: still running after 0.3 s (--cell_timeout), killed"
        );
        assert!(t0.elapsed() < Duration::from_secs(10), "not killed");
        let o = output_within(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Some(Duration::from_secs(60)),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(o.stdout, b"out\n");
        assert_eq!(o.stderr, b"err\n");
        assert_eq!(o.status.code(), Some(3));
    }

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn db_bench_gets_the_partitioned_index_flags_in_its_own_spelling() {
        // Nothing to translate: the step as written.
        let a = args("--benchmarks=fillrandom --num=10 --cache_index_and_filter_blocks=1");
        assert_eq!(db_bench_args(&a), a);
        // --index_type=0 is db_bench's default; it has no such flag.
        assert_eq!(
            db_bench_args(&args("--num=10 --index_type=0 --metadata_block_size=8192")),
            args("--num=10 --metadata_block_size=8192")
        );
        // --index_type=2 is its --partition_index, in either argv form.
        for step in [
            "--num=10 --index_type=2 --metadata_block_size=8192",
            "--num=10 --index_type 2 --metadata_block_size=8192",
            "--num=10 -index-type=2 --metadata_block_size=8192",
        ] {
            assert_eq!(
                db_bench_args(&args(step)),
                args(
                    "--num=10 --metadata_block_size=8192 --partition_index=1 \
                     --pin_top_level_index_and_filter=1"
                ),
                "{step}"
            );
        }
        // db_bench's own partition flags pass as written, with the top level pinned.
        assert_eq!(
            db_bench_args(&args(
                "--partition_index_and_filters --metadata_block_size=1024"
            )),
            args(
                "--partition_index_and_filters --metadata_block_size=1024 \
                 --pin_top_level_index_and_filter=1"
            )
        );
        assert_eq!(
            db_bench_args(&args("--index_type=0 --partition_index=1")),
            args("--partition_index=1 --pin_top_level_index_and_filter=1")
        );
        // ShaleDB's own blob flag is not db_bench's.
        assert_eq!(
            db_bench_args(&args(
                "--num=10 --separate_blobs_at_write=1 --enable_blob_files=1"
            )),
            args("--num=10 --enable_blob_files=1")
        );
        // Nor is the background threads' priority.
        assert_eq!(
            db_bench_args(&args("--num=10 --background_cpu_priority=low")),
            args("--num=10")
        );
        // A step shale-bench refuses is left for db_bench to judge.
        let a = args("--index_type=1 --num=10");
        assert_eq!(db_bench_args(&a), a);
    }
}
