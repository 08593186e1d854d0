//! YCSB core workloads A-F, reproduced from YCSB's `CoreWorkload` and its generators.
//!
//! * Keys: `"user" + fnvhash64(keynum)` in decimal (YCSB `buildKeyName`, `orderedinserts` false,
//!   `zeropadding` 1), or with `--fixedkey8b` the 8 bytes of `fnvhash64(keynum)` big-endian (the
//!   seed's fixed 8-byte keys).
//! * Records: `--fieldcount` fields `field0..` of `--fieldlength` random printable bytes, stored
//!   in YCSB-cpp's row format (u32 length + name, u32 length + value, little-endian); with
//!   `--fixedkey8b` and one field the value is the field's bytes alone (the seed's 24-byte value).
//! * Request distributions: scrambled zipfian (constant 0.99, YCSB's `ScrambledZipfianGenerator`
//!   over `recordcount + 2 * operationcount * insertproportion` items, rejecting keys not yet
//!   inserted), latest (`SkewedLatestGenerator`: newest minus zipfian), scan length uniform
//!   1..=100. readallfields true, writeallfields false (an update rewrites one field by
//!   read-modify-write of the record, as YCSB-cpp's RocksDB/LevelDB bindings do).
//! * Inserts during a run take the next key number from a shared counter; the newest key readers
//!   may choose is the highest one below which every insert has finished (YCSB's
//!   `AcknowledgedCounterGenerator`), so a read never targets an insert still in flight and any
//!   "reads not found" in a run is a record the engine lost.

use crate::dbbench::flags::{parse_args, Flags};
use crate::dbbench::keys::Mt64;
use crate::dbbench::report::{write_results_json, BenchResult, Hist, Latency};
use crate::engine::Engine;
use crate::engines::open_engine;
use crate::harness::{run_workers, Run};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// YCSB's FNV-1a-style 64-bit hash of a long (`Utils.fnvhash64`).
pub fn fnvhash64(mut val: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        let octet = val & 0xff;
        val >>= 8;
        h ^= octet;
        h = h.wrapping_mul(1_099_511_628_211);
    }
    (h as i64).wrapping_abs() as u64
}

/// `sum_{i=st}^{n-1} 1/(i+1)^theta + initial`.
pub fn zeta(st: u64, n: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in st..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// YCSB's `ZipfianGenerator`.
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    base: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: u64,
}

/// YCSB's zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// `ScrambledZipfianGenerator.ITEM_COUNT`.
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
/// `ScrambledZipfianGenerator.ZETAN`: zeta(10^10, 0.99).
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

impl Zipfian {
    /// Over [min, max], computing zeta(n) unless given.
    pub fn new(min: u64, max: u64, theta: f64, zetan: Option<f64>) -> Self {
        let items = max - min + 1;
        let zeta2theta = zeta(0, 2, theta, 0.0);
        let zetan = zetan.unwrap_or_else(|| zeta(0, items, theta, 0.0));
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan);
        Zipfian {
            items,
            base: min,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta,
            count_for_zeta: items,
        }
    }
    /// `nextLong(itemcount)`: grows zeta incrementally when the item count grows.
    pub fn next_long(&mut self, rng: &mut Mt64, itemcount: u64) -> u64 {
        if itemcount > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, itemcount, self.theta, self.zetan);
            self.count_for_zeta = itemcount;
            // As YCSB: eta keeps the original item count.
            self.eta = (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta))
                / (1.0 - self.zeta2theta / self.zetan);
        }
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        self.base + (itemcount as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }
    /// Next over the configured items.
    pub fn next(&mut self, rng: &mut Mt64) -> u64 {
        let n = self.items;
        self.next_long(rng, n)
    }
}

/// YCSB's `ScrambledZipfianGenerator` (constant 0.99).
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    gen: Zipfian,
    min: u64,
    itemcount: u64,
}

impl ScrambledZipfian {
    /// Over [min, max].
    pub fn new(min: u64, max: u64) -> Self {
        ScrambledZipfian {
            gen: Zipfian::new(
                0,
                SCRAMBLED_ITEM_COUNT - 1,
                ZIPFIAN_CONSTANT,
                Some(SCRAMBLED_ZETAN),
            ),
            min,
            itemcount: max - min + 1,
        }
    }
    /// The next key number.
    pub fn next(&mut self, rng: &mut Mt64) -> u64 {
        let r = self.gen.next_long(rng, SCRAMBLED_ITEM_COUNT);
        self.min + fnvhash64(r) % self.itemcount
    }
}

