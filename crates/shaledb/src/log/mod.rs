//! The record format shared by the write-ahead log and the MANIFEST. See docs/format/wal.md.
