//! Engine implementations. ShaleDB is always built; the peers only with the `peers` feature.

pub mod shaledb;