/// YCSB's `SkewedLatestGenerator`: the newest key minus a zipfian offset.
#[derive(Debug, Clone)]
pub struct Latest {
    gen: Zipfian,
}

impl Latest {
    /// For a key space whose newest key is `last`.
    pub fn new(last: u64) -> Self {
        Latest {
            gen: Zipfian::new(0, last.max(1), ZIPFIAN_CONSTANT, None),
        }
    }
    /// The next key number given the newest one.
    pub fn next(&mut self, rng: &mut Mt64, last: u64) -> u64 {
        let off = self.gen.next_long(rng, last.max(1));
        last.saturating_sub(off)
    }
}

/// Workload operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Read a whole record.
    Read,
    /// Rewrite one field.
    Update,
    /// Insert a new record.
    Insert,
    /// Scan 1..=100 records.
    Scan,
    /// Read then update.
    ReadModifyWrite,
}

impl Op {
    /// YCSB's measurement name.
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "READ",
            Op::Update => "UPDATE",
            Op::Insert => "INSERT",
            Op::Scan => "SCAN",
            Op::ReadModifyWrite => "READ-MODIFY-WRITE",
        }
    }
    const ALL: [Op; 5] = [
        Op::Read,
        Op::Update,
        Op::Insert,
        Op::Scan,
        Op::ReadModifyWrite,
    ];
    fn idx(self) -> usize {
        self as usize
    }
}

/// Request distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dist {
    /// Scrambled zipfian.
    Zipfian,
    /// Newest minus zipfian.
    Latest,
}

/// A core workload's mix.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Letter.
    pub name: char,
    /// (op, proportion).
    pub mix: Vec<(Op, f64)>,
    /// Key distribution.
    pub dist: Dist,
}

impl Workload {
    /// YCSB's workloads/workload{a..f}.
    pub fn core(letter: char) -> Option<Workload> {
        use Op::*;
        let (mix, dist) = match letter.to_ascii_lowercase() {
            'a' => (vec![(Read, 0.5), (Update, 0.5)], Dist::Zipfian),
            'b' => (vec![(Read, 0.95), (Update, 0.05)], Dist::Zipfian),
            'c' => (vec![(Read, 1.0)], Dist::Zipfian),
            'd' => (vec![(Read, 0.95), (Insert, 0.05)], Dist::Latest),
            'e' => (vec![(Scan, 0.95), (Insert, 0.05)], Dist::Zipfian),
            'f' => (vec![(Read, 0.5), (ReadModifyWrite, 0.5)], Dist::Zipfian),
            _ => return None,
        };
        Some(Workload {
            name: letter.to_ascii_lowercase(),
            mix,
            dist,
        })
    }
    fn insert_proportion(&self) -> f64 {
        self.mix
            .iter()
            .filter(|(o, _)| *o == Op::Insert)
            .map(|(_, p)| p)
            .sum()
    }
    /// `DiscreteGenerator.nextValue`.
    pub fn choose(&self, rng: &mut Mt64) -> Op {
        let total: f64 = self.mix.iter().map(|(_, p)| p).sum();
        let mut v = rng.next_f64() * total;
        for (o, p) in &self.mix {
            if v < *p {
                return *o;
            }
            v -= p;
        }
        self.mix[self.mix.len() - 1].0
    }
}

/// YCSB options.
#[derive(Debug, Clone)]
pub struct YcsbConfig {
    /// Workload (the first of `--workload=a,b,...`; it also drives the load phase).
    pub workload: Workload,
    /// Further workloads run after the first, on the same database (`--workload=a,b,c`).
    pub more_workloads: Vec<Workload>,
    /// Phases in order: "load", "run".
    pub phases: Vec<String>,
    /// Records loaded.
    pub recordcount: u64,
    /// Operations in the run phase.
    pub operationcount: u64,
    /// Client threads.
    pub threads: usize,
    /// Fields per record.
    pub fieldcount: usize,
    /// Bytes per field.
    pub fieldlength: usize,
    /// Fixed 8-byte keys.
    pub fixedkey8b: bool,
    /// Longest scan.
    pub maxscanlength: u64,
    /// YCSB's `maxexecutiontime`: seconds after which a phase stops with the operations done so
    /// far (applied to each phase; `None` runs every operation).
    pub maxexecutiontime: Option<u64>,
    /// db_bench flags for the engine (cache, compression, WAL, --engine, --db, --json, --seed).
    pub flags: Flags,
}

