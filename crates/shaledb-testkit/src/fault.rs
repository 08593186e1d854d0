//! [`FaultFs`]: a filesystem wrapper that counts operations and injects faults.
//!
//! It wraps any `Arc<dyn FileSystem>` (usually a [`shaledb::fs::MemFileSystem`], whose
//! `crash()` then simulates the power loss) and can:
//! - count every operation by [`OpKind`];
//! - fail the N-th operation of one kind (or of any kind) with a [`Fault`]: EIO, ENOSPC, a
//!   short write (an append writes a prefix of its bytes, then fails) or a corrupted read (the
//!   read succeeds but one byte of the result is flipped);
//! - *halt*: "the machine stopped here". After [`FaultFs::halt`] (or automatically after the
//!   k-th mutating operation, [`FaultFs::halt_after_mutations`]) every further operation fails
//!   with EIO and none reaches the inner filesystem. `halt` waits for operations in progress,
//!   so once it returns the inner filesystem is frozen and can be crashed safely.

use shaledb::fs::{FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// The kinds of filesystem operation counted and targeted by faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// `create` (open for writing, truncating).
    Create,
    /// `WritableFile::append`.
    Append,
    /// `WritableFile::flush`.
    Flush,
    /// `WritableFile::sync`.
    Sync,
    /// `rename`.
    Rename,
    /// `remove_file` and `remove_dir`.
    Remove,
    /// Opening a file for reading, reading from it, or asking its size.
    Read,
    /// `sync_dir`.
    SyncDir,
    /// `lock`.
    Lock,
    /// `list_dir`, `exists`, `create_dir_all`, `file_size`.
    Meta,
    /// `WritableFile::preallocate` and `trim_preallocated` (a file's size set ahead of its
    /// appends, and cut back to them).
    Preallocate,
}

impl OpKind {
    /// Every kind, in a fixed order (the index into the counters).
    pub const ALL: [OpKind; 11] = [
        OpKind::Create,
        OpKind::Append,
        OpKind::Flush,
        OpKind::Sync,
        OpKind::Rename,
        OpKind::Remove,
        OpKind::Read,
        OpKind::SyncDir,
        OpKind::Lock,
        OpKind::Meta,
        OpKind::Preallocate,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// True for operations that change what is on disk or what survives a crash: the points
    /// at which "crash at every point" stops the machine.
    pub fn is_mutating(self) -> bool {
        matches!(
            self,
            OpKind::Create
                | OpKind::Append
                | OpKind::Flush
                | OpKind::Sync
                | OpKind::Rename
                | OpKind::Remove
                | OpKind::SyncDir
                | OpKind::Preallocate
        )
    }
}

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Fail with EIO.
    Eio,
    /// Fail with ENOSPC.
    Enospc,
    /// On an append: write the first half of the bytes, then fail with ENOSPC. On any other
    /// operation: like `Enospc`.
    ShortWrite,
    /// On a read: succeed but flip one bit of the bytes returned. On any other operation:
    /// like `Eio`.
    CorruptRead,
}

/// Which operations a fault rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Operations of this kind only.
    Kind(OpKind),
    /// Every operation.
    Any,
    /// Every mutating operation ([`OpKind::is_mutating`]).
    Mutating,
}

impl Target {
    fn matches(self, kind: OpKind) -> bool {
        match self {
            Target::Kind(k) => k == kind,
            Target::Any => true,
            Target::Mutating => kind.is_mutating(),
        }
    }
}

/// "Fail the `nth` (1-based) matching operation with `fault`"; with `sticky`, every matching
/// operation after it fails too.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// The operations counted.
    pub target: Target,
    /// Which matching operation fails (1 = the first one after the rule was added).
    pub nth: u64,
    /// What happens to it.
    pub fault: Fault,
    /// Keep failing every later matching operation.
    pub sticky: bool,
}

struct ActiveRule {
    rule: Rule,
    seen: u64,
    fired: bool,
}

/// A record of one injected fault.
#[derive(Debug, Clone)]
pub struct Injected {
    /// The operation that was failed.
    pub kind: OpKind,
    /// The file it concerned.
    pub path: PathBuf,
    /// What was done to it.
    pub fault: Fault,
}

