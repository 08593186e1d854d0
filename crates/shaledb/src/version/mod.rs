//! Versions: the set of table files per level, and the MANIFEST that records it.

pub mod edit;
