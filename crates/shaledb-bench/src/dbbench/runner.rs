//! Runs db_bench benchmarks against any [`Engine`].

use super::flags::Flags;
use super::keys::{make_key, Mt64, RandomGenerator};
use super::live::LiveKeys;
use super::report::{write_results_json, BenchResult, Hist};
use crate::engine::{size_on_disk, BatchOp, CommonOptions, Engine};
use crate::engines::open_engine;
use crate::harness::{run_workers, Run};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Per-thread state of a running benchmark.
pub struct ThreadCtx<'a> {
    /// Thread index.
    pub tid: usize,
    /// Key chooser (`std::mt19937_64` seeded `seed + tid + 1`, like db_bench's `Random64`).
    pub rand: Mt64,
    /// Value source.
    pub gen: RandomGenerator,
    /// Scratch key.
    pub key: Vec<u8>,
    /// Bytes moved.
    pub bytes: u64,
    /// Ops done.
    pub done: u64,
    /// Reads that found a value.
    pub found: u64,
    /// Extra counters (reads/writes of mixed benchmarks).
    pub reads: u64,
    /// Writes of mixed benchmarks.
    pub writes: u64,
    /// Latencies.
    pub hist: Hist,
    /// Leave this thread out of the merged figures (readwhilewriting's writer).
    pub exclude: bool,
    start: Instant,
    max_ops: u64,
    duration: Option<Duration>,
    progress: &'a AtomicU64,
    run: &'a Run,
    rate_limit: u64,
    rate_bytes: u64,
}

impl ThreadCtx<'_> {
    /// True while op number `i` should run.
    pub fn more(&self, i: u64) -> bool {
        if self.run.stop_requested() {
            return false;
        }
        match self.duration {
            Some(d) => i & 15 != 0 || self.start.elapsed() < d,
            None => i < self.max_ops,
        }
    }
    /// Records a finished op that began at `t0` and moved `bytes`.
    pub fn finished(&mut self, t0: Instant, bytes: u64) {
        self.hist.record_nanos(t0.elapsed().as_nanos() as u64);
        self.done += 1;
        self.bytes += bytes;
        if !self.exclude {
            self.progress.fetch_add(1, Ordering::Relaxed);
        }
    }
    /// Reads `self.key`, counting a hit; returns the bytes read (key and value; 0 on a miss).
    fn read_key(&mut self, e: &dyn Engine) -> Result<u64, String> {
        Ok(match e.get_len(&self.key)? {
            Some(len) => {
                self.found += 1;
                (self.key.len() + len) as u64
            }
            None => 0,
        })
    }
    /// Sleeps so that writes stay under `--benchmark_write_rate_limit`.
    pub fn pace_write(&mut self, bytes: u64) {
        if self.rate_limit == 0 {
            return;
        }
        self.rate_bytes += bytes;
        let due = Duration::from_secs_f64(self.rate_bytes as f64 / self.rate_limit as f64);
        let el = self.start.elapsed();
        if due > el {
            std::thread::sleep(due - el);
        }
    }
}

/// What one thread measured, kept after its [`ThreadCtx`] (which borrows the run) is gone.
struct ThreadFigures {
    hist: Hist,
    done: u64,
    bytes: u64,
    found: u64,
    reads: u64,
    writes: u64,
    exclude: bool,
    start: Instant,
}

impl ThreadFigures {
    fn of(c: ThreadCtx<'_>) -> Self {
        ThreadFigures {
            hist: c.hist,
            done: c.done,
            bytes: c.bytes,
            found: c.found,
            reads: c.reads,
            writes: c.writes,
            exclude: c.exclude,
            start: c.start,
        }
    }
}

/// What kind of key order a write benchmark uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Seq,
    Random,
    Unique,
}

/// An open benchmark session: flags, database directory and engine.
pub struct Runner {
    /// The flags.
    pub flags: Flags,
    path: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    engine: Option<Box<dyn Engine>>,
    /// Results so far.
    pub results: Vec<BenchResult>,
    /// Print result lines on stdout.
    pub verbose: bool,
    /// Threads started by earlier benchmarks of this run: like db_bench, each benchmark's
    /// threads get fresh seeds (`seed + threads_so_far + tid + 1`), so readrandom does not
    /// replay the exact key sequence fillrandom wrote.
    threads_started: AtomicU64,
    /// The keys the database holds, while every write to it came from this run's write
    /// benchmarks (`None` once something else changed it, or with `--use_existing_db`).
    live: Option<LiveKeys>,
}

fn is_fill(name: &str) -> bool {
    matches!(
        name,
        "fillseq" | "fillrandom" | "filluniquerandom" | "fillsync" | "fill100K"
    )
}

/// Every benchmark name the runner knows.
pub const BENCHMARKS: &[&str] = &[
    "fillseq",
    "fillrandom",
    "filluniquerandom",
    "overwrite",
    "fillsync",
    "fill100K",
    "readrandom",
    "readseq",
    "readreverse",
    "readmissing",
    "readhot",
    "seekrandom",
    "readwhilewriting",
    "readrandomwriterandom",
    "mergerandom",
    "readrandommergerandom",
    "multireadrandom",
    "deleteseq",
    "deleterandom",
    "compact",
    "flush",
    "waitforcompaction",
    "stats",
    "levelstats",
    "sstables",
];

