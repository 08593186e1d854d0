//! WAL marker records: what a WAL says about the WALs before it (docs/format/wal.md, "Marker
//! records"). A WAL is synced only after a newer one took over (by the next synced write,
//! MANIFEST edit or close), so after a power loss an older WAL may be cut short while a newer
//! one holds writes. The markers let recovery tell that apart from damage:
//! - [`WalMarker::TakesOver`], the first record of a WAL started by a memtable switch, names
//!   the WAL before it and its length then, so a WAL cut back to a record boundary (or lost
//!   whole) is seen as cut short, not as a WAL that ended there;
//! - [`WalMarker::Synced`], written after older WALs were synced, proves that damage in them
//!   is lost synced data (corruption), not writes a power loss cut off before any sync.

use crate::coding::{put_varint64, Decoder};

/// The first eight bytes of a marker record: a write batch's sequence field, which can never
/// hold this value (sequence numbers are below 2^56), so no batch starts this way.
const MARKER_PREFIX: [u8; 8] = [0xFF; 8];

/// Kind byte of [`WalMarker::TakesOver`].
const KIND_TAKES_OVER: u8 = 1;
/// Kind byte of [`WalMarker::Synced`].
const KIND_SYNCED: u8 = 2;

/// A marker record of a WAL (not a write batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalMarker {
    /// This WAL took over from WAL `from`, which then held `length` bytes of records.
    TakesOver {
        /// The file number of the WAL before this one.
        from: u64,
        /// Its size in bytes when this one took over: every byte up to its last record.
        length: u64,
    },
    /// Every WAL numbered up to `through` was synced before this record was written.
    Synced {
        /// The newest WAL synced.
        through: u64,
    },
}

impl WalMarker {
    /// The record's payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 1 + 20);
        out.extend_from_slice(&MARKER_PREFIX);
        match *self {
            WalMarker::TakesOver { from, length } => {
                out.push(KIND_TAKES_OVER);
                put_varint64(&mut out, from);
                put_varint64(&mut out, length);
            }
            WalMarker::Synced { through } => {
                out.push(KIND_SYNCED);
                put_varint64(&mut out, through);
            }
        }
        out
    }

    /// `None` if `record` is not a marker (a write batch); otherwise the marker, or why its
    /// bytes are not a valid one.
    pub fn decode(record: &[u8]) -> Option<Result<WalMarker, String>> {
        let rest = record.strip_prefix(&MARKER_PREFIX)?;
        Some(Self::decode_body(rest))
    }

    fn decode_body(body: &[u8]) -> Result<WalMarker, String> {
        let mut d = Decoder::new(body);
        let kind = d.u8().ok_or("a WAL marker record without its kind byte")?;
        let varint = |d: &mut Decoder<'_>, what: &str| {
            d.varint64()
                .ok_or_else(|| format!("a WAL marker record whose {what} is cut short"))
        };
        let marker = match kind {
            KIND_TAKES_OVER => WalMarker::TakesOver {
                from: varint(&mut d, "WAL number")?,
                length: varint(&mut d, "length")?,
            },
            KIND_SYNCED => WalMarker::Synced {
                through: varint(&mut d, "WAL number")?,
            },
            other => return Err(format!("a WAL marker record of unknown kind {other}")),
        };
        if !d.remaining().is_empty() {
            return Err("a WAL marker record with bytes after its fields".to_string());
        }
        Ok(marker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_encode_byte_for_byte_and_decode_back() {
        let over = WalMarker::TakesOver {
            from: 7,
            length: 300,
        };
        let want = [
            0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1, 7, 0xAC, 0x02,
        ];
        assert_eq!(over.encode(), want);
        assert_eq!(WalMarker::decode(&want), Some(Ok(over)));
        let synced = WalMarker::Synced { through: 9 };
        let want = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 2, 9];
        assert_eq!(synced.encode(), want);
        assert_eq!(WalMarker::decode(&want), Some(Ok(synced)));
    }

    #[test]
    fn a_write_batch_is_not_a_marker_and_bad_markers_say_why() {
        let mut batch = crate::WriteBatch::new();
        batch.put(b"k", b"v");
        batch.set_sequence(crate::key::MAX_SEQUENCE);
        assert_eq!(WalMarker::decode(batch.data()), None);
        let synced = WalMarker::Synced { through: 9 }.encode();
        for cut in 8..synced.len() {
            assert!(
                matches!(WalMarker::decode(&synced[..cut]), Some(Err(_))),
                "{cut}"
            );
        }
        let mut long = synced.clone();
        long.push(0);
        let e = WalMarker::decode(&long)
            .expect("a marker")
            .expect_err("trailing byte");
        assert!(e.contains("bytes after"), "{e}");
        let mut unknown = synced;
        unknown[8] = 3;
        let e = WalMarker::decode(&unknown)
            .expect("a marker")
            .expect_err("kind 3");
        assert!(e.contains("unknown kind 3"), "{e}");
    }
}
