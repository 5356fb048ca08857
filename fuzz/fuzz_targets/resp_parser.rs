//! The RESP request parser (multibulk and inline) on arbitrary bytes. Besides "no panic,
//! no crash, no unbounded allocation", three ways of parsing the same bytes must agree:
//! the whole input at once with frames, at once with argument lists, and fed in chunks
//! (as a socket delivers it). See `tollgate_fuzz::resp`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tollgate_fuzz::resp::check(data);
});
