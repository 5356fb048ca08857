//! Sequences of up to 30 keyspace commands from the engine's own table (strings, bitmaps,
//! HyperLogLog, keys, hashes, lists, sets, sorted sets, geo, SORT, DUMP/RESTORE, OBJECT,
//! scripts and functions, the limiters), generated from the input by
//! `tollgate_fuzz::commands` with edge values for their arguments, applied in batches with
//! `engine::apply_ops` on an in-process state, then again on a second fresh state. A
//! crash, a panic (an "internal error" reply), replies or a keyspace that differ between
//! the two states, or an engine that no longer answers fails the run.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tollgate_fuzz::commands::check(data);
});
