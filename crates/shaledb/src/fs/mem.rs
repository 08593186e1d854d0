//! In-memory filesystem with crash simulation (work in progress).

/// An in-memory filesystem.
pub struct MemFileSystem {}