const YCSB_FLAGS: &[&str] = &[
    "workload",
    "phase",
    "recordcount",
    "operationcount",
    "threadcount",
    "fieldcount",
    "fieldlength",
    "fixedkey8b",
    "fixedfieldlen",
    "maxscanlength",
    "maxexecutiontime",
];

impl YcsbConfig {
    /// Parses `--workload=a --phase=load,run ...`; also YCSB's `-p name=value` and `-P workloads/workloada`.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<YcsbConfig, String> {
        let mut ycsb = std::collections::BTreeMap::new();
        let mut rest: Vec<String> = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_ref();
            i += 1;
            if a == "-p" || a == "-P" {
                let Some(v) = args.get(i) else {
                    return Err(format!("{a} needs an argument"));
                };
                i += 1;
                let v = v.as_ref();
                if a == "-P" {
                    let w = v.trim_end_matches('/').rsplit('/').next().unwrap_or(v);
                    let l = w.strip_prefix("workload").unwrap_or(w);
                    ycsb.insert("workload".to_string(), l.to_string());
                } else {
                    let (n, val) = v
                        .split_once('=')
                        .ok_or_else(|| format!("-p {v}: expected name=value"))?;
                    ycsb.insert(n.to_string(), val.to_string());
                }
                continue;
            }
            if a == "-load" || a == "-run" {
                let p = &a[1..];
                let e = ycsb.entry("phase".to_string()).or_insert_with(String::new);
                if !e.is_empty() {
                    e.push(',');
                }
                e.push_str(p);
                continue;
            }
            if let Some(body) = a.strip_prefix("--") {
                let (n, v) = body
                    .split_once('=')
                    .map_or((body, None), |(n, v)| (n, Some(v)));
                let n = n.replace('-', "_");
                let n = if n == "threads" {
                    "threadcount".to_string()
                } else {
                    n
                };
                if YCSB_FLAGS.contains(&n.as_str()) {
                    let v = match v {
                        Some(v) => v.to_string(),
                        None if n == "fixedkey8b" || n == "fixedfieldlen" => "true".into(),
                        None => {
                            let Some(v) = args.get(i) else {
                                return Err(format!("flag --{n} needs a value"));
                            };
                            i += 1;
                            v.as_ref().to_string()
                        }
                    };
                    ycsb.insert(n, v);
                    continue;
                }
            }
            rest.push(a.to_string());
        }
        let (m, pos) = parse_args(&rest)?;
        if let Some(p) = pos.first() {
            return Err(format!("unexpected argument {p:?}"));
        }
        let flags = Flags::from_map(&m)?;
        let num = |n: &str, d: u64| -> Result<u64, String> {
            ycsb.get(n).map_or(Ok(d), |v| {
                v.trim()
                    .parse()
                    .map_err(|_| format!("ycsb --{n}: cannot parse {v:?}"))
            })
        };
        let mut wls = Vec::new();
        for wl in ycsb.get("workload").map_or("a", |s| s.as_str()).split(',') {
            let wl = wl.trim();
            let w = wl
                .chars()
                .next()
                .filter(|_| wl.len() == 1)
                .and_then(Workload::core)
                .ok_or_else(|| format!("--workload={wl}: expected one of a, b, c, d, e, f"))?;
            wls.push(w);
        }
        let letter = wls.remove(0);
        let phases: Vec<String> = ycsb
            .get("phase")
            .map_or("load,run", |s| s.as_str())
            .split(',')
            .map(|s| s.trim().to_ascii_lowercase())
            .filter(|s| !s.is_empty())
            .collect();
        for p in &phases {
            if p != "load" && p != "run" {
                return Err(format!("--phase: {p:?} is not load or run"));
            }
        }
        let fixed = ycsb
            .get("fixedkey8b")
            .is_some_and(|v| matches!(v.as_str(), "1" | "true" | ""));
        Ok(YcsbConfig {
            workload: letter,
            more_workloads: wls,
            phases,
            recordcount: num("recordcount", 1000)?,
            operationcount: num("operationcount", 1000)?,
            threads: num("threadcount", 1)?.max(1) as usize,
            fieldcount: num("fieldcount", 10)?.max(1) as usize,
            fieldlength: num("fieldlength", 100)? as usize,
            fixedkey8b: fixed,
            maxscanlength: num("maxscanlength", 100)?.max(1),
            maxexecutiontime: match num("maxexecutiontime", 0)? {
                0 => None,
                s => Some(s),
            },
            flags,
        })
    }

    /// The key of key number `n`.
    pub fn key(&self, n: u64) -> Vec<u8> {
        let h = fnvhash64(n);
        if self.fixedkey8b {
            h.to_be_bytes().to_vec()
        } else {
            format!("user{h}").into_bytes()
        }
    }

    fn field_value(&self, rng: &mut Mt64) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.fieldlength);
        while v.len() < self.fieldlength {
            let mut x = rng.next_u64();
            for _ in 0..8 {
                if v.len() == self.fieldlength {
                    break;
                }
                v.push(b' ' + (x % 95) as u8);
                x /= 95;
            }
        }
        v
    }

    fn raw_value(&self) -> bool {
        self.fixedkey8b && self.fieldcount == 1
    }

    /// A full new record.
    pub fn record(&self, rng: &mut Mt64) -> Vec<u8> {
        if self.raw_value() {
            return self.field_value(rng);
        }
        let fields: Vec<(Vec<u8>, Vec<u8>)> = (0..self.fieldcount)
            .map(|i| (format!("field{i}").into_bytes(), self.field_value(rng)))
            .collect();
        serialize_row(&fields)
    }

    /// The record with field `f` replaced (writeallfields false).
    pub fn update_record(&self, old: Option<&[u8]>, f: usize, rng: &mut Mt64) -> Vec<u8> {
        if self.raw_value() {
            return self.field_value(rng);
        }
        let mut fields = old.map(deserialize_row).unwrap_or_default();
        let name = format!("field{f}").into_bytes();
        let v = self.field_value(rng);
        match fields.iter_mut().find(|(n, _)| *n == name) {
            Some(e) => e.1 = v,
            None => fields.push((name, v)),
        }
        serialize_row(&fields)
    }
}

