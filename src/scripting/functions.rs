//! Function libraries: `FUNCTION LOAD/LIST/DELETE/FLUSH/DUMP/RESTORE/STATS/KILL/HELP`
//! and `FCALL`/`FCALL_RO`, in their own Lua VM like Redis's function engine.
//! Library code runs at load time in an environment that only has
//! `redis.register_function`, `redis.log` and the version constants, within a
//! deterministic instruction budget standing in for Redis's 500 ms load timeout.
//! Libraries and functions are kept in name order, so listings and dumps never
//! depend on hash order.

use std::collections::BTreeMap;
use std::ffi::c_int;

use bytes::Bytes;

use crate::glob::glob_match;

use super::exec::{self, Invocation};
use super::lua::{
    error_text, ffi, install_hook, load_text, raw_get_str, raw_set_str, registry_get, registry_set,
    remove_hook, string_or_number, LoadState, Vm, VmKind,
};
use super::sandbox::{mark_readonly, nonexistent_global, push_proxy, ENV_META, STORAGE};
use super::{
    parse_i64, Reply, ScriptContext, ScriptControl, ScriptFlags, ScriptHost, ScriptLimits,
};

/// Redis's error for an invalid library or function name.
pub(crate) const NAME_ERROR: &str =
    "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// Hook ticks (of `HOOK_INTERVAL` instructions) a FUNCTION LOAD may run: about
/// Redis's 500 ms, but counted in instructions so every replica agrees.
const LOAD_BUDGET: u64 = 5_000;

/// Registry key of the environment library code sees while it loads.
const LOAD_API: &str = "tollgate.loadapi";

/// A function registered by `redis.register_function`.
pub(crate) struct RegisteredFunction {
    /// The name as registered (lookups ignore case).
    pub name: String,
    /// `description=` of the table form.
    pub description: Option<String>,
    /// `flags=` of the table form.
    pub flags: ScriptFlags,
    /// Registry reference of the callback in the functions VM.
    pub func_ref: c_int,
}

struct Library {
    code: Bytes,
    functions: Vec<RegisteredFunction>,
}

/// The functions VM and its libraries.
pub(crate) struct Functions {
    vm: Vm,
    limits: ScriptLimits,
    libraries: BTreeMap<String, Library>,
    /// Lower-case function name -> library name (function names are case-insensitive).
    index: BTreeMap<String, String>,
}

/// `functionsVerifyName`: `[a-zA-Z0-9_]+`.
pub(crate) fn verify_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

const FUNCTION_HELP: [&str; 37] = [
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
];

fn new_functions_vm(limits: ScriptLimits) -> Vm {
    let vm = exec::new_vm(VmKind::Functions, limits);
    // SAFETY: building the load-time environment of our own state, relaxed.
    vm.relaxed(|l| unsafe {
        super::api::push_redis_table(l, super::api::ApiKind::FunctionLoad);
        ffi::lua_newtable(l);
        push_proxy(l, -2, None);
        raw_set_str(l, -2, "redis");
        ffi::lua_newtable(l);
        super::lua::set_fn(l, -1, "__index", nonexistent_global);
        mark_readonly(l, -1);
        ffi::lua_setmetatable(l, -2);
        mark_readonly(l, -1);
        registry_set(l, LOAD_API);
        ffi::lua_pop(l, 1);
    });
    vm
}

/// Library metadata from the `#!<engine> name=<name>` line.
struct Metadata {
    engine: String,
    name: String,
    /// Offset of the code after the shebang (its newline kept for line numbers).
    code_start: usize,
}

fn extract_metadata(code: &[u8]) -> Result<Metadata, String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let Some(nl) = code.iter().position(|&b| b == b'\n') else {
        return Err("ERR Invalid library metadata".into());
    };
    let parts = match crate::protocol::parser::sds_split_args(&code[..nl]) {
        Some(p) if !p.is_empty() => p,
        _ => return Err("ERR Invalid library metadata".into()),
    };
    let engine = String::from_utf8_lossy(&parts[0][2..]).into_owned();
    let mut name: Option<String> = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(String::from_utf8_lossy(&part[5..]).into_owned());
            continue;
        }
        return Err(format!(
            "ERR Invalid metadata value given: {}",
            String::from_utf8_lossy(part)
        ));
    }
    let name = name.ok_or_else(|| "ERR Library name was not given".to_string())?;
    Ok(Metadata {
        engine,
        name,
        code_start: nl,
    })
}

