//! Merging iterator.
