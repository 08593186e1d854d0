//! The one error type of the engine.
//!
//! Every failure a caller can see is one of these variants. Corruption always names the file and
//! the byte offset where it was found so an operator can locate it with `shale sst-dump`.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// The result type of every fallible ShaleDB call.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong in ShaleDB.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The operating system reported an IO error.
    Io {
        /// What the engine was doing, e.g. "writing WAL 000012.log".
        context: String,
        /// The underlying OS error.
        source: std::io::Error,
    },
    /// Bytes read from disk failed validation. Never silently turned into "not found".
    Corruption {
        /// The file holding the bad bytes.
        file: PathBuf,
        /// The byte offset in that file where the problem was found.
        offset: u64,
        /// What was wrong.
        detail: String,
    },
    /// A caller passed an argument the engine cannot accept.
    InvalidArgument(String),
    /// Another handle, in this process or another, has the database open.
    Locked(PathBuf),
    /// A WAL or MANIFEST write or sync, or a background flush or compaction, failed earlier;
    /// the database refuses further writes because their durability could not be guaranteed.
    /// Reads keep working. Reopen to recover. Holds that first failure, which
    /// [`std::error::Error::source`] also returns.
    Poisoned(Arc<Error>),
    /// A flush failed with an IO error (a full disk, a transient EIO), or a WAL write failed
    /// for lack of space, and the recovery waits to be retried: writes fail with this until
    /// the retry succeeds, by itself after
    /// `Options::bgerror_resume_retry_interval` or at once through
    /// [`Db::resume`](crate::Db::resume). Nothing acknowledged was lost; reads keep working.
    /// Holds the failure, which [`std::error::Error::source`] also returns.
    Suspended(Arc<Error>),
    /// The database is being closed or was closed.
    Closed,
    /// The database does not exist and `create_if_missing` is false.
    NotFound(PathBuf),
    /// The database exists and `error_if_exists` is true.
    AlreadyExists(PathBuf),
    /// The operation is not available on this handle, e.g. a write to an instance opened
    /// with [`Db::open_read_only`](crate::Db::open_read_only). The text says which and why.
    NotSupported(String),
    /// The merge operator could not combine the merge operands of `key`
    /// ([`MergeOperator::full_merge`](crate::MergeOperator::full_merge) returned `None`).
    MergeFailed {
        /// The key whose value could not be computed.
        key: Vec<u8>,
        /// The merge operator's name.
        operator: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { context, source } if context.is_empty() => write!(f, "IO error: {source}"),
            Error::Io { context, source } => write!(f, "IO error while {context}: {source}"),
            Error::Corruption {
                file,
                offset,
                detail,
            } => write!(
                f,
                "corruption in {} at offset {offset}: {detail}",
                file.display()
            ),
            Error::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            Error::Locked(p) => write!(
                f,
                "database at {} is locked: it is already open in this or another process",
                p.display()
            ),
            Error::Poisoned(cause) => write!(
                f,
                "database refuses writes after an earlier failure ({cause}); reads still work, \
                 reopen the database to recover"
            ),
            Error::Suspended(cause) => write!(
                f,
                "writes are suspended after a failed flush or WAL write ({cause}); they resume \
                 when the recovery succeeds (automatically, or now with Db::resume)"
            ),
            Error::Closed => write!(f, "database is closed"),
            Error::NotFound(p) => write!(
                f,
                "database at {} does not exist (set Options::create_if_missing to create it)",
                p.display()
            ),
            Error::AlreadyExists(p) => write!(
                f,
                "database at {} already exists (Options::error_if_exists is set)",
                p.display()
            ),
            Error::NotSupported(s) => write!(f, "not supported: {s}"),
            Error::MergeFailed { key, operator } => write!(
                f,
                "merge operator {operator} failed to merge the operands of key {}",
                key.escape_ascii()
            ),
        }
    }
}

impl std::error::Error for Error {
    /// The OS error of `Io`; the first failure (itself an `Error`) of `Poisoned`.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Poisoned(cause) | Error::Suspended(cause) => Some(&**cause),
            _ => None,
        }
    }
}

impl Error {
    /// Builds a corruption error for `file` at `offset`.
    pub(crate) fn corruption(
        file: impl Into<PathBuf>,
        offset: u64,
        detail: impl fmt::Display,
    ) -> Error {
        Error::Corruption {
            file: file.into(),
            offset,
            detail: detail.to_string(),
        }
    }

    /// Wraps an IO error with what the engine was doing.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// True if this is a corruption error.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// True if this is an IO error for lack of space (ENOSPC): the write that failed may
    /// succeed once space is freed.
    pub(crate) fn is_no_space(&self) -> bool {
        matches!(self, Error::Io { source, .. } if is_no_space(source))
    }

    /// The error that refuses writes after `cause` (a `Poisoned` error stays as it is, so
    /// causes do not nest).
    pub(crate) fn poisoned(cause: Error) -> Error {
        match cause {
            // A suspension is reported as itself: a retry may still lift it.
            Error::Poisoned(_) | Error::Suspended(_) => cause,
            other => Error::Poisoned(Arc::new(other)),
        }
    }

    /// A copy of this error, for handing the same failure to several waiters (group commit)
    /// or keeping it as the background error. IO errors keep their kind and message.
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Io { context, source } => Error::Io {
                context: context.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Corruption {
                file,
                offset,
                detail,
            } => Error::Corruption {
                file: file.clone(),
                offset: *offset,
                detail: detail.clone(),
            },
            Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
            Error::MergeFailed { key, operator } => Error::MergeFailed {
                key: key.clone(),
                operator: operator.clone(),
            },
            Error::Locked(p) => Error::Locked(p.clone()),
            Error::Poisoned(cause) => Error::Poisoned(cause.clone()),
            Error::Suspended(cause) => Error::Suspended(cause.clone()),
            Error::Closed => Error::Closed,
            Error::NotFound(p) => Error::NotFound(p.clone()),
            Error::AlreadyExists(p) => Error::AlreadyExists(p.clone()),
            Error::NotSupported(s) => Error::NotSupported(s.clone()),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Self {
        Error::Io {
            context: String::new(),
            source,
        }
    }
}

/// True if `e` says the disk (or the file system) is full: ENOSPC.
pub(crate) fn is_no_space(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::StorageFull || e.raw_os_error() == Some(libc::ENOSPC)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn poisoned_keeps_its_cause_without_nesting() {
        let io = std::io::Error::from(std::io::ErrorKind::StorageFull);
        let p = Error::poisoned(Error::io("syncing WAL 000004.log", io));
        let again = Error::poisoned(p.duplicate());
        for e in [&p, &again] {
            match e.source().and_then(|s| s.downcast_ref::<Error>()) {
                Some(Error::Io { source, .. }) => {
                    assert_eq!(source.kind(), std::io::ErrorKind::StorageFull)
                }
                other => panic!("cause is {other:?}"),
            }
        }
        assert_eq!(
            again.to_string(),
            "database refuses writes after an earlier failure (IO error while syncing WAL \
             000004.log: no storage space); reads still work, reopen the database to recover"
        );
    }

    #[test]
    fn display_of_io_errors_names_the_context_when_there_is_one() {
        let e = Error::from(std::io::Error::other("boom"));
        assert_eq!(e.to_string(), "IO error: boom");
        assert_eq!(
            Error::io("reading CURRENT", std::io::Error::other("boom")).to_string(),
            "IO error while reading CURRENT: boom"
        );
    }
}
