//! `EVAL`, `EVALSHA`, their `_RO` variants and `SCRIPT ...`: the script cache
//! (body compiled once, keyed by its lower-case SHA1), shebang parsing, and
//! Redis's argument checks and error texts.

use std::collections::HashMap;
use std::ffi::c_int;

use bytes::Bytes;

use super::convert::error_reply_text;
use super::exec::{self, Invocation};
use super::lua::{error_text, ffi, load_text, Vm, VmKind};
use super::{
    ascii_lowercase, parse_i64, Reply, ScriptContext, ScriptFlags, ScriptHost, ScriptLimits,
    NOSCRIPT_ERROR,
};

struct EvalScript {
    flags: ScriptFlags,
    func_ref: c_int,
    /// Kept so a replica's snapshot can carry the cache (see `export`).
    body: Bytes,
}

/// The EVAL VM and its script cache.
pub(crate) struct EvalScripts {
    vm: Vm,
    /// By lower-case hex SHA1. Hashed with aHash: std's SipHash of the 40-byte key cost
    /// about 260 instructions per EVALSHA under callgrind. Iteration order never shows
    /// (`export` sorts).
    scripts: HashMap<String, EvalScript, ahash::RandomState>,
}

const SCRIPT_HELP: [&str; 14] = [
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
];

/// The lower-case hex SHA1 of a script body.
pub(crate) fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

impl EvalScripts {
    /// A fresh VM with an empty cache.
    pub(crate) fn new(limits: ScriptLimits) -> Self {
        EvalScripts {
            vm: exec::new_vm(VmKind::Eval, limits),
            scripts: HashMap::default(),
        }
    }

    /// Number of cached scripts.
    pub(crate) fn len(&self) -> usize {
        self.scripts.len()
    }

    /// The cached script bodies, ordered by SHA1 (for a replicated snapshot).
    pub(crate) fn export(&self) -> Vec<Bytes> {
        let mut all: Vec<(&String, &EvalScript)> = self.scripts.iter().collect();
        all.sort_by(|a, b| a.0.cmp(b.0));
        all.into_iter().map(|(_, s)| s.body.clone()).collect()
    }

    /// Compile and cache each body (restoring a snapshot into a fresh cache).
    pub(crate) fn import(&mut self, bodies: &[Bytes]) -> Result<(), String> {
        for body in bodies {
            self.create(body)
                .map_err(|e| format!("restoring script cache: {e:?}"))?;
        }
        Ok(())
    }

    /// Bytes used by the EVAL VM.
    pub(crate) fn used_memory(&self) -> usize {
        self.vm.used_memory()
    }

    /// Flags of the script with this body (cached or not), None if its shebang is invalid.
    pub(crate) fn flags_of_body(&self, body: &[u8]) -> Option<ScriptFlags> {
        match self.scripts.get(&sha1_hex(body)) {
            Some(s) => Some(s.flags),
            None => parse_shebang(body).ok().map(|(flags, _)| flags),
        }
    }

    /// Flags of the cached script with this SHA1.
    pub(crate) fn flags_of_sha(&self, sha: &[u8]) -> Option<ScriptFlags> {
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        self.scripts.get(&sha).map(|s| s.flags)
    }

