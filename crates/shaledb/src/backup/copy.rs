//! Reading a file with its CRC32C, and copying it (possibly between file systems) while
//! computing the CRC32C of exactly what was copied.

use crate::checksum::crc32c_extend;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::rate_limiter::RateLimiter;
use std::path::Path;

/// Bytes read per call.
const CHUNK: usize = 1 << 20;

/// The smallest chunk read under a rate limit (a limit of a few KB/s still reads in 4 KiB).
const MIN_LIMITED_CHUNK: usize = 4 << 10;

/// Bytes read per call: under a limit, about a tenth of a second's worth, so the waits are
/// short and even rather than one long pause per MiB.
fn chunk_size(limiter: Option<&RateLimiter>) -> usize {
    match limiter {
        None => CHUNK,
        Some(l) => {
            let tenth = usize::try_from(l.rate() / 10).unwrap_or(CHUNK);
            tenth.clamp(MIN_LIMITED_CHUNK, CHUNK)
        }
    }
}

/// Reads `from` chunk by chunk, handing each to `sink`; returns the bytes read and their
/// CRC32C. With `len`, the file must be exactly that long (a file of another length is
/// `Corruption` naming it); without, it is read as far as it is written when opened (a WAL
/// still being appended to). With `limiter`, each chunk waits for its bytes before it is read.
fn read_chunks(
    fs: &dyn FileSystem,
    from: &Path,
    len: Option<u64>,
    limiter: Option<&RateLimiter>,
    mut sink: impl FnMut(&[u8]) -> Result<()>,
) -> Result<(u64, u32)> {
    let reading = |e| Error::io(format!("reading {}", from.display()), e);
    let src = fs.open_random_access(from).map_err(reading)?;
    let actual = src.len().map_err(reading)?;
    let len = len.unwrap_or(actual);
    if actual != len {
        return Err(Error::corruption(
            from,
            actual.min(len),
            format!("file is {actual} bytes, {len} expected"),
        ));
    }
    let chunk = chunk_size(limiter);
    // `len` is the file's actual size, and the buffer at most one chunk.
    let mut buf = vec![0u8; (chunk as u64).min(len) as usize];
    let (mut at, mut crc) = (0u64, 0u32);
    while at < len {
        let n = (len - at).min(chunk as u64) as usize;
        if let Some(l) = limiter {
            l.request(n as u64);
        }
        src.read_exact_at(at, &mut buf[..n]).map_err(reading)?;
        crc = crc32c_extend(crc, &buf[..n]);
        sink(&buf[..n])?;
        at += n as u64;
    }
    Ok((len, crc))
}

/// CRC32C of `from`, which must be `len` bytes long, read at most as fast as `limiter` allows.
pub(crate) fn checksum(
    fs: &dyn FileSystem,
    from: &Path,
    len: u64,
    limiter: Option<&RateLimiter>,
) -> Result<u32> {
    read_chunks(fs, from, Some(len), limiter, |_| Ok(())).map(|(_, crc)| crc)
}

/// Copies `from` (read through `src`; exactly `len` bytes, or as far as written without) to a
/// new file `to` (written through `dst`), at most as fast as `limiter` allows, syncs the
/// copy, and returns the bytes copied and their CRC32C.
pub(crate) fn copy(
    src: &dyn FileSystem,
    from: &Path,
    len: Option<u64>,
    dst: &dyn FileSystem,
    to: &Path,
    limiter: Option<&RateLimiter>,
) -> Result<(u64, u32)> {
    let writing = |e| Error::io(format!("writing {}", to.display()), e);
    let mut out = dst.create(to).map_err(writing)?;
    let copied = read_chunks(src, from, len, limiter, |chunk| {
        out.append(chunk).map_err(writing)
    })?;
    out.sync().map_err(writing)?;
    Ok(copied)
}

/// Writes `bytes` to a new file `to` and syncs it.
pub(crate) fn write_file(fs: &dyn FileSystem, to: &Path, bytes: &[u8]) -> Result<()> {
    let writing = |e| Error::io(format!("writing {}", to.display()), e);
    let mut out = fs.create(to).map_err(writing)?;
    out.append(bytes).map_err(writing)?;
    out.sync().map_err(writing)
}
