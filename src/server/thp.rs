//! `disable-thp` (Redis 7.0's parameter, default `yes`, set at start only): transparent
//! huge pages off for this process, with `prctl(PR_SET_THP_DISABLE)`, as Redis does.
//!
//! Redis turns them off only when the kernel's mode is `always`, because jemalloc never asks
//! for them. mimalloc does (`MADV_HUGEPAGE` on its segments, its `allow_thp` option), so
//! under the common `madvise` mode Tollgate's heap was backed by 2 MiB pages: each first
//! touch of one zeroes 2 MiB, and with `defrag` at `madvise` a fault may compact memory
//! first. Filling 4,000 keys with 200 KB values (`bench/large_values.sh`) took the server
//! between 1.3 and 4.5 s of CPU from one run to the next with huge pages, against a steady
//! 1.1-1.3 s without them (and about 140 MB less RSS): the stalls Redis's documentation
//! warns of. The flag holds for every later fault and for khugepaged, so setting it after
//! the allocator started is enough.

/// Apply `disable-thp` at start: a line for the log saying what was done.
pub fn apply(disable: bool) -> Result<&'static str, std::io::Error> {
    if !disable {
        return Ok("transparent huge pages left to the kernel's setting (disable-thp no)");
    }
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and changes a flag of this
    // process.
    if unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok("transparent huge pages disabled for this process (disable-thp yes)")
}
