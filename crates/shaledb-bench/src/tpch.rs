//! T1 (terarkdb-vs-rocksdb seed): TPC-H `lineitem` rows, one writer and several readers.
//!
//! Rows come from the `tpchgen` crate's lineitem generator (a port of TPC-H `dbgen`) at scale
//! factor [`scale_factor`]`(rows)` (`rows * 1.05 / 6e6` rounded up to a multiple of 0.01, at
//! least 0.01); the run takes the first `rows` rows. A stored value is the row's sixteen columns
//! separated by `|` (dbgen's text format without its trailing `|`), with `l_comment` widened to
//! exactly 512 bytes by repeating the row's own comment text: about 610 bytes a row (the seed's
//! "about 615 B"; 604 on average at scale factor 0.01, 610 at 0.88). The key is the first three
//! fields (`l_orderkey|l_partkey|l_suppkey`) as decimal strings. These are not unique in TPC-H: a
//! line can repeat the part and supplier of an earlier line of its order (19 rows in the first
//! million), and its put overwrites that row; the run counts them. The data does not depend on
//! `--seed` (only the readers' choices do). All keys are generated before the timed phase, so
//! readers can pick any row already written.

use crate::dbbench::flags::{parse_args, Flags};
use crate::dbbench::keys::Mt64;
use crate::dbbench::report::{write_results_json, BenchResult, Hist};
use crate::engine::size_on_disk;
use crate::engines::open_engine;
use crate::harness::{run_workers, Run};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tpchgen::generators::{LineItem, LineItemGenerator};

/// Width of the stored `l_comment`.
pub const COMMENT_LEN: usize = 512;

/// The scale factor used for `rows` rows: lineitem has about 6,000,000 rows per unit, so this is
/// `rows * 1.05 / 6e6` rounded up to a multiple of 0.01, and at least 0.01 (tpchgen needs at least
/// one supplier, i.e. a scale factor of 0.0001, and 0.01 is the smallest customary one).
pub fn scale_factor(rows: u64) -> f64 {
    let hundredths = (rows as f64 * 1.05 / 60_000.0).ceil().max(1.0);
    hundredths / 100.0
}

/// tpchgen's lineitem rows at scale factor `sf`, in its order.
fn lineitems(sf: f64) -> impl Iterator<Item = LineItem<'static>> {
    LineItemGenerator::new(sf, 1, 1).into_iter()
}

/// The key of a row: `l_orderkey|l_partkey|l_suppkey`.
pub fn lineitem_key(li: &LineItem<'_>) -> Vec<u8> {
    format!("{}|{}|{}", li.l_orderkey, li.l_partkey, li.l_suppkey).into_bytes()
}

/// The stored row: the sixteen lineitem columns separated by `|` (no trailing `|`), with
/// `l_comment` widened to [`COMMENT_LEN`] bytes by repeating the row's comment followed by a space.
pub fn lineitem_row(li: &LineItem<'_>) -> Vec<u8> {
    let mut v = Vec::with_capacity(COMMENT_LEN + 128);
    v.extend_from_slice(
        format!(
            "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|",
            li.l_orderkey,
            li.l_partkey,
            li.l_suppkey,
            li.l_linenumber,
            li.l_quantity,
            li.l_extendedprice,
            li.l_discount,
            li.l_tax,
            li.l_returnflag,
            li.l_linestatus,
            li.l_shipdate,
            li.l_commitdate,
            li.l_receiptdate,
            li.l_shipinstruct,
            li.l_shipmode,
        )
        .as_bytes(),
    );
    // The chained space keeps the cycle non-empty even for an empty comment.
    v.extend(
        li.l_comment
            .as_bytes()
            .iter()
            .chain(b" ")
            .cycle()
            .take(COMMENT_LEN),
    );
    v
}

/// The keys of the first rows, in order, packed into one buffer.
struct Keys {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Keys {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }
}

