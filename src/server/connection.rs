//! One client connection: reads requests, keeps the client's state (database, protocol
//! version, authentication, MULTI queue, WATCHed keys) and writes replies.
//!
//! Everything that is already buffered is parsed and answered in one write (pipelining).
//! Consecutive keyspace commands are handed to the engine as one batch, so a pipeline of
//! N commands costs one lock of the state, not N.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{info, ClientHandle, ClientInfo, Shared};
use crate::command::args::{db_index, int, is};
use crate::command::{self, flags, CommandSpec};
use crate::engine::{Batch, Op, WatchGuard};
use crate::protocol::parser::{parse_request, Limits, Request};
use crate::protocol::Reply;
use crate::store::WatchFlag;

/// What to do after handling a request.
#[derive(PartialEq)]
enum Flow {
    Continue,
    Close,
}

/// Per-connection state.
struct Client {
    shared: Arc<Shared>,
    handle: Arc<ClientHandle>,
    db: usize,
    resp: u8,
    authenticated: bool,
    multi: Option<Vec<Vec<Bytes>>>,
    multi_dirty: bool,
    watch: Option<WatchState>,
    pending: Vec<Op>,
    out: BytesMut,
    /// Name of the last known command received (CLIENT LIST `cmd`).
    last_cmd: &'static str,
}

struct WatchState {
    flag: WatchFlag,
    keys: Vec<(usize, Bytes)>,
    existed: Vec<(usize, Bytes)>,
    /// Cluster mode: content digests at WATCH time (see `engine::WatchGuard::digests`).
    digests: Vec<(usize, Bytes, u64)>,
}

/// Tell a client over the connection cap why it is refused, then close.
pub async fn refuse(mut socket: TcpStream) {
    let _ = socket
        .write_all(b"-ERR max number of clients reached\r\n")
        .await;
}

/// Serve one connection until it closes.
pub async fn serve(shared: Arc<Shared>, mut socket: TcpStream, peer: SocketAddr) {
    let _ = socket.set_nodelay(true);
    let laddr = socket.local_addr().unwrap_or(shared.addr);
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let handle = Arc::new(ClientHandle {
        info: Mutex::new(ClientInfo {
            id,
            addr: peer,
            laddr,
            name: String::new(),
            db: 0,
            resp: 2,
            created: Instant::now(),
            last_cmd: "NULL",
            lib_name: String::new(),
            lib_ver: String::new(),
            in_multi: false,
        }),
        kill: Default::default(),
        killed: Default::default(),
    });
    shared.clients.lock().insert(id, handle.clone());
    let authenticated = shared.config.read().requirepass.is_none();
    let mut client = Client {
        shared: shared.clone(),
        handle: handle.clone(),
        db: 0,
        resp: 2,
        authenticated,
        multi: None,
        multi_dirty: false,
        watch: None,
        pending: Vec::new(),
        out: BytesMut::with_capacity(16 * 1024),
        last_cmd: "NULL",
    };
    client.run(&mut socket).await;
    client.unwatch().await;
    shared.clients.lock().remove(&id);
}

impl Client {
    async fn run(&mut self, socket: &mut TcpStream) {
        let mut input = BytesMut::with_capacity(16 * 1024);
        let mut shutdown = self.shared.shutdown.subscribe();
        loop {
            if self.handle.killed.load(Ordering::Relaxed) || *shutdown.borrow() {
                return;
            }
            let read = tokio::select! {
                r = socket.read_buf(&mut input) => r,
                _ = self.handle.kill.notified() => return,
                _ = shutdown.changed() => return,
            };
            match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let flow = self.process_input(&mut input).await;
            if !self.out.is_empty() {
                if socket.write_all(&self.out).await.is_err() {
                    return;
                }
                self.out.clear();
                if self.out.capacity() > 1024 * 1024 {
                    self.out = BytesMut::with_capacity(16 * 1024);
                }
            }
            if flow == Flow::Close {
                return;
            }
            let limit = self.shared.config.read().client_query_buffer_limit;
            if input.len() > limit {
                tracing::warn!(
                    id = self.id(),
                    "closing client that reached max query buffer length"
                );
                return;
            }
            if input.is_empty() && input.capacity() > 1024 * 1024 {
                input = BytesMut::with_capacity(16 * 1024);
            }
        }
    }