struct Shared {
    inner: Arc<dyn FileSystem>,
    counts: [AtomicU64; OpKind::ALL.len()],
    mutations: AtomicU64,
    /// After this many mutating operations the machine halts (0 = never).
    halt_after: AtomicU64,
    halted: AtomicBool,
    /// Held shared by every operation, exclusively by `halt`: so `halt` returns only once no
    /// operation is in progress.
    gate: RwLock<()>,
    rules: Mutex<Vec<ActiveRule>>,
    injected: Mutex<Vec<Injected>>,
    /// Name suffixes of the files the disk is full for (`fill_disk`).
    full_for: Mutex<Vec<String>>,
    /// The disk is full only once this many mutating operations were done (`fill_disk_from`).
    full_from: AtomicU64,
}

/// The fault-injecting filesystem. Clones share counters, rules and the halt switch.
#[derive(Clone)]
pub struct FaultFs {
    s: Arc<Shared>,
}

fn halted_err(path: &Path) -> io::Error {
    io::Error::other(format!("FaultFs: machine halted (at {})", path.display()))
}

fn fault_err(fault: Fault, kind: OpKind, path: &Path) -> io::Error {
    let errno = match fault {
        Fault::Eio | Fault::CorruptRead => libc::EIO,
        Fault::Enospc | Fault::ShortWrite => libc::ENOSPC,
    };
    let os = io::Error::from_raw_os_error(errno);
    io::Error::new(
        os.kind(),
        format!("FaultFs: injected {os} on {kind:?} of {}", path.display()),
    )
}

/// What `begin` decided for an operation.
enum Verdict {
    Go,
    Fail(Fault),
}

impl FaultFs {
    /// Wraps `inner` with no faults armed.
    pub fn new(inner: Arc<dyn FileSystem>) -> FaultFs {
        FaultFs {
            s: Arc::new(Shared {
                inner,
                counts: Default::default(),
                mutations: AtomicU64::new(0),
                halt_after: AtomicU64::new(0),
                halted: AtomicBool::new(false),
                gate: RwLock::new(()),
                rules: Mutex::new(Vec::new()),
                injected: Mutex::new(Vec::new()),
                full_for: Mutex::new(Vec::new()),
                full_from: AtomicU64::new(0),
            }),
        }
    }

    /// This filesystem as the engine's trait object.
    pub fn as_dyn(&self) -> Arc<dyn FileSystem> {
        Arc::new(self.clone())
    }

    /// Arms a fault rule (counting starts now).
    pub fn add_rule(&self, rule: Rule) {
        lock(&self.s.rules).push(ActiveRule {
            rule,
            seen: 0,
            fired: false,
        });
    }

    /// Shorthand: fail the `nth` operation matching `target` once with `fault`.
    pub fn fail_nth(&self, target: Target, nth: u64, fault: Fault) {
        self.add_rule(Rule {
            target,
            nth,
            fault,
            sticky: false,
        });
    }

    /// A full disk for files whose names end with one of `suffixes` (e.g. `[".sst", ".blob"]`):
    /// until [`free_disk`](Self::free_disk), creating, appending to or flushing such a file
    /// fails with ENOSPC. Files with other names (the WAL, the MANIFEST) are unaffected, as
    /// if they had space set aside.
    pub fn fill_disk(&self, suffixes: &[&str]) {
        self.fill_disk_from(0, suffixes);
    }

    /// [`fill_disk`](Self::fill_disk) once `mutations` mutating operations (counted from the
    /// file system's creation, see [`mutations`](Self::mutations)) were done: the disk fills
    /// up at that point of a workload.
    pub fn fill_disk_from(&self, mutations: u64, suffixes: &[&str]) {
        self.s.full_from.store(mutations, Ordering::SeqCst);
        *lock(&self.s.full_for) = suffixes.iter().map(|s| s.to_string()).collect();
    }

    /// Ends [`fill_disk`](Self::fill_disk).
    pub fn free_disk(&self) {
        lock(&self.s.full_for).clear();
    }

    /// True if the disk is full for writes to `path`.
    fn full_for(&self, kind: OpKind, path: &Path) -> bool {
        if !matches!(kind, OpKind::Create | OpKind::Append | OpKind::Flush) {
            return false;
        }
        if self.s.mutations.load(Ordering::SeqCst) < self.s.full_from.load(Ordering::SeqCst) {
            return false;
        }
        let name = path.to_string_lossy();
        lock(&self.s.full_for)
            .iter()
            .any(|s| name.ends_with(s.as_str()))
    }

