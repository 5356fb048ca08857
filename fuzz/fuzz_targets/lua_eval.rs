//! EVAL of generated Lua programs through the real command layer and scripting engine
//! (`engine::apply_ops` on an in-process state), with the programs built from the input
//! by `tollgate_fuzz::lua`: calls of `unpack`, `string.*`, `table.*`, `cjson`, `cmsgpack`,
//! `struct`, `bit`, `redis.*` with extreme numbers, odd strings and nested tables. A crash,
//! a panic (which the apply path would turn into an "internal error" reply) or an
//! "internal error" from a C function fails the run.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tollgate_fuzz::lua::check(data);
});
