//! Named properties for observing a running database (`Db::property`).

use super::DbInner;
use crate::column_family::CfData;
use crate::compaction::picker;
use std::fmt::Write;
use std::sync::atomic::Ordering;

impl DbInner {
    /// Family `cf`'s property `name` (database-wide properties are the same for every family).
    pub(crate) fn property(&self, cf: &CfData, name: &str) -> Option<String> {
        let name = name
            .strip_prefix("shaledb.")
            .or_else(|| name.strip_prefix("rocksdb."))?;
        if let Some(level) = name.strip_prefix("num-files-at-level") {
            let level: usize = level.parse().ok()?;
            let v = cf.super_version.load().version.clone();
            if level >= v.num_levels() {
                return None;
            }
            return Some(v.level_files(level).len().to_string());
        }
        match name {
            "stats" => Some(self.stats_text(cf)),
            "levelstats" => Some(level_summary(cf)),
            "estimate-num-keys" => {
                let sv = cf.super_version.load();
                let mut n: i64 = 0;
                for m in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
                    n += m.len() as i64 - 2 * m.num_deletes() as i64;
                }
                n += sv.version.num_entries() as i64 - 2 * sv.version.num_deletions() as i64;
                Some(n.max(0).to_string())
            }
            "total-sst-files-size" => {
                Some(cf.super_version.load().version.total_bytes().to_string())
            }
            "blob-stats"
            | "num-blob-files"
            | "live-blob-file-size"
            | "total-blob-file-size"
            | "live-blob-file-garbage-size" => {
                Some(blob_property(&cf.super_version.load().version, name))
            }
            "info-log-write-errors" => Some(self.info_log.write_errors().to_string()),
            "block-cache-usage" => Some(self.block_cache.usage().to_string()),
            "block-cache-capacity" => Some(self.block_cache.capacity().to_string()),
            "block-cache-pinned-usage" => Some(self.block_cache.pinned_usage().to_string()),
            // 0 without a compressed secondary tier.
            "compressed-secondary-cache-usage" => Some(
                self.block_cache
                    .secondary()
                    .map_or(0, |s| s.usage())
                    .to_string(),
            ),
            "compressed-secondary-cache-capacity" => Some(
                self.block_cache
                    .secondary()
                    .map_or(0, |s| s.capacity())
                    .to_string(),
            ),
            // Of every database sharing the manager; absent without one.
            "write-buffer-manager-usage" => self
                .opts
                .write_buffer_manager
                .as_ref()
                .map(|w| w.memory_usage().to_string()),
            "write-buffer-manager-buffer-size" => self
                .opts
                .write_buffer_manager
                .as_ref()
                .map(|w| w.buffer_size().to_string()),
            "cur-size-all-mem-tables" => {
                let sv = cf.super_version.load();
                let n: usize = std::iter::once(&sv.mem)
                    .chain(sv.imms.iter())
                    .map(|m| m.approximate_memory_usage())
                    .sum();
                Some(n.to_string())
            }
            "num-immutable-mem-table" => Some(cf.super_version.load().imms.len().to_string()),
            "num-snapshots" => Some(self.snapshots.count().to_string()),
            "estimate-live-data-size" => Some(
                cf.super_version
                    .load()
                    .version
                    .estimate_live_data_size()
                    .to_string(),
            ),
            "base-level" => {
                let v = cf.super_version.load().version.clone();
                Some(picker::base_level(&v, &cf.opts).to_string())
            }
            "estimate-pending-compaction-bytes" => {
                let v = cf.super_version.load().version.clone();
                Some(picker::pending_compaction_bytes(&v, &cf.opts).to_string())
            }
            "background-errors" | "background-error" => Some(
                self.state
                    .lock()
                    .bg_error
                    .as_ref()
                    .map_or_else(String::new, |e| e.to_string()),
            ),
            "compaction-bytes-written" => {
                let st = self.state.lock();
                Some(
                    st.family(cf.id)?
                        .level_stats
                        .iter()
                        .map(|s| s.bytes_written)
                        .sum::<u64>()
                        .to_string(),
                )
            }
            "user-bytes-written" => {
                Some(self.user_bytes_written.load(Ordering::Relaxed).to_string())
            }
            "last-sequence" => Some(self.last_sequence.load(Ordering::Acquire).to_string()),
            _ => None,
        }
    }
}

fn level_summary(cf: &CfData) -> String {
    let v = cf.super_version.load().version.clone();
    let mut out = String::from("Level Files Size(MB)\n--------------------\n");
    for level in 0..v.num_levels() {
        let _ = writeln!(
            out,
            "{:>5} {:>5} {:>8.1}",
            level,
            v.level_files(level).len(),
            v.level_bytes(level) as f64 / 1048576.0
        );
    }
    out
}

