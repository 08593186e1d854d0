//! What a repair found, kept and lost: [`RepairReport`] and its parts.

use std::fmt;
use std::path::PathBuf;

/// A file repair could not use, moved aside into the database's `lost/` directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostFile {
    /// Where the file was.
    pub file: PathBuf,
    /// Where it is now (`lost/` under the database directory).
    pub moved_to: PathBuf,
    /// Its length in bytes.
    pub bytes: u64,
    /// Where in the file the problem was found (0 when it concerns the whole file).
    pub offset: u64,
    /// Why it could not be used.
    pub reason: String,
}

/// What repair made of one write-ahead log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalSalvage {
    /// The log's file number (`NNNNNN.log`).
    pub number: u64,
    /// Records (write batches) replayed into tables.
    pub records: u64,
    /// Records skipped because an older MANIFEST showed their data already in tables.
    pub records_already_in_tables: u64,
    /// Damage found, as (file offset, what was wrong): the bytes there were skipped.
    pub damage: Vec<(u64, String)>,
}

/// What [`crate::repair`] did: the families it found, the tables and blob files it kept, and
/// everything it could not use, with the file and offset. Its `Display` is a summary an
/// operator can read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RepairReport {
    /// The column families of the repaired database, as (id, name), the default first.
    pub families: Vec<(u32, String)>,
    /// Tables the new MANIFEST lists, by file number.
    pub tables_kept: Vec<u64>,
    /// Of those, the tables repair wrote: from WAL records, or rewritten from kept tables
    /// (merged where the tables' sequence numbers overlap, or without values a damaged blob
    /// file lost).
    pub tables_written: Vec<u64>,
    /// Tables moved aside: damaged, of a dropped family, or replaced by a rewrite.
    pub tables_lost: Vec<LostFile>,
    /// Blob files the kept tables reference, by file number.
    pub blob_files_kept: Vec<u64>,
    /// Blob files moved aside (damaged ones, once no kept table references them).
    pub blob_files_lost: Vec<LostFile>,
    /// Intact blob files no kept table references (the next open deletes them).
    pub blob_files_unreferenced: Vec<u64>,
    /// Values kept apart in a damaged blob file that could not be read: their entries were
    /// left out of the rewritten tables.
    pub blob_values_lost: u64,
    /// Every write-ahead log found, oldest first.
    pub wals: Vec<WalSalvage>,
    /// The MANIFEST whose readable part gave family names, merge operators, TTL flags and
    /// log numbers, if any was readable.
    pub old_manifest: Option<PathBuf>,
    /// Where that MANIFEST stopped being readable, as (offset, what was wrong).
    pub old_manifest_damage: Option<(u64, String)>,
    /// The database's last sequence number after repair.
    pub last_sequence: u64,
    /// The number of the new MANIFEST.
    pub manifest_number: u64,
}

impl RepairReport {
    /// WAL records replayed into tables, over all logs.
    pub fn wal_records_salvaged(&self) -> u64 {
        self.wals.iter().map(|w| w.records).sum()
    }

    /// True if repair saw data it could not keep: a table or blob file moved aside because
    /// it is damaged, a blob value lost, or damaged WAL bytes skipped. (Files moved aside
    /// after a rewrite, as part of a dropped family, or as unreferenced, lose nothing.)
    pub fn lost_data(&self) -> bool {
        let damaged = |l: &LostFile| {
            ![REPLACED, DROPPED, UNREFERENCED]
                .iter()
                .any(|p| l.reason.starts_with(p))
        };
        self.tables_lost.iter().any(damaged)
            || self.blob_files_lost.iter().any(damaged)
            || self.blob_values_lost > 0
            || self.wals.iter().any(|w| !w.damage.is_empty())
    }
}

/// How the reason of a table moved aside after it was rewritten starts.
pub(super) const REPLACED: &str = "replaced by";
/// How the reason of a table of a dropped family starts.
pub(super) const DROPPED: &str = "belongs to dropped";
/// How the reason of an intact blob file no kept table references starts.
pub(super) const UNREFERENCED: &str = "referenced by no kept table";

impl fmt::Display for RepairReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self
            .families
            .iter()
            .map(|(id, n)| format!("{n:?} ({id})"))
            .collect();
        writeln!(f, "column families: {}", names.join(", "))?;
        writeln!(
            f,
            "tables kept: {} ({} written by repair); blob files kept: {}",
            self.tables_kept.len(),
            self.tables_written.len(),
            self.blob_files_kept.len()
        )?;
        match (&self.old_manifest, &self.old_manifest_damage) {
            (None, _) => writeln!(f, "no readable MANIFEST: families named from the tables")?,
            (Some(m), None) => writeln!(f, "old MANIFEST {} read to its end", m.display())?,
            (Some(m), Some((off, d))) => writeln!(
                f,
                "old MANIFEST {} read up to offset {off}: {d}",
                m.display()
            )?,
        }
        for w in &self.wals {
            writeln!(
                f,
                "WAL {:06}.log: {} records replayed, {} already in tables",
                w.number, w.records, w.records_already_in_tables
            )?;
            for (off, d) in &w.damage {
                writeln!(f, "  damage at offset {off} skipped: {d}")?;
            }
        }
        for l in self.tables_lost.iter().chain(&self.blob_files_lost) {
            writeln!(
                f,
                "moved {} ({} bytes) to {}: {} (offset {})",
                l.file.display(),
                l.bytes,
                l.moved_to.display(),
                l.reason,
                l.offset
            )?;
        }
        if self.blob_values_lost > 0 {
            writeln!(f, "blob values lost: {}", self.blob_values_lost)?;
        }
        if !self.blob_files_unreferenced.is_empty() {
            writeln!(
                f,
                "unreferenced blob files (deleted at the next open): {:?}",
                self.blob_files_unreferenced
            )?;
        }
        let verdict = if self.lost_data() {
            "some data was lost (see above)"
        } else {
            "no data was lost"
        };
        write!(
            f,
            "last sequence {}, new MANIFEST-{:06}: {verdict}",
            self.last_sequence, self.manifest_number
        )
    }
}
