//! The user-facing iterator.