/// The metadata checks FUNCTION LOAD performs before running any code.
fn check_metadata(code: &[u8]) -> Result<Metadata, String> {
    let md = extract_metadata(code)?;
    if !verify_name(&md.name) {
        return Err(format!("ERR {NAME_ERROR}"));
    }
    if !md.engine.eq_ignore_ascii_case("LUA") {
        return Err(format!("ERR Engine '{}' not found", md.engine));
    }
    Ok(md)
}

impl Functions {
    /// A fresh VM without libraries.
    pub(crate) fn new(limits: ScriptLimits) -> Self {
        Functions {
            vm: new_functions_vm(limits),
            limits,
            libraries: BTreeMap::new(),
            index: BTreeMap::new(),
        }
    }

    /// Bytes used by the functions VM.
    pub(crate) fn used_memory(&self) -> usize {
        self.vm.used_memory()
    }

    /// Publish library and function counts for FUNCTION STATS.
    pub(crate) fn publish_counts(&self, control: &ScriptControl) {
        control.set_counts(self.libraries.len(), self.index.len());
    }

    fn find(&self, name: &[u8]) -> Option<&RegisteredFunction> {
        let key = String::from_utf8_lossy(name).to_ascii_lowercase();
        let lib = self.libraries.get(self.index.get(&key)?)?;
        lib.functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(&key))
    }

    /// Flags of the named function.
    pub(crate) fn flags_of(&self, name: &[u8]) -> Option<ScriptFlags> {
        self.find(name).map(|f| f.flags)
    }

    /// FCALL / FCALL_RO (`args.len() >= 3`).
    pub(crate) fn fcall(
        &mut self,
        host: &mut dyn ScriptHost,
        args: &[Bytes],
        ctx: &ScriptContext,
        read_only: bool,
    ) -> Reply {
        let Some(f) = self.find(&args[1]) else {
            return Reply::err("ERR Function not found");
        };
        let Some(numkeys) = parse_i64(&args[2]) else {
            return Reply::err("ERR Bad number of keys provided");
        };
        let available = i64::try_from(args.len() - 3).unwrap_or(i64::MAX);
        if numkeys > available {
            return Reply::err("ERR Number of keys can't be greater than number of args");
        } else if numkeys < 0 {
            return Reply::err("ERR Number of keys can't be negative");
        }
        let split = 3 + numkeys as usize;
        let inv = Invocation {
            name: &f.name,
            command: args,
            flags: f.flags,
            read_only_cmd: read_only,
            is_function: true,
            keys: &args[3..split],
            argv: &args[split..],
        };
        exec::run(&self.vm, f.func_ref, &inv, host, ctx)
    }

    /// FUNCTION <subcommand> ... The subcommand and its arity were checked against the
    /// command table before this runs (`command::execute_spec`).
    pub(crate) fn function_command(&mut self, args: &[Bytes], ctx: &ScriptContext) -> Reply {
        let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
        let reply = match sub.as_str() {
            "help" => crate::command::help_reply("FUNCTION", &FUNCTION_HELP),
            "kill" => ctx.control.request_kill(true),
            "stats" => {
                self.publish_counts(&ctx.control);
                ctx.control.function_stats()
            }
            "load" => self.load_command(args),
            "list" => self.list(args),
            "delete" => {
                let name = String::from_utf8_lossy(&args[2]).into_owned();
                match self.libraries.remove(&name) {
                    Some(lib) => {
                        self.unlink(&lib);
                        Reply::ok()
                    }
                    None => Reply::err("ERR Library not found"),
                }
            }
            "flush" => {
                if args.len() > 3 {
                    return crate::command::subcommand_syntax_error(args);
                }
                if args.len() == 3
                    && !args[2].eq_ignore_ascii_case(b"sync")
                    && !args[2].eq_ignore_ascii_case(b"async")
                {
                    return Reply::err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
                }
                self.flush();
                Reply::ok()
            }
            "dump" => Reply::Bulk(Bytes::from(super::rdb::dump(
                self.libraries.values().map(|l| &l.code[..]),
            ))),
            "restore" => self.restore(args),
            _ => crate::command::unknown_subcommand(&args[0], &args[1]),
        };
        self.publish_counts(&ctx.control);
        reply
    }

    /// Every library in `FUNCTION DUMP`'s format (for a replicated snapshot).
    pub(crate) fn export(&self) -> Vec<u8> {
        super::rdb::dump(self.libraries.values().map(|l| &l.code[..]))
    }

    /// Replace every library with those of `export`'s output (`FUNCTION RESTORE .. FLUSH`).
    pub(crate) fn import(&mut self, dump: &[u8]) -> Result<(), String> {
        let args = [
            Bytes::from_static(b"function"),
            Bytes::from_static(b"restore"),
            Bytes::copy_from_slice(dump),
            Bytes::from_static(b"flush"),
        ];
        match self.restore(&args) {
            Reply::Error(e) => Err(e),
            _ => Ok(()),
        }
    }

    fn flush(&mut self) {
        self.libraries.clear();
        self.index.clear();
        self.vm = new_functions_vm(self.limits);
    }

    /// Release a removed library's callbacks and index entries.
    fn unlink(&mut self, lib: &Library) {
        for f in &lib.functions {
            self.index.remove(&f.name.to_ascii_lowercase());
            self.release(f.func_ref);
        }
    }

    fn release(&self, func_ref: c_int) {
        // SAFETY: unref of our own registry reference.
        self.vm
            .relaxed(|l| unsafe { ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, func_ref) });
    }

    fn load_command(&mut self, args: &[Bytes]) -> Reply {
        let mut replace = false;
        let mut pos = 2;
        while pos < args.len() - 1 {
            let arg = &args[pos];
            pos += 1;
            if arg.eq_ignore_ascii_case(b"replace") {
                replace = true;
                continue;
            }
            return Reply::err(format!(
                "ERR Unknown option given: {}",
                crate::command::arg_text(arg)
            ));
        }
        if pos >= args.len() {
            return Reply::err("ERR Function code is missing");
        }
        let code = &args[pos];
        let md = match check_metadata(code) {
            Ok(md) => md,
            Err(e) => return Reply::Error(e),
        };
        if !replace && self.libraries.contains_key(&md.name) {
            return Reply::Error(format!("ERR Library '{}' already exists", md.name));
        }
        match self.compile_library(code, md, Some(LOAD_BUDGET)) {
            Ok((name, lib)) => match self.link(vec![(name.clone(), lib)], replace, true) {
                Ok(()) => Reply::bulk(name),
                Err(e) => Reply::Error(e),
            },
            Err(e) => Reply::Error(e),
        }
    }

    /// Run library code in the load environment and collect its functions.
    fn compile_library(
        &mut self,
        code: &Bytes,
        md: Metadata,
        budget: Option<u64>,
    ) -> Result<(String, Library), String> {
        let mut load = LoadState {
            functions: Vec::new(),
            budget: budget.unwrap_or(u64::MAX),
        };
        let result = self.run_library_code(&code[md.code_start..], &mut load);
        let functions = std::mem::take(&mut load.functions);
        if let Err(e) = result {
            functions.iter().for_each(|f| self.release(f.func_ref));
            return Err(e);
        }
        if functions.is_empty() {
            return Err("ERR No functions registered".into());
        }
        Ok((
            md.name,
            Library {
                code: code.clone(),
                functions,
            },
        ))
    }

    fn run_library_code(&mut self, code: &[u8], load: &mut LoadState) -> Result<(), String> {
        let vm = &self.vm;
        vm.collect_if_crowded();
        vm.reset_ids(super::lua::LIBRARY_IDS);
        // SAFETY: engine-side stack work on our own state, relaxed; the chunk runs
        // in a protected call with the load state installed and is popped.
        let compiled = vm.relaxed(|l| unsafe {
            switch_env(l, LOAD_API);
            if load_text(l, code, c"@user_function") != 0 {
                let msg = error_text(l);
                ffi::lua_pop(l, 1);
                switch_env(l, STORAGE);
                return Err(format!("ERR Error compiling function: {msg}"));
            }
            Ok(())
        });
        compiled?;
        // SAFETY: the chunk is on top; the hook only reads the installed load state.
        let status = vm.with_load(load, || unsafe {
            install_hook(vm.l);
            let status = ffi::lua_pcall(vm.l, 0, 0, 0);
            remove_hook(vm.l);
            status
        });
        // SAFETY: the error value (if any) is on top.
        let result = vm.relaxed(|l| unsafe {
            let r = if status == 0 {
                Ok(())
            } else {
                let msg = if ffi::lua_type(l, -1) == ffi::LUA_TTABLE {
                    raw_get_str(l, -1, "err");
                    let m = string_or_number(l, -1).unwrap_or_default();
                    ffi::lua_pop(l, 1);
                    String::from_utf8_lossy(&m).into_owned()
                } else {
                    format!("ERR {}", error_text(l))
                };
                ffi::lua_pop(l, 1);
                Err(super::convert::map_crlf(
                    format!("ERR Error registering functions: {msg}").as_bytes(),
                ))
            };
            switch_env(l, STORAGE);
            r
        });
        if status == ffi::LUA_ERRMEM || vm.over_limit() {
            vm.full_gc();
        }
        result
    }

    /// Add libraries; with `replace`, libraries of the same name are swapped out.
    /// `quoted` selects FUNCTION LOAD's "Library 'x' already exists" wording over
    /// RESTORE's "Library x already exists". On error nothing changes and the new
    /// libraries' callbacks are released.
    fn link(
        &mut self,
        new: Vec<(String, Library)>,
        replace: bool,
        quoted: bool,
    ) -> Result<(), String> {
        let check = self.check_link(&new, replace, quoted);
        if let Err(e) = check {
            for (_, lib) in &new {
                lib.functions.iter().for_each(|f| self.release(f.func_ref));
            }
            return Err(e);
        }
        for (name, lib) in new {
            if let Some(old) = self.libraries.remove(&name) {
                self.unlink(&old);
            }
            for f in &lib.functions {
                self.index.insert(f.name.to_ascii_lowercase(), name.clone());
            }
            self.libraries.insert(name, lib);
        }
        Ok(())
    }

    fn check_link(
        &self,
        new: &[(String, Library)],
        replace: bool,
        quoted: bool,
    ) -> Result<(), String> {
        let mut seen_libs: Vec<&str> = Vec::new();
        let mut seen_fns: Vec<String> = Vec::new();
        for (name, lib) in new {
            if seen_libs.contains(&name.as_str()) {
                return Err(format!("ERR Library '{name}' already exists"));
            }
            seen_libs.push(name);
            if self.libraries.contains_key(name) && !replace {
                return Err(if quoted {
                    format!("ERR Library '{name}' already exists")
                } else {
                    format!("ERR Library {name} already exists")
                });
            }
            for f in &lib.functions {
                let key = f.name.to_ascii_lowercase();
                let taken = match self.index.get(&key) {
                    Some(owner) => !(replace && new.iter().any(|(n, _)| n == owner)),
                    None => false,
                };
                if taken || seen_fns.contains(&key) {
                    return Err(format!("ERR Function {} already exists", f.name));
                }
                seen_fns.push(key);
            }
        }
        Ok(())
    }

    fn list(&self, args: &[Bytes]) -> Reply {
        let mut with_code = false;
        let mut pattern: Option<&[u8]> = None;
        let mut i = 2;
        while i < args.len() {
            let arg = &args[i];
            if !with_code && arg.eq_ignore_ascii_case(b"withcode") {
                with_code = true;
            } else if pattern.is_none() && arg.eq_ignore_ascii_case(b"libraryname") {
                if i >= args.len() - 1 {
                    return Reply::err("ERR library name argument was not given");
                }
                i += 1;
                pattern = Some(&args[i]);
            } else {
                return Reply::err(format!(
                    "ERR Unknown argument {}",
                    String::from_utf8_lossy(arg)
                ));
            }
            i += 1;
        }
        let libs = self
            .libraries
            .iter()
            .filter(|(name, _)| pattern.is_none_or(|p| glob_match(p, name.as_bytes(), true)))
            .map(|(name, lib)| {
                let mut functions: Vec<&RegisteredFunction> = lib.functions.iter().collect();
                functions.sort_by(|a, b| a.name.cmp(&b.name));
                let functions = functions
                    .into_iter()
                    .map(|f| {
                        Reply::Map(vec![
                            (Reply::bulk("name"), Reply::bulk(f.name.clone())),
                            (
                                Reply::bulk("description"),
                                f.description.clone().map_or(Reply::Nil, Reply::bulk),
                            ),
                            (
                                Reply::bulk("flags"),
                                Reply::Set(
                                    f.flags
                                        .names()
                                        .into_iter()
                                        .map(|n| Reply::Status(n.into()))
                                        .collect(),
                                ),
                            ),
                        ])
                    })
                    .collect();
                let mut fields = vec![
                    (Reply::bulk("library_name"), Reply::bulk(name.clone())),
                    (Reply::bulk("engine"), Reply::bulk("LUA")),
                    (Reply::bulk("functions"), Reply::Array(functions)),
                ];
                if with_code {
                    fields.push((Reply::bulk("library_code"), Reply::Bulk(lib.code.clone())));
                }
                Reply::Map(fields)
            })
            .collect();
        Reply::Array(libs)
    }

    fn restore(&mut self, args: &[Bytes]) -> Reply {
        if args.len() > 4 {
            return crate::command::subcommand_syntax_error(args);
        }
        #[derive(PartialEq)]
        enum Policy {
            Flush,
            Append,
            Replace,
        }
        let policy = match args.get(3) {
            None => Policy::Append,
            Some(p) if p.eq_ignore_ascii_case(b"append") => Policy::Append,
            Some(p) if p.eq_ignore_ascii_case(b"replace") => Policy::Replace,
            Some(p) if p.eq_ignore_ascii_case(b"flush") => Policy::Flush,
            Some(_) => return Reply::err(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ),
        };
        let codes = match super::rdb::parse(&args[2]) {
            Ok(c) => c,
            Err(e) => return Reply::err(e),
        };
        let mut staged: Vec<(String, Library)> = Vec::new();
        for code in codes {
            let code = Bytes::from(code);
            let compiled = check_metadata(&code).and_then(|md| {
                if staged.iter().any(|(n, _)| *n == md.name) {
                    return Err(format!("ERR Library '{}' already exists", md.name));
                }
                self.compile_library(&code, md, None)
            });
            match compiled {
                Ok(lib) => staged.push(lib),
                Err(e) => {
                    for (_, lib) in &staged {
                        lib.functions.iter().for_each(|f| self.release(f.func_ref));
                    }
                    return Reply::Error(e);
                }
            }
        }
        if policy == Policy::Flush {
            let old: Vec<Library> = std::mem::take(&mut self.libraries).into_values().collect();
            self.index.clear();
            for lib in &old {
                lib.functions.iter().for_each(|f| self.release(f.func_ref));
            }
        }
        match self.link(staged, policy == Policy::Replace, false) {
            Ok(()) => Reply::ok(),
            Err(e) => Reply::Error(e),
        }
    }
}

/// Point the environment's `__index` at the registry table `key`.
unsafe fn switch_env(l: *mut ffi::lua_State, key: &str) {
    registry_get(l, ENV_META);
    registry_get(l, key);
    raw_set_str(l, -2, "__index");
    ffi::lua_pop(l, 1);
}
