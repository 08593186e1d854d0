//! Database statistics (RocksDB's `Options::statistics`): counters ("tickers") and latency
//! histograms, kept only when [`Options::statistics`](crate::Options::statistics) is set.
//!
//! Off, every recording site is one branch on an `Option` that is `None`: no clock is read
//! and no shared memory written. On, a ticker is one relaxed atomic add and a latency sample
//! two clock reads plus three relaxed atomic updates in a fixed array of logarithmic buckets
//! (no lock, no allocation). The counters are split into shards, one picked per thread
//! (RocksDB keeps them per core), so threads reading at once do not all write the same cache
//! lines; a snapshot sums the shards.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Declares `Ticker` with its variants, their names and `COUNT`.
macro_rules! tickers {
    ($($(#[$doc:meta])* $v:ident => $name:literal,)*) => {
        /// A counter kept by [`Statistics`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Ticker {
            $($(#[$doc])* $v,)*
        }

        impl Ticker {
            /// Every ticker, in the order [`StatisticsSnapshot`]'s text lists them.
            pub const ALL: &'static [Ticker] = &[$(Ticker::$v,)*];

            /// The ticker's name in the text form (`shaledb.` followed by RocksDB's name
            /// where RocksDB has the counter).
            pub fn name(self) -> &'static str {
                match self {
                    $(Ticker::$v => $name,)*
                }
            }
        }
    };
}

tickers! {
    /// Data blocks found in the block cache.
    BlockCacheDataHit => "shaledb.block.cache.data.hit",
    /// Data blocks not found in the block cache (read from the file).
    BlockCacheDataMiss => "shaledb.block.cache.data.miss",
    /// Index blocks found in the block cache (`cache_index_and_filter_blocks`).
    BlockCacheIndexHit => "shaledb.block.cache.index.hit",
    /// Index blocks read from the file because the block cache lacked them.
    BlockCacheIndexMiss => "shaledb.block.cache.index.miss",
    /// Filters found in the block cache (`cache_index_and_filter_blocks`).
    BlockCacheFilterHit => "shaledb.block.cache.filter.hit",
    /// Filters read from the file because the block cache lacked them.
    BlockCacheFilterMiss => "shaledb.block.cache.filter.miss",
    /// Data blocks missing from the block cache found in its compressed secondary tier
    /// (decompressed into the primary, no file read). RocksDB's
    /// `COMPRESSED_SECONDARY_CACHE_HITS`.
    CompressedSecondaryCacheHit => "shaledb.compressed.secondary.cache.hits",
    /// Data blocks missing from both tiers of a block cache with a compressed secondary
    /// tier (read from the file). Not counted without the tier.
    CompressedSecondaryCacheMiss => "shaledb.compressed.secondary.cache.misses",
    /// Point lookups in a table that asked its bloom filter.
    BloomChecked => "shaledb.bloom.filter.checked",
    /// Of those, lookups the filter answered "certainly absent" (the table was not read).
    BloomUseful => "shaledb.bloom.filter.useful",
    /// Keys written by `put`, `delete`, `merge`, `write` (each entry of a batch).
    KeysWritten => "shaledb.number.keys.written",
    /// Bytes of the batches written (keys, values and batch headers).
    BytesWritten => "shaledb.bytes.written",
    /// Point lookups (`get` and each key of `multi_get`).
    KeysRead => "shaledb.number.keys.read",
    /// Bytes of the values point lookups returned.
    BytesRead => "shaledb.bytes.read",
    /// Point lookups a memtable answered (found, deleted or a merge operand).
    MemtableHit => "shaledb.memtable.hit",
    /// Point lookups the memtables could not answer (the tables were searched).
    MemtableMiss => "shaledb.memtable.miss",
    /// WAL syncs (a write with `WriteOptions::sync`).
    WalSyncs => "shaledb.wal.synced",
    /// Bytes of the table and blob files flushes wrote.
    FlushBytesWritten => "shaledb.flush.write.bytes",
    /// Bytes of the input tables compactions read.
    CompactionBytesRead => "shaledb.compact.read.bytes",
    /// Bytes of the table and blob files compactions wrote.
    CompactionBytesWritten => "shaledb.compact.write.bytes",
    /// Key ranges compactions were split into and written side by side
    /// (`Options::max_subcompactions`; a compaction not split counts none). RocksDB keeps
    /// `num.subcompactions.scheduled` as a histogram.
    SubcompactionsRun => "shaledb.num.subcompactions.run",
    /// Microseconds writes spent stalled or slowed down.
    StallMicros => "shaledb.stall.micros",
    /// Microseconds flush and compaction writes waited for the rate limiter.
    RateLimiterWaitMicros => "shaledb.rate.limiter.wait.micros",
    /// Lines the `LOG` file could not take (a write error; the line is dropped).
    InfoLogWriteErrors => "shaledb.info.log.write.errors",
    /// Event listener calls that panicked (the panic is caught).
    ListenerPanics => "shaledb.listener.panics",
}

/// Declares `HistogramKind` with its variants, names and `COUNT`.
macro_rules! histograms {
    ($($(#[$doc:meta])* $v:ident => $name:literal,)*) => {
        /// A latency histogram kept by [`Statistics`] (in microseconds).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum HistogramKind {
            $($(#[$doc])* $v,)*
        }

        impl HistogramKind {
            /// Every histogram, in the order the text form lists them.
            pub const ALL: &'static [HistogramKind] = &[$(HistogramKind::$v,)*];

            /// The histogram's name in the text form.
            pub fn name(self) -> &'static str {
                match self {
                    $(HistogramKind::$v => $name,)*
                }
            }
        }
    };
}

histograms! {
    /// `get` (and `get_cf`...) latency.
    GetMicros => "shaledb.db.get.micros",
    /// Latency of a write call, queueing and WAL included.
    WriteMicros => "shaledb.db.write.micros",
    /// Iterator seek latency (`seek`, `seek_for_prev`, `seek_to_first`, `seek_to_last`).
    SeekMicros => "shaledb.db.seek.micros",
    /// `multi_get` (and `multi_get_cf`) latency, per call.
    MultiGetMicros => "shaledb.db.multiget.micros",
    /// Duration of a flush job.
    FlushMicros => "shaledb.db.flush.micros",
    /// Duration of a compaction job.
    CompactionMicros => "shaledb.compaction.times.micros",
}

/// Sub-buckets per power of two: 4 keep a percentile within about 19% of the true value.
const SUB_BUCKET_BITS: u32 = 2;
const SUB_BUCKETS: usize = 1 << SUB_BUCKET_BITS;
/// Values (nanoseconds) up to 2^64 - 1: 64 powers of two, each split in `SUB_BUCKETS`.
const BUCKETS: usize = 64 * SUB_BUCKETS;

/// The bucket of `v`: exact below `SUB_BUCKETS`, then `SUB_BUCKETS` buckets per power of two.
fn bucket_of(v: u64) -> usize {
    if v < SUB_BUCKETS as u64 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let sub = (v >> (msb - SUB_BUCKET_BITS)) as usize & (SUB_BUCKETS - 1);
    (msb - SUB_BUCKET_BITS + 1) as usize * SUB_BUCKETS + sub
}

/// The smallest value of bucket `b` and the smallest of the next one.
fn bucket_bounds(b: usize) -> (u64, u64) {
    let lower = |b: usize| -> u128 {
        if b < SUB_BUCKETS {
            return b as u128;
        }
        let msb = (b / SUB_BUCKETS) as u32 - 1 + SUB_BUCKET_BITS;
        let sub = (b % SUB_BUCKETS) as u128;
        (1u128 << msb) + (sub << (msb - SUB_BUCKET_BITS))
    };
    let clamp = |v: u128| u64::try_from(v).unwrap_or(u64::MAX);
    (clamp(lower(b)), clamp(lower(b + 1)))
}

/// A histogram of durations in nanoseconds, in logarithmic buckets of atomics.
struct AtomicHistogram {
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
    max: AtomicU64,
}

impl AtomicHistogram {
    fn new() -> Self {
        AtomicHistogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }

    fn record(&self, nanos: u64) {
        self.buckets[bucket_of(nanos)].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(nanos, Ordering::Relaxed);
        self.max.fetch_max(nanos, Ordering::Relaxed);
    }

    fn reset(&self) {
        for b in self.buckets.iter() {
            b.store(0, Ordering::Relaxed);
        }
        self.sum.store(0, Ordering::Relaxed);
        self.max.store(0, Ordering::Relaxed);
    }

    /// The summary of the samples of every histogram in `shards` together.
    fn merged<'a>(shards: impl Iterator<Item = &'a AtomicHistogram>) -> HistogramData {
        let mut counts = vec![0u64; BUCKETS];
        let (mut sum, mut max) = (0u64, 0u64);
        for h in shards {
            for (c, b) in counts.iter_mut().zip(h.buckets.iter()) {
                *c += b.load(Ordering::Relaxed);
            }
            sum = sum.wrapping_add(h.sum.load(Ordering::Relaxed));
            max = max.max(h.max.load(Ordering::Relaxed));
        }
        let count: u64 = counts.iter().sum();
        let micros = |nanos: f64| nanos / 1000.0;
        let percentile = |p: f64| micros(percentile_of(&counts, count, max, p));
        HistogramData {
            count,
            sum_micros: sum / 1000,
            mean_micros: match count {
                0 => 0.0,
                n => micros(sum as f64 / n as f64),
            },
            p50_micros: percentile(50.0),
            p95_micros: percentile(95.0),
            p99_micros: percentile(99.0),
            max_micros: micros(max as f64),
        }
    }
}

/// The `p`-th percentile of the samples in `counts` (`count` of them), interpolated linearly
/// within its bucket and never above the largest sample.
fn percentile_of(counts: &[u64], count: u64, max: u64, p: f64) -> f64 {
    if count == 0 {
        return 0.0;
    }
    let rank = (p / 100.0 * count as f64).max(1.0);
    let mut below = 0u64;
    for (b, &n) in counts.iter().enumerate() {
        if n == 0 {
            continue;
        }
        if (below + n) as f64 >= rank {
            let (lo, hi) = bucket_bounds(b);
            let within = (rank - below as f64) / n as f64;
            let v = lo as f64 + within * (hi - lo) as f64;
            return v.min(max as f64);
        }
        below += n;
    }
    max as f64
}

/// Counters and latency histograms of one database, or of several sharing it (RocksDB's
/// `CreateDBStatistics()`): set [`Options::statistics`](crate::Options::statistics) to an
/// `Arc` of one, keep a clone to read it, or call [`crate::Db::statistics`].
///
/// ```
/// use shaledb::{Db, Options, Statistics, Ticker};
/// use std::sync::Arc;
/// let dir = tempfile::tempdir().unwrap();
/// let stats = Arc::new(Statistics::new());
/// let db = Db::open(dir.path(), Options::default().with_statistics(stats.clone())).unwrap();
/// db.put(b"k", b"v").unwrap();
/// db.get(b"k").unwrap();
/// let s = db.statistics().unwrap();
/// assert_eq!(s.ticker(Ticker::KeysWritten), 1);
/// assert_eq!(stats.snapshot().ticker(Ticker::MemtableHit), 1);
/// println!("{s}"); // the text form
/// ```
pub struct Statistics {
    shards: Box<[Shard]>,
}

/// Shards of the counters (a power of two).
const SHARDS: usize = 16;

/// One shard: every ticker and histogram, written by the threads mapped to it.
struct Shard {
    tickers: Box<[AtomicU64]>,
    histograms: Box<[AtomicHistogram]>,
}

impl Shard {
    fn new() -> Shard {
        Shard {
            tickers: Ticker::ALL.iter().map(|_| AtomicU64::new(0)).collect(),
            histograms: HistogramKind::ALL
                .iter()
                .map(|_| AtomicHistogram::new())
                .collect(),
        }
    }
}

/// The shard of the calling thread: threads take shards round-robin as they first record.
fn shard_index() -> usize {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed) as usize % SHARDS;
    }
    INDEX.with(|i| *i)
}

impl Default for Statistics {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Statistics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Statistics")
    }
}

