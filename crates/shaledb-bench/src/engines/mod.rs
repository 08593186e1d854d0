//! Engine implementations. ShaleDB is always built; the peers only with the `peers` feature.

#[cfg(feature = "peers")]
pub mod peers;
pub mod shaledb;

use crate::engine::{CommonOptions, Engine, EngineResult};
use std::path::Path;

/// Every engine name `--engine` accepts.
pub const ENGINE_NAMES: &[&str] = &["shaledb", "rocksdb", "leveldb", "wiredtiger", "fjall"];

/// Opens the named engine on a database directory at `path`.
pub fn open_engine(name: &str, path: &Path, opts: &CommonOptions) -> EngineResult<Box<dyn Engine>> {
    match name {
        "shaledb" => Ok(Box::new(shaledb::ShaleEngine::open(path, opts)?)),
        #[cfg(feature = "peers")]
        other => peers::open(other, path, opts),
        #[cfg(not(feature = "peers"))]
        other if ENGINE_NAMES.contains(&other) => Err(format!(
            "engine {other} needs the `peers` feature: cargo build --release --features peers \
             (and the Debian packages librocksdb-dev libleveldb-dev libwiredtiger-dev)"
        )),
        #[cfg(not(feature = "peers"))]
        other => Err(format!(
            "unknown engine {other:?}; known engines: {}",
            ENGINE_NAMES.join(", ")
        )),
    }
}
