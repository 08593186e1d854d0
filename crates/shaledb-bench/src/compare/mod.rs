//! `shale-bench compare`: every workload of a BENCHMARKS.md suite on every engine, alternating
//! engines within the run, each cell on a fresh database directory in its own process (so a
//! crash or a missing peer is one failed cell), plus RocksDB's own `db_bench` as the
//! `rocksdb-db_bench` column when installed. Writes `bench/results/<date>-<suite>/`.
//!
//! Rooms: [`suite`] (the workloads and substitutions), [`run`] (one cell's processes),
//! [`report_md`] and [`report_html`] (the reports), [`merge`] (outputs, and `--append` parts),
//! [`machine`] (date and machine facts).

mod machine;
mod merge;
mod report_html;
mod report_md;
mod run;
mod suite;

use machine::now_utc;
pub use machine::{machine_facts, today};
pub use report_html::report_html;
pub use report_md::report_md;
pub use suite::{substitute, suite, suite_note, Kind, Substitution, Workload, SUBSTITUTIONS};

use crate::dbbench::report::BenchResult;
use merge::{all_columns, earlier_parts, write_outputs};
use run::{find_db_bench, run_cell, shell_quote};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// One cell: a workload on an engine.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Cell {
    /// Workload id.
    pub workload: String,
    /// Engine (or `rocksdb-db_bench`).
    pub engine: String,
    /// The exact command.
    pub command: String,
    /// Results, or empty on failure.
    pub results: Vec<BenchResult>,
    /// Failure text.
    pub error: Option<String>,
    /// Wall seconds of the process.
    pub secs: f64,
    /// Labels of the substitutions this cell ran with (see [`SUBSTITUTIONS`]).
    pub substitutions: Vec<String>,
}

impl Cell {
    /// The engine column: the engine, with its substitutions in parentheses.
    pub fn label(&self) -> String {
        if self.substitutions.is_empty() {
            self.engine.clone()
        } else {
            format!("{} ({})", self.engine, self.substitutions.join(", "))
        }
    }
}

/// The flags of `shale-bench compare`.
#[derive(Debug, Clone, PartialEq)]
struct CompareArgs {
    suite: String,
    engines: Vec<String>,
    out_root: PathBuf,
    only: Option<Vec<String>>,
    with_db_bench: bool,
    out_dir: Option<PathBuf>,
    append: bool,
    /// Flags added to every workload's command lines (`--extra="--flag=v --other=w"`), to
    /// measure one option across a whole suite.
    extra: Vec<String>,
    /// A cell's process still running after this many seconds is killed and its cell
    /// reported as failed (`--cell_timeout=SECONDS`, 0 for none; unset: the suite's
    /// [`default_cell_timeout`]): one hung engine must not stall the run.
    cell_timeout_secs: Option<u64>,
}

/// The `--cell_timeout` of a suite when none is given: about ten times its longest cell on
/// this machine (seed-medium: WiredTiger's Y1-8t, 308 s; seed-full: WiredTiger's K1-100B,
/// 106 minutes), so only a hung engine meets it.
fn default_cell_timeout(suite: &str) -> Duration {
    Duration::from_secs(match suite {
        "tiny" | "seed-small" => 600,
        "seed-full" => 3 * 3600,
        _ => 3600,
    })
}

impl CompareArgs {
    fn parse<S: AsRef<str>>(args: &[S]) -> Result<CompareArgs, String> {
        let mut c = CompareArgs {
            suite: "seed-small".to_string(),
            engines: vec!["shaledb".to_string()],
            out_root: PathBuf::from("bench/results"),
            only: None,
            with_db_bench: true,
            out_dir: None,
            append: false,
            extra: Vec::new(),
            cell_timeout_secs: None,
        };
        for a in args {
            let a = a.as_ref();
            let (n, v) = a
                .split_once('=')
                .ok_or_else(|| format!("compare: expected --name=value, got {a:?}"))?;
            match n {
                "--suite" => c.suite = v.into(),
                "--engines" => {
                    c.engines = v
                        .split(',')
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .collect()
                }
                "--out" => c.out_root = v.into(),
                "--only" => c.only = Some(v.split(',').map(String::from).collect()),
                "--db_bench" => c.with_db_bench = matches!(v, "1" | "true"),
                "--dir" => c.out_dir = Some(v.into()),
                "--append" => c.append = matches!(v, "1" | "true"),
                "--extra" => c.extra = v.split_whitespace().map(String::from).collect(),
                "--cell_timeout" => {
                    let secs: u64 = v.parse().map_err(|_| {
                        format!("compare: --cell_timeout takes whole seconds (0 for none), got {v:?}")
                    })?;
                    c.cell_timeout_secs = Some(secs);
                }
                _ => {
                    return Err(format!(
                        "compare: unknown flag {n} (known: --suite --engines --out --dir --only --db_bench --append --extra --cell_timeout)"
                    ))
                }
            }
        }
        Ok(c)
    }
}