/// The keys of the first `rows` rows at scale factor `sf`, and how many of them repeat the key
/// of an earlier row (which can only be a row of the same order, since the orderkey is in the key).
fn generate_keys(sf: f64, rows: u64) -> Result<(Keys, u64), String> {
    let n = usize::try_from(rows).map_err(|_| format!("--rows={rows} is too large"))?;
    let mut keys = Keys {
        bytes: Vec::with_capacity(n * 20),
        ends: Vec::with_capacity(n),
    };
    let mut repeats = 0;
    let mut order = (0i64, Vec::new());
    for li in lineitems(sf).take(n) {
        if order.0 != li.l_orderkey {
            order = (li.l_orderkey, Vec::new());
        }
        if order.1.contains(&(li.l_partkey, li.l_suppkey)) {
            repeats += 1;
        }
        order.1.push((li.l_partkey, li.l_suppkey));
        keys.bytes.extend_from_slice(&lineitem_key(&li));
        keys.ends.push(keys.bytes.len());
    }
    if keys.len() < n {
        return Err(format!(
            "tpchgen scale factor {sf} yields only {} lineitem rows, fewer than --rows={rows}",
            keys.len()
        ));
    }
    Ok((keys, repeats))
}

/// `shale-bench tpch --rows=N --readers=R [db_bench engine flags]`.
pub fn main_with_args<S: AsRef<str>>(args: &[S]) -> Result<Vec<BenchResult>, String> {
    let mut rows = 200_000u64;
    let mut readers = 2usize;
    let mut rest = Vec::new();
    for a in args {
        let a = a.as_ref();
        if let Some(v) = a.strip_prefix("--rows=") {
            rows = v
                .parse()
                .map_err(|_| format!("--rows: cannot parse {v:?}"))?;
        } else if let Some(v) = a.strip_prefix("--readers=") {
            readers = v
                .parse()
                .map_err(|_| format!("--readers: cannot parse {v:?}"))?;
        } else {
            rest.push(a.to_string());
        }
    }
    let (m, pos) = parse_args(&rest)?;
    if let Some(p) = pos.first() {
        return Err(format!("unexpected argument {p:?}"));
    }
    let flags = Flags::from_map(&m)?;
    run(&flags, rows, readers, true)
}

