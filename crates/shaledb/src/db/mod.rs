//! The database handle.

/// A database handle (work in progress).
pub struct Db {}
/// A user-facing iterator (work in progress).
pub struct DbIterator {}
/// A point-in-time view (work in progress).
#[derive(Clone)]
pub struct Snapshot {}
