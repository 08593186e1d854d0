//! Peer engines behind the benchmark [`Engine`] trait (feature `peers`): RocksDB, LevelDB and
//! WiredTiger through their C APIs (Debian `librocksdb-dev`, `libleveldb-dev`,
//! `libwiredtiger-dev`), and fjall from crates.io.
//!
//! The option mapping is documented in docs/benchmarks-peers.md. An option an engine cannot
//! honour in a way that changes what is measured (a codec it lacks, WAL off, direct reads) is an
//! error naming the engine and the option, never a silent substitute.

/// Declares opaque C handle types (`#[repr(C)]`, zero-sized, never built in Rust). Defined
/// before the adapter modules so that they all see it.
macro_rules! opaque {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
        $(#[$doc])*
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}

pub mod capi;
pub mod fjall;
pub mod leveldb;
pub mod rocksdb;
mod uint64add;
pub mod wiredtiger;

use crate::engine::{CommonOptions, Engine, EngineResult};
use std::ffi::{c_char, CStr, CString};
use std::path::Path;

/// The peer engine names [`open`] accepts.
pub const PEER_NAMES: &[&str] = &["rocksdb", "leveldb", "wiredtiger", "fjall"];

/// Opens the named peer engine on a database directory at `path`.
pub fn open(name: &str, path: &Path, opts: &CommonOptions) -> EngineResult<Box<dyn Engine>> {
    if name != "rocksdb" && (opts.memory_budget > 0 || opts.num_column_families > 1) {
        // Quietly ignoring them would report a different experiment under the same flags.
        return Err(format!(
            "{name}: --memory_budget and --num_column_families are not mapped for this \
             engine (ShaleDB and RocksDB only)"
        ));
    }
    if opts.compressed_secondary_cache_size > 0 {
        // RocksDB 7.8's C API has no secondary cache (nor an options string that makes
        // one); the others have no such tier.
        return Err(format!(
            "{name}: --use_compressed_secondary_cache is not mapped for this engine (ShaleDB \
             only: RocksDB's C API 7.8 cannot build a compressed secondary cache)"
        ));
    }
    match name {
        "rocksdb" => Ok(Box::new(rocksdb::RocksEngine::open(path, opts)?)),
        "leveldb" => Ok(Box::new(leveldb::LevelEngine::open(path, opts)?)),
        "wiredtiger" => Ok(Box::new(wiredtiger::WtEngine::open(path, opts)?)),
        "fjall" => Ok(Box::new(fjall::FjallEngine::open(path, opts)?)),
        other => Err(format!(
            "unknown engine {other:?}; known engines: shaledb, {}",
            PEER_NAMES.join(", ")
        )),
    }
}

/// Prepares the database directory: with `use_existing_db` it must exist; otherwise it is
/// created (with its parents) if missing.
pub(crate) fn prepare_dir(engine: &str, path: &Path, opts: &CommonOptions) -> EngineResult<()> {
    if opts.use_existing_db {
        if !path.is_dir() {
            return Err(format!(
                "{engine}: --use_existing_db is set but {} is not a database directory",
                path.display()
            ));
        }
        return Ok(());
    }
    std::fs::create_dir_all(path).map_err(|e| format!("{engine}: create {}: {e}", path.display()))
}

/// The path as a C string.
pub(crate) fn c_path(engine: &str, path: &Path) -> EngineResult<CString> {
    let s = path
        .to_str()
        .ok_or_else(|| format!("{engine}: path {} is not UTF-8", path.display()))?;
    CString::new(s).map_err(|_| format!("{engine}: path {s:?} contains a NUL byte"))
}

/// Clamps a 64-bit option to a C `int`.
pub(crate) fn clamp_int(v: u64) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// Clamps a 64-bit option to `usize`.
pub(crate) fn clamp_size(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// Takes an error string a C API returned through `char** errptr` (malloc'ed; NULL = no error),
/// frees it with `free_fn` and returns it as `Err`.
///
/// # Safety
/// `err` must be NULL or a NUL-terminated string allocated by the library that `free_fn`
/// releases, and not used after this call.
pub(crate) unsafe fn take_err(
    engine: &str,
    err: *mut c_char,
    free_fn: unsafe extern "C" fn(*mut std::ffi::c_void),
) -> EngineResult<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: per this function's contract `err` is a valid NUL-terminated C string.
    let msg = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: `err` was allocated by the library and is freed exactly once, here.
    unsafe { free_fn(err.cast()) };
    Err(format!("{engine}: {msg}"))
}

/// Parses `Cumulative compaction: 1.23 GB write` out of a RocksDB or similar stats text, and the
/// per-level "Sum" line is not needed. Returns bytes.
pub(crate) fn parse_gb_after(text: &str, marker: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.trim_start().starts_with(marker))?;
    let rest = line.trim_start().strip_prefix(marker)?.trim_start();
    let num: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let gb: f64 = num.parse().ok()?;
    Some((gb * (1u64 << 30) as f64) as u64)
}

#[cfg(test)]
mod differential;
#[cfg(test)]
mod tests;