fn destroy_dir(path: &Path) -> Result<(), String> {
    if path.parent().is_none() || path.as_os_str().is_empty() {
        return Err(format!("refusing to delete {}", path.display()));
    }
    if path.exists() {
        std::fs::remove_dir_all(path).map_err(|e| format!("deleting {}: {e}", path.display()))?;
    }
    Ok(())
}

impl Runner {
    /// Prepares the database directory (a temp dir unless `--db`).
    pub fn new(flags: Flags) -> Result<Runner, String> {
        for b in &flags.benchmarks {
            if !BENCHMARKS.contains(&b.as_str()) {
                return Err(format!(
                    "unknown benchmark {b:?}; known: {}",
                    BENCHMARKS.join(",")
                ));
            }
        }
        let (path, tmp) = flags.db_dir("shale-bench-")?;
        Ok(Runner {
            flags,
            path,
            _tmp: tmp,
            engine: None,
            results: Vec::new(),
            verbose: true,
            threads_started: AtomicU64::new(0),
            live: None,
        })
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn say(&self, s: &str) {
        if self.verbose {
            println!("{s}");
            let _ = std::io::stdout().flush();
        }
    }

    fn open(&mut self, opts: &CommonOptions) -> Result<(), String> {
        self.engine = None;
        let e = open_engine(&self.flags.engine, &self.path, opts)
            .map_err(|e| format!("open {} at {}: {e}", self.flags.engine, self.path.display()))?;
        self.engine = Some(e);
        Ok(())
    }

    /// Destroys the database directory and opens a new, empty database there.
    fn fresh(&mut self, opts: &CommonOptions) -> Result<(), String> {
        self.engine = None;
        destroy_dir(&self.path)?;
        self.live = Some(LiveKeys::new());
        let mut create = opts.clone();
        create.use_existing_db = false;
        self.open(&create)
    }

    /// Prints db_bench's header.
    pub fn header(&self) {
        let f = &self.flags;
        let ratio = f.compression_ratio.min(1.0);
        let raw = (f.key_size + f.value_size) as f64 * f.num as f64 / 1048576.0;
        let file = (f.key_size as f64 + f.value_size as f64 * ratio) * f.num as f64 / 1048576.0;
        self.say(&format!("Keys:       {} bytes each", f.key_size));
        self.say(&format!(
            "Values:     {} bytes each ({} bytes after compression)",
            f.value_size,
            (f.value_size as f64 * ratio + 0.5) as u64
        ));
        self.say(&format!("Entries:    {}", f.num));
        self.say(&format!("RawSize:    {raw:.1} MB (estimated)"));
        self.say(&format!("FileSize:   {file:.1} MB (estimated)"));
        self.say(&format!("Compression: {}", f.opts.compression));
        self.say(&format!(
            "Engine:     {}   DB path: [{}]",
            f.engine,
            self.path.display()
        ));
        for l in f.ignored_report() {
            self.say(&l);
        }
        self.say("------------------------------------------------");
    }

    /// Runs every benchmark of `--benchmarks` in order; writes `--json` if asked.
    pub fn run_all(&mut self) -> Result<Vec<BenchResult>, String> {
        self.header();
        let opts = self.flags.opts.clone();
        if opts.use_existing_db {
            self.open(&opts)?;
        } else {
            self.fresh(&opts)?;
        }
        let names = self.flags.benchmarks.clone();
        for name in names {
            let r = self.run_one(&name)?;
            if let Some(r) = r {
                self.results.push(r);
                self.write_json()?;
            }
        }
        if let Some(kb) = peak_rss_kb() {
            self.say(&format!(
                "Peak RSS:   {:.1} MB (VmHWM, {kb} kB)",
                kb as f64 / 1024.0
            ));
        }
        self.say_memory();
        Ok(self.results.clone())
    }

    /// The engine's own view of its memory at the end of a run (ShaleDB's properties).
    fn say_memory(&self) {
        let Some(e) = &self.engine else { return };
        let mb = |name: &str| {
            e.property(name)
                .and_then(|v| v.trim().parse::<f64>().ok())
                .map(|b| format!("{:.1} MB", b / 1048576.0))
        };
        if let (Some(usage), Some(pinned)) =
            (mb("block-cache-usage"), mb("block-cache-pinned-usage"))
        {
            self.say(&format!("Block cache: {usage} (pinned {pinned})"));
        }
    }

    fn write_json(&self) -> Result<(), String> {
        match &self.flags.json {
            Some(p) => write_results_json(p, "shale-bench", &self.flags.engine, &self.results),
            None => Ok(()),
        }
    }

    fn engine(&self) -> Result<&dyn Engine, String> {
        self.engine
            .as_deref()
            .ok_or_else(|| "engine is not open".to_string())
    }

    fn per_thread(&self, v: i64) -> u64 {
        if v < 0 {
            self.flags.num
        } else {
            v as u64
        }
    }

    /// Runs one benchmark by name; `None` for benchmarks that only print.
    pub fn run_one(&mut self, name: &str) -> Result<Option<BenchResult>, String> {
        if is_fill(name) && self.flags.opts.use_existing_db {
            let msg = format!("{name:<12} : skipped (--use_existing_db is true)");
            self.say(&msg);
            return Ok(Some(BenchResult {
                benchmark: name.into(),
                engine: self.flags.engine.clone(),
                error: Some("skipped (--use_existing_db is true)".into()),
                ..Default::default()
            }));
        }
        let bench = bench_fn(name).ok_or_else(|| format!("unknown benchmark {name:?}"))?;
        if changes_live_keys_untracked(name) {
            self.live = None;
        }
        let r = bench(self, name)?;
        if let Some(r) = &r {
            self.print_result(name, r);
        }
        Ok(r)
    }

    /// The result line, the size line of write benchmarks and, with `--histogram`, the
    /// latency histogram.
    fn print_result(&self, name: &str, r: &BenchResult) {
        self.say(&r.line());
        if r.user_bytes_written.is_some() {
            self.size_line(r);
        }
        if self.flags.histogram && r.latency.count > 0 {
            self.say(&r.latency.db_bench_text(latency_label(name)));
        }
    }

    /// The options the benchmarks after the first open the database with.
    fn reopen_opts(&self) -> CommonOptions {
        let mut o = self.flags.opts.clone();
        o.use_existing_db = true;
        o
    }

    /// fillseq, fillrandom, filluniquerandom, fillsync, fill100K: a fresh database, then writes.
    fn fill(&mut self, name: &str) -> Result<Option<BenchResult>, String> {
        let f = self.flags.clone();
        let writes = self.per_thread(f.writes);
        let open_opts = self.reopen_opts();
        let mut o = open_opts.clone();
        let (order, n, vsize) = match name {
            "fillseq" => (Order::Seq, writes, f.value_size),
            "fillrandom" => (Order::Random, writes, f.value_size),
            "filluniquerandom" => (Order::Unique, writes, f.value_size),
            "fillsync" => {
                o.sync = true;
                (Order::Random, (f.num / 1000).max(1), f.value_size)
            }
            _ => (Order::Random, (f.num / 1000).max(1), 100 * 1000),
        };
        if f.fill_by_ingestion {
            check_ingestion_fill(name, &f)?;
        }
        self.fresh(&o)?;
        let r = self.write_bench(name, order, n, vsize, f.threads)?;
        if o.sync != open_opts.sync {
            self.open(&open_opts)?;
        }
        Ok(Some(r))
    }

    /// overwrite: random writes into the existing database.
    fn overwrite(&mut self, name: &str) -> Result<Option<BenchResult>, String> {
        let f = &self.flags;
        let (writes, vsize, threads) = (self.per_thread(f.writes), f.value_size, f.threads);
        Ok(Some(self.write_bench(
            name,
            Order::Random,
            writes,
            vsize,
            threads,
        )?))
    }

    /// deleteseq, deleterandom.
    fn delete(&mut self, name: &str) -> Result<Option<BenchResult>, String> {
        let f = self.flags.clone();
        let n = self.per_thread(f.deletes);
        let seq = name == "deleteseq";
        let ks = f.key_size;
        let e = self.engine()?;
        let (r, _) = self.run_threads(name, f.threads, n, e, move |c, e| {
            let mut i = 0u64;
            while c.more(i) {
                let k = if seq { i } else { c.rand.uniform(f.num) };
                make_key(k, ks, &mut c.key);
                let t0 = Instant::now();
                e.delete(&c.key)?;
                c.finished(t0, 0);
                i += 1;
            }
            Ok(())
        })?;
        Ok(Some(r))
    }

    /// readrandom, readmissing (keys that are never written), readhot (the first 1%).
    fn read_random(&mut self, name: &str) -> Result<Option<BenchResult>, String> {
        let f = &self.flags;
        let reads = self.per_thread(f.reads);
        let range = if name == "readhot" {
            f.num.div_ceil(100).max(1)
        } else {
            f.num.max(1)
        };
        let missing = name == "readmissing";
        let ks = f.key_size;
        let e = self.engine()?;
        let (mut r, cnt) = self.run_threads(name, f.threads, reads, e, move |c, e| {
            let mut i = 0u64;
            while c.more(i) {
                let k = c.rand.uniform(range);
                make_key(k, ks, &mut c.key);
                if missing {
                    c.key.push(b'.');
                }
                let t0 = Instant::now();
                let b = c.read_key(e)?;
                c.finished(t0, b);
                i += 1;
            }
            Ok(())
        })?;
        r.message = format!("({} of {} found)", cnt.found, r.ops);
        Ok(Some(r))
    }

    /// readseq, readreverse: a full scan per thread (wrapping around with `--duration`).
    fn read_seq(&mut self, name: &str) -> Result<Option<BenchResult>, String> {
        let reads = self.per_thread(self.flags.reads);
        let fwd = name == "readseq";
        let e = self.engine()?;
        let (r, _) = self.run_threads(name, self.flags.threads, reads, e, move |c, e| {
            let mut it = e.iter();
            if fwd {
                it.seek_to_first()
            } else {
                it.seek_to_last()
            }
            let mut i = 0u64;
            while c.more(i) {
                if !it.valid() {
                    if c.duration.is_none() {
                        break;
                    }
                    if fwd {
                        it.seek_to_first()
                    } else {
                        it.seek_to_last()
                    }
                    if !it.valid() {
                        break;
                    }
                }
                let t0 = Instant::now();
                let b = (it.key().len() + it.value().len()) as u64;
                if fwd {
                    it.next()
                } else {
                    it.prev()
                }
                c.finished(t0, b);
                i += 1;
            }
            it.status()
        })?;
        Ok(Some(r))
    }

    /// seekrandom: a seek to a random key, then `--seek_nexts` steps.
    fn seek_random(&mut self, name: &str) -> Result<Option<BenchResult>, String> {
        let f = &self.flags;
        let reads = self.per_thread(f.reads);
        let nexts = f.seek_nexts;
        let ks = f.key_size;
        let num = f.num.max(1);
        let e = self.engine()?;
        let (mut r, cnt) = self.run_threads(name, f.threads, reads, e, move |c, e| {
            let mut it = e.iter();
            let mut i = 0u64;
            while c.more(i) {
                make_key(c.rand.uniform(num), ks, &mut c.key);
                let t0 = Instant::now();
                it.seek(&c.key);
                let mut b = 0u64;
                if it.valid() && it.key() == c.key.as_slice() {
                    c.found += 1;
                }
                for _ in 0..nexts {
                    if !it.valid() {
                        break;
                    }
                    b += (it.key().len() + it.value().len()) as u64;
                    it.next();
                }
                c.finished(t0, b);
                i += 1;
            }
            it.status()
        })?;
        r.message = format!("({} of {} found)", cnt.found, r.ops);
        Ok(Some(r))
    }

    /// readwhilewriting: `--threads` readers, plus one writer (left out of the figures) that
    /// overwrites random keys until every reader is done.
    fn read_while_writing(&mut self, name: &str) -> Result<Option<BenchResult>, String> {
        let f = &self.flags;
        let reads = self.per_thread(f.reads);
        let threads = f.threads;
        let ks = f.key_size;
        let vs = f.value_size;
        let num = f.num.max(1);
        let e = self.engine()?;
        let readers_left = AtomicU64::new(threads as u64);
        let (mut r, cnt) = self.run_threads(name, threads + 1, reads, e, |c, e| {
            if c.tid == threads {
                c.exclude = true;
                while readers_left.load(Ordering::Acquire) > 0 {
                    make_key(c.rand.uniform(num), ks, &mut c.key);
                    let t0 = Instant::now();
                    e.put(&c.key, c.gen.generate(vs))?;
                    c.finished(t0, (ks + vs) as u64);
                    c.pace_write((ks + vs) as u64);
                }
                return Ok(());
            }
            let res = (|| {
                let mut i = 0u64;
                while c.more(i) {
                    make_key(c.rand.uniform(num), ks, &mut c.key);
                    let t0 = Instant::now();
                    let b = c.read_key(e)?;
                    c.finished(t0, b);
                    i += 1;
                }
                Ok(())
            })();
            readers_left.fetch_sub(1, Ordering::AcqRel);
            res
        })?;
        // The writer is left out of the figures (as in db_bench); say how much it wrote, since
        // an unthrottled writer changes what the readers see.
        r.message = format!(
            "({} of {} found; the writer wrote {} keys meanwhile)",
            cnt.found, r.ops, cnt.excluded_ops
        );
        Ok(Some(r))
    }

    /// readrandomwriterandom: `--readwritepercent` reads, the rest writes, on every thread.
    fn read_random_write_random(&mut self, name: &str) -> Result<Option<BenchResult>, String> {
        let f = &self.flags;
        let reads = self.per_thread(f.reads);
        let ks = f.key_size;
        let vs = f.value_size;
        let num = f.num.max(1);
        let pct = f.readwritepercent as u64;
        let e = self.engine()?;
        let (mut r, cnt) = self.run_threads(name, f.threads, reads, e, move |c, e| {
            let mut i = 0u64;
            while c.more(i) {
                make_key(c.rand.uniform(num), ks, &mut c.key);
                let t0 = Instant::now();
                if c.rand.uniform(100) < pct {
                    c.reads += 1;
                    let b = c.read_key(e)?;
                    c.finished(t0, b);
                } else {
                    c.writes += 1;
                    e.put(&c.key, c.gen.generate(vs))?;
                    c.finished(t0, (ks + vs) as u64);
                    c.pace_write((ks + vs) as u64);
                }
                i += 1;
            }
            Ok(())
        })?;
        let (rd, wr) = (cnt.reads, cnt.writes);
        r.message = format!(
            "( reads:{rd} writes:{wr} total:{} found:{})",
            r.ops, cnt.found
        );
        Ok(Some(r))
    }

    /// mergerandom (db_bench: `--num` merges of an 8-byte 1 into random keys, for
    /// `--merge_operator=uint64add`) and readrandommergerandom (`--mergereadpercent` reads,
    /// the rest merges).
    fn merge_random(&mut self, name: &str) -> Result<Option<BenchResult>, String> {
        let f = &self.flags;
        let ops = self.per_thread(if name == "mergerandom" {
            f.writes
        } else {
            f.reads
        });
        let ks = f.key_size;
        let num = f.num.max(1);
        let pct = if name == "mergerandom" {
            0
        } else {
            u64::from(f.mergereadpercent)
        };
        let e = self.engine()?;
        let one = 1u64.to_le_bytes();
        let (mut r, cnt) = self.run_threads(name, f.threads, ops, e, move |c, e| {
            let mut i = 0u64;
            while c.more(i) {
                make_key(c.rand.uniform(num), ks, &mut c.key);
                let t0 = Instant::now();
                if pct > 0 && c.rand.uniform(100) < pct {
                    c.reads += 1;
                    let b = c.read_key(e)?;
                    c.finished(t0, b);
                } else {
                    c.writes += 1;
                    e.merge(&c.key, &one)?;
                    c.finished(t0, (ks + one.len()) as u64);
                    c.pace_write((ks + one.len()) as u64);
                }
                i += 1;
            }
            Ok(())
        })?;
        if pct > 0 {
            r.message = format!(
                "( reads:{} merges:{} total:{} hits:{})",
                cnt.reads, cnt.writes, r.ops, cnt.found
            );
        }
        Ok(Some(r))
    }

    /// multireadrandom: random keys read `--batch_size` at a time with one multi-get.
    fn multi_read_random(&mut self, name: &str) -> Result<Option<BenchResult>, String> {
        let f = &self.flags;
        let reads = self.per_thread(f.reads);
        let ks = f.key_size;
        let num = f.num.max(1);
        let batch = f.batch_size.max(1);
        let e = self.engine()?;
        let (mut r, cnt) = self.run_threads(name, f.threads, reads, e, move |c, e| {
            let mut keys: Vec<Vec<u8>> = Vec::with_capacity(batch);
            let mut i = 0u64;
            while c.more(i) {
                keys.clear();
                for _ in 0..batch {
                    make_key(c.rand.uniform(num), ks, &mut c.key);
                    keys.push(c.key.clone());
                }
                let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                let t0 = Instant::now();
                let got = e.multi_get(&refs)?;
                let bytes: u64 = got
                    .iter()
                    .zip(&keys)
                    .filter_map(|(v, k)| v.as_ref().map(|v| (k.len() + v.len()) as u64))
                    .sum();
                c.found += got.iter().filter(|v| v.is_some()).count() as u64;
                c.finished(t0, bytes);
                // One timed call, but db_bench counts every key read as an op.
                c.done += batch as u64 - 1;
                i += batch as u64;
            }
            Ok(())
        })?;
        r.message = format!("({} of {} found)", cnt.found, r.ops);
        Ok(Some(r))
    }

    /// compact, flush, waitforcompaction: one timed engine call.
    fn maintenance(&mut self, name: &str) -> Result<Option<BenchResult>, String> {
        let e = self.engine()?;
        let t0 = Instant::now();
        match name {
            "compact" => e.compact()?,
            "flush" => e.flush()?,
            _ => e.wait_for_compactions()?,
        }
        let secs = t0.elapsed().as_secs_f64();
        let mut h = Hist::new();
        h.record_nanos((secs * 1e9) as u64);
        Ok(Some(BenchResult {
            benchmark: name.into(),
            engine: self.flags.engine.clone(),
            threads: 1,
            ops: 1,
            elapsed_secs: secs,
            micros_per_op: secs * 1e6,
            ops_per_sec: 1.0 / secs.max(1e-9),
            latency: h.summary(),
            size_on_disk: Some(size_on_disk(&self.path)),
            ..Default::default()
        }))
    }

    /// stats: prints the engine's statistics text.
    fn print_stats(&mut self, _name: &str) -> Result<Option<BenchResult>, String> {
        let s = self
            .engine()?
            .stats()
            .unwrap_or_else(|| "(no stats)".into());
        self.say(&s);
        Ok(None)
    }

    /// levelstats: prints the engine's per-level file counts and sizes.
    fn print_level_stats(&mut self, _name: &str) -> Result<Option<BenchResult>, String> {
        let s = self
            .engine()?
            .property("levelstats")
            .unwrap_or_else(|| "(no level stats)".into());
        self.say(&s);
        Ok(None)
    }

    /// sstables: prints the table files of the database directory with their sizes.
    fn print_sstables(&mut self, _name: &str) -> Result<Option<BenchResult>, String> {
        let mut files: Vec<(String, u64)> = std::fs::read_dir(&self.path)
            .map_err(|e| e.to_string())?
            .flatten()
            .filter_map(|d| {
                let n = d.file_name().to_string_lossy().to_string();
                (n.ends_with(".sst") || n.ends_with(".ldb"))
                    .then(|| (n, d.metadata().map(|m| m.len()).unwrap_or(0)))
            })
            .collect();
        files.sort();
        let mut s = format!(
            "--- {} table files in {}\n",
            files.len(),
            self.path.display()
        );
        for (n, b) in files {
            s.push_str(&format!("{n}: {b} bytes\n"));
        }
        self.say(s.trim_end());
        Ok(None)
    }

    fn write_bench(
        &mut self,
        name: &str,
        order: Order,
        n: u64,
        vsize: usize,
        threads: usize,
    ) -> Result<BenchResult, String> {
        let f = self.flags.clone();
        let ks = f.key_size;
        let num = f.num.max(1);
        let batch = f.batch_size;
        let tombstones = f.range_tombstones;
        // `--fill_by_ingestion`: the writes are gathered (the last value of a key wins), then
        // written as sorted external files and ingested, all inside the timed run.
        let ingest = f.fill_by_ingestion && name.starts_with("fill");
        let max_key = match order {
            Order::Seq => n.max(num),
            _ => num,
        };
        let tracked = match self.live.as_mut() {
            Some(l) => l.prepare(max_key, (ks + vsize) as u64) && !tombstones.enabled(),
            None => false,
        };
        if !tracked {
            self.live = None;
        }
        let live = self.live.take();
        let e = self.engine()?;
        let cb0 = e.compaction_bytes_written();
        let live_ref = live.as_ref();
        let run = self.run_threads(name, threads, n, e, move |c, e| {
            let perm: Vec<u64> = if order == Order::Unique {
                let mut v: Vec<u64> = (0..num).collect();
                for i in (1..v.len()).rev() {
                    let j = c.rand.uniform(i as u64 + 1) as usize;
                    v.swap(i, j);
                }
                v
            } else {
                Vec::new()
            };
            let mut i = 0u64;
            let mut ops = Vec::new();
            let mut gathered = std::collections::BTreeMap::new();
            let (mut end_key, mut issued) = (Vec::new(), 0u64);
            while c.more(i) {
                let t0 = Instant::now();
                let mut bytes = 0u64;
                let this = if batch > 1 { batch } else { 1 };
                for j in 0..this {
                    let idx = i + j as u64;
                    let k = match order {
                        Order::Seq => idx,
                        Order::Random => c.rand.uniform(num),
                        Order::Unique => perm[(idx % num) as usize],
                    };
                    make_key(k, ks, &mut c.key);
                    if let Some(l) = live_ref {
                        l.insert(k);
                    }
                    bytes += (ks + vsize) as u64;
                    if ingest {
                        gathered.insert(c.key.clone(), c.gen.generate(vsize).to_vec());
                    } else if batch > 1 {
                        ops.push(BatchOp::Put(c.key.clone(), c.gen.generate(vsize).to_vec()));
                    } else {
                        e.put(&c.key, c.gen.generate(vsize))?;
                    }
                }
                if batch > 1 && !ingest {
                    e.write_batch(&ops)?;
                    ops.clear();
                }
                for written in i + 1..=i + this as u64 {
                    if tombstones.due(written, issued) {
                        let begin = c.rand.uniform(num);
                        make_key(begin, ks, &mut c.key);
                        make_key(begin + tombstones.width, ks, &mut end_key);
                        e.delete_range(&c.key, &end_key)?;
                        issued += 1;
                    }
                }
                c.finished(t0, bytes);
                c.pace_write(bytes);
                i += this as u64;
            }
            if ingest {
                let entries: Vec<(Vec<u8>, Vec<u8>)> =
                    std::mem::take(&mut gathered).into_iter().collect();
                e.ingest_sorted(&entries)?;
            }
            Ok(())
        });
        self.live = live;
        let (mut r, _) = run?;
        // Untimed: settle the engine, then report size on disk and write amplification.
        let e = self.engine()?;
        e.flush()?;
        e.wait_for_compactions()?;
        let size = size_on_disk(&self.path);
        r.size_on_disk = Some(size);
        r.space_amp = self
            .live
            .as_ref()
            .map(LiveKeys::bytes)
            .filter(|&b| b > 0)
            .map(|b| size as f64 / b as f64);
        r.user_bytes_written = Some(r.bytes);
        if let (Some(a), Some(b)) = (cb0, e.compaction_bytes_written()) {
            let cb = b.saturating_sub(a);
            r.compaction_bytes_written = Some(cb);
            if r.bytes > 0 {
                r.write_amp = Some(cb as f64 / r.bytes as f64);
            }
        }
        Ok(r)
    }

    fn size_line(&self, r: &BenchResult) {
        self.say(&format!(
            "{:<12} : size on disk {:.1} MB; write-amp {} (flush+compaction {:.1} MB / user {:.1} MB); space-amp {} (size on disk / live keys x entry bytes); measured after flush + wait, untimed",
            r.benchmark,
            r.size_on_disk.unwrap_or(0) as f64 / 1048576.0,
            r.write_amp.map_or("n/a".to_string(), |w| format!("{w:.2}")),
            r.compaction_bytes_written.unwrap_or(0) as f64 / 1048576.0,
            r.bytes as f64 / 1048576.0,
            r.space_amp.map_or("n/a".to_string(), |s| format!("{s:.2}")),
        ));
    }

    /// Runs `body` on `n` threads and merges their figures into a result; prints the line.
    fn run_threads<F>(
        &self,
        name: &str,
        n: usize,
        max_ops: u64,
        engine: &dyn Engine,
        body: F,
    ) -> Result<(BenchResult, Counts), String>
    where
        F: Fn(&mut ThreadCtx<'_>, &dyn Engine) -> Result<(), String> + Sync,
    {
        let f = &self.flags;
        let progress = AtomicU64::new(0);
        let duration = (f.duration > 0).then(|| Duration::from_secs(f.duration));
        let writers = n.max(1) as u64;
        let seed_base = f
            .seed
            .wrapping_add(self.threads_started.fetch_add(n as u64, Ordering::Relaxed));
        let worker = |tid: usize, run: &Run| {
            let mut c = ThreadCtx {
                tid,
                rand: Mt64::new(seed_base.wrapping_add(tid as u64 + 1)),
                gen: RandomGenerator::new(f.compression_ratio, f.value_size.max(100_000)),
                key: Vec::with_capacity(f.key_size + 1),
                bytes: 0,
                done: 0,
                found: 0,
                reads: 0,
                writes: 0,
                hist: Hist::new(),
                exclude: false,
                start: Instant::now(),
                max_ops,
                duration,
                progress: &progress,
                run,
                rate_limit: f.write_rate_limit / writers,
                rate_bytes: 0,
            };
            body(&mut c, engine).map(|()| ThreadFigures::of(c))
        };
        let out = run_workers(
            n,
            "benchmark thread panicked",
            worker,
            self.monitor(name, &progress),
        );
        let (end, elapsed) = (out.end, out.elapsed_secs());
        let ctxs = out.results;
        let mut hist = Hist::new();
        let (mut ops, mut bytes, mut found, mut thread_secs, mut counted) =
            (0u64, 0u64, 0u64, 0f64, 0usize);
        let (mut rd, mut wr, mut excluded_ops) = (0u64, 0u64, 0u64);
        for c in ctxs {
            let c = c.map_err(|e| format!("{name}: {e}"))?;
            if c.exclude {
                excluded_ops += c.done;
                continue;
            }
            counted += 1;
            hist.merge(&c.hist);
            ops += c.done;
            bytes += c.bytes;
            found += c.found;
            rd += c.reads;
            wr += c.writes;
            thread_secs += end
                .saturating_duration_since(c.start)
                .as_secs_f64()
                .min(elapsed);
        }
        let r = BenchResult {
            benchmark: name.into(),
            engine: f.engine.clone(),
            threads: counted,
            ops,
            elapsed_secs: elapsed,
            micros_per_op: if ops > 0 {
                thread_secs * 1e6 / ops as f64
            } else {
                0.0
            },
            ops_per_sec: ops as f64 / elapsed,
            bytes,
            mb_per_sec: bytes as f64 / 1048576.0 / elapsed,
            message: String::new(),
            latency: hist.summary(),
            ..Default::default()
        };
        Ok((
            r,
            Counts {
                found,
                reads: rd,
                writes: wr,
                excluded_ops,
            },
        ))
    }

    /// The progress lines of `--stats_interval` / `--stats_interval_seconds`, for the
    /// harness to call every 50 ms.
    fn monitor<'a>(&self, name: &'a str, progress: &'a AtomicU64) -> impl FnMut(&Run) + Send + 'a {
        let period = Duration::from_secs_f64(self.flags.stats_interval_seconds.max(0.1));
        let every_ops = self.flags.stats_interval;
        let mut last: Option<(Instant, u64)> = None;
        let mut next_ops = every_ops;
        move |run: &Run| {
            let start = run.start();
            let (last_t, last_n) = last.unwrap_or((start, 0));
            let n = progress.load(Ordering::Relaxed);
            let now = Instant::now();
            let due = if every_ops > 0 {
                n >= next_ops
            } else {
                now - last_t >= period
            };
            if due {
                let dt = (now - last_t).as_secs_f64().max(1e-9);
                eprintln!(
                    "{name:<12} : ... finished {n} ops in {:.1} s, {:.0} ops/sec now",
                    (now - start).as_secs_f64(),
                    (n - last_n) as f64 / dt
                );
                last = Some((now, n));
                while every_ops > 0 && next_ops <= n {
                    next_ops += every_ops;
                }
            }
        }
    }
}

/// Counters that go into a result's message.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    found: u64,
    reads: u64,
    writes: u64,
    /// Ops of threads left out of the figures (readwhilewriting's writer).
    excluded_ops: u64,
}

/// One benchmark (or family of benchmarks sharing a body, told apart by name).
type BenchFn = fn(&mut Runner, &str) -> Result<Option<BenchResult>, String>;

/// The function that runs benchmark `name`, if the runner knows it.
fn bench_fn(name: &str) -> Option<BenchFn> {
    Some(match name {
        "fillseq" | "fillrandom" | "filluniquerandom" | "fillsync" | "fill100K" => Runner::fill,
        "overwrite" => Runner::overwrite,
        "deleteseq" | "deleterandom" => Runner::delete,
        "readrandom" | "readmissing" | "readhot" => Runner::read_random,
        "readseq" | "readreverse" => Runner::read_seq,
        "seekrandom" => Runner::seek_random,
        "readwhilewriting" => Runner::read_while_writing,
        "readrandomwriterandom" => Runner::read_random_write_random,
        "mergerandom" | "readrandommergerandom" => Runner::merge_random,
        "multireadrandom" => Runner::multi_read_random,
        "compact" | "flush" | "waitforcompaction" => Runner::maintenance,
        "stats" => Runner::print_stats,
        "levelstats" => Runner::print_level_stats,
        "sstables" => Runner::print_sstables,
        _ => return None,
    })
}

/// Benchmarks that change which keys the database holds in ways `LiveKeys` does not follow
/// (deletes, merges, writers running beside reads): after one, fills report no space-amp.
fn changes_live_keys_untracked(name: &str) -> bool {
    matches!(
        name,
        "deleteseq"
            | "deleterandom"
            | "readwhilewriting"
            | "readrandomwriterandom"
            | "mergerandom"
            | "readrandommergerandom"
    )
}

/// The operation word of a benchmark's `--histogram` block, as db_bench prints it.
fn latency_label(name: &str) -> &'static str {
    if name.starts_with("fill") || name == "overwrite" {
        "write"
    } else if name.starts_with("delete") {
        "delete"
    } else if name.starts_with("seek") {
        "seek"
    } else if !name.starts_with("read") {
        "op"
    } else {
        "read"
    }
}