    fn id(&self) -> u64 {
        self.handle.info.lock().id
    }

    fn limits(&self) -> Limits {
        if !self.authenticated {
            return Limits::UNAUTHENTICATED;
        }
        let c = self.shared.config.read();
        Limits {
            max_bulk: c.proto_max_bulk_len,
            max_multibulk: 1024 * 1024,
            max_inline: 64 * 1024,
        }
    }

    /// Parse and answer every complete request in `input`.
    async fn process_input(&mut self, input: &mut BytesMut) -> Flow {
        let mut limits = self.limits();
        let mut count = 0;
        // The command is looked up once, here; a command that only borrows its arguments
        // gets them as a frame, unless a cluster would turn the frame into an argument list
        // for the Raft log anyway.
        let standalone = self.shared.engine.cluster().is_none();
        let classify = |name: &[u8]| {
            let spec = command::lookup(name);
            (spec, standalone && spec.is_some_and(|s| s.fast.is_some()))
        };
        let flow = loop {
            match parse_request(input, &limits, classify) {
                Ok(Some((request, spec))) => {
                    if request.is_empty() {
                        continue;
                    }
                    count += 1;
                    let was_authenticated = self.authenticated;
                    let flow = self.handle_request(request, spec).await;
                    if self.authenticated != was_authenticated {
                        limits = self.limits();
                    }
                    if flow == Flow::Close {
                        break Flow::Close;
                    }
                }
                Ok(None) => break Flow::Continue,
                Err(e) => {
                    self.flush_pending().await;
                    Reply::err(e.to_string()).encode(self.resp, &mut self.out);
                    break Flow::Close;
                }
            }
        };
        self.flush_pending().await;
        if count > 0 {
            // CLIENT LIST's `cmd`: the last command of what was read, set once per read.
            self.handle.info.lock().last_cmd = self.last_cmd;
        }
        flow
    }

    fn push(&mut self, r: Reply) {
        r.encode(self.resp, &mut self.out);
    }

