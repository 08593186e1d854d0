//! Benchmarks our users trust: a db_bench-compatible tool, YCSB workloads, and every peer engine
//! behind one trait, so that every figure is a ratio measured side by side in one run.
//!
//! The binaries in `src/bin/` are thin; all logic lives here.

pub mod cli;
pub mod compare;
pub mod dbbench;
pub mod engine;
pub mod engines;
pub mod harness;
pub mod tpch;
pub mod ycsb;
