//! The in-memory write buffer.
