//! A backup's meta file (`meta/<id>`, docs/format/backup.md): every file of the backup with
//! its size and CRC32C, the whole record checksummed. A backup exists exactly when its meta
//! file does.

use crate::checksum::{crc32c, mask, unmask};
use crate::coding::{decode_fixed32, put_fixed32, put_fixed64, Decoder};
use crate::error::{Error, Result};
use crate::version::filename::{self, FileKind};
use std::collections::HashSet;
use std::path::Path;

/// The first 8 bytes of every meta file.
const MAGIC: &[u8; 8] = b"shaleBAK";
/// The one format version written and read.
const FORMAT_VERSION: u32 = 1;
/// Bytes before the first entry: magic, version, id, timestamp, file count.
const HEADER_LEN: usize = 32;
/// Bytes of the trailing checksum.
const TRAILER_LEN: usize = 4;
/// The smallest entry: name length, a one-byte name, size, checksum.
const MIN_ENTRY_LEN: usize = 1 + 1 + 8 + 4;
/// The longest file name an entry may hold.
const MAX_NAME_LEN: usize = 64;
/// The largest meta file read (millions of entries); a longer one is refused as damaged
/// before anything is allocated for it.
pub const MAX_META_SIZE: u64 = 64 << 20;

/// One file of a backup, under its database name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupFile {
    /// The file's name in a database directory (`000012.sst`, `000009.log`, `MANIFEST-000015`).
    pub name: String,
    /// Its length in bytes.
    pub size: u64,
    /// CRC32C of its contents (not masked).
    pub crc32c: u32,
}

impl BackupFile {
    /// True for tables and blob files: kept once in `shared/` for every backup that has them.
    /// WALs and the MANIFEST are the backup's own (`private/<id>/`).
    pub fn is_shared(&self) -> bool {
        matches!(
            filename::parse_file_name(&self.name),
            Some((FileKind::Table | FileKind::Blob, _))
        )
    }

    /// The name of a shared file in `shared/`: `<number>_<crc32c as 8 hex digits>_<size>.<ext>`,
    /// so files of equal name but different contents (from another database) never collide.
    pub fn shared_name(&self) -> String {
        let (stem, ext) = self.name.split_once('.').unwrap_or((&self.name, ""));
        format!("{stem}_{:08x}_{}.{ext}", self.crc32c, self.size)
    }
}

/// The decoded meta file of one backup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupMeta {
    /// The backup's id (also the meta file's name).
    pub id: u64,
    /// When the backup was taken, in seconds since the Unix epoch (the database's clock).
    pub timestamp: u64,
    /// Every file, tables and blob files first, the MANIFEST last.
    pub files: Vec<BackupFile>,
}

impl BackupMeta {
    /// The number of the backup's MANIFEST (a decoded meta file has exactly one).
    pub fn manifest_number(&self) -> Option<u64> {
        self.files
            .iter()
            .find_map(|f| match filename::parse_file_name(&f.name) {
                Some((FileKind::Manifest, n)) => Some(n),
                _ => None,
            })
    }

    /// The meta file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + TRAILER_LEN + self.files.len() * 40);
        out.extend_from_slice(MAGIC);
        put_fixed32(&mut out, FORMAT_VERSION);
        put_fixed64(&mut out, self.id);
        put_fixed64(&mut out, self.timestamp);
        put_fixed32(&mut out, self.files.len() as u32);
        for f in &self.files {
            out.push(f.name.len() as u8);
            out.extend_from_slice(f.name.as_bytes());
            put_fixed64(&mut out, f.size);
            put_fixed32(&mut out, f.crc32c);
        }
        let crc = mask(crc32c(&out));
        put_fixed32(&mut out, crc);
        out
    }

    /// Decodes and validates a meta file read from `path`: any damage, an unknown version, a
    /// name that is not a table, blob file, WAL or MANIFEST (so never a path), a repeated
    /// name, or not exactly one MANIFEST is `Corruption` naming `path` and the offset.
    pub fn decode(data: &[u8], path: &Path) -> Result<BackupMeta> {
        let bad = |offset: usize, detail: String| Error::corruption(path, offset as u64, detail);
        if data.len() < HEADER_LEN + TRAILER_LEN {
            return Err(bad(
                0,
                format!("backup meta file too short ({} bytes)", data.len()),
            ));
        }
        let body_len = data.len() - TRAILER_LEN;
        let stored = decode_fixed32(&data[body_len..]).unwrap_or_default();
        let actual = crc32c(&data[..body_len]);
        if unmask(stored) != actual {
            return Err(bad(
                body_len,
                format!(
                    "backup meta checksum mismatch (stored {:08x}, computed {actual:08x})",
                    unmask(stored)
                ),
            ));
        }
        let mut d = Decoder::new(&data[..body_len]);
        if d.bytes(MAGIC.len()) != Some(&MAGIC[..]) {
            return Err(bad(0, "not a backup meta file (bad magic)".into()));
        }
        let version = d.fixed32().unwrap_or_default();
        if version != FORMAT_VERSION {
            return Err(bad(
                8,
                format!("unknown backup meta format version {version}"),
            ));
        }
        let id = d.fixed64().unwrap_or_default();
        let timestamp = d.fixed64().unwrap_or_default();
        let count = d.fixed32().unwrap_or_default() as usize;
        // Bounded by the bytes there are, so a damaged count allocates nothing large.
        if count > (body_len - HEADER_LEN) / MIN_ENTRY_LEN {
            return Err(bad(
                28,
                format!("file count {count} exceeds what the meta file can hold"),
            ));
        }
        let mut files = Vec::with_capacity(count);
        for _ in 0..count {
            let at = d.position();
            let f = decode_entry(&mut d).ok_or_else(|| bad(at, "truncated file entry".into()))?;
            files.push(f);
        }
        if !d.is_empty() {
            return Err(bad(d.position(), "bytes after the last file entry".into()));
        }
        let meta = BackupMeta {
            id,
            timestamp,
            files,
        };
        meta.check_names().map_err(|e| bad(HEADER_LEN, e))?;
        Ok(meta)
    }

    /// Every name a file of a database that a backup copies, none twice, one MANIFEST.
    fn check_names(&self) -> std::result::Result<(), String> {
        let mut seen = HashSet::new();
        let mut manifests = 0;
        for f in &self.files {
            let kind = match filename::parse_file_name(&f.name) {
                Some((k @ (FileKind::Table | FileKind::Blob | FileKind::Log), n))
                    if canonical_name(k, n) == f.name =>
                {
                    k
                }
                Some((FileKind::Manifest, n)) if filename::manifest_name(n) == f.name => {
                    FileKind::Manifest
                }
                _ => return Err(format!("{:?} is not a file a backup holds", f.name)),
            };
            manifests += usize::from(kind == FileKind::Manifest);
            if !seen.insert(f.name.as_str()) {
                return Err(format!("{} is listed twice", f.name));
            }
        }
        if manifests != 1 {
            return Err(format!(
                "{manifests} MANIFESTs listed; a backup has exactly one"
            ));
        }
        Ok(())
    }
}