impl Statistics {
    /// Empty statistics: every counter 0.
    pub fn new() -> Self {
        Statistics {
            shards: (0..SHARDS).map(|_| Shard::new()).collect(),
        }
    }

    #[inline]
    fn shard(&self) -> &Shard {
        &self.shards[shard_index()]
    }

    /// Adds `n` to ticker `t`.
    #[inline]
    pub(crate) fn add(&self, t: Ticker, n: u64) {
        self.shard().tickers[t as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Records the time elapsed since `start` in histogram `h`.
    #[inline]
    pub(crate) fn record_since(&self, h: HistogramKind, start: Instant) {
        let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.shard().histograms[h as usize].record(nanos);
    }

    /// Records a duration in histogram `h`.
    pub(crate) fn record(&self, h: HistogramKind, d: std::time::Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.shard().histograms[h as usize].record(nanos);
    }

    /// The current value of ticker `t`.
    pub fn ticker(&self, t: Ticker) -> u64 {
        self.shards
            .iter()
            .map(|s| s.tickers[t as usize].load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }

    /// Sets every counter and histogram back to 0.
    pub fn reset(&self) {
        for s in self.shards.iter() {
            for t in s.tickers.iter() {
                t.store(0, Ordering::Relaxed);
            }
            for h in s.histograms.iter() {
                h.reset();
            }
        }
    }

    /// A copy of every counter and histogram summary, as of now. Counters are read one by
    /// one while others may update them, so the copy is not one atomic instant.
    pub fn snapshot(&self) -> StatisticsSnapshot {
        StatisticsSnapshot {
            tickers: Ticker::ALL.iter().map(|&t| (t, self.ticker(t))).collect(),
            histograms: HistogramKind::ALL
                .iter()
                .map(|&h| {
                    let shards = self.shards.iter().map(|s| &s.histograms[h as usize]);
                    (h, AtomicHistogram::merged(shards))
                })
                .collect(),
        }
    }
}

/// A summary of one latency histogram, in microseconds. Percentiles are interpolated within
/// logarithmic buckets (about 19% wide), so they are estimates; `count`, the mean and the
/// maximum are exact.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct HistogramData {
    /// Samples recorded.
    pub count: u64,
    /// Their sum.
    pub sum_micros: u64,
    /// Their mean.
    pub mean_micros: f64,
    /// The median.
    pub p50_micros: f64,
    /// The 95th percentile.
    pub p95_micros: f64,
    /// The 99th percentile.
    pub p99_micros: f64,
    /// The largest sample.
    pub max_micros: f64,
}

/// The statistics as of one moment ([`crate::Db::statistics`], [`Statistics::snapshot`]).
/// Its `Display` is the text form, one line per counter and per histogram, as RocksDB's
/// `Statistics::ToString`.
#[derive(Debug, Clone, PartialEq)]
pub struct StatisticsSnapshot {
    tickers: Vec<(Ticker, u64)>,
    histograms: Vec<(HistogramKind, HistogramData)>,
}

impl StatisticsSnapshot {
    /// The value of ticker `t`.
    pub fn ticker(&self, t: Ticker) -> u64 {
        self.tickers
            .iter()
            .find(|(k, _)| *k == t)
            .map_or(0, |(_, v)| *v)
    }

    /// The summary of histogram `h`.
    pub fn histogram(&self, h: HistogramKind) -> HistogramData {
        self.histograms
            .iter()
            .find(|(k, _)| *k == h)
            .map_or_else(HistogramData::default, |(_, d)| *d)
    }

    /// Every ticker with its value.
    pub fn tickers(&self) -> impl Iterator<Item = (Ticker, u64)> + '_ {
        self.tickers.iter().copied()
    }
}

impl fmt::Display for StatisticsSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (t, v) in &self.tickers {
            writeln!(f, "{} COUNT : {v}", t.name())?;
        }
        for (h, d) in &self.histograms {
            writeln!(
                f,
                "{} P50 : {:.3} P95 : {:.3} P99 : {:.3} MAX : {:.3} COUNT : {} SUM : {}",
                h.name(),
                d.p50_micros,
                d.p95_micros,
                d.p99_micros,
                d.max_micros,
                d.count,
                d.sum_micros
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for v in (0..10_000u64).chain([u64::MAX / 2, u64::MAX - 1, u64::MAX]) {
            let b = bucket_of(v);
            assert!(b >= last && b < BUCKETS, "{v}");
            let (lo, hi) = bucket_bounds(b);
            assert!(lo <= v && (v < hi || hi == u64::MAX), "{v} in [{lo}, {hi})");
            last = b;
        }
        assert_eq!(bucket_bounds(bucket_of(1000)), (896, 1024));
    }

    #[test]
    fn shards_add_up() {
        let s = std::sync::Arc::new(Statistics::new());
        let threads: Vec<_> = (0..2 * SHARDS as u64)
            .map(|i| {
                let s = s.clone();
                std::thread::spawn(move || {
                    s.add(Ticker::KeysWritten, i);
                    s.record(HistogramKind::WriteMicros, Duration::from_micros(i));
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        let n = 2 * SHARDS as u64;
        assert_eq!(s.ticker(Ticker::KeysWritten), n * (n - 1) / 2);
        let h = s.snapshot().histogram(HistogramKind::WriteMicros);
        assert_eq!((h.count, h.sum_micros), (n, n * (n - 1) / 2));
        assert!((h.max_micros - (n - 1) as f64).abs() < 1e-9);
    }

    #[test]
    fn percentiles_and_counts() {
        let s = Statistics::new();
        for micros in 1..=100u64 {
            s.record(HistogramKind::GetMicros, Duration::from_micros(micros));
        }
        s.add(Ticker::KeysRead, 3);
        s.add(Ticker::KeysRead, 4);
        let snap = s.snapshot();
        assert_eq!(snap.ticker(Ticker::KeysRead), 7);
        let h = snap.histogram(HistogramKind::GetMicros);
        assert_eq!(h.count, 100);
        assert_eq!(h.sum_micros, 5050);
        assert!((h.mean_micros - 50.5).abs() < 1e-9);
        assert!((h.max_micros - 100.0).abs() < 1e-9);
        // Within a bucket's width (about 19%) of the true values.
        assert!(h.p50_micros > 40.0 && h.p50_micros < 60.0, "{h:?}");
        assert!(h.p99_micros > 85.0 && h.p99_micros <= 100.0, "{h:?}");
        let text = snap.to_string();
        assert!(
            text.contains("shaledb.number.keys.read COUNT : 7\n"),
            "{text}"
        );
        assert!(text.contains("shaledb.db.get.micros P50 : "), "{text}");
        s.reset();
        assert_eq!(s.snapshot().ticker(Ticker::KeysRead), 0);
        assert_eq!(s.snapshot().histogram(HistogramKind::GetMicros).count, 0);
    }
}