    /// `luaCreateFunction`: compile and cache `body`, returning its SHA1.
    fn create(&mut self, body: &[u8]) -> Result<String, Reply> {
        let sha = sha1_hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let (flags, code_start) = parse_shebang(body).map_err(Reply::err)?;
        let code = &body[code_start..];
        // SAFETY: compiling on our own state, relaxed; the chunk or error is popped.
        let compiled = self.vm.relaxed(|l| unsafe {
            if load_text(l, code, c"@user_script") != 0 {
                let msg = error_text(l);
                ffi::lua_pop(l, 1);
                Err(msg)
            } else {
                Ok(ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX))
            }
        });
        match compiled {
            Ok(func_ref) => {
                self.scripts.insert(
                    sha.clone(),
                    EvalScript {
                        flags,
                        func_ref,
                        body: Bytes::copy_from_slice(body),
                    },
                );
                Ok(sha)
            }
            Err(msg) => {
                let text = format!("ERR Error compiling script (new function): {msg}\n");
                Err(Reply::Error(error_reply_text(text.as_bytes())))
            }
        }
    }

    /// EVAL / EVALSHA / EVAL_RO / EVALSHA_RO (`args.len() >= 3`).
    pub(crate) fn eval(
        &mut self,
        host: &mut dyn ScriptHost,
        args: &[Bytes],
        ctx: &ScriptContext,
        by_sha: bool,
        read_only: bool,
    ) -> Reply {
        if by_sha && args[1].len() != 40 {
            return Reply::err(NOSCRIPT_ERROR);
        }
        let numkeys = match parse_i64(&args[2]) {
            Some(n) => n,
            None => return Reply::err("ERR value is not an integer or out of range"),
        };
        let available = i64::try_from(args.len() - 3).unwrap_or(i64::MAX);
        if numkeys > available {
            return Reply::err("ERR Number of keys can't be greater than number of args");
        } else if numkeys < 0 {
            return Reply::err("ERR Number of keys can't be negative");
        }
        let mut buf = [0u8; 40];
        let found = if by_sha {
            // SHA1s are ASCII hex: anything else is simply not cached.
            ascii_lowercase(&args[1], &mut buf).and_then(|sha| self.scripts.get_key_value(sha))
        } else {
            match self.create(&args[1]) {
                Ok(sha) => self.scripts.get_key_value(&sha),
                Err(reply) => return reply,
            }
        };
        let Some((sha, script)) = found else {
            return Reply::err(NOSCRIPT_ERROR);
        };
        let split = 3 + numkeys as usize;
        let inv = Invocation {
            name: sha,
            command: args,
            flags: script.flags,
            read_only_cmd: read_only,
            is_function: false,
            keys: &args[3..split],
            argv: &args[split..],
        };
        exec::run(&self.vm, script.func_ref, &inv, host, ctx)
    }

    /// SCRIPT HELP|EXISTS|FLUSH|LOAD|KILL|DEBUG. The subcommand and its arity were checked
    /// against the command table before this runs (`command::execute_spec`).
    pub(crate) fn script_command(
        &mut self,
        args: &[Bytes],
        ctx: &ScriptContext,
        limits: ScriptLimits,
    ) -> Reply {
        let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
        match sub.as_str() {
            "help" => crate::command::help_reply("SCRIPT", &SCRIPT_HELP),
            "kill" => ctx.control.request_kill(false),
            "load" => match self.create(&args[2]) {
                Ok(sha) => Reply::bulk(sha),
                Err(reply) => reply,
            },
            "exists" => Reply::Array(
                args[2..]
                    .iter()
                    .map(|sha| {
                        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                        Reply::Integer(i64::from(self.scripts.contains_key(&sha)))
                    })
                    .collect(),
            ),
            "flush" => {
                let mode_ok = args.len() == 2
                    || (args.len() == 3
                        && (args[2].eq_ignore_ascii_case(b"sync")
                            || args[2].eq_ignore_ascii_case(b"async")));
                if !mode_ok {
                    return Reply::err("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
                }
                self.scripts.clear();
                self.vm = exec::new_vm(VmKind::Eval, limits);
                Reply::ok()
            }
            "debug" => {
                if args[2].eq_ignore_ascii_case(b"no") {
                    Reply::ok()
                } else if args[2].eq_ignore_ascii_case(b"yes")
                    || args[2].eq_ignore_ascii_case(b"sync")
                {
                    Reply::err(
                        "ERR SCRIPT DEBUG (the Lua debugger) is not supported by this server",
                    )
                } else {
                    Reply::err("ERR Use SCRIPT DEBUG YES/SYNC/NO")
                }
            }
            _ => crate::command::unknown_subcommand(&args[0], &args[1]),
        }
    }
}

/// Parse the `#!lua flags=...` shebang: the flags and where the code starts (the
/// newline is kept so line numbers stay right). Without a shebang the script runs in
/// eval compatibility mode.
pub(crate) fn parse_shebang(body: &[u8]) -> Result<(ScriptFlags, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((
            ScriptFlags {
                eval_compat: true,
                ..ScriptFlags::default()
            },
            0,
        ));
    }
    let Some(nl) = body.iter().position(|&b| b == b'\n') else {
        return Err("ERR Invalid script shebang".into());
    };
    let parts = match crate::protocol::parser::sds_split_args(&body[..nl]) {
        Some(p) if !p.is_empty() => p,
        _ => return Err("ERR Invalid engine in script shebang".into()),
    };
    if parts[0] != b"#!lua" {
        return Err(format!(
            "ERR Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(&parts[0])
        ));
    }
    let mut flags = ScriptFlags::default();
    for part in &parts[1..] {
        let Some(list) = part.strip_prefix(b"flags=") else {
            return Err(format!(
                "ERR Unknown lua shebang option: {}",
                String::from_utf8_lossy(part)
            ));
        };
        if list.is_empty() {
            continue;
        }
        for flag in list.split(|&b| b == b',') {
            let name = String::from_utf8_lossy(flag);
            if !flags.set(&name, false) {
                return Err(format!("ERR Unexpected flag in script shebang: {name}"));
            }
        }
    }
    Ok((flags, nl))
}