    /// Run the queued keyspace commands and append their replies.
    async fn flush_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        // The next batch is likely as long as this one: size it once (an operation is
        // about a hundred bytes, so growing by doubling copied more than it allocated).
        let capacity = self.pending.len();
        let ops = std::mem::replace(&mut self.pending, Vec::with_capacity(capacity));
        let result = self
            .shared
            .engine
            .execute(Batch {
                db: self.db,
                resp: self.resp,
                ops,
                watch: None,
                transaction: false,
            })
            .await;
        for r in result.replies.unwrap_or_default() {
            self.push(r);
        }
    }

    /// Run one request, whose command (`spec`) the parser looked up.
    async fn handle_request(
        &mut self,
        request: Request,
        spec: Option<&'static CommandSpec>,
    ) -> Flow {
        self.shared
            .stats
            .total_commands
            .fetch_add(1, Ordering::Relaxed);
        if let Some(spec) = spec {
            self.last_cmd = spec.name;
        }
        if !self.authenticated && !spec.is_some_and(|s| s.has(flags::NO_AUTH)) {
            self.reject(Reply::err("NOAUTH Authentication required."))
                .await;
            return Flow::Continue;
        }
        let Some(spec) = spec else {
            self.reject(command::unknown_command(&request.into_args()))
                .await;
            return Flow::Continue;
        };
        if !command::arity_ok(spec, request.len()) {
            self.reject(command::arity_error(spec.name)).await;
            return Flow::Continue;
        }
        // A command that only borrows its arguments runs on the frame as parsed (outside
        // MULTI, which keeps its commands until EXEC).
        let request = match request {
            Request::Frame(frame) if spec.fast.is_some() && self.multi.is_none() => {
                self.pending.push(Op::Frame(frame, spec));
                return Flow::Continue;
            }
            request => request,
        };
        let args = request.into_args();
        if self.multi.is_some()
            && !matches!(
                spec.name,
                "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
            )
        {
            if spec.has(flags::NO_MULTI) {
                self.reject(Reply::err("ERR Command not allowed inside a transaction"))
                    .await;
                return Flow::Continue;
            }
            // As in Redis, a queue may not grow while memory is over `maxmemory`.
            if self.shared.engine.out_of_memory().await {
                self.reject(Reply::err(crate::engine::memory::OOM_ERROR))
                    .await;
                return Flow::Continue;
            }
            self.flush_pending().await;
            if let Some(q) = self.multi.as_mut() {
                q.push(args);
            }
            self.push(Reply::Status("QUEUED".into()));
            return Flow::Continue;
        }
        if let Some(reply) = self.script_control_command(spec, &args) {
            self.flush_pending().await;
            self.push(reply);
            return Flow::Continue;
        }
        if spec.handler.is_some() && !spec.has(flags::CONNECTION) {
            self.pending.push(Op::Command(args, Some(spec)));
            return Flow::Continue;
        }
        self.flush_pending().await;
        self.connection_command(spec, &args).await
    }

    /// SCRIPT KILL, FUNCTION KILL and FUNCTION STATS are answered here, without
    /// waiting for the state a running script holds.
    fn script_control_command(&self, spec: &CommandSpec, a: &[Bytes]) -> Option<Reply> {
        let control = self.shared.engine.script_control();
        let kill = matches!((spec.name, a.get(1)), ("script" | "function", Some(sub)) if is(sub, "kill") && a.len() == 2);
        if kill && self.shared.engine.cluster().is_some() {
            // Killing a script on one node would leave the replicas that finished it diverged.
            return Some(Reply::err(
                "ERR SCRIPT KILL and FUNCTION KILL are not supported in cluster mode (a script runs on every replica)",
            ));
        }
        match (spec.name, a.get(1)) {
            ("script", Some(sub)) if is(sub, "kill") && a.len() == 2 => {
                Some(control.request_kill(false))
            }
            ("function", Some(sub)) if is(sub, "kill") && a.len() == 2 => {
                Some(control.request_kill(true))
            }
            ("function", Some(sub)) if is(sub, "stats") && a.len() == 2 => {
                Some(control.function_stats())
            }
            _ => None,
        }
    }

    /// Reply with an error; inside MULTI the error also dooms the transaction.
    async fn reject(&mut self, r: Reply) {
        self.flush_pending().await;
        if self.multi.is_some() {
            self.multi_dirty = true;
        }
        self.push(r);
    }

    async fn connection_command(&mut self, spec: &'static CommandSpec, a: &[Bytes]) -> Flow {
        let reply = match spec.name {
            "select" => self.select(&a[1]),
            "auth" => self.auth(a),
            "hello" => self.hello(a),
            "quit" => {
                self.push(Reply::ok());
                return Flow::Close;
            }
            "reset" => self.reset().await,
            "multi" => self.multi(),
            "exec" => self.exec().await,
            "discard" => self.discard().await,
            "watch" => self.watch_keys(&a[1..]).await,
            "unwatch" => {
                self.unwatch().await;
                Reply::ok()
            }
            "client" => self.client(a),
            "info" => Reply::Verbatim(
                "txt",
                Bytes::from(info::render(&self.shared, &a[1..]).await),
            ),
            "config" => info::config(&self.shared, a),
            "command" => info::command(a),
            "debug" => self.debug(a).await,
            "memory" => info::memory(&self.shared, self.db, a).await,
            "lastsave" => Reply::Integer(self.shared.last_save.load(Ordering::Relaxed) as i64),
            "save" | "bgsave" => self.save(spec.name, a).await,
            "cluster" => super::cluster::cluster_command(&self.shared, a),
            "raft.status" | "raft.addnode" | "raft.removenode" | "raft.transfer"
            | "raft.snapshot" | "raft.partition" | "raft.heal" => {
                super::cluster::raft_command(&self.shared, spec.name, a).await
            }
            "shutdown" => match shutdown_options(a) {
                Err(e) => e,
                Ok(Shutdown::Abort) => Reply::err("ERR No shutdown in progress."),
                Ok(Shutdown::Save) if self.shared.engine.cluster().is_none() => {
                    Reply::err(NOTHING_TO_SAVE)
                }
                Ok(_) => {
                    self.shared.request_shutdown();
                    return Flow::Close;
                }
            },
            _ => command::unknown_command(a),
        };
        self.push(reply);
        Flow::Continue
    }

    /// SAVE and BGSAVE. A standalone node keeps its data in memory only: there is nothing
    /// to save to, and it says so. A cluster node has every acknowledged write in its Raft
    /// log on disk already; SAVE and BGSAVE also have it write a snapshot.
    async fn save(&mut self, name: &str, a: &[Bytes]) -> Reply {
        if a.len() > 2 || a.get(1).is_some_and(|arg| !is(arg, "schedule")) {
            return Reply::err("ERR syntax error");
        }
        let Some(node) = self.shared.engine.cluster() else {
            return Reply::err(NOTHING_TO_SAVE);
        };
        if let Err(e) = node.trigger_snapshot().await {
            return crate::engine::cluster_error_reply(&e);
        }
        self.shared
            .last_save
            .store(super::unix_secs(), Ordering::Relaxed);
        if name == "save" {
            Reply::ok()
        } else {
            Reply::Status("Background saving started".into())
        }
    }

    fn sync_info(&self) {
        let mut info = self.handle.info.lock();
        info.db = self.db;
        info.resp = self.resp;
        info.in_multi = self.multi.is_some();
    }

    fn select(&mut self, arg: &[u8]) -> Reply {
        match db_index(arg) {
            Ok(n) => {
                self.db = n;
                self.sync_info();
                Reply::ok()
            }
            Err(e) => e,
        }
    }

    fn check_password(&mut self, user: &[u8], pass: &[u8]) -> Reply {
        let expected = self.shared.config.read().requirepass.clone();
        match expected {
            None if user == b"default" => {
                self.authenticated = true;
                Reply::ok()
            }
            Some(p) if user == b"default" && constant_time_eq(p.as_bytes(), pass) => {
                self.authenticated = true;
                Reply::ok()
            }
            _ => Reply::err("WRONGPASS invalid username-password pair or user is disabled."),
        }
    }

    fn auth(&mut self, a: &[Bytes]) -> Reply {
        if a.len() > 3 {
            return Reply::err("ERR syntax error");
        }
        if a.len() == 2 && self.shared.config.read().requirepass.is_none() {
            return Reply::err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
        }
        let (user, pass) = if a.len() == 3 {
            (&a[1][..], &a[2][..])
        } else {
            (&b"default"[..], &a[1][..])
        };
        self.check_password(user, pass)
    }

    fn hello(&mut self, a: &[Bytes]) -> Reply {
        let mut proto = self.resp;
        let mut i = 1;
        if let Some(v) = a.get(1) {
            match int(v) {
                Ok(2) => proto = 2,
                Ok(3) => proto = 3,
                Ok(_) => return Reply::err("NOPROTO unsupported protocol version"),
                Err(_) => {
                    return Reply::err("ERR Protocol version is not an integer or out of range")
                }
            }
            i = 2;
        }
        let mut name = None;
        while i < a.len() {
            if is(&a[i], "auth") && i + 2 < a.len() {
                let r = self.check_password(&a[i + 1].clone(), &a[i + 2].clone());
                if r.is_error() {
                    return r;
                }
                i += 3;
            } else if is(&a[i], "setname") && i + 1 < a.len() {
                name = Some(a[i + 1].clone());
                i += 2;
            } else {
                return Reply::err(format!(
                    "ERR Syntax error in HELLO option '{}'",
                    command::arg_text(&a[i])
                ));
            }
        }
        if !self.authenticated {
            return Reply::err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
        }
        if let Some(n) = name {
            if let Err(e) = self.set_name(&n) {
                return e;
            }
        }
        self.resp = proto;
        self.sync_info();
        let id = self.id();
        Reply::Map(vec![
            (Reply::bulk("server"), Reply::bulk("redis")),
            (Reply::bulk("version"), Reply::bulk(info::REDIS_VERSION)),
            (Reply::bulk("proto"), Reply::Integer(proto as i64)),
            (Reply::bulk("id"), Reply::Integer(id as i64)),
            (
                Reply::bulk("mode"),
                Reply::bulk(self.shared.engine.mode_name()),
            ),
            (Reply::bulk("role"), Reply::bulk("master")),
            (Reply::bulk("modules"), Reply::Array(vec![])),
        ])
    }

    fn set_name(&mut self, name: &[u8]) -> Result<(), Reply> {
        if name.iter().any(|&c| c <= b' ' || c > b'~') {
            return Err(Reply::err(
                "ERR Client names cannot contain spaces, newlines or special characters.",
            ));
        }
        self.handle.info.lock().name = String::from_utf8_lossy(name).into_owned();
        Ok(())
    }

    async fn reset(&mut self) -> Reply {
        self.multi = None;
        self.multi_dirty = false;
        self.unwatch().await;
        self.db = 0;
        self.resp = 2;
        self.handle.info.lock().name.clear();
        self.authenticated = self.shared.config.read().requirepass.is_none();
        self.sync_info();
        Reply::Status("RESET".into())
    }

    fn multi(&mut self) -> Reply {
        if self.multi.is_some() {
            return Reply::err("ERR MULTI calls can not be nested");
        }
        self.multi = Some(Vec::new());
        self.multi_dirty = false;
        self.sync_info();
        Reply::ok()
    }

    async fn discard(&mut self) -> Reply {
        if self.multi.take().is_none() {
            return Reply::err("ERR DISCARD without MULTI");
        }
        self.multi_dirty = false;
        self.unwatch().await;
        self.sync_info();
        Reply::ok()
    }

    async fn exec(&mut self) -> Reply {
        let Some(queued) = self.multi.take() else {
            return Reply::err("ERR EXEC without MULTI");
        };
        self.sync_info();
        if std::mem::take(&mut self.multi_dirty) {
            self.unwatch().await;
            return Reply::err("EXECABORT Transaction discarded because of previous errors.");
        }
        // Keyspace commands and SELECT run in the engine as one atomic batch; the few
        // connection commands allowed in a transaction are answered around it.
        let mut ops = Vec::with_capacity(queued.len());
        let mut slots: Vec<Option<Reply>> = Vec::with_capacity(queued.len());
        for args in queued {
            let spec = command::lookup(&args[0]).expect("queued commands were looked up");
            if spec.name == "select" {
                match db_index(&args[1]) {
                    Ok(n) => {
                        ops.push(Op::Select(n));
                        slots.push(Some(Reply::ok()));
                    }
                    Err(e) => slots.push(Some(e)),
                }
            } else if spec.handler.is_some() && !spec.has(flags::CONNECTION) {
                ops.push(Op::Command(args, Some(spec)));
                slots.push(None);
            } else {
                slots.push(Some(Reply::err(format!(
                    "ERR '{}' is not supported inside MULTI",
                    spec.name
                ))));
            }
        }
        let watch = self.watch.as_ref().map(|w| WatchGuard {
            flag: w.flag.clone(),
            existed: w.existed.clone(),
            digests: w.digests.clone(),
        });
        let result = self
            .shared
            .engine
            .execute(Batch {
                db: self.db,
                resp: self.resp,
                ops,
                watch,
                transaction: true,
            })
            .await;
        self.unwatch().await;
        if let Some(Reply::Error(reason)) = result.aborted {
            return Reply::err(format!(
                "EXECABORT Transaction discarded because of: {reason}"
            ));
        }
        let Some(replies) = result.replies else {
            return Reply::NilArray;
        };
        // A transaction the cluster could not run at all gets one error, not one per command
        // (no command ever answers CLUSTERDOWN itself, so this is never a partial result).
        let down = |r: &Reply| matches!(r, Reply::Error(e) if e.starts_with("CLUSTERDOWN"));
        if self.shared.engine.cluster().is_some() && !replies.is_empty() && replies.iter().all(down)
        {
            return replies.into_iter().next().unwrap_or(Reply::NilArray);
        }
        self.db = result.db;
        self.sync_info();
        let mut replies = replies.into_iter();
        Reply::Array(
            slots
                .into_iter()
                .map(|s| s.unwrap_or_else(|| replies.next().unwrap_or(Reply::Nil)))
                .collect(),
        )
    }

    async fn watch_keys(&mut self, keys: &[Bytes]) -> Reply {
        if self.multi.is_some() {
            return Reply::err("ERR WATCH inside MULTI is not allowed");
        }
        let engine = self.shared.engine.clone();
        if let Some(node) = engine.cluster() {
            // The digests must describe state at least as new as any acknowledged write.
            if let Err(e) = node.read_barrier().await {
                return crate::engine::cluster_error_reply(&e);
            }
        }
        let now = engine.now_ms();
        let clustered = engine.cluster().is_some();
        let mut state = engine.lock().await;
        let w = self.watch.get_or_insert_with(|| WatchState {
            flag: WatchFlag::default(),
            keys: Vec::new(),
            existed: Vec::new(),
            digests: Vec::new(),
        });
        for k in keys {
            if w.keys.iter().any(|(d, key)| *d == self.db && key == k) {
                continue;
            }
            let db = &mut state.ks.dbs[self.db];
            if clustered {
                let digest = crate::store::snapshot::entry_digest(db, k, now);
                w.digests.push((self.db, k.clone(), digest));
            }
            db.watch(k.clone(), w.flag.clone());
            if db.contains(k, now) {
                w.existed.push((self.db, k.clone()));
            }
            w.keys.push((self.db, k.clone()));
        }
        Reply::ok()
    }

    async fn unwatch(&mut self) {
        if let Some(w) = self.watch.take() {
            let mut state = self.shared.engine.lock().await;
            for (db, k) in &w.keys {
                state.ks.dbs[*db].unwatch(k, &w.flag);
            }
        }
    }

    fn client(&mut self, a: &[Bytes]) -> Reply {
        let sub = String::from_utf8_lossy(&a[1]).to_ascii_lowercase();
        match (sub.as_str(), a.len()) {
            ("id", 2) => Reply::Integer(self.id() as i64),
            ("setname", 3) => match self.set_name(&a[2]) {
                Ok(()) => Reply::ok(),
                Err(e) => e,
            },
            ("getname", 2) => {
                let name = self.handle.info.lock().name.clone();
                if name.is_empty() {
                    Reply::Nil
                } else {
                    Reply::bulk(name)
                }
            }
            ("list", _) => {
                let clients: Vec<_> = self.shared.clients.lock().values().cloned().collect();
                let text: String = clients
                    .iter()
                    .map(|c| info::client_line(&c.info.lock()) + "\n")
                    .collect();
                Reply::Verbatim("txt", Bytes::from(text))
            }
            ("info", 2) => Reply::Verbatim(
                "txt",
                Bytes::from(info::client_line(&self.handle.info.lock()) + "\n"),
            ),
            ("kill", n) if n >= 3 => self.client_kill(&a[2..]),
            ("setinfo", 4) => {
                let mut info = self.handle.info.lock();
                let value = String::from_utf8_lossy(&a[3]).into_owned();
                if is(&a[2], "lib-name") {
                    info.lib_name = value;
                } else if is(&a[2], "lib-ver") {
                    info.lib_ver = value;
                } else {
                    return Reply::err(format!(
                        "ERR Unrecognized option '{}'",
                        command::arg_text(&a[2])
                    ));
                }
                Reply::ok()
            }
            ("no-evict", 3) | ("no-touch", 3) => Reply::ok(),
            ("help", 2) => Reply::Array(
                [
                    "CLIENT <subcommand>",
                    "ID",
                    "SETNAME <name>",
                    "GETNAME",
                    "LIST",
                    "INFO",
                    "KILL <ip:port>|ID <id>|ADDR <ip:port>",
                    "SETINFO LIB-NAME|LIB-VER <value>",
                ]
                .iter()
                .map(|s| Reply::Status(s.to_string()))
                .collect(),
            ),
            (
                "id" | "setname" | "getname" | "info" | "setinfo" | "kill" | "no-evict"
                | "no-touch" | "help",
                _,
            ) => command::arity_error(&format!("client|{sub}")),
            _ => Reply::err(format!(
                "ERR unknown subcommand '{}'. Try CLIENT HELP.",
                command::arg_text(&a[1])
            )),
        }
    }

    fn client_kill(&mut self, a: &[Bytes]) -> Reply {
        let clients: Vec<_> = self.shared.clients.lock().values().cloned().collect();
        let kill = |h: &Arc<ClientHandle>| {
            h.killed.store(true, Ordering::Relaxed);
            h.kill.notify_one();
        };
        if a.len() == 1 {
            let addr = String::from_utf8_lossy(&a[0]);
            return match clients
                .iter()
                .find(|c| c.info.lock().addr.to_string() == addr)
            {
                Some(c) => {
                    kill(c);
                    Reply::ok()
                }
                None => Reply::err("ERR No such client"),
            };
        }
        if !a.len().is_multiple_of(2) {
            return Reply::err("ERR syntax error");
        }
        let mut killed = 0;
        for c in &clients {
            let info = c.info.lock().clone();
            let mut all = true;
            for pair in a.chunks(2) {
                let v = String::from_utf8_lossy(&pair[1]);
                let ok = if is(&pair[0], "id") {
                    match v.parse::<u64>() {
                        Ok(id) => info.id == id,
                        Err(_) => return Reply::err("ERR client-id should be greater than 0"),
                    }
                } else if is(&pair[0], "addr") {
                    info.addr.to_string() == v
                } else if is(&pair[0], "laddr") {
                    info.laddr.to_string() == v
                } else if is(&pair[0], "skipme") {
                    !(v.eq_ignore_ascii_case("yes") && info.id == self.id())
                } else {
                    return Reply::err("ERR syntax error");
                };
                all &= ok;
            }
            if all {
                kill(c);
                killed += 1;
            }
        }
        Reply::Integer(killed)
    }

    async fn debug(&mut self, a: &[Bytes]) -> Reply {
        if !self.shared.config.read().enable_debug_command {
            return Reply::err("ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.");
        }
        if is(&a[1], "advance-time") && a.len() == 3 {
            return match int(&a[2]) {
                Ok(ms) if ms >= 0 => {
                    self.shared.engine.advance_time(ms as u64);
                    Reply::ok()
                }
                Ok(_) => Reply::err("ERR time can only move forward"),
                Err(e) => e,
            };
        }
        if is(&a[1], "digest") && a.len() == 2 {
            if let Some(node) = self.shared.engine.cluster() {
                // Digests of nodes are comparable once each has applied every acknowledged write.
                if let Err(e) = node.read_barrier().await {
                    return crate::engine::cluster_error_reply(&e);
                }
            }
            let now = self.shared.engine.now_ms();
            let state = self.shared.engine.lock().await;
            let d = crate::store::snapshot::digest(&state.ks, now);
            return Reply::Status(format!("{d:016x}"));
        }
        if is(&a[1], "panic-on-apply") && a.len() == 2 {
            // Replicated like a write: every node panics applying it (engine::poison).
            let batch = Batch {
                db: self.db,
                resp: self.resp,
                ops: vec![crate::engine::poison::panic_trigger_op()],
                watch: None,
                transaction: false,
            };
            let result = self.shared.engine.execute(batch).await;
            return result
                .replies
                .and_then(|r| r.into_iter().next())
                .unwrap_or(Reply::Nil);
        }
        if is(&a[1], "sleep") && a.len() == 3 {
            let secs = crate::command::args::parse_f64(&a[2])
                .unwrap_or(0.0)
                .clamp(0.0, 60.0);
            let _state = self.shared.engine.lock().await;
            std::thread::sleep(std::time::Duration::from_secs_f64(secs));
            return Reply::ok();
        }
        Reply::err(format!(
            "ERR unknown subcommand '{}'. Try DEBUG HELP.",
            command::arg_text(&a[1])
        ))
    }
}

