//! The `LOG` file: a human-readable account of what the database did (RocksDB's info log):
//! the options at open, flushes, compactions, stalls, errors and a periodic `shaledb.stats`
//! dump. Written through the `FileSystem` trait. Logging never fails a user operation: a
//! line the file cannot take is dropped and counted.
//!
//! At open the previous `LOG` becomes `LOG.old.<micros since the epoch>`; while open, the
//! file is rotated the same way when it passes `Options::max_log_file_size`; only the newest
//! `Options::keep_log_file_num` old files are kept.

use crate::fs::{FileSystem, WritableFile};
use crate::statistics::{Statistics, Ticker};
use parking_lot::Mutex;
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The name of the live info log in the database directory.
pub(crate) const LOG_NAME: &str = "LOG";
/// Old info logs are `LOG.old.<micros>`.
const OLD_PREFIX: &str = "LOG.old.";

/// How much goes to the `LOG` file ([`Options::info_log_level`](crate::Options)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum InfoLogLevel {
    /// Everything, including per-file detail.
    Debug,
    /// Open, flushes, compactions, stalls, statistics dumps, and all below. The default.
    #[default]
    Info,
    /// Recoverable problems, and errors.
    Warn,
    /// Errors only.
    Error,
    /// No `LOG` file at all.
    Off,
}

impl InfoLogLevel {
    fn tag(self) -> &'static str {
        match self {
            InfoLogLevel::Debug => "DEBUG",
            InfoLogLevel::Info => "INFO",
            InfoLogLevel::Warn => "WARN",
            InfoLogLevel::Error => "ERROR",
            InfoLogLevel::Off => "",
        }
    }
}

/// True if `name` is the info log or an old one (they belong to the database: `destroy`
/// removes them).
pub(crate) fn is_info_log(name: &str) -> bool {
    name == LOG_NAME || old_log_micros(name).is_some()
}

fn old_log_micros(name: &str) -> Option<u64> {
    let n = name.strip_prefix(OLD_PREFIX)?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// Where the info log goes and how it rotates.
pub(crate) struct InfoLogConfig {
    pub level: InfoLogLevel,
    pub max_file_size: u64,
    pub keep_file_num: usize,
}

impl InfoLogConfig {
    /// The LOG settings of `opts` (`info_log_level`, `max_log_file_size`, `keep_log_file_num`).
    pub(crate) fn of(opts: &crate::options::Options) -> Self {
        InfoLogConfig {
            level: opts.info_log_level,
            max_file_size: opts.max_log_file_size,
            keep_file_num: opts.keep_log_file_num,
        }
    }
}

/// The live info log. Shared by every thread of one database.
pub(crate) struct InfoLog {
    level: InfoLogLevel,
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    max_file_size: u64,
    keep_file_num: usize,
    file: Mutex<Option<Box<dyn WritableFile>>>,
    stats: Option<Arc<Statistics>>,
    write_errors: AtomicU64,
}

impl InfoLog {
    /// A log that writes nothing (for level `Off`, and where no database is open).
    pub(crate) fn off() -> InfoLog {
        InfoLog {
            level: InfoLogLevel::Off,
            fs: crate::fs::default_fs(),
            dir: PathBuf::new(),
            max_file_size: 0,
            keep_file_num: 0,
            file: Mutex::new(None),
            stats: None,
            write_errors: AtomicU64::new(0),
        }
    }

    /// Opens the info log of the database in `dir`: the previous `LOG` is renamed to an old
    /// log first. Failures leave a log that drops its lines (counted), never an error.
    pub(crate) fn open(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        config: InfoLogConfig,
        stats: Option<Arc<Statistics>>,
    ) -> InfoLog {
        if config.level == InfoLogLevel::Off {
            return InfoLog::off();
        }
        let log = InfoLog {
            level: config.level,
            fs,
            dir: dir.to_path_buf(),
            max_file_size: config.max_file_size,
            keep_file_num: config.keep_file_num,
            file: Mutex::new(None),
            stats,
            write_errors: AtomicU64::new(0),
        };
        let mut file = log.file.lock();
        *file = log.start_new_file();
        if file.is_none() {
            log.count_error();
        }
        drop(file);
        log
    }

    /// True if lines of `level` are written.
    #[inline]
    pub(crate) fn enabled(&self, level: InfoLogLevel) -> bool {
        level >= self.level && self.level != InfoLogLevel::Off
    }

    /// Lines that could not be written.
    pub(crate) fn write_errors(&self) -> u64 {
        self.write_errors.load(Ordering::Relaxed)
    }

    /// Writes one line (or several, for a multi-line message: each gets the prefix) at
    /// `level`. Use the `info_log!` macro, which skips formatting below the level.
    pub(crate) fn write(&self, level: InfoLogLevel, message: fmt::Arguments<'_>) {
        if !self.enabled(level) {
            return;
        }
        let prefix = format!("{} {:>5} ", timestamp(SystemTime::now()), level.tag());
        let mut text = String::new();
        let _ = text.write_fmt(message);
        let mut out = String::with_capacity(text.len() + prefix.len() + 1);
        for line in text.lines() {
            out.push_str(&prefix);
            out.push_str(line);
            out.push('\n');
        }
        let mut file = self.file.lock();
        let Some(f) = file.as_mut() else {
            self.count_error();
            return;
        };
        if self.max_file_size > 0
            && !f.is_empty()
            && f.len() + out.len() as u64 > self.max_file_size
        {
            *file = self.rotate(file.take());
        }
        let Some(f) = file.as_mut() else {
            self.count_error();
            return;
        };
        // Flushed line by line: a crash loses at most the line being written.
        if f.append(out.as_bytes()).and_then(|()| f.flush()).is_err() {
            self.count_error();
        }
    }

    fn count_error(&self) {
        self.write_errors.fetch_add(1, Ordering::Relaxed);
        if let Some(s) = &self.stats {
            s.add(Ticker::InfoLogWriteErrors, 1);
        }
    }

    /// Closes `old`, moves it aside and starts a new `LOG`.
    fn rotate(&self, old: Option<Box<dyn WritableFile>>) -> Option<Box<dyn WritableFile>> {
        if let Some(mut f) = old {
            let _ = f.flush();
        }
        self.start_new_file()
    }

    /// Renames the current `LOG` (if any) to an old log, deletes old logs beyond
    /// `keep_file_num`, and creates a fresh `LOG`.
    fn start_new_file(&self) -> Option<Box<dyn WritableFile>> {
        let live = self.dir.join(LOG_NAME);
        if self.fs.exists(&live) {
            let mut micros = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64);
            // Two rotations within one microsecond must not overwrite each other.
            while self
                .fs
                .exists(&self.dir.join(format!("{OLD_PREFIX}{micros}")))
            {
                micros += 1;
            }
            let old = self.dir.join(format!("{OLD_PREFIX}{micros}"));
            if self.fs.rename(&live, &old).is_err() {
                self.count_error();
            }
        }
        self.prune_old_files();
        self.fs.create(&live).ok()
    }

    fn prune_old_files(&self) {
        let Ok(names) = self.fs.list_dir(&self.dir) else {
            return;
        };
        let mut old: Vec<(u64, String)> = names
            .into_iter()
            .filter_map(|n| old_log_micros(&n).map(|m| (m, n)))
            .collect();
        if old.len() <= self.keep_file_num {
            return;
        }
        old.sort();
        let excess = old.len() - self.keep_file_num;
        for (_, name) in old.into_iter().take(excess) {
            let _ = self.fs.remove_file(&self.dir.join(name));
        }
    }
}

