//! The record format shared by the write-ahead log and the MANIFEST. See docs/format/wal.md.
//!
//! A log file is a sequence of 32 KiB blocks. Each logical record is split into one or more
//! physical fragments, each with a 7-byte header (masked CRC32C, length, type). A fragment never
//! crosses a block boundary, so a reader can always resynchronize at the next block after
//! damage. Block tails too short for a header are zero-filled.

mod reader;
mod replay;
mod wal_marker;
mod writer;

pub use reader::{LogRead, LogReader};
pub(crate) use replay::{replay_records, RecordCheck, ReplayEnd, TailPolicy};
pub use wal_marker::WalMarker;
pub(crate) use writer::LogWriter;

/// Size of a log block. Fragments never straddle a block boundary.
pub(crate) const BLOCK_SIZE: usize = 32768;

/// Bytes of a fragment header: fixed32 masked CRC, fixed16 length, 1 type byte.
pub(crate) const HEADER_SIZE: usize = 7;

/// Fragment type byte values.
pub(crate) mod record_type {
    /// Reserved: what preallocated or never-written (zeroed) space looks like.
    pub(crate) const ZERO: u8 = 0;
    /// A whole logical record in one fragment.
    pub(crate) const FULL: u8 = 1;
    /// The first fragment of a multi-fragment record.
    pub(crate) const FIRST: u8 = 2;
    /// A fragment that is neither first nor last.
    pub(crate) const MIDDLE: u8 = 3;
    /// The last fragment of a multi-fragment record.
    pub(crate) const LAST: u8 = 4;
}

#[cfg(test)]
mod tests;