/// The answer to SAVE, BGSAVE and SHUTDOWN SAVE on a standalone node.
const NOTHING_TO_SAVE: &str = "ERR nothing to save to: this standalone node keeps its data in memory only (no RDB or AOF file). SHUTDOWN or SHUTDOWN NOSAVE stops it; for durable storage run a cluster (--node-id and --peers)";

/// What SHUTDOWN was asked to do.
#[derive(PartialEq)]
enum Shutdown {
    /// Stop, saving only where something is saved anyway (the default, NOSAVE).
    Stop,
    /// SAVE: stop after saving.
    Save,
    /// ABORT: cancel a shutdown in progress.
    Abort,
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT], with Redis 7.0's syntax errors.
fn shutdown_options(a: &[Bytes]) -> Result<Shutdown, Reply> {
    let (mut save, mut nosave, mut abort, mut other) = (false, false, false, false);
    for arg in &a[1..] {
        if is(arg, "save") {
            save = true;
        } else if is(arg, "nosave") {
            nosave = true;
        } else if is(arg, "abort") {
            abort = true;
        } else if is(arg, "now") || is(arg, "force") {
            other = true;
        } else {
            return Err(Reply::err("ERR syntax error"));
        }
    }
    if (save && nosave) || (abort && (save || nosave || other)) {
        return Err(Reply::err("ERR syntax error"));
    }
    Ok(if abort {
        Shutdown::Abort
    } else if save {
        Shutdown::Save
    } else {
        Shutdown::Stop
    })
}

/// Compare secrets without an early exit that leaks their common prefix length.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
