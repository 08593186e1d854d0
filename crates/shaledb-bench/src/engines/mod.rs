//! Engine implementations. ShaleDB is always built; the peers only with the `peers` feature.

#[cfg(feature = "peers")]
pub mod peers;
pub mod shaledb;

use crate::engine::{CommonOptions, Engine, EngineResult};
use std::path::Path;

/// Every engine name `--engine` accepts.
pub const ENGINE_NAMES: &[&str] = &["shaledb", "rocksdb", "leveldb", "wiredtiger", "fjall"];

/// Whether this build can open the named engine: an unknown name, or a peer engine in a build
/// without the `peers` feature, is an error that says what to do.
pub fn check_engine(name: &str) -> EngineResult<()> {
    if !ENGINE_NAMES.contains(&name) {
        return Err(format!(
            "unknown engine {name:?}; known engines: {}",
            ENGINE_NAMES.join(", ")
        ));
    }
    if name != "shaledb" && !cfg!(feature = "peers") {
        return Err(format!(
            "engine {name} needs the `peers` feature: cargo build --release --features peers \
             (and the Debian packages librocksdb-dev libleveldb-dev libwiredtiger-dev)"
        ));
    }
    Ok(())
}

/// Opens the named engine on a database directory at `path`.
pub fn open_engine(name: &str, path: &Path, opts: &CommonOptions) -> EngineResult<Box<dyn Engine>> {
    check_engine(name)?;
    match name {
        "shaledb" => Ok(Box::new(shaledb::ShaleEngine::open(path, opts)?)),
        #[cfg(feature = "peers")]
        other => peers::open(other, path, opts),
        #[cfg(not(feature = "peers"))]
        other => Err(format!("engine {other} is not in this build")),
    }
}
