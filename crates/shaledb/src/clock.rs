//! The wall clock that TTL (`CfOptions::ttl`) reads: write times are stored with values and
//! compared with it on every read and compaction.

use std::time::{SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in whole seconds since the Unix epoch (UTC).
///
/// The default, [`SystemClock`], reads the operating system's real-time clock
/// (`SystemTime::now`), so expiry follows that clock: if it is set back, entries live longer;
/// set forward, they expire sooner. Tests substitute a clock they advance by hand.
///
/// ```
/// use shaledb::Clock;
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// /// A clock a test moves forward.
/// struct TestClock(AtomicU64);
/// impl Clock for TestClock {
///     fn now_secs(&self) -> u64 {
///         self.0.load(Ordering::Relaxed)
///     }
/// }
/// ```
pub trait Clock: Send + Sync {
    /// Seconds since 1970-01-01 00:00:00 UTC.
    fn now_secs(&self) -> u64;
}

/// The operating system's real-time clock (the default [`Clock`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_secs(&self) -> u64 {
        // A clock before 1970 reads as 1970: nothing written then can have expired early.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

/// Bytes of the write time appended to every value of a family with a TTL.
pub(crate) const WRITE_TIME_LEN: usize = 8;

/// `value` with its write time appended (the stored form in a family with a TTL).
pub(crate) fn stamp(value: &[u8], now: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(value.len() + WRITE_TIME_LEN);
    v.extend_from_slice(value);
    v.extend_from_slice(&now.to_le_bytes());
    v
}

/// Splits a stored value into the user's value and its write time; `None` if it is too short
/// to hold one (corruption).
pub(crate) fn split_stamp(stored: &[u8]) -> Option<(&[u8], u64)> {
    let at = stored.len().checked_sub(WRITE_TIME_LEN)?;
    let (value, time) = stored.split_at(at);
    let time = u64::from_le_bytes(time.try_into().ok()?);
    Some((value, time))
}

/// When a family's entries expire: its TTL and the time "now" means for one read or
/// compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Expiry {
    /// The TTL in seconds (at least 1).
    pub ttl_secs: u64,
    /// The clock's reading when the read or compaction started.
    pub now: u64,
}

impl Expiry {
    /// True if a value written at `write_time` has expired: at least `ttl_secs` old.
    #[inline]
    pub(crate) fn expired(&self, write_time: u64) -> bool {
        self.now.saturating_sub(write_time) >= self.ttl_secs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip_and_expire_at_the_ttl() {
        let s = stamp(b"value", 1_000);
        assert_eq!(s.len(), 5 + WRITE_TIME_LEN);
        assert_eq!(split_stamp(&s), Some((&b"value"[..], 1_000)));
        assert_eq!(split_stamp(&stamp(b"", 7)), Some((&b""[..], 7)));
        assert_eq!(split_stamp(b"short"), None);
        let e = Expiry {
            ttl_secs: 10,
            now: 1_010,
        };
        assert!(e.expired(1_000));
        assert!(!e.expired(1_001));
        assert!(
            !e.expired(5_000),
            "a write time in the future has not expired"
        );
        assert!(SystemClock.now_secs() > 1_700_000_000);
    }
}
