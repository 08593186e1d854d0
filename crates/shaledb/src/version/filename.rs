//! Names of the files in a database directory.
//!
//! `CURRENT` names the live MANIFEST; `MANIFEST-NNNNNN` holds version edits; `NNNNNN.log` is a
//! write-ahead log; `NNNNNN.sst` a table; `NNNNNN.dbtmp` a temporary file; `LOCK` is held by
//! the open handle. All numbers come from one counter, persisted in the MANIFEST.

use std::path::{Path, PathBuf};

/// The kinds of files the engine creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// A write-ahead log.
    Log,
    /// A table.
    Table,
    /// A blob file (values stored apart from the tables).
    Blob,
    /// A MANIFEST.
    Manifest,
    /// The CURRENT pointer.
    Current,
    /// The LOCK file.
    Lock,
    /// A temporary file.
    Temp,
}

/// Path of WAL `number`.
pub(crate) fn log_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.log"))
}

/// Path of table `number`.
pub(crate) fn table_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.sst"))
}

/// Path of blob file `number`.
pub(crate) fn blob_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.blob"))
}

/// Path of MANIFEST `number`.
pub(crate) fn manifest_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(manifest_name(number))
}

/// File name (no directory) of MANIFEST `number`.
pub(crate) fn manifest_name(number: u64) -> String {
    format!("MANIFEST-{number:06}")
}

/// Path of temporary file `number`.
pub(crate) fn temp_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.dbtmp"))
}

/// Path of CURRENT.
pub(crate) fn current_file(dir: &Path) -> PathBuf {
    dir.join("CURRENT")
}

/// Path of LOCK.
pub(crate) fn lock_file(dir: &Path) -> PathBuf {
    dir.join("LOCK")
}

/// Recognizes a file name; returns its kind and number (0 for CURRENT and LOCK).
pub(crate) fn parse_file_name(name: &str) -> Option<(FileKind, u64)> {
    match name {
        "CURRENT" => return Some((FileKind::Current, 0)),
        "LOCK" => return Some((FileKind::Lock, 0)),
        _ => {}
    }
    if let Some(n) = name.strip_prefix("MANIFEST-") {
        return parse_number(n).map(|n| (FileKind::Manifest, n));
    }
    let (num, ext) = name.split_once('.')?;
    let n = parse_number(num)?;
    let kind = match ext {
        "log" => FileKind::Log,
        "sst" => FileKind::Table,
        "blob" => FileKind::Blob,
        "dbtmp" => FileKind::Temp,
        _ => return None,
    };
    Some((kind, n))
}

fn parse_number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let d = Path::new("/db");
        for (p, kind, n) in [
            (log_file(d, 7), FileKind::Log, 7),
            (table_file(d, 1234567), FileKind::Table, 1234567),
            (manifest_file(d, 3), FileKind::Manifest, 3),
            (temp_file(d, 9), FileKind::Temp, 9),
            (current_file(d), FileKind::Current, 0),
            (lock_file(d), FileKind::Lock, 0),
        ] {
            let name = p.file_name().and_then(|s| s.to_str()).unwrap_or_default();
            assert_eq!(parse_file_name(name), Some((kind, n)), "{name}");
        }
        for bad in [
            "",
            "x.log",
            "12.txt",
            "MANIFEST-",
            "MANIFEST-1a",
            "-1.log",
            "1.2.sst",
        ] {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
    }
}
