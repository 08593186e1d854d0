//! Replaying a log's records with one decision about damage, shared by WAL recovery and
//! MANIFEST recovery: what a damaged region means (a torn final write, or corruption in the
//! middle of the log) depends only on what follows it and on the caller's [`TailPolicy`].

use super::{LogRead, LogReader};
use crate::error::{Error, Result};
use crate::options::WalRecoveryMode;

/// What to do with damaged bytes and with records whose contents the caller rejects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TailPolicy {
    /// Any damage or rejected record is corruption.
    Strict,
    /// Only damage at the very end (a torn final write) is tolerated; damage followed by an
    /// intact record, or a rejected record, is corruption. The MANIFEST always uses this.
    TornTailOnly,
    /// Stop replaying at the first damage or rejected record; what follows is not applied.
    StopAtDamage,
    /// Skip damaged bytes and rejected records and go on.
    SkipDamaged,
}

impl TailPolicy {
    /// The policy a WAL is replayed with under `mode`.
    pub(crate) fn for_wal(mode: WalRecoveryMode) -> Self {
        match mode {
            WalRecoveryMode::AbsoluteConsistency => TailPolicy::Strict,
            WalRecoveryMode::TolerateCorruptedTailRecords => TailPolicy::TornTailOnly,
            WalRecoveryMode::PointInTimeRecovery => TailPolicy::StopAtDamage,
            WalRecoveryMode::SkipAnyCorruptedRecords => TailPolicy::SkipDamaged,
        }
    }
}

/// What the caller made of one record's contents.
#[derive(Debug)]
pub(crate) enum RecordCheck {
    /// The record was applied.
    Applied,
    /// The record's bytes were intact but its contents are invalid; the policy decides. The
    /// string describes the problem and becomes the corruption detail.
    Invalid(String),
    /// The record is intact but refers to data that did not survive: a blob written with it
    /// (`Options::separate_blobs_at_write`) and lost in a power loss before either was
    /// synced. No later record was synced either (a synced write syncs every blob file
    /// first), so recovery ends here as at a torn tail; only the strict policy refuses.
    DataLost(String),
}

/// How a replay ended (errors are returned as `Err` instead).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReplayEnd {
    /// The end of the file was reached. `torn_tail` is the damage found at the end (only with
    /// [`TailPolicy::TornTailOnly`]): offset and detail of its first damaged byte range.
    Eof {
        /// The damage after the last intact record, if any.
        torn_tail: Option<(u64, String)>,
    },
    /// [`TailPolicy::StopAtDamage`] stopped at damage or at a rejected record.
    Stopped,
}

/// Reads every record of `reader` and hands it to `apply` with its file offset, deciding
/// about damage by `policy`. `io_context` names the read in IO errors ("reading WAL ...").
/// Errors `apply` returns end the replay unchanged.
pub(crate) fn replay_records(
    reader: &mut LogReader,
    policy: TailPolicy,
    io_context: &str,
    mut apply: impl FnMut(Vec<u8>, u64) -> Result<RecordCheck>,
) -> Result<ReplayEnd> {
    let path = reader.path().to_path_buf();
    let mut damage: Option<(u64, String)> = None;
    loop {
        let read = reader
            .read()
            .map_err(|e| Error::io(io_context.to_string(), e))?;
        let (data, offset) = match read {
            LogRead::Eof => return Ok(ReplayEnd::Eof { torn_tail: damage }),
            LogRead::Damaged { offset, detail } => match policy {
                TailPolicy::Strict => return Err(Error::corruption(&path, offset, detail)),
                TailPolicy::StopAtDamage => return Ok(ReplayEnd::Stopped),
                TailPolicy::SkipDamaged => continue,
                TailPolicy::TornTailOnly => {
                    if damage.is_none() {
                        damage = Some((offset, detail));
                    }
                    continue;
                }
            },
            LogRead::Record { data, offset } => (data, offset),
        };
        if let Some((off, detail)) = damage {
            // Intact records after damage: the damage is not a torn tail.
            return Err(Error::corruption(&path, off, detail));
        }
        match apply(data, offset)? {
            RecordCheck::Applied => {}
            RecordCheck::Invalid(detail) => match policy {
                TailPolicy::SkipDamaged => {}
                TailPolicy::StopAtDamage => return Ok(ReplayEnd::Stopped),
                TailPolicy::Strict | TailPolicy::TornTailOnly => {
                    return Err(Error::corruption(&path, offset, detail))
                }
            },
            RecordCheck::DataLost(detail) => match policy {
                TailPolicy::SkipDamaged => {}
                TailPolicy::StopAtDamage => return Ok(ReplayEnd::Stopped),
                TailPolicy::TornTailOnly => {
                    return Ok(ReplayEnd::Eof {
                        torn_tail: Some((offset, detail)),
                    })
                }
                TailPolicy::Strict => return Err(Error::corruption(&path, offset, detail)),
            },
        }
    }
}
