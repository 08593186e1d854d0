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

/// How much of a file to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extent {
    /// The whole file, which must be exactly this long (a file of another length is
    /// `Corruption` naming it).
    Exact(u64),
    /// The first this many bytes of a file at least that long: a live WAL as far as its
    /// records reached when the copy's state was taken (past them it holds the zeros of its
    /// preallocated space, which records written since may fill during the copy).
    Prefix(u64),
    /// As far as the file is written when opened (a blob file still being appended to).
    AsWritten,
}

/// Reads `extent` of `from` chunk by chunk, handing each to `sink`; returns the bytes read
/// and their CRC32C. With `limiter`, each chunk waits for its bytes before it is read.
fn read_chunks(
    fs: &dyn FileSystem,
    from: &Path,
    extent: Extent,
    limiter: Option<&RateLimiter>,
    mut sink: impl FnMut(&[u8]) -> Result<()>,
) -> Result<(u64, u32)> {
    let reading = |e| Error::io(format!("reading {}", from.display()), e);
    let src = fs.open_random_access(from).map_err(reading)?;
    let actual = src.len().map_err(reading)?;
    let len = match extent {
        Extent::Exact(len) | Extent::Prefix(len) => len,
        Extent::AsWritten => actual,
    };
    let short = actual < len;
    if short || (actual != len && matches!(extent, Extent::Exact(_))) {
        return Err(Error::corruption(
            from,
            actual.min(len),
            format!("file is {actual} bytes, {len} expected"),
        ));
    }
    let chunk = chunk_size(limiter);
    // `len` is at most the file's actual size, and the buffer at most one chunk.
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
    read_chunks(fs, from, Extent::Exact(len), limiter, |_| Ok(())).map(|(_, crc)| crc)
}

/// Copies `extent` of `from` (read through `src`) to a new file `to` (written through
/// `dst`), at most as fast as `limiter` allows, syncs the copy, and returns the bytes copied
/// and their CRC32C.
pub(crate) fn copy(
    src: &dyn FileSystem,
    from: &Path,
    extent: Extent,
    dst: &dyn FileSystem,
    to: &Path,
    limiter: Option<&RateLimiter>,
) -> Result<(u64, u32)> {
    let writing = |e| Error::io(format!("writing {}", to.display()), e);
    let mut out = dst.create(to).map_err(writing)?;
    let copied = read_chunks(src, from, extent, limiter, |chunk| {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, MemFileSystem};

    /// A prefix copy reads exactly its bytes of a longer file and refuses a shorter one; an
    /// exact copy refuses a file of another length; "as written" copies the whole file.
    #[test]
    fn each_extent_copies_what_it_names() {
        let fs = MemFileSystem::new();
        let data: Vec<u8> = (0..CHUNK + CHUNK / 2 + 3)
            .map(|i| (i % 251) as u8)
            .collect();
        let (from, to) = (Path::new("/db/000007.log"), Path::new("/copy/000007.log"));
        fs.write_file_bytes(from, &data);
        fs.create_dir_all(Path::new("/copy")).expect("dir");
        let cut = CHUNK + 5;
        let (len, crc) = copy(&fs, from, Extent::Prefix(cut as u64), &fs, to, None).expect("copy");
        assert_eq!(
            (len, crc),
            (cut as u64, crate::checksum::crc32c(&data[..cut]))
        );
        assert_eq!(fs.read_file_bytes(to).expect("copy"), &data[..cut]);
        let whole = copy(&fs, from, Extent::AsWritten, &fs, to, None).expect("copy");
        assert_eq!(whole.0, data.len() as u64);
        assert_eq!(fs.read_file_bytes(to).expect("copy"), data);
        let long = Extent::Prefix(data.len() as u64 + 1);
        assert!(matches!(
            copy(&fs, from, long, &fs, to, None),
            Err(Error::Corruption { .. })
        ));
        let other = Extent::Exact(cut as u64);
        assert!(matches!(
            copy(&fs, from, other, &fs, to, None),
            Err(Error::Corruption { .. })
        ));
    }
}
