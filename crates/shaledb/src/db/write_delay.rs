//! The token bucket that paces writes while the database is in the slowdown state (L0 at
//! `level0_slowdown_writes_trigger` files, or pending compaction bytes past the soft limit):
//! writes pass at `Options::delayed_write_rate` bytes per second, the way RocksDB's write
//! controller paces them. Each write group costs its size in bytes; credit accrues with time
//! at the rate; the group leader sleeps off any debt (with the mutex released, so writers
//! queue up behind it and the next group is bigger). Time is passed in, so the arithmetic is
//! tested without sleeping.

use std::time::{Duration, Instant};

/// The default rate, used when the option is 0.
const DEFAULT_RATE: u64 = 16 << 20;

/// Pacing state. Reset whenever a write finds the database out of the slowdown state, so
/// credit never carries over from an earlier slowdown.
#[derive(Debug)]
pub(crate) struct WriteDelay {
    /// Bytes per second, at least 1.
    rate: u64,
    /// Bytes that may pass now without waiting; at most `max_credit`.
    credit: u64,
    /// The most credit a pause earns: one second's worth for writes; less for the rate
    /// limiter of flush and compaction writes, so they do not burst after a pause.
    max_credit: u64,
    /// The moment up to which credit has been earned (may be in the future while a leader
    /// sleeps off debt); `None` outside a slowdown.
    accounted_to: Option<Instant>,
}

impl WriteDelay {
    /// A bucket for `rate` bytes per second (0 means the default, 16 MiB/s).
    pub(crate) fn new(rate: u64) -> Self {
        let rate = if rate == 0 { DEFAULT_RATE } else { rate };
        WriteDelay {
            rate,
            credit: 0,
            max_credit: rate,
            accounted_to: None,
        }
    }

    /// A bucket for `rate` bytes per second (at least 1) whose credit never exceeds
    /// `max_credit` bytes: after a pause at most that much passes without waiting.
    pub(crate) fn with_max_credit(rate: u64, max_credit: u64) -> Self {
        WriteDelay {
            rate: rate.max(1),
            credit: 0,
            max_credit,
            accounted_to: None,
        }
    }

    /// How long a write group of `bytes` must wait at `now` before it may proceed.
    pub(crate) fn delay(&mut self, bytes: u64, now: Instant) -> Duration {
        let start = *self.accounted_to.get_or_insert(now);
        if now > start {
            let earned = (now - start).as_nanos() * u128::from(self.rate) / 1_000_000_000;
            // A pause inside a slowdown earns at most one second's worth (`max_credit`), so
            // the writes after it do not burst far above the rate.
            let credit = (u128::from(self.credit) + earned).min(u128::from(self.max_credit));
            self.credit = credit as u64;
            self.accounted_to = Some(now);
        }
        if self.credit >= bytes {
            self.credit -= bytes;
            return Duration::ZERO;
        }
        let debt = bytes - self.credit;
        self.credit = 0;
        let pay = debt_duration(debt, self.rate);
        let until = now.max(start) + pay;
        self.accounted_to = Some(until);
        until - now
    }

    /// The database left the slowdown state.
    pub(crate) fn reset(&mut self) {
        self.credit = 0;
        self.accounted_to = None;
    }
}

/// Time to earn `debt` bytes at `rate` bytes per second, rounded up to a microsecond.
fn debt_duration(debt: u64, rate: u64) -> Duration {
    let micros = (u128::from(debt) * 1_000_000).div_ceil(u128::from(rate));
    Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn debt_is_slept_off_at_the_rate() {
        let t0 = Instant::now();
        let mut d = WriteDelay::new(1000);
        // No credit at the start of a slowdown: 500 bytes at 1000 B/s wait 500 ms.
        assert_eq!(d.delay(500, t0), 500 * MS);
        // The next group right after the sleep pays in full too: the sleep earned nothing
        // extra.
        assert_eq!(d.delay(250, t0 + 500 * MS), 250 * MS);
        // A group arriving while the previous sleep is still running queues behind it.
        assert_eq!(d.delay(100, t0 + 700 * MS), 150 * MS);
        assert_eq!(debt_duration(1, 3), Duration::from_micros(333_334));
        assert_eq!(debt_duration(64 << 10, 32 << 10), 2000 * MS);
    }

    #[test]
    fn time_between_groups_earns_credit_up_to_one_second() {
        let t0 = Instant::now();
        let mut d = WriteDelay::new(1000);
        assert_eq!(d.delay(100, t0), 100 * MS);
        // 300 ms after the debt was paid: 300 bytes of credit, 200 used.
        assert_eq!(d.delay(200, t0 + 400 * MS), Duration::ZERO);
        // 100 left, 150 asked: 50 bytes of debt.
        assert_eq!(d.delay(150, t0 + 400 * MS), 50 * MS);
        // Ten idle seconds earn one second's worth, not ten.
        let later = t0 + 10_450 * MS;
        assert_eq!(d.delay(1000, later), Duration::ZERO);
        assert_eq!(d.delay(1, later), MS);
    }

    #[test]
    fn leaving_the_slowdown_forgets_credit_and_zero_means_default() {
        let t0 = Instant::now();
        let mut d = WriteDelay::new(1000);
        assert_eq!(d.delay(100, t0), 100 * MS);
        d.reset();
        // A new slowdown starts without credit however long ago the last one was.
        assert_eq!(d.delay(100, t0 + 5000 * MS), 100 * MS);
        let mut d = WriteDelay::new(0);
        assert_eq!(d.delay(16 << 20, t0), 1000 * MS);
    }
}
