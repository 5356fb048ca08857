//! The global allocator: mimalloc (glibc malloc was 40% of the instructions of a
//! pipelined SET workload under callgrind), wrapped to count live bytes so INFO memory
//! reports real heap use and `maxmemory` compares against it.
//!
//! The binary installs it as the global allocator; the library only reads the counter.
//!
//! Giving memory back to the OS: mimalloc keeps freed pages in the heap of the thread that
//! allocated them until that thread collects, and returns ("purges") free arena memory only
//! when something asks. A server that goes idle after FLUSHALL would keep its whole peak
//! resident (measured: 1 GB of 10 KB values, FLUSHALL, RSS still 1 GB a minute later). So
//! the server's memory task calls [`release_free_memory`] when used memory has dropped well
//! below what it was (every thread then collects its own heap the next time it goes idle,
//! through [`collect_when_idle`] in the runtime's park hook), and RSS follows within about a
//! second.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::ffi::c_void;

use mimalloc::MiMalloc as System;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

/// Bumped to ask every thread to collect its heap.
static RELEASE_EPOCH: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The release request this thread last honoured.
    static COLLECTED: Cell<u64> = const { Cell::new(0) };
}

extern "C" {
    // mimalloc's C API (libmimalloc-sys declares it only with its `extended` feature):
    // collect this thread's free pages; with `force`, purge free arena memory at once.
    fn mi_collect(force: bool);
}

/// Return free memory to the OS: this thread's heap now, every other runtime thread's
/// when it next goes idle ([`collect_when_idle`]).
pub fn release_free_memory() {
    let epoch = RELEASE_EPOCH.fetch_add(1, Ordering::Relaxed) + 1;
    COLLECTED.with(|c| c.set(epoch));
    // SAFETY: a plain C call without arguments that borrow anything.
    unsafe { mi_collect(true) };
}

/// For the runtime's park hook: collect this thread's heap if a release was asked for
/// since it last did (otherwise one relaxed load).
pub fn collect_when_idle() {
    let epoch = RELEASE_EPOCH.load(Ordering::Relaxed);
    COLLECTED.with(|c| {
        if c.get() != epoch {
            c.set(epoch);
            // SAFETY: as above.
            unsafe { mi_collect(true) };
        }
    });
}

/// Resident set size of this process in bytes (Linux `/proc/self/statm`; 0 elsewhere).
pub fn resident_bytes() -> usize {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Bytes currently allocated through [`CountingAlloc`] (0 if it is not installed).
pub fn allocated() -> usize {
    ALLOCATED.load(Ordering::Relaxed)
}

extern "C" {
    // Part of mimalloc's C API (libmimalloc-sys declares it only with its `extended`
    // feature): the version as major * 10000 + minor * 100 + patch.
    fn mi_version() -> std::ffi::c_int;
}

/// The allocator's name for INFO's `mem_allocator`: `mimalloc-<version>` once
/// [`CountingAlloc`] is installed (the binary installs it), `libc` when it is not (a test
/// embedding the server without it).
pub fn name() -> String {
    if allocated() == 0 {
        return "libc".to_string();
    }
    // SAFETY: a plain C function without arguments, linked in by libmimalloc-sys.
    let v = unsafe { mi_version() };
    format!("mimalloc-{}.{}.{}", v / 10000, v / 100 % 100, v % 100)
}

/// The system allocator, counting live bytes.
pub struct CountingAlloc;

/// Whether plain `mi_malloc` satisfies `align` for `size` bytes: mimalloc's blocks are
/// whole machine words, so every block is 8-aligned. The `mimalloc` crate always calls
/// `mi_malloc_aligned`, whose fast path needs a free block that happens to be aligned and
/// otherwise over-allocates; for the common non-power-of-two sizes (a request's argument
/// list, say) that slow path ran on most calls: about 155 instructions instead of 40.
/// This is the same rule std's own `System` allocator applies to `malloc`, with
/// mimalloc's word alignment in place of `max_align_t`.
fn plain(align: usize, size: usize) -> bool {
    align <= 8 && align <= size
}

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = if plain(layout.align(), layout.size()) {
            libmimalloc_sys::mi_malloc(layout.size()).cast()
        } else {
            System.alloc(layout)
        };
        if !p.is_null() {
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = if plain(layout.align(), layout.size()) {
            libmimalloc_sys::mi_zalloc(layout.size()).cast()
        } else {
            System.alloc_zeroed(layout)
        };
        if !p.is_null() {
            ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = if plain(layout.align(), new_size) {
            libmimalloc_sys::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
        } else {
            System.realloc(ptr, layout, new_size)
        };
        if !p.is_null() {
            ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
            ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}