/// The workloads of `all` that `--only` names (an id, or an id prefix before a `-`).
fn selected(all: &[Workload], only: Option<&[String]>) -> Vec<Workload> {
    let mut wls = all.to_vec();
    if let Some(o) = only {
        wls.retain(|w| {
            o.iter()
                .any(|x| w.id == *x || w.id.starts_with(&format!("{x}-")))
        });
    }
    wls
}

/// The columns of the run: the engines, plus RocksDB's own db_bench if wanted and installed.
fn engine_columns(engines: &[String], with_db_bench: bool) -> Vec<String> {
    let mut columns = engines.to_vec();
    if with_db_bench {
        match find_db_bench() {
            Some(_) => columns.push("rocksdb-db_bench".into()),
            None => eprintln!("compare: RocksDB's db_bench not installed (apt-get install -y rocksdb-tools); column rocksdb-db_bench skipped"),
        }
    }
    columns
}

/// This run's command line, quoted for a shell (runs.txt).
fn command_line<S: AsRef<str>>(args: &[S]) -> String {
    std::iter::once("shale-bench compare".to_string())
        .chain(args.iter().map(|a| shell_quote(a.as_ref())))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A finished cell's result lines (or its failure) on stderr.
fn print_cell(c: &Cell) {
    match &c.error {
        Some(e) => eprintln!("    FAILED: {e}"),
        None => {
            for r in &c.results {
                eprintln!("    {}", r.line());
            }
        }
    }
}

/// `shale-bench compare --suite=... --engines=... [--out=DIR] [--only=R1,K1-100B]`.
pub fn main_with_args<S: AsRef<str>>(args: &[S]) -> Result<(), String> {
    let CompareArgs {
        suite: suite_name,
        engines,
        out_root,
        only,
        with_db_bench,
        out_dir,
        append,
        extra,
        cell_timeout_secs,
    } = CompareArgs::parse(args)?;
    let cell_timeout = match cell_timeout_secs {
        Some(0) => None,
        Some(secs) => Some(Duration::from_secs(secs)),
        None => Some(default_cell_timeout(&suite_name)),
    };
    // A long run must not discover a missing engine cell by cell (each would be a FAILED row).
    for e in &engines {
        crate::engines::check_engine(e).map_err(|m| format!("compare: {m}"))?;
    }
    let all_wls = suite(&suite_name)?;
    let mut wls = selected(&all_wls, only.as_deref());
    for w in &mut wls {
        w.args.extend(extra.iter().cloned());
        if !w.then.is_empty() {
            w.then.extend(extra.iter().cloned());
        }
    }
    let this_command = command_line(args);
    let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    let dir = out_dir.unwrap_or_else(|| out_root.join(format!("{}-{suite_name}", today())));
    let raw = dir.join("raw");
    std::fs::create_dir_all(&raw).map_err(|e| format!("creating {}: {e}", raw.display()))?;
    let report_wls = |cells: &[Cell]| -> Vec<Workload> {
        all_wls
            .iter()
            .filter(|w| {
                wls.iter().any(|x| x.id == w.id) || cells.iter().any(|c| c.workload == w.id)
            })
            .cloned()
            .collect()
    };
    let work = tempfile::Builder::new()
        .prefix("shale-compare-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let columns = engine_columns(&engines, with_db_bench);
    // With --append, a suite too long for one sitting is run in parts into one directory: the
    // cells this run does not repeat (another workload, or another engine of the same workload)
    // are kept, and each part's command and time are listed in runs.txt.
    let (kept, mut command) = if append {
        earlier_parts(&dir, &wls, &columns)?
    } else {
        (Vec::new(), String::new())
    };
    let _ = write!(command, "{this_command}    # {} UTC", now_utc());
    let report_columns = all_columns(&kept, &columns);
    let facts = machine_facts(work.path());
    let mut cells: Vec<Cell> = kept;
    let first_new = cells.len();
    let total = wls.len() * columns.len();
    let t0 = Instant::now();
    for wl in &wls {
        for engine in &columns {
            if engine == "rocksdb-db_bench" && wl.kind != Kind::DbBench {
                continue;
            }
            eprintln!(
                "[{}/{total}] {} on {engine} ({:.0} s so far)",
                cells.len() - first_new + 1,
                wl.id,
                t0.elapsed().as_secs_f64()
            );
            let c = run_cell(&exe, wl, engine, work.path(), &raw, cell_timeout);
            print_cell(&c);
            cells.push(c);
            let shown = report_wls(&cells);
            write_outputs(
                &dir,
                &suite_name,
                &cells,
                &shown,
                &report_columns,
                &facts,
                &command,
            )?;
        }
    }
    println!(
        "compare: {} cells in {:.0} s; report in {}",
        cells.len() - first_new,
        t0.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn compare_flags_parse_with_their_defaults() {
        let none: [&str; 0] = [];
        let d = CompareArgs::parse(&none).unwrap();
        assert_eq!(
            d,
            CompareArgs {
                suite: "seed-small".into(),
                engines: vec!["shaledb".into()],
                out_root: "bench/results".into(),
                only: None,
                with_db_bench: true,
                out_dir: None,
                append: false,
                extra: Vec::new(),
                cell_timeout_secs: None,
            }
        );
        let c = CompareArgs::parse(&[
            "--suite=tiny",
            "--engines=shaledb, leveldb,",
            "--only=R1,K1",
            "--db_bench=0",
            "--dir=/tmp/x",
            "--append=true",
            "--extra=--level_compaction_dynamic_level_bytes=1  --bloom_bits=12",
        ])
        .unwrap();
        assert_eq!(
            c.extra,
            [
                "--level_compaction_dynamic_level_bytes=1",
                "--bloom_bits=12"
            ]
        );
        assert_eq!(c.suite, "tiny");
        assert_eq!(c.engines, ["shaledb", "leveldb"]);
        assert_eq!(c.only, Some(vec!["R1".to_string(), "K1".to_string()]));
        assert!(!c.with_db_bench && c.append);
        assert_eq!(c.out_dir, Some(PathBuf::from("/tmp/x")));
        let t = |a: &str| CompareArgs::parse(&[a]).map(|c| c.cell_timeout_secs);
        assert_eq!(t("--cell_timeout=300"), Ok(Some(300)));
        assert_eq!(t("--cell_timeout=0"), Ok(Some(0)));
        assert_eq!(default_cell_timeout("seed-small"), Duration::from_secs(600));
        assert_eq!(
            default_cell_timeout("seed-medium"),
            Duration::from_secs(3600)
        );
        assert_eq!(
            default_cell_timeout("seed-full"),
            Duration::from_secs(10800)
        );
        assert_eq!(
            t("--cell_timeout=5m"),
            Err("compare: --cell_timeout takes whole seconds (0 for none), got \"5m\"".into())
        );
        let e = CompareArgs::parse(&["--nope=1"]).unwrap_err();
        assert!(e.starts_with("compare: unknown flag --nope"), "{e}");
        let e = CompareArgs::parse(&["--suite"]).unwrap_err();
        assert_eq!(e, "compare: expected --name=value, got \"--suite\"");
    }

    #[test]
    fn only_selects_workloads_by_id_or_id_prefix() {
        let all = suite("tiny").unwrap();
        let ids = |only: &[&str]| -> Vec<String> {
            let o: Vec<String> = only.iter().map(|s| s.to_string()).collect();
            selected(&all, Some(&o)).into_iter().map(|w| w.id).collect()
        };
        // An id also selects the variants named after it.
        assert_eq!(ids(&["R1"]), ["R1", "R1-bulk"]);
        assert_eq!(ids(&["R1-bulk"]), ["R1-bulk"]);
        let k1 = ids(&["K1"]);
        assert!(
            k1.len() > 1 && k1.iter().all(|id| id.starts_with("K1-")),
            "{k1:?}"
        );
        assert!(ids(&["nope"]).is_empty());
        assert_eq!(
            command_line(&["--suite=tiny", "--only=R1 R2"]),
            "shale-bench compare --suite=tiny '--only=R1 R2'"
        );
        assert_eq!(selected(&all, None).len(), all.len());
    }
}