    /// Disarms every rule (e.g. "the disk has space again").
    pub fn clear_rules(&self) {
        lock(&self.s.rules).clear();
    }

    /// Operations of `kind` performed or attempted so far.
    pub fn count(&self, kind: OpKind) -> u64 {
        self.s.counts[kind.index()].load(Ordering::SeqCst)
    }

    /// Mutating operations that reached the inner filesystem so far.
    pub fn mutations(&self) -> u64 {
        self.s.mutations.load(Ordering::SeqCst)
    }

    /// Every fault injected so far.
    pub fn injected(&self) -> Vec<Injected> {
        lock(&self.s.injected).clone()
    }

    /// Halts the machine once `k` mutating operations have completed: the k-th one happens,
    /// nothing after it does. `k = 0` halts at once.
    pub fn halt_after_mutations(&self, k: u64) {
        if k == 0 {
            self.halt();
        } else {
            self.s.halt_after.store(k, Ordering::SeqCst);
        }
    }

    /// Stops the machine: waits for operations in progress, then fails every later one.
    pub fn halt(&self) {
        let _g = self.s.gate.write().unwrap_or_else(|e| e.into_inner());
        self.s.halted.store(true, Ordering::SeqCst);
    }

    /// True once halted.
    pub fn is_halted(&self) -> bool {
        self.s.halted.load(Ordering::SeqCst)
    }

    /// Runs one operation: counts it, applies halt and fault rules, and on success counts a
    /// mutation (halting if that was the last one allowed).
    fn run<R>(
        &self,
        kind: OpKind,
        path: &Path,
        op: impl FnOnce(Verdict) -> io::Result<R>,
    ) -> io::Result<R> {
        let _g = self.s.gate.read().unwrap_or_else(|e| e.into_inner());
        if self.s.halted.load(Ordering::SeqCst) {
            return Err(halted_err(path));
        }
        self.s.counts[kind.index()].fetch_add(1, Ordering::SeqCst);
        let mut verdict = match self.full_for(kind, path) {
            true => Verdict::Fail(Fault::Enospc),
            false => Verdict::Go,
        };
        {
            let mut rules = lock(&self.s.rules);
            for r in rules.iter_mut() {
                if !r.rule.target.matches(kind) {
                    continue;
                }
                r.seen += 1;
                if r.seen == r.rule.nth || (r.rule.sticky && r.fired) {
                    r.fired = true;
                    if matches!(verdict, Verdict::Go) {
                        verdict = Verdict::Fail(r.rule.fault);
                    }
                }
            }
        }
        if let Verdict::Fail(f) = verdict {
            lock(&self.s.injected).push(Injected {
                kind,
                path: path.to_path_buf(),
                fault: f,
            });
        }
        let res = op(verdict);
        if kind.is_mutating() {
            let n = self.s.mutations.fetch_add(1, Ordering::SeqCst) + 1;
            let limit = self.s.halt_after.load(Ordering::SeqCst);
            if limit != 0 && n >= limit {
                self.s.halted.store(true, Ordering::SeqCst);
            }
        }
        res
    }