/// YCSB-cpp's row format.
pub fn serialize_row(fields: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, v) in fields {
        out.extend_from_slice(&(n.len() as u32).to_le_bytes());
        out.extend_from_slice(n);
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

/// Inverse of [`serialize_row`]; stops at malformed input.
pub fn deserialize_row(mut b: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let take = |b: &mut &[u8]| -> Option<Vec<u8>> {
        let len = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
        let v = b.get(4..4 + len)?.to_vec();
        *b = &b[4 + len..];
        Some(v)
    };
    while !b.is_empty() {
        let (Some(n), Some(v)) = (take(&mut b), take(&mut b)) else {
            break;
        };
        out.push((n, v));
    }
    out
}

/// Shared key space state.
struct KeySpace {
    next_insert: AtomicU64,
    acked: Acknowledged,
}

/// The highest key number `limit` such that the inserts of every key up to it have finished.
/// Inserts finish out of order (eight client threads on two cores get preempted mid-insert), so
/// finished numbers above the first gap wait in `pending` until it closes.
struct Acknowledged {
    limit: AtomicU64,
    pending: Mutex<BTreeSet<u64>>,
}

impl Acknowledged {
    fn new(limit: u64) -> Self {
        Acknowledged {
            limit: AtomicU64::new(limit),
            pending: Mutex::new(BTreeSet::new()),
        }
    }

    fn limit(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// Records that the insert of key number `n` finished.
    fn ack(&self, n: u64) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let mut limit = self.limit.load(Ordering::Acquire);
        if n <= limit {
            return;
        }
        if n != limit + 1 {
            pending.insert(n);
            return;
        }
        limit = n;
        while pending.remove(&(limit + 1)) {
            limit += 1;
        }
        self.limit.store(limit, Ordering::Release);
    }
}

/// Per-op histograms of one thread.
struct OpStats {
    hist: Vec<Hist>,
    not_found: u64,
}

impl OpStats {
    fn new() -> Self {
        OpStats {
            hist: Op::ALL.iter().map(|_| Hist::new()).collect(),
            not_found: 0,
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn thread_run(
    cfg: &YcsbConfig,
    e: &dyn Engine,
    ks: &KeySpace,
    load: bool,
    tid: usize,
    remaining: &AtomicU64,
    progress: &AtomicU64,
    proto_latest: &Option<Latest>,
    proto_zipf: &ScrambledZipfian,
    run: &Run,
) -> Result<OpStats, String> {
    let mut rng = Mt64::new(cfg.flags.seed.wrapping_mul(31).wrapping_add(tid as u64 + 1));
    let mut st = OpStats::new();
    let mut zipf = proto_zipf.clone();
    let mut latest = proto_latest.clone();
    let wl = &cfg.workload;
    let next_key = |rng: &mut Mt64, zipf: &mut ScrambledZipfian, latest: &mut Option<Latest>| {
        let last = ks.acked.limit();
        match (wl.dist, latest.as_mut()) {
            (Dist::Latest, Some(l)) => l.next(rng, last),
            _ => loop {
                let k = zipf.next(rng);
                if k <= last {
                    break k;
                }
            },
        }
    };
    loop {
        if run.stop_requested() {
            break;
        }
        let prev =
            remaining.fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| r.checked_sub(1));
        if prev.is_err() {
            break;
        }
        let op = if load {
            Op::Insert
        } else {
            wl.choose(&mut rng)
        };
        let t0 = Instant::now();
        match op {
            Op::Insert => {
                let n = ks.next_insert.fetch_add(1, Ordering::AcqRel);
                let rec = cfg.record(&mut rng);
                e.put(&cfg.key(n), &rec)?;
                ks.acked.ack(n);
            }
            Op::Read => {
                let k = cfg.key(next_key(&mut rng, &mut zipf, &mut latest));
                if e.get(&k)?.is_none() {
                    st.not_found += 1;
                }
            }
            Op::Update => {
                let k = cfg.key(next_key(&mut rng, &mut zipf, &mut latest));
                let f = rng.uniform(cfg.fieldcount as u64) as usize;
                let old = e.get(&k)?;
                let rec = cfg.update_record(old.as_deref(), f, &mut rng);
                e.put(&k, &rec)?;
            }
            Op::Scan => {
                let k = cfg.key(next_key(&mut rng, &mut zipf, &mut latest));
                let len = 1 + rng.uniform(cfg.maxscanlength);
                let mut it = e.iter();
                it.seek(&k);
                let mut n = 0;
                while it.valid() && n < len {
                    std::hint::black_box(it.value().len());
                    it.next();
                    n += 1;
                }
                it.status()?;
            }
            Op::ReadModifyWrite => {
                let k = cfg.key(next_key(&mut rng, &mut zipf, &mut latest));
                let r0 = Instant::now();
                let old = e.get(&k)?;
                st.hist[Op::Read.idx()].record_nanos(r0.elapsed().as_nanos() as u64);
                if old.is_none() {
                    st.not_found += 1;
                }
                let u0 = Instant::now();
                let f = rng.uniform(cfg.fieldcount as u64) as usize;
                let cur = e.get(&k)?;
                let rec = cfg.update_record(cur.as_deref(), f, &mut rng);
                e.put(&k, &rec)?;
                st.hist[Op::Update.idx()].record_nanos(u0.elapsed().as_nanos() as u64);
            }
        }
        st.hist[op.idx()].record_nanos(t0.elapsed().as_nanos() as u64);
        progress.fetch_add(1, Ordering::Relaxed);
    }
    Ok(st)
}

/// Runs one phase on an open engine.
pub fn run_phase(
    cfg: &YcsbConfig,
    e: &dyn Engine,
    phase: &str,
    ks_next: u64,
) -> Result<BenchResult, String> {
    let load = phase == "load";
    let total = if load {
        cfg.recordcount
    } else {
        cfg.operationcount
    };
    let ks = KeySpace {
        next_insert: AtomicU64::new(if load { 0 } else { ks_next }),
        acked: Acknowledged::new(ks_next.max(1) - 1),
    };
    let expected_new = (cfg.operationcount as f64 * cfg.workload.insert_proportion() * 2.0) as u64;
    let zipf = ScrambledZipfian::new(0, cfg.recordcount + expected_new);
    let latest =
        (!load && cfg.workload.dist == Dist::Latest).then(|| Latest::new(ks_next.max(2) - 1));
    let remaining = AtomicU64::new(total);
    let progress = AtomicU64::new(0);
    let timed_out = AtomicBool::new(false);
    let limit = cfg.maxexecutiontime.map(Duration::from_secs);
    let label = format!("ycsb-{}-{phase}", cfg.workload.name);
    let mut last: Option<(Instant, u64)> = None;
    let monitor = |run: &Run| {
        let start = run.start();
        if limit.is_some_and(|l| start.elapsed() >= l) && !timed_out.load(Ordering::Relaxed) {
            timed_out.store(true, Ordering::Relaxed);
            run.request_stop();
        }
        let (last_t, last_n) = *last.get_or_insert((start, 0));
        if last_t.elapsed() >= Duration::from_secs(5) {
            let n = progress.load(Ordering::Relaxed);
            eprintln!(
                "{label}: ... {n} of {total} ops in {:.0} s, {:.0} ops/sec now",
                start.elapsed().as_secs_f64(),
                (n - last_n) as f64 / last_t.elapsed().as_secs_f64()
            );
            last = Some((Instant::now(), n));
        }
    };
    let worker = |tid: usize, run: &Run| {
        thread_run(
            cfg, e, &ks, load, tid, &remaining, &progress, &latest, &zipf, run,
        )
    };
    let out = run_workers(cfg.threads, "ycsb thread panicked", worker, monitor);
    let elapsed = out.elapsed_secs();
    let results = out.results;
    let mut merged: Vec<Hist> = Op::ALL.iter().map(|_| Hist::new()).collect();
    let mut not_found = 0;
    for r in results {
        let st = r?;
        for (m, h) in merged.iter_mut().zip(&st.hist) {
            m.merge(h);
        }
        not_found += st.not_found;
    }
    let mut all = Hist::new();
    let mut per_op: Vec<(String, Latency)> = Vec::new();
    for op in Op::ALL {
        let h = &merged[op.idx()];
        if h.count() > 0 {
            per_op.push((op.name().to_string(), h.summary()));
            if op != Op::ReadModifyWrite || !cfg.workload.mix.iter().any(|(o, _)| *o == Op::Read) {
                all.merge(h);
            }
        }
    }
    let ops = progress.load(Ordering::Relaxed);
    let note = (timed_out.load(Ordering::Relaxed) && ops < total).then(|| {
        let what = if load {
            "records loaded"
        } else {
            "operations done"
        };
        format!(
            "stopped at --maxexecutiontime={}: {} of {} {what}",
            cfg.maxexecutiontime.unwrap_or(0),
            group_thousands(ops),
            group_thousands(total)
        )
    });
    Ok(BenchResult {
        benchmark: format!("ycsb-{}-{phase}", cfg.workload.name),
        engine: cfg.flags.engine.clone(),
        threads: cfg.threads,
        ops,
        elapsed_secs: elapsed,
        micros_per_op: elapsed * 1e6 * cfg.threads as f64 / ops.max(1) as f64,
        ops_per_sec: ops as f64 / elapsed,
        message: if not_found > 0 {
            format!("({not_found} reads not found)")
        } else {
            String::new()
        },
        latency: all.summary(),
        per_op,
        note,
        ..Default::default()
    })
}

/// The seed's table layout for one phase.
pub fn format_phase(r: &BenchResult, phase: &str) -> String {
    let cap = if phase == "load" { "Load" } else { "Run" };
    let mut s = format!(
        "| DB | {cap} runtime(sec) | {cap} throughput(ops/sec) |\n|----|----|----|\n| {} | {:.2} | {} |\n\n",
        r.engine,
        r.elapsed_secs,
        group_thousands(r.ops_per_sec.round() as u64)
    );
    s.push_str("| DB | Max | Min | Avg(us) | 90 | 99 | 99.9 | 99.99 |\n");
    s.push_str("|----|-----|-----|---------|----|----|------|-------|\n");
    for (op, l) in &r.per_op {
        s.push_str(&format!(
            "| {}-{} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            r.engine, op, l.max_us, l.min_us, l.avg_us, l.p90_us, l.p99_us, l.p999_us, l.p9999_us
        ));
    }
    s
}

/// `1234567` -> `1,234,567`.
pub fn group_thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).rem_euclid(3) == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `shale-bench ycsb ...`.
pub fn main_with_args<S: AsRef<str>>(args: &[S]) -> Result<Vec<BenchResult>, String> {
    let cfg = YcsbConfig::parse(args)?;
    run(&cfg, true)
}

/// Runs the configured phases; prints the tables when `verbose`.
pub fn run(cfg: &YcsbConfig, verbose: bool) -> Result<Vec<BenchResult>, String> {
    let has_load = cfg.phases.iter().any(|p| p == "load");
    if cfg.flags.db.is_none() && !has_load {
        return Err("--phase=run needs a loaded database: use --phase=load,run, or --db=PATH of a database loaded with the same --recordcount".into());
    }
    let (path, _tmp) = cfg.flags.db_dir("shale-ycsb-")?;
    // A load that starts the run creates a fresh database (peers refuse to "open existing" a
    // directory that holds none); a run phase alone opens the loaded one.
    let fresh = has_load
        && cfg.phases.first().map(|s| s.as_str()) == Some("load")
        && !cfg.flags.opts.use_existing_db;
    if fresh && path.exists() {
        std::fs::remove_dir_all(&path).map_err(|e| format!("deleting {}: {e}", path.display()))?;
    }
    let mut opts = cfg.flags.opts.clone();
    opts.use_existing_db = !fresh;
    let e = open_engine(&cfg.flags.engine, &path, &opts)?;
    let mut out = Vec::new();
    let mut next = cfg.recordcount;
    if verbose {
        println!(
            "YCSB workload {}: engine {}, {} threads, recordcount {}, operationcount {}, {} field(s) of {} B, keys {}, db [{}]",
            cfg.workload.name,
            cfg.flags.engine,
            cfg.threads,
            cfg.recordcount,
            cfg.operationcount,
            cfg.fieldcount,
            cfg.fieldlength,
            if cfg.fixedkey8b { "fixed 8 B" } else { "\"user\"+fnv64" },
            path.display()
        );
        for l in cfg.flags.ignored_report() {
            println!("{l}");
        }
    }
    let mut steps: Vec<(String, YcsbConfig)> = Vec::new();
    for phase in &cfg.phases {
        if phase == "load" {
            steps.push((phase.clone(), cfg.clone()));
        } else {
            for w in std::iter::once(&cfg.workload).chain(&cfg.more_workloads) {
                let mut c = cfg.clone();
                c.workload = w.clone();
                steps.push((phase.clone(), c));
            }
        }
    }
    // A load stopped by --maxexecutiontime leaves fewer records: the run phases then choose
    // among those (as the seed ran WiredTiger on 10M records, not 1G) and say so.
    let mut short_load: Option<u64> = None;
    for (phase, cfg) in &steps {
        let mut cfg = cfg.clone();
        if let Some(n) = short_load {
            cfg.recordcount = n;
        }
        let cfg = &cfg;
        let mut r = run_phase(cfg, e.as_ref(), phase, next)?;
        if phase == "load" && r.note.is_some() {
            short_load = Some(r.ops);
            next = r.ops;
        } else if let Some(n) = short_load {
            let on = format!(
                "on the {} records the stopped load left",
                group_thousands(n)
            );
            r.note = Some(match r.note.take() {
                Some(t) => format!("{t}; {on}"),
                None => on,
            });
        }
        if phase == "run" {
            let ins = r
                .per_op
                .iter()
                .find(|(n, _)| n == "INSERT")
                .map_or(0, |(_, l)| l.count);
            next += ins;
        }
        if verbose {
            println!("\n### {} phase, workload {}\n", phase, cfg.workload.name);
            print!("{}", format_phase(&r, phase));
            if !r.message.is_empty() {
                println!("{}", r.message);
            }
            if let Some(n) = &r.note {
                println!("Note: {n}");
            }
        }
        out.push(r);

        if let Some(p) = &cfg.flags.json {
            write_results_json(p, "shale-bench ycsb", &cfg.flags.engine, &out)?;
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn acknowledged_limit_stops_at_the_first_insert_still_in_flight() {
        // 99 keys exist; inserts of 100..=104 finish in the order 101, 103, 100, 104, 102.
        let a = Acknowledged::new(99);
        a.ack(101);
        assert_eq!(a.limit(), 99, "100 is still in flight");
        a.ack(103);
        assert_eq!(a.limit(), 99);
        a.ack(100);
        assert_eq!(
            a.limit(),
            101,
            "100 closes the gap up to 101; 102 is in flight"
        );
        a.ack(104);
        assert_eq!(a.limit(), 101);
        a.ack(102);
        assert_eq!(a.limit(), 104);
        a.ack(50);
        assert_eq!(a.limit(), 104, "an old number changes nothing");
    }

    #[test]
    fn fnv_matches_ycsb() {
        // FNV-1 64 over the 8 little-endian bytes of 0, then abs.
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for _ in 0..8 {
            h = h.wrapping_mul(1_099_511_628_211);
        }
        assert_eq!(fnvhash64(0), (h as i64).wrapping_abs() as u64);
        assert_ne!(fnvhash64(1), fnvhash64(2));
    }

    #[test]
    fn scrambled_zetan_constant() {
        // zeta(10^10, 0.99) is YCSB's precomputed constant; check the first 10^6 terms agree
        // in shape: zeta grows, and the constant is above the partial sum.
        let z = zeta(0, 1_000_000, 0.99, 0.0);
        assert!(z < SCRAMBLED_ZETAN && z > 10.0);
    }

    #[test]
    fn zipfian_is_skewed() {
        let mut rng = Mt64::new(7);
        let mut z = Zipfian::new(0, 999, ZIPFIAN_CONSTANT, None);
        let mut counts = vec![0u64; 1000];
        for _ in 0..100_000 {
            counts[z.next(&mut rng) as usize] += 1;
        }
        // Item 0 gets 1/zeta(1000) ~ 13% of requests; the top 10 get about 40%.
        let top: u64 = counts[..10].iter().sum();
        assert!(counts[0] > 11_000 && counts[0] < 15_500, "{}", counts[0]);
        assert!(top > 35_000, "{top}");
        assert!(counts[0] > counts[1] && counts[1] > counts[10]);
    }

    #[test]
    fn scrambled_zipfian_spreads_hot_keys() {
        let mut rng = Mt64::new(9);
        let mut z = ScrambledZipfian::new(0, 9_999);
        let mut counts = vec![0u64; 10_000];
        for _ in 0..100_000 {
            let k = z.next(&mut rng);
            assert!(k < 10_000);
            counts[k as usize] += 1;
        }
        let mut sorted = counts.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        // Skewed: the hottest key far above uniform (10 per key) ...
        assert!(sorted[0] > 1_000, "{}", sorted[0]);
        // ... but not at key 0: the hot keys are scattered by the hash.
        let hottest = counts.iter().position(|&c| c == sorted[0]).unwrap_or(0);
        assert_eq!(hottest as u64, fnvhash64(0) % 10_000);
    }

    #[test]
    fn latest_prefers_newest() {
        let mut rng = Mt64::new(3);
        let mut l = Latest::new(9_999);
        let mut newest = 0;
        for _ in 0..10_000 {
            let k = l.next(&mut rng, 9_999);
            assert!(k <= 9_999);
            if k >= 9_990 {
                newest += 1;
            }
        }
        assert!(newest > 3_000, "{newest}");
        // The key space grows: the newest key moves.
        let k = (0..1000)
            .map(|_| l.next(&mut rng, 20_000))
            .max()
            .unwrap_or(0);
        assert_eq!(k, 20_000);
    }

    #[test]
    fn keys_and_records() {
        let cfg =
            YcsbConfig::parse(&["--workload=a", "--fieldcount=3", "--fieldlength=5"]).unwrap();
        assert_eq!(cfg.key(0), format!("user{}", fnvhash64(0)).into_bytes());
        let mut rng = Mt64::new(1);
        let r = cfg.record(&mut rng);
        let f = deserialize_row(&r);
        assert_eq!(f.len(), 3);
        assert_eq!(f[2].0, b"field2");
        assert_eq!(f[2].1.len(), 5);
        let u = cfg.update_record(Some(&r), 1, &mut rng);
        let g = deserialize_row(&u);
        assert_eq!(g[0], f[0]);
        assert_eq!(g[2], f[2]);
        let cfg = YcsbConfig::parse(&[
            "-p",
            "fixedkey8b=true",
            "-p",
            "fieldcount=1",
            "-p",
            "fieldlength=24",
            "-P",
            "workloads/workloadf",
            "-p",
            "threadcount=8",
        ])
        .unwrap();
        assert_eq!(cfg.key(5).len(), 8);
        assert_eq!(cfg.record(&mut rng).len(), 24);
        assert_eq!(cfg.threads, 8);
        assert_eq!(cfg.workload.name, 'f');
        assert!(YcsbConfig::parse(&["--workload=g"]).is_err());
        assert!(YcsbConfig::parse(&["--bogus=1"]).is_err());
    }

    #[test]
    fn thousands() {
        assert_eq!(group_thousands(176387), "176,387");
        assert_eq!(group_thousands(12), "12");
        assert_eq!(group_thousands(1000), "1,000");
    }
}
