//! Reading a file with its CRC32C, and copying it (possibly between file systems) while
//! computing the CRC32C of exactly what was copied.

use crate::checksum::crc32c_extend;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use std::path::Path;

/// Bytes read per call.
const CHUNK: usize = 1 << 20;

/// Reads `from` chunk by chunk, handing each to `sink`; returns the bytes read and their
/// CRC32C. With `len`, the file must be exactly that long (a file of another length is
/// `Corruption` naming it); without, it is read as far as it is written when opened (a WAL
/// still being appended to).
fn read_chunks(
    fs: &dyn FileSystem,
    from: &Path,
    len: Option<u64>,
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
    let mut buf = vec![0u8; CHUNK.min(len as usize)];
    let (mut at, mut crc) = (0u64, 0u32);
    while at < len {
        let n = (len - at).min(CHUNK as u64) as usize;
        src.read_exact_at(at, &mut buf[..n]).map_err(reading)?;
        crc = crc32c_extend(crc, &buf[..n]);
        sink(&buf[..n])?;
        at += n as u64;
    }
    Ok((len, crc))
}

/// CRC32C of `from`, which must be `len` bytes long.
pub(crate) fn checksum(fs: &dyn FileSystem, from: &Path, len: u64) -> Result<u32> {
    read_chunks(fs, from, Some(len), |_| Ok(())).map(|(_, crc)| crc)
}

/// Copies `from` (read through `src`; exactly `len` bytes, or as far as written without) to a
/// new file `to` (written through `dst`), syncs the copy, and returns the bytes copied and
/// their CRC32C.
pub(crate) fn copy(
    src: &dyn FileSystem,
    from: &Path,
    len: Option<u64>,
    dst: &dyn FileSystem,
    to: &Path,
) -> Result<(u64, u32)> {
    let writing = |e| Error::io(format!("writing {}", to.display()), e);
    let mut out = dst.create(to).map_err(writing)?;
    let copied = read_chunks(src, from, len, |chunk| out.append(chunk).map_err(writing))?;
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