    /// An operation that either fails with the fault's error or runs.
    fn simple<R>(
        &self,
        kind: OpKind,
        path: &Path,
        op: impl FnOnce() -> io::Result<R>,
    ) -> io::Result<R> {
        self.run(kind, path, |v| match v {
            Verdict::Go => op(),
            Verdict::Fail(f) => Err(fault_err(f, kind, path)),
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn flip_one(buf: &mut [u8]) {
    if !buf.is_empty() {
        let i = buf.len() / 2;
        buf[i] ^= 0x10;
    }
}

struct FaultWritable {
    fs: FaultFs,
    path: PathBuf,
    inner: Box<dyn WritableFile>,
}

impl WritableFile for FaultWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let inner = &mut self.inner;
        self.fs.run(OpKind::Append, &self.path, |v| match v {
            Verdict::Go => inner.append(data),
            Verdict::Fail(Fault::ShortWrite) => {
                inner.append(&data[..data.len() / 2])?;
                Err(fault_err(Fault::ShortWrite, OpKind::Append, &self.path))
            }
            Verdict::Fail(f) => Err(fault_err(f, OpKind::Append, &self.path)),
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        let inner = &mut self.inner;
        self.fs.simple(OpKind::Flush, &self.path, || inner.flush())
    }

    fn sync(&mut self) -> io::Result<()> {
        let inner = &mut self.inner;
        self.fs.simple(OpKind::Sync, &self.path, || inner.sync())
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn set_writeback_interval(&mut self, bytes: u64) {
        self.inner.set_writeback_interval(bytes)
    }

    fn preallocate(&mut self, len: u64) -> io::Result<()> {
        let inner = &mut self.inner;
        self.fs
            .simple(OpKind::Preallocate, &self.path, || inner.preallocate(len))
    }

    fn trim_preallocated(&mut self) -> io::Result<()> {
        let inner = &mut self.inner;
        self.fs.simple(OpKind::Preallocate, &self.path, || {
            inner.trim_preallocated()
        })
    }
}

struct FaultRandom {
    fs: FaultFs,
    path: PathBuf,
    inner: Arc<dyn RandomAccessFile>,
}

impl RandomAccessFile for FaultRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.fs.run(OpKind::Read, &self.path, |v| match v {
            Verdict::Go => self.inner.read_exact_at(offset, buf),
            Verdict::Fail(Fault::CorruptRead) => {
                self.inner.read_exact_at(offset, buf)?;
                flip_one(buf);
                Ok(())
            }
            Verdict::Fail(f) => Err(fault_err(f, OpKind::Read, &self.path)),
        })
    }

    fn len(&self) -> io::Result<u64> {
        self.fs
            .simple(OpKind::Read, &self.path, || self.inner.len())
    }
}

struct FaultSequential {
    fs: FaultFs,
    path: PathBuf,
    inner: Box<dyn SequentialFile>,
}

impl SequentialFile for FaultSequential {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let inner = &mut self.inner;
        self.fs.run(OpKind::Read, &self.path, |v| match v {
            Verdict::Go => inner.read(buf),
            Verdict::Fail(Fault::CorruptRead) => {
                let n = inner.read(buf)?;
                flip_one(&mut buf[..n]);
                Ok(n)
            }
            Verdict::Fail(f) => Err(fault_err(f, OpKind::Read, &self.path)),
        })
    }
}

struct FaultLock {
    _inner: Box<dyn FileLock>,
}

impl FileLock for FaultLock {}

impl FileSystem for FaultFs {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let inner = self.simple(OpKind::Create, path, || self.s.inner.create(path))?;
        Ok(Box::new(FaultWritable {
            fs: self.clone(),
            path: path.to_path_buf(),
            inner,
        }))
    }

    fn open_random_access(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let inner = self.simple(OpKind::Read, path, || self.s.inner.open_random_access(path))?;
        Ok(Arc::new(FaultRandom {
            fs: self.clone(),
            path: path.to_path_buf(),
            inner,
        }))
    }

    fn create_direct(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let inner = self.simple(OpKind::Create, path, || self.s.inner.create_direct(path))?;
        Ok(Box::new(FaultWritable {
            fs: self.clone(),
            path: path.to_path_buf(),
            inner,
        }))
    }

    fn open_random_access_direct(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let inner = self.simple(OpKind::Read, path, || {
            self.s.inner.open_random_access_direct(path)
        })?;
        Ok(Arc::new(FaultRandom {
            fs: self.clone(),
            path: path.to_path_buf(),
            inner,
        }))
    }

    fn open_sequential(&self, path: &Path) -> io::Result<Box<dyn SequentialFile>> {
        let inner = self.simple(OpKind::Read, path, || self.s.inner.open_sequential(path))?;
        Ok(Box::new(FaultSequential {
            fs: self.clone(),
            path: path.to_path_buf(),
            inner,
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        // Cannot fail by signature; a halted machine answers "no".
        self.simple(OpKind::Meta, path, || Ok(self.s.inner.exists(path)))
            .unwrap_or(false)
    }

    fn file_size(&self, path: &Path) -> io::Result<u64> {
        self.simple(OpKind::Meta, path, || self.s.inner.file_size(path))
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.simple(OpKind::Meta, dir, || self.s.inner.list_dir(dir))
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.simple(OpKind::Meta, dir, || self.s.inner.create_dir_all(dir))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.simple(OpKind::Remove, path, || self.s.inner.remove_file(path))
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        self.simple(OpKind::Remove, dir, || self.s.inner.remove_dir(dir))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.simple(OpKind::Rename, from, || self.s.inner.rename(from, to))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.simple(OpKind::SyncDir, dir, || self.s.inner.sync_dir(dir))
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let inner = self.simple(OpKind::Lock, path, || self.s.inner.lock(path))?;
        Ok(Box::new(FaultLock { _inner: inner }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use shaledb::fs::MemFileSystem;

    fn setup() -> (MemFileSystem, FaultFs) {
        let mem = MemFileSystem::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        fs.create_dir_all(Path::new("/d")).unwrap();
        (mem, fs)
    }

    #[test]
    fn counts_and_fails_the_nth_append() {
        let (mem, fs) = setup();
        fs.fail_nth(Target::Kind(OpKind::Append), 2, Fault::Eio);
        let mut f = fs.create(Path::new("/d/a")).unwrap();
        f.append(b"one").unwrap();
        let e = f.append(b"two").unwrap_err();
        assert_eq!(e.raw_os_error(), None);
        assert!(e.to_string().contains("injected"), "{e}");
        f.append(b"three").unwrap();
        assert_eq!(fs.count(OpKind::Append), 3);
        assert_eq!(fs.count(OpKind::Create), 1);
        assert_eq!(mem.read_file_bytes("/d/a").unwrap(), b"onethree");
        assert_eq!(fs.injected().len(), 1);
    }

    #[test]
    fn short_write_leaves_a_prefix() {
        let (mem, fs) = setup();
        fs.fail_nth(Target::Any, 3, Fault::ShortWrite); // create, append, append
        let mut f = fs.create(Path::new("/d/a")).unwrap();
        f.append(b"ok|").unwrap();
        assert!(f.append(b"abcdef").is_err());
        assert_eq!(mem.read_file_bytes("/d/a").unwrap(), b"ok|abc");
    }

    #[test]
    fn failed_sync_leaves_data_unsynced_and_corrupt_read_flips() {
        let (mem, fs) = setup();
        fs.fail_nth(Target::Kind(OpKind::Sync), 1, Fault::Eio);
        let mut f = fs.create(Path::new("/d/a")).unwrap();
        f.append(b"data").unwrap();
        assert!(f.sync().is_err());
        fs.sync_dir(Path::new("/d")).unwrap();
        fs.fail_nth(Target::Kind(OpKind::Read), 2, Fault::CorruptRead);
        let r = fs.open_random_access(Path::new("/d/a")).unwrap();
        let mut buf = [0u8; 4];
        r.read_exact_at(0, &mut buf).unwrap();
        assert_ne!(&buf, b"data");
        r.read_exact_at(0, &mut buf).unwrap();
        assert_eq!(&buf, b"data");
        mem.crash();
        assert_eq!(mem.read_file_bytes("/d/a").unwrap(), b"");
    }

    #[test]
    fn halt_after_k_mutations_stops_everything() {
        let (mem, fs) = setup();
        fs.halt_after_mutations(2);
        let mut f = fs.create(Path::new("/d/a")).unwrap();
        f.append(b"x").unwrap();
        assert!(fs.is_halted());
        assert!(f.append(b"y").is_err());
        assert!(fs.sync_dir(Path::new("/d")).is_err());
        assert!(!fs.exists(Path::new("/d/a")));
        assert_eq!(fs.mutations(), 2);
        assert_eq!(mem.read_file_bytes("/d/a").unwrap(), b"x");
    }

    #[test]
    fn sticky_rule_keeps_failing() {
        let (_mem, fs) = setup();
        fs.add_rule(Rule {
            target: Target::Mutating,
            nth: 2,
            fault: Fault::Enospc,
            sticky: true,
        });
        let mut f = fs.create(Path::new("/d/a")).unwrap();
        for _ in 0..3 {
            let e = f.append(b"x").unwrap_err();
            assert_eq!(e.kind(), io::Error::from_raw_os_error(libc::ENOSPC).kind());
        }
        fs.clear_rules();
        f.append(b"x").unwrap();
    }
}
