//! The global allocator: mimalloc (glibc malloc was 40% of the instructions of a
//! pipelined SET workload under callgrind), wrapped to count live bytes so INFO memory
//! reports real heap use.
//!
//! The binary installs it as the global allocator; the library only reads the counter.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use mimalloc::MiMalloc as System;
use std::sync::atomic::{AtomicUsize, Ordering};

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

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
