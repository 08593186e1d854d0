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
/// still being appended to), or as far as it still reaches if it is cut meanwhile (a WAL's
/// preallocated zeros cut when the next one takes over, `LogWriter::sync_and_trim`: the
/// copy may keep some of those zeros, which end the log as well). With `limiter`, each
/// chunk waits for its bytes before it is read.
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
    let exact = len.is_some();
    let mut len = len.unwrap_or(actual);
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
        match src.read_exact_at(at, &mut buf[..n]) {
            Ok(()) => {}
            Err(e) if !exact && e.kind() == std::io::ErrorKind::UnexpectedEof => {
                let now = src.len().map_err(reading)?;
                if now >= at + n as u64 {
                    return Err(reading(e));
                }
                len = now;
                continue;
            }
            Err(e) => return Err(reading(e)),
        }
        crc = crc32c_extend(crc, &buf[..n]);
        sink(&buf[..n])?;
        at += n as u64;
    }
    Ok((at, crc))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, FsHook, HookedFileSystem, MemFileSystem, RandomAccessFile};
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Cuts every file opened for reading to `cut_to` bytes after its first read, as a WAL's
    /// preallocated zeros are cut while a checkpoint or backup copies it.
    struct CutAfterFirstRead {
        fs: MemFileSystem,
        cut_to: usize,
    }

    struct Cutting {
        inner: Arc<dyn RandomAccessFile>,
        fs: MemFileSystem,
        path: PathBuf,
        cut_to: usize,
        cut: AtomicBool,
    }

    impl FsHook for CutAfterFirstRead {
        fn random_access(
            &self,
            path: &Path,
            file: Arc<dyn RandomAccessFile>,
        ) -> Arc<dyn RandomAccessFile> {
            Arc::new(Cutting {
                inner: file,
                fs: self.fs.clone(),
                path: path.to_path_buf(),
                cut_to: self.cut_to,
                cut: AtomicBool::new(false),
            })
        }
    }

    impl RandomAccessFile for Cutting {
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
            let read = self.inner.read_exact_at(offset, buf);
            if !self.cut.swap(true, Ordering::SeqCst) {
                let bytes = self.fs.read_file_bytes(&self.path).expect("test file");
                self.fs.write_file_bytes(&self.path, &bytes[..self.cut_to]);
            }
            read
        }

        fn len(&self) -> std::io::Result<u64> {
            self.inner.len()
        }
    }

    /// A file cut while it is copied "as far as written" is copied as far as it still
    /// reaches; a copy of an exact length fails instead.
    #[test]
    fn a_file_cut_while_copied_is_copied_to_its_new_end() {
        let mem = MemFileSystem::new();
        let cut_to = CHUNK + CHUNK / 2 + 3;
        let mut data: Vec<u8> = (0..cut_to).map(|i| (i % 251) as u8 + 1).collect();
        data.resize(3 * CHUNK + 100, 0);
        let from = Path::new("/db/000007.log");
        let to = Path::new("/copy/000007.log");
        let hooked = HookedFileSystem::new(
            Arc::new(mem.clone()),
            CutAfterFirstRead {
                fs: mem.clone(),
                cut_to,
            },
        );
        mem.write_file_bytes(from, &data);
        mem.create_dir_all(Path::new("/copy")).expect("dir");
        let (len, crc) = copy(&hooked, from, None, &mem, to, None).expect("copy");
        assert_eq!(len, cut_to as u64);
        assert_eq!(crc, crate::checksum::crc32c(&data[..cut_to]));
        assert_eq!(mem.read_file_bytes(to).expect("copy"), &data[..cut_to]);

        mem.write_file_bytes(from, &data);
        let exact = copy(&hooked, from, Some(data.len() as u64), &mem, to, None);
        assert!(matches!(exact, Err(Error::Io { .. })), "{exact:?}");
    }
}