impl DbInner {
    fn stats_text(&self, cf: &CfData) -> String {
        let st = self.state.lock();
        let v = st.versions.current(cf.id);
        let sv = cf.super_version.load();
        let no_stats = Vec::new();
        let level_stats = st.family(cf.id).map_or(&no_stats, |f| &f.level_stats);
        let scores = picker::level_scores(&v, &cf.opts);
        let user = self.user_bytes_written.load(Ordering::Relaxed);
        let mut out = String::new();
        let _ = writeln!(out, "** Compaction Stats **");
        let _ = writeln!(
            out,
            "Level  Files   Size(MB)  Score  Read(GB)  Write(GB)  Moved(GB)  W-Amp  Comp(sec)  Comp(cnt)"
        );
        let _ = writeln!(out, "{}", "-".repeat(90));
        let mut total = crate::compaction::LevelStats::default();
        let mut total_files = 0;
        for level in 0..v.num_levels() {
            let s = level_stats.get(level).cloned().unwrap_or_default();
            let s = &s;
            let files = v.level_files(level).len();
            total_files += files;
            total.count += s.count;
            total.bytes_read += s.bytes_read;
            total.bytes_written += s.bytes_written;
            total.bytes_moved += s.bytes_moved;
            total.micros += s.micros;
            let w_amp = if level == 0 {
                if user > 0 {
                    s.bytes_written as f64 / user as f64
                } else {
                    0.0
                }
            } else if s.bytes_read > 0 {
                s.bytes_written as f64 / s.bytes_read.max(1) as f64
            } else {
                0.0
            };
            let _ = writeln!(
                out,
                "  L{:<3} {:>6} {:>10.1} {:>6.2} {:>9.3} {:>10.3} {:>10.3} {:>6.2} {:>10.2} {:>10}",
                level,
                files,
                v.level_bytes(level) as f64 / 1048576.0,
                scores.get(level).copied().unwrap_or(0.0),
                s.bytes_read as f64 / 1e9,
                s.bytes_written as f64 / 1e9,
                s.bytes_moved as f64 / 1e9,
                w_amp,
                s.micros as f64 / 1e6,
                s.count
            );
        }
        let _ = writeln!(
            out,
            "  Sum  {:>6} {:>10.1} {:>6} {:>9.3} {:>10.3} {:>10.3} {:>6.2} {:>10.2} {:>10}",
            total_files,
            v.total_bytes() as f64 / 1048576.0,
            "",
            total.bytes_read as f64 / 1e9,
            total.bytes_written as f64 / 1e9,
            total.bytes_moved as f64 / 1e9,
            if user > 0 {
                total.bytes_written as f64 / user as f64
            } else {
                0.0
            },
            total.micros as f64 / 1e6,
            total.count
        );
        let _ = writeln!(
            out,
            "User bytes written: {:.3} GB; compaction+flush bytes written: {:.3} GB; write amplification: {:.2}",
            user as f64 / 1e9,
            total.bytes_written as f64 / 1e9,
            if user > 0 {
                total.bytes_written as f64 / user as f64
            } else {
                0.0
            }
        );
        let _ = writeln!(
            out,
            "Write stalls: {} (total {:.3} s); memtables: 1 active + {} frozen, {} bytes; block cache: {} / {} bytes",
            st.stall_count,
            st.stall_micros as f64 / 1e6,
            sv.imms.len(),
            std::iter::once(&sv.mem)
                .chain(sv.imms.iter())
                .map(|m| m.approximate_memory_usage())
                .sum::<usize>(),
            self.block_cache.usage(),
            self.block_cache.capacity()
        );
        if let Some(e) = &st.bg_error {
            let _ = writeln!(out, "Background error: {e}");
        }
        out
    }
}

/// The blob-file properties of a family's version (`name` is one `property` routes here).
fn blob_property(v: &crate::version::Version, name: &str) -> String {
    let files = &v.blob_files;
    match name {
        "blob-stats" => blob_stats(v),
        "num-blob-files" => files.len().to_string(),
        "live-blob-file-garbage-size" => files
            .iter()
            .map(|b| b.garbage_bytes)
            .sum::<u64>()
            .to_string(),
        // live- and total- are the same: a version lists only live blob files.
        _ => files
            .iter()
            .map(|b| b.meta.addition.file_size)
            .sum::<u64>()
            .to_string(),
    }
}

/// `shaledb.blob-stats`: the family's live blob files, their bytes, the garbage in them, and
/// the space amplification that garbage causes (RocksDB's `rocksdb.blob-stats` lines).
fn blob_stats(v: &crate::version::Version) -> String {
    let files = v.blob_files.len();
    let total: u64 = v.blob_files.iter().map(|b| b.meta.addition.file_size).sum();
    let garbage: u64 = v.blob_files.iter().map(|b| b.garbage_bytes).sum();
    let live = total.saturating_sub(garbage);
    let amp = if live == 0 {
        0.0
    } else {
        total as f64 / live as f64
    };
    format!(
        "Number of blob files: {files}\nTotal size of blob files: {total}\n\
         Total size of garbage in blob files: {garbage}\nBlob file space amplification: {amp:.2}\n"
    )
}