fn decode_entry(d: &mut Decoder<'_>) -> Option<BackupFile> {
    let len = usize::from(d.u8()?);
    let name = d.bytes(len)?;
    let size = d.fixed64()?;
    let crc32c = d.fixed32()?;
    // Names are ASCII; anything else fails the name check as an empty name.
    let name = std::str::from_utf8(name).unwrap_or_default().to_string();
    Some(BackupFile { name, size, crc32c })
}

/// The name the engine gives a table, blob file or WAL numbered `n` (a name that parses but
/// differs, like `12.sst`, was not written by the engine).
fn canonical_name(kind: FileKind, n: u64) -> String {
    let dir = Path::new("");
    let path = match kind {
        FileKind::Table => filename::table_file(dir, n),
        FileKind::Blob => filename::blob_file(dir, n),
        _ => filename::log_file(dir, n),
    };
    path.to_string_lossy().into_owned()
}

/// True if `name` can be an entry's name (used before encoding names from a database).
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_LEN && name.is_ascii()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    fn sample() -> BackupMeta {
        let file = |name: &str, size, crc32c| BackupFile {
            name: name.into(),
            size,
            crc32c,
        };
        BackupMeta {
            id: 7,
            timestamp: 1_800_000_000,
            files: vec![
                file("000012.sst", 4096, 0xdead_beef),
                file("000013.blob", 100, 1),
                file("000014.log", 0, 0),
                file("MANIFEST-000015", 77, 2),
            ],
        }
    }

    #[test]
    fn round_trip_and_names() {
        let m = sample();
        let bytes = m.encode();
        assert_eq!(bytes.len(), 32 + 4 + (14 + 9) * 2 + (14 + 10) + (14 + 14));
        assert_eq!(BackupMeta::decode(&bytes, Path::new("m")).unwrap(), m);
        assert_eq!(m.manifest_number(), Some(15));
        assert!(m.files[0].is_shared() && m.files[1].is_shared());
        assert!(!m.files[2].is_shared() && !m.files[3].is_shared());
        assert_eq!(m.files[0].shared_name(), "000012_deadbeef_4096.sst");
    }

    #[test]
    fn every_flipped_byte_and_every_cut_is_corruption() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            let e = BackupMeta::decode(&b, Path::new("m")).unwrap_err();
            assert!(e.is_corruption(), "byte {i}: {e}");
            let e = BackupMeta::decode(&bytes[..i], Path::new("m")).unwrap_err();
            assert!(e.is_corruption(), "cut at {i}: {e}");
        }
    }

    #[test]
    fn bad_names_and_counts_are_refused_even_with_a_valid_checksum() {
        let reseal = |mut m: BackupMeta, f: &dyn Fn(&mut BackupMeta)| {
            f(&mut m);
            BackupMeta::decode(&m.encode(), Path::new("m")).unwrap_err()
        };
        for name in [
            "../x.sst",
            "12.sst",
            "CURRENT",
            "LOCK",
            "000001.dbtmp",
            "a/000001.sst",
        ] {
            let e = reseal(sample(), &|m| m.files[0].name = name.into());
            assert!(e.to_string().contains("not a file a backup holds"), "{e}");
        }
        let e = reseal(sample(), &|m| m.files[1].name = "000012.sst".into());
        assert!(e.to_string().contains("listed twice"), "{e}");
        let e = reseal(sample(), &|m| {
            m.files.pop();
        });
        assert!(e.to_string().contains("0 MANIFESTs"), "{e}");
        // A count larger than the bytes can hold: refused before allocating.
        let mut b = sample().encode();
        b[28..32].copy_from_slice(&u32::MAX.to_le_bytes());
        let n = b.len() - 4;
        let crc = mask(crc32c(&b[..n])).to_le_bytes();
        b[n..].copy_from_slice(&crc);
        let e = BackupMeta::decode(&b, Path::new("m")).unwrap_err();
        assert!(e.to_string().contains("exceeds"), "{e}");
    }
}
