//! The clock of per-command timing: nanoseconds of a monotonic clock, read once per
//! command on the hot path (every command's latency histogram, the slow log and the
//! latency monitor). On x86-64, when the kernel itself keeps time with the TSC (its
//! clocksource is `tsc`, so the TSC is invariant and synchronised across cores), this is
//! the TSC scaled to nanoseconds by a factor measured once against `CLOCK_MONOTONIC`:
//! `rdtsc`, a multiply and a shift, where `clock_gettime` costs about 60 user-space
//! instructions per call under callgrind (`bench/instructions.sh`). Anywhere else it is
//! `clock_gettime(CLOCK_MONOTONIC)`. Hand-written rather than the `quanta` crate (which
//! does the same) to keep the read to these few instructions without a thread-local
//! check, and without a new dependency for twenty lines.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

/// Nanoseconds per TSC tick times 2^32; 0 until measured or when the TSC is not used.
static TSC_MULT: AtomicU64 = AtomicU64::new(0);
static CALIBRATE: Once = Once::new();

/// Nanoseconds of `CLOCK_MONOTONIC`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Measure the TSC against `CLOCK_MONOTONIC` (once per process; about 10 ms, at server
/// start). Afterwards [`now_ns`] reads the TSC where that is sound.
pub fn calibrate() {
    CALIBRATE.call_once(|| {
        #[cfg(target_arch = "x86_64")]
        {
            let source = std::fs::read_to_string(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            )
            .unwrap_or_default();
            if source.trim() != "tsc" {
                return;
            }
            // SAFETY: rdtsc has no preconditions on x86-64.
            let tsc = || unsafe { core::arch::x86_64::_rdtsc() };
            let (n0, t0) = (monotonic_ns(), tsc());
            std::thread::sleep(std::time::Duration::from_millis(10));
            let (n1, t1) = (monotonic_ns(), tsc());
            let (dn, dt) = (n1.saturating_sub(n0), t1.saturating_sub(t0));
            if dn == 0 || dt == 0 {
                return;
            }
            let mult = ((u128::from(dn) << 32) / u128::from(dt)) as u64;
            TSC_MULT.store(mult, Ordering::Relaxed);
        }
    });
}

/// Nanoseconds of a monotonic clock (see the module docs): only differences mean
/// anything.
#[inline]
pub fn now_ns() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let mult = TSC_MULT.load(Ordering::Relaxed);
        if mult != 0 {
            // SAFETY: rdtsc has no preconditions on x86-64.
            let ticks = unsafe { core::arch::x86_64::_rdtsc() };
            return ((u128::from(ticks) * u128::from(mult)) >> 32) as u64;
        }
    }
    monotonic_ns()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reading of both clocks: ours, and the monotonic clock's around it (the tightest
    /// of 50 tries, so that a preemption between the reads does not count).
    fn pair() -> (u64, u64) {
        (0..50)
            .map(|_| {
                let before = monotonic_ns();
                let ours = now_ns();
                let after = monotonic_ns();
                (after - before, ours, before + (after - before) / 2)
            })
            .min()
            .map(|(_, ours, mono)| (ours, mono))
            .unwrap()
    }

    #[test]
    fn agrees_with_the_monotonic_clock() {
        calibrate();
        let (a, m0) = pair();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let (b, m1) = pair();
        let (ours, theirs) = ((b - a) as f64, (m1 - m0) as f64);
        assert!((ours / theirs - 1.0).abs() < 0.01, "{ours} vs {theirs}");
    }
}