/// `--fill_by_ingestion` covers the fills that only put: one thread, no range deletes.
fn check_ingestion_fill(name: &str, f: &Flags) -> Result<(), String> {
    if !matches!(name, "fillseq" | "fillrandom" | "filluniquerandom") {
        return Err(format!(
            "--fill_by_ingestion: {name} cannot load by ingestion (fillseq, fillrandom and \
             filluniquerandom can)"
        ));
    }
    if f.threads != 1 || f.range_tombstones.enabled() || f.duration > 0 {
        return Err(
            "--fill_by_ingestion runs one thread, a count of writes (no --duration) and no \
             range deletes"
                .to_string(),
        );
    }
    Ok(())
}

/// The process's peak resident set size in kB (`VmHWM` in /proc/self/status; Linux only).
pub fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `benchmarks` on a fresh ShaleDB with `extra` flags; returns the runner (engine
    /// still open) and the results.
    fn run(benchmarks: &str, extra: &[&str]) -> (Runner, Vec<BenchResult>) {
        let mut args = vec![
            format!("--benchmarks={benchmarks}"),
            "--engine=shaledb".to_string(),
            "--num=2000".to_string(),
            "--key_size=16".to_string(),
            "--threads=1".to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let flags = Flags::parse(&args).expect("flags");
        let mut runner = Runner::new(flags).expect("runner");
        runner.verbose = false;
        let results = runner.run_all().expect("run");
        (runner, results)
    }

    #[test]
    fn mergerandom_adds_one_per_op_and_multireadrandom_counts_keys() {
        let (runner, results) = run(
            "mergerandom,readrandommergerandom,multireadrandom",
            &[
                "--merge_operator=uint64add",
                "--batch_size=8",
                "--reads=800",
            ],
        );
        let ops: Vec<u64> = results.iter().map(|r| r.ops).collect();
        assert_eq!(ops, vec![2000, 800, 800]);
        let e = runner.engine().expect("engine");
        let mut total = 0u64;
        for k in 0..2000u64 {
            let mut key = Vec::new();
            make_key(k, 16, &mut key);
            if let Some(v) = e.get(&key).expect("get") {
                total += u64::from_le_bytes(v.as_slice().try_into().expect("8 bytes"));
            }
        }
        let merges_in_mix = results[1]
            .message
            .split("merges:")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse::<u64>().ok())
            .expect("merge count in the message");
        assert_eq!(total, 2000 + merges_in_mix, "every merge added one");
        assert!(
            results[2].message.contains("of 800 found"),
            "{}",
            results[2].message
        );
    }

    #[test]
    fn mergerandom_without_a_merge_operator_fails_with_a_message() {
        let flags = Flags::parse(&["--benchmarks=mergerandom", "--engine=shaledb", "--num=10"])
            .expect("flags");
        let mut runner = Runner::new(flags).expect("runner");
        runner.verbose = false;
        let err = runner.run_all().expect_err("refused");
        assert!(err.contains("merge"), "{err}");
        assert!(Flags::parse(&["--merge_operator=max"]).is_err());
    }

    #[test]
    fn every_known_benchmark_has_a_function_and_no_other_name_does() {
        for name in BENCHMARKS {
            assert!(bench_fn(name).is_some(), "{name}");
        }
        for name in ["", "fill", "readrandom2", "ycsb"] {
            assert!(bench_fn(name).is_none(), "{name}");
        }
    }

    #[test]
    fn histogram_labels_follow_db_bench() {
        let labels: Vec<&str> = [
            "fillseq",
            "overwrite",
            "deleterandom",
            "seekrandom",
            "readwhilewriting",
            "compact",
        ]
        .iter()
        .map(|n| latency_label(n))
        .collect();
        assert_eq!(labels, ["write", "write", "delete", "seek", "read", "op"]);
    }
}