/// One writer loads `rows` rows while `readers` threads read random rows already written.
pub fn run(
    flags: &Flags,
    rows: u64,
    readers: usize,
    verbose: bool,
) -> Result<Vec<BenchResult>, String> {
    // Untimed: the keys of every row, so readers can pick among the rows already written.
    let sf = scale_factor(rows);
    let t = Instant::now();
    let (keys, repeats) = generate_keys(sf, rows)?;
    let keys = &keys;
    if verbose {
        eprintln!(
            "tpch: tpchgen scale factor {sf}: keys of the first {rows} lineitem rows generated in \
             {:.1}s ({repeats} repeat an earlier row's key)",
            t.elapsed().as_secs_f64()
        );
    }
    let (path, _tmp) = flags.db_dir("shale-tpch-")?;
    if path.exists() && !flags.opts.use_existing_db {
        std::fs::remove_dir_all(&path).map_err(|e| format!("deleting {}: {e}", path.display()))?;
    }
    // A fresh database is created, not opened as existing (peers refuse an empty directory).
    let e = open_engine(&flags.engine, &path, &flags.opts)?;
    let e = e.as_ref();
    let seed = flags.seed;
    let n = keys.len();
    let written = AtomicU64::new(0);
    let reads = AtomicU64::new(0);
    let mut timeline: Vec<(f64, f64)> = Vec::new();
    // Worker 0 writes every row, then ends the run; workers 1..=readers read rows already
    // written until then. Each returns its latencies, rows found and bytes read or written.
    let worker = |tid: usize, run: &Run| -> Result<Tally, String> {
        if tid == 0 {
            let mut tally = Tally::new();
            let res = (|| {
                // The same generator as `generate_keys`, so row `i` has key `keys.get(i)`.
                for (i, li) in lineitems(sf).take(n).enumerate() {
                    let k = keys.get(i);
                    let v = lineitem_row(&li);
                    let t0 = Instant::now();
                    e.put(k, &v)?;
                    tally.hist.record_nanos(t0.elapsed().as_nanos() as u64);
                    tally.bytes += (k.len() + v.len()) as u64;
                    written.store(i as u64 + 1, Ordering::Release);
                }
                Ok(())
            })();
            run.finish();
            return res.map(|_| tally);
        }
        let mut rng = Mt64::new(seed + 77 + (tid - 1) as u64);
        let mut tally = Tally::new();
        while !run.is_finished() {
            let n = written.load(Ordering::Acquire);
            if n == 0 {
                std::thread::yield_now();
                continue;
            }
            tally.read(e, keys.get(rng.uniform(n) as usize))?;
            reads.fetch_add(1, Ordering::Relaxed);
        }
        Ok(tally)
    };
    let mut last: Option<(Instant, u64)> = None;
    let monitor = |run: &Run| {
        let start = run.start();
        let (last_t, last_n) = *last.get_or_insert((start, 0));
        if last_t.elapsed() < Duration::from_secs(1) {
            return;
        }
        let n = reads.load(Ordering::Relaxed);
        let rate = (n - last_n) as f64 / last_t.elapsed().as_secs_f64();
        let t = start.elapsed().as_secs_f64();
        timeline.push((t, rate));
        if verbose {
            eprintln!(
                "tpch: t={t:.0}s rows written {} read ops/sec {rate:.0}",
                written.load(Ordering::Relaxed)
            );
        }
        last = Some((Instant::now(), n));
    };
    let out = run_workers(readers + 1, "tpch thread panicked", worker, monitor);
    let elapsed = out.elapsed_secs();
    let mut results = out.results.into_iter();
    let wrote = results
        .next()
        .unwrap_or_else(|| Err("tpch: no writer".into()))?;
    let read = Tally::merged(results)?;
    e.flush()?;
    e.wait_for_compactions()?;
    let size = size_on_disk(&path);
    let mk = |name: &str, tally: &Tally, threads: usize| BenchResult {
        size_on_disk: Some(size),
        ..tally.result(name, &flags.engine, threads, elapsed)
    };
    let mut w = mk("tpch-write", &wrote, 1);
    w.message = format!(
        "(tpchgen scale factor {sf}; {} distinct keys)",
        rows - repeats
    );
    let mut r = mk("tpch-read", &read, readers);
    r.message = format!(
        "({} of {} found; read ops/sec per second: {})",
        read.found,
        read.hist.count(),
        timeline
            .iter()
            .map(|(_, r)| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    if verbose {
        println!("{}", w.line());
        println!("{}", r.line());
        println!(
            "tpch         : {rows} rows ({} distinct keys), size on disk {:.1} MB",
            rows - repeats,
            size as f64 / 1048576.0
        );
    }
    let reads_per_reader = match flags.reads {
        n if n > 0 => n as u64,
        _ => (keys.len() as u64 / 10 / readers.max(1) as u64).max(1),
    };
    let loaded = read_loaded(e, &flags.engine, keys, readers, reads_per_reader, seed)?;
    if verbose {
        println!("{}", loaded.line());
    }
    let out = vec![w, r, loaded];

    if let Some(p) = &flags.json {
        write_results_json(p, "shale-bench tpch", &flags.engine, &out)?;
    }
    Ok(out)
}

/// One worker's timed operations: latencies, rows found (reads) and bytes read or written.
struct Tally {
    hist: Hist,
    found: u64,
    bytes: u64,
}

impl Tally {
    fn new() -> Self {
        Tally {
            hist: Hist::new(),
            found: 0,
            bytes: 0,
        }
    }

    /// The sum of the workers' tallies, or the first worker's error.
    fn merged(tallies: impl Iterator<Item = Result<Tally, String>>) -> Result<Tally, String> {
        let mut sum = Tally::new();
        for t in tallies {
            let t = t?;
            sum.hist.merge(&t.hist);
            sum.found += t.found;
            sum.bytes += t.bytes;
        }
        Ok(sum)
    }

    /// The result line of `threads` workers whose tallies this is, over `elapsed` seconds.
    fn result(&self, name: &str, engine: &str, threads: usize, elapsed: f64) -> BenchResult {
        let ops = self.hist.count();
        BenchResult {
            benchmark: name.into(),
            engine: engine.into(),
            threads,
            ops,
            elapsed_secs: elapsed,
            micros_per_op: elapsed * 1e6 * threads as f64 / ops.max(1) as f64,
            ops_per_sec: ops as f64 / elapsed,
            bytes: self.bytes,
            mb_per_sec: self.bytes as f64 / 1048576.0 / elapsed,
            latency: self.hist.summary(),
            ..Default::default()
        }
    }

    /// Gets `k` from `e`, recording the get's latency and what it found.
    fn read(&mut self, e: &dyn crate::engine::Engine, k: &[u8]) -> Result<(), String> {
        let t0 = Instant::now();
        if let Some(v) = e.get(k)? {
            self.found += 1;
            self.bytes += (k.len() + v.len()) as u64;
        }
        self.hist.record_nanos(t0.elapsed().as_nanos() as u64);
        Ok(())
    }
}

/// `tpch-read-loaded`: after the load (flushed, compactions finished), `readers` threads each
/// read `reads_per_reader` rows picked uniformly among all of them. Unlike `tpch-read`, whose
/// readers pick among the rows written so far (the first seconds read a database that fits in
/// memory, and a faster writer grows it sooner), every engine here reads the same data set:
/// the seed's reads under a memory cap.
fn read_loaded(
    e: &dyn crate::engine::Engine,
    engine: &str,
    keys: &Keys,
    readers: usize,
    reads_per_reader: u64,
    seed: u64,
) -> Result<BenchResult, String> {
    let n = keys.len() as u64;
    let worker = |tid: usize, _: &Run| -> Result<Tally, String> {
        let mut rng = Mt64::new(seed + 1077 + tid as u64);
        let mut tally = Tally::new();
        for _ in 0..reads_per_reader {
            tally.read(e, keys.get(rng.uniform(n) as usize))?;
        }
        Ok(tally)
    };
    let out = run_workers(readers.max(1), "tpch reader panicked", worker, |_| {});
    let elapsed = out.elapsed_secs();
    let read = Tally::merged(out.results.into_iter())?;
    let mut result = read.result("tpch-read-loaded", engine, readers.max(1), elapsed);
    result.message = format!(
        "({} of {} found; uniform over all {n} rows after the load)",
        read.found,
        read.hist.count()
    );
    Ok(result)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_lineitem_shaped() {
        let li = lineitems(0.01).nth(12).unwrap();
        let r = lineitem_row(&li);
        let s = String::from_utf8(r.clone()).unwrap();
        let cols: Vec<&str> = s.split('|').collect();
        assert_eq!(cols.len(), 16);
        assert_eq!(cols[15].len(), COMMENT_LEN);
        let c = format!("{} ", li.l_comment);
        assert!(c.repeat(COMMENT_LEN / c.len() + 1).starts_with(cols[15]));
        assert!(r.len() > 590 && r.len() < 640, "{}", r.len());
        let k = String::from_utf8(lineitem_key(&li)).unwrap();
        assert_eq!(k, cols[..3].join("|"));
        // Deterministic: the same row again from a fresh generator.
        assert_eq!(lineitem_row(&lineitems(0.01).nth(12).unwrap()), r);
        let (keys, _) = generate_keys(0.01, 20).unwrap();
        assert_eq!(keys.len(), 20);
        assert_eq!(keys.get(12), lineitem_key(&li));
        assert_ne!(keys.get(13), keys.get(12));
    }

    #[test]
    fn scale_factors() {
        assert_eq!(scale_factor(0), 0.01);
        assert_eq!(scale_factor(20_000), 0.01);
        assert_eq!(scale_factor(5_000_000), 0.88);
        assert!(generate_keys(0.01, 70_000).is_err());
    }

    #[test]
    fn one_writer_loads_every_row_while_readers_find_only_written_rows() {
        let (m, _) = parse_args(&["--engine=shaledb", "--compression_type=none"]).unwrap();
        let flags = Flags::from_map(&m).unwrap();
        let res = run(&flags, 3000, 2, false).unwrap();
        let names: Vec<&str> = res.iter().map(|r| r.benchmark.as_str()).collect();
        assert_eq!(names, ["tpch-write", "tpch-read", "tpch-read-loaded"]);
        let (w, r) = (&res[0], &res[1]);
        assert_eq!((w.ops, w.threads), (3000, 1));
        assert_eq!(r.threads, 2);
        // Readers pick among rows already written, so every read finds its row.
        assert!(
            r.message
                .starts_with(&format!("({} of {} found", r.ops, r.ops)),
            "{}",
            r.message
        );
        // Both figures share the writer's clock.
        assert_eq!(w.elapsed_secs, r.elapsed_secs);
        // After the load, readers pick among all rows: 3000 / 10 / 2 reads each, all found.
        let loaded = &res[2];
        assert_eq!((loaded.ops, loaded.threads), (300, 2));
        assert!(
            loaded
                .message
                .starts_with("(300 of 300 found; uniform over all 3000 rows"),
            "{}",
            loaded.message
        );
    }
}