/// Writes a line to an [`InfoLog`] if its level is enabled (the arguments are not formatted
/// otherwise).
macro_rules! info_log {
    ($log:expr, $level:ident, $($arg:tt)*) => {{
        let log: &$crate::info_log::InfoLog = &$log;
        if log.enabled($crate::info_log::InfoLogLevel::$level) {
            log.write($crate::info_log::InfoLogLevel::$level, format_args!($($arg)*));
        }
    }};
}
pub(crate) use info_log;

/// `YYYY/MM/DD-HH:MM:SS.micros` in UTC, as RocksDB stamps its LOG lines.
fn timestamp(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days as i64);
    format!(
        "{y:04}/{m:02}/{day:02}-{:02}:{:02}:{:02}.{:06}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_micros()
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFileSystem;
    use std::time::Duration;

    #[test]
    fn timestamps_and_names() {
        let t = UNIX_EPOCH + Duration::from_micros(1_764_121_873_123_456);
        assert_eq!(timestamp(t), "2025/11/26-01:51:13.123456");
        assert_eq!(timestamp(UNIX_EPOCH), "1970/01/01-00:00:00.000000");
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert!(is_info_log("LOG") && is_info_log("LOG.old.123"));
        assert!(!is_info_log("LOG.old.") && !is_info_log("LOG.old.1x") && !is_info_log("LOGS"));
    }

    #[test]
    fn rotates_by_size_and_keeps_the_newest_old_files() {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let dir = Path::new("/db");
        fs.create_dir_all(dir).expect("test");
        let config = || InfoLogConfig {
            level: InfoLogLevel::Info,
            max_file_size: 200,
            keep_file_num: 2,
        };
        let log = InfoLog::open(fs.clone(), dir, config(), None);
        for i in 0..20 {
            info_log!(log, Info, "line {i} of some forty bytes");
            info_log!(log, Debug, "never written {i}");
        }
        let mut names = fs.list_dir(dir).expect("test");
        names.sort();
        assert_eq!(names.len(), 3, "{names:?}");
        assert_eq!(names[0], "LOG");
        let live =
            String::from_utf8(fs.read_to_vec(&dir.join("LOG")).expect("test")).expect("test");
        assert!(live.len() <= 200, "{live}");
        assert!(
            live.ends_with("INFO line 19 of some forty bytes\n"),
            "{live}"
        );
        assert!(!live.contains("never written"));
        assert_eq!(log.write_errors(), 0);
        drop(log);
        // A reopen moves the live log aside too (and prunes to two old ones).
        let _log = InfoLog::open(fs.clone(), dir, config(), None);
        let names = fs.list_dir(dir).expect("test");
        assert_eq!(names.len(), 3, "{names:?}");
        assert_eq!(fs.file_size(&dir.join("LOG")).expect("test"), 0);
    }
}
