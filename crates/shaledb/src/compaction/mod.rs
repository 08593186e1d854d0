//! Compaction: picking, running and the compaction iterator.
