//! One client connection: reads requests, keeps the client's state (database, protocol
//! version, authentication, MULTI queue, WATCHed keys), routes each request by its row in
//! the command table, and writes replies.
//!
//! Everything that is already buffered is parsed and answered in one write (pipelining).
//! Consecutive keyspace commands are handed to the engine as one batch, so a pipeline of
//! N commands costs one lock of the state, not N. Connection commands run here, through
//! the `client` handler of their row (`client_commands.rs`, `transaction.rs`).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::transaction::WatchState;
use super::{ClientHandle, ClientInfo, Shared};
use crate::command::{self, flags, CommandSpec};
use crate::engine::{Batch, BatchResult, Op, WatchGuard};
use crate::protocol::parser::{parse_request, Limits, Request};
use crate::protocol::Reply;

/// What to do after handling a request.
#[derive(PartialEq)]
enum Flow {
    Continue,
    Close,
}

/// What a connection command answers (see `command::ClientHandler`).
pub enum Answer {
    /// Send this reply and go on.
    Reply(Reply),
    /// Send this reply, if any, and close the connection (QUIT, SHUTDOWN).
    Close(Option<Reply>),
    /// Not answered here: run the row's keyspace handler (SCRIPT and FUNCTION answer
    /// only KILL and STATS on the connection).
    Engine,
    /// The client blocks (BLPOP & co.): no reply until it is released.
    Block(super::blocking::Blocked),
    /// Refused before it ran (EXEC while a script is busy or writes are refused for want
    /// of replicas): counted as the command's `rejected_calls`, as Redis's
    /// `rejectCommand`, not as a call.
    Rejected(Reply),
}

impl From<Reply> for Answer {
    fn from(r: Reply) -> Answer {
        Answer::Reply(r)
    }
}

/// Most operations a connection's pending list keeps room for between batches (about
/// 120 KiB).
const KEPT_OPS: usize = 1024;

/// The most capacity an empty query or reply buffer keeps between reads (64 KiB, four
/// reads' worth): a larger one is dropped once its request ran or its reply was written,
/// and the next read or reply starts a new one. Redis trims a client's query buffer once
/// it has been idle 2 s, or is over twice its recent peak (`clientsCronResizeQueryBuffer`),
/// and its reply buffer is 16 KiB plus a list of chunks freed as they are written; this
/// was 1 MiB, which each connection that ever sent or fetched a large value kept until it
/// closed. Only a request or reply over 64 KiB
/// meets the cost: a new buffer grown for it (about one more copy of its bytes).
const KEPT_BUFFER: usize = 64 * 1024;

/// Bytes a read asks the socket for (into the worker's scratch buffer when the query
/// buffer is empty, or behind a partial request).
const READ_SIZE: usize = 16 * 1024;

thread_local! {
    /// The buffer a connection with an empty query buffer reads into, one per thread: see
    /// [`read_input`].
    static SCRATCH: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0; READ_SIZE].into_boxed_slice());
}

/// Read what the socket holds into `input` (Ok(0): the peer closed).
///
/// Buffers are lazy, so that an idle connection holds no 16 KiB ones: both start empty,
/// and while the query buffer is empty (every wait between two requests, for a client
/// that does not pipeline) the read goes into the worker thread's scratch buffer, and only
/// the bytes that arrived are copied into `input`, which then holds just what its largest
/// read needed. Before, every connection allocated a 16 KiB query and a 16 KiB reply
/// buffer at once and held them while idle (`bench/conn_memory.sh`). Behind a partial
/// request the read goes on directly into `input`, with room for [`READ_SIZE`] bytes.
fn read_input<'a, S: AsyncRead + Unpin>(
    socket: &'a mut S,
    input: &'a mut BytesMut,
) -> impl Future<Output = std::io::Result<usize>> + 'a {
    std::future::poll_fn(move |cx| {
        if !input.is_empty() {
            if input.capacity() - input.len() < READ_SIZE / 4 {
                input.reserve(READ_SIZE);
            }
            return std::pin::pin!(socket.read_buf(&mut *input)).poll(cx);
        }
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let mut buf = tokio::io::ReadBuf::new(&mut scratch[..]);
            std::task::ready!(Pin::new(&mut *socket).poll_read(cx, &mut buf))?;
            input.extend_from_slice(buf.filled());
            Poll::Ready(Ok(buf.filled().len()))
        })
    })
}

/// A MULTI queue: each command with its row.
pub(super) type Queued = Vec<(Vec<Bytes>, &'static CommandSpec)>;

/// One client's connection state, which connection commands read and change.
pub struct Client {
    pub(super) shared: Arc<Shared>,
    pub(super) handle: Arc<ClientHandle>,
    pub(super) db: usize,
    pub(super) resp: u8,
    pub(super) authenticated: bool,
    /// The ACL user (the default user until AUTH names another).
    pub(super) user: crate::acl::ClientUser,
    /// The ACL store's epoch when `user` was read: when it moves, `user` is read again.
    pub(super) acl_epoch: u64,
    /// The commands queued since MULTI; `None` outside a transaction.
    pub(super) multi: Option<Queued>,
    /// A command was refused while queueing: EXEC must abort.
    pub(super) multi_dirty: bool,
    /// EXEC is running this client's transaction (CLIENT LIST still shows it in MULTI).
    pub(super) executing: bool,
    pub(super) watch: Option<WatchState>,
    /// Keyspace commands waiting to go to the engine as one batch.
    pending: Vec<Op>,
    out: BytesMut,
    /// Name of the last known command received (CLIENT LIST `cmd`).
    last_cmd: &'static str,
    /// Channels, patterns and shard channels subscribed to, and the mailbox messages
    /// arrive in (`crate::pubsub`).
    pub(super) subs: crate::pubsub::ClientSubs,
    /// CLIENT REPLY OFF: no replies (pub/sub messages still go out).
    pub(super) reply_off: bool,
    /// CLIENT REPLY SKIP: the next command's replies are not sent.
    pub(super) skip_next: bool,
    /// The replies of the command being handled are not sent (SKIP).
    pub(super) skipping: bool,
    /// Blocked in BLPOP & co.: the commands after it wait in the input buffer.
    blocked: Option<super::blocking::Blocked>,
    /// In MONITOR mode: its mailbox (`subs.mailbox`) gets every command's line.
    pub(super) monitor: bool,
    /// Length and capacity of the query buffer when the read being processed arrived
    /// (the caller's own CLIENT LIST `qbuf`: Redis's query buffer still holds the whole
    /// read while its commands run).
    pub(super) read: (usize, usize),
    /// Resolves when the connection must close (killed, or the server shuts down).
    stop: Stop,
}

/// Tell a client over the connection cap why it is refused, then close.
pub async fn refuse(mut socket: TcpStream) {
    let _ = socket
        .write_all(b"-ERR max number of clients reached\r\n")
        .await;
}

/// Send a last message and close without losing it: closing a socket that holds unread
/// input makes the kernel send a reset, which can destroy the message before the client
/// reads it. So: send, shut down the sending side, and read what the client still sends
/// (at most 64 KiB, for at most a second) before closing.
async fn say_and_close<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, message: &[u8]) {
    if stream.write_all(message).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let drain = async {
        // On the heap: an array here made every connection's future 4 KiB larger (this
        // future is part of `serve`'s), for a path taken only by a refused connection.
        let mut buf = vec![0u8; 4096];
        let mut left: usize = 64 * 1024;
        while left > 0 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), drain).await;
}

/// Serve one plaintext connection until it closes.
pub async fn serve_tcp(shared: Arc<Shared>, socket: TcpStream, peer: SocketAddr) {
    let _ = socket.set_nodelay(true);
    let laddr = socket.local_addr().unwrap_or(shared.addr);
    let fd = std::os::fd::AsRawFd::as_raw_fd(&socket);
    serve(shared, socket, peer, laddr, fd).await;
}

/// Serve one connection (plaintext, or TLS after its handshake) until it closes.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    shared: Arc<Shared>,
    mut socket: S,
    peer: SocketAddr,
    laddr: SocketAddr,
    fd: i32,
) {
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
            last_interaction: super::coarse_ds(),
            fd,
            last_cmd: "NULL",
            in_multi: false,
            subs: (0, 0, 0),
            blocked: false,
            blocked_with_timeout: false,
            qbuf: 0,
            qbuf_capacity: 0,
            obuf: 0,
            obuf_capacity: 0,
            multi_mem: 0,
            multi_len: 0,
            monitor: false,
            argv_mem: 0,
            user: crate::acl::DEFAULT_USER.into(),
        }),
        kill: Default::default(),
        killed: Default::default(),
    });
    if shared
        .security
        .protected_mode_denies(&shared.config.read(), shared.engine.acl(), peer.ip())
    {
        shared
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        say_and_close(&mut socket, super::security::DENIED.as_bytes()).await;
        return;
    }
    shared.clients.lock().insert(id, handle.clone());
    // As in Redis, a new connection is the default user's, and logged in when that user
    // is on and needs no password.
    let acl = shared.engine.acl();
    let acl_epoch = acl.epoch();
    let user = acl.default_user();
    let authenticated = user.enabled && user.nopass;
    let mut client = Client {
        shared: shared.clone(),
        handle: handle.clone(),
        db: 0,
        resp: 2,
        authenticated,
        user: crate::acl::ClientUser::new(user),
        acl_epoch,
        multi: None,
        multi_dirty: false,
        executing: false,
        watch: None,
        pending: Vec::new(),
        out: BytesMut::new(),
        last_cmd: "NULL",
        subs: Default::default(),
        reply_off: false,
        skip_next: false,
        skipping: false,
        blocked: None,
        monitor: false,
        read: (0, 0),
        stop: Stop::new(&shared, &handle),
    };
    client.run(&mut socket).await;
    client.unwatch().await;
    if client.monitor {
        shared.engine.pubsub().monitors.remove(id);
    }
    client.subs.clear(shared.engine.pubsub(), id);
    shared.clients.lock().remove(&id);
}

impl Client {
    async fn run<S: AsyncRead + AsyncWrite + Unpin>(&mut self, socket: &mut S) {
        let mut input = BytesMut::new();
        loop {
            if self.handle.killed.load(Ordering::Relaxed) || *self.shared.shutdown.borrow() {
                return;
            }
            if let Some(b) = self.blocked.take() {
                let released = self.wait_blocked(b, socket, &mut input).await;
                {
                    let mut info = self.handle.info.lock();
                    info.blocked = false;
                    info.blocked_with_timeout = false;
                    info.argv_mem = 0;
                }
                let Some(reply) = released else {
                    return;
                };
                self.push(reply);
                if !self.write_out(socket).await {
                    return;
                }
                // The commands that arrived while it was blocked.
                let flow = self.process_input_served_first(&mut input).await;
                if !self.write_out(socket).await || flow == Flow::Close {
                    return;
                }
                continue;
            }
            let mailbox = self.subs.mailbox.clone();
            if let Some(m) = &mailbox {
                if m.dropped() {
                    return;
                }
                // Messages that arrived while the last write was under way.
                if m.pending() > 0 {
                    m.drain_into(&mut self.out);
                    if !self.write_out(socket).await {
                        return;
                    }
                    continue;
                }
            }
            // In this order, without select!'s random start (a thread-local generator): the
            // loop's first check sees a kill or a shutdown whatever the input does.
            let read = tokio::select! {
                biased;
                r = read_input(socket, &mut input) => Some(r),
                _ = mailbox_ready(&mailbox) => None,
                _ = &mut self.stop => return,
            };
            let flow = match read {
                None => {
                    // Let the publishers that are ready run first, so that one write carries
                    // what they publish (Redis writes once per event-loop turn likewise).
                    tokio::task::yield_now().await;
                    Flow::Continue
                }
                Some(Ok(0) | Err(_)) => return,
                // Killed (CLIENT KILL, ACL LOAD, ...) while the input arrived: `select!`
                // picks among ready branches at random, so the kill may not have won.
                Some(Ok(_)) if self.handle.killed.load(Ordering::Relaxed) => return,
                Some(Ok(n)) => {
                    let metrics = self.shared.engine.metrics();
                    metrics.net_input.fetch_add(n as u64, Ordering::Relaxed);
                    self.shared.stats.reads.fetch_add(1, Ordering::Relaxed);
                    self.process_input_served_first(&mut input).await
                }
            };
            if !self.write_out(socket).await {
                return;
            }
            self.publish_buffers(&input);
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
            if input.is_empty() && input.capacity() > KEPT_BUFFER {
                input = BytesMut::new();
            }
        }
    }

    /// Wait until a blocked client is served, times out, is unblocked (the reply to send),
    /// or disconnects or is killed (None). Input that arrives meanwhile is buffered.
    async fn wait_blocked<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        b: super::blocking::Blocked,
        socket: &mut S,
        input: &mut BytesMut,
    ) -> Option<Reply> {
        let nothing = b.nothing();
        let super::blocking::Blocked {
            waiter,
            timeout,
            spec,
            ..
        } = b;
        let registry = self.shared.engine.pubsub().clone();
        let cluster = self.shared.engine.cluster().is_some();
        let sleep = async {
            match timeout {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(sleep);
        // A served or unblocked reply; `Nil` from CLIENT UNBLOCK stands for the timeout's.
        let answer = |r: Reply| {
            if crate::engine::blocking::nothing(&r) {
                nothing.clone()
            } else {
                r
            }
        };
        loop {
            tokio::select! {
                _ = waiter.wake.notified() => {
                    // Answered: served (standalone) or unblocked.
                    if let Some(r) = waiter.take_reply() {
                        return Some(answer(r));
                    }
                    if !cluster {
                        continue;
                    }
                    // A key changed on this node: propose the pop (it stays registered, so
                    // a change while the proposal is in flight wakes it again).
                    let result = self
                        .run_batch(vec![Op::Command(waiter.args.clone(), Some(spec))], None, false)
                        .await;
                    let reply = result.replies.and_then(|r| r.into_iter().next()).unwrap_or(Reply::Nil);
                    if !crate::engine::blocking::nothing(&reply) {
                        // Even if CLIENT UNBLOCK raced with it, the pop happened: send it.
                        registry.blocking.unblock(&waiter);
                        return Some(reply);
                    }
                }
                _ = &mut sleep => {
                    if registry.blocking.unblock(&waiter) {
                        return Some(nothing);
                    }
                    // Served (or unblocked) just now: that reply, left in the waiter right
                    // after, wins.
                    loop {
                        if let Some(r) = waiter.take_reply() {
                            return Some(answer(r));
                        }
                        waiter.wake.notified().await;
                    }
                }
                r = read_input(socket, input) => {
                    let limit = self.shared.config.read().client_query_buffer_limit;
                    if matches!(r, Ok(0) | Err(_)) || input.len() > limit {
                        registry.blocking.unblock(&waiter);
                        return None;
                    }
                }
                _ = &mut self.stop => {
                    registry.blocking.unblock(&waiter);
                    return None;
                }
            }
        }
    }

    /// Write the output buffer, unless the client is killed or drops off its pub/sub
    /// output limit meanwhile (a subscriber that does not read must not hold the task
    /// forever). False: close the connection.
    async fn write_out<S: AsyncRead + AsyncWrite + Unpin>(&mut self, socket: &mut S) -> bool {
        if self.out.is_empty() {
            return true;
        }
        if self.out.len() > super::info::REPLY_CHUNK {
            // A reply bigger than Redis's static buffer may wait on a slow reader: others'
            // CLIENT LIST sees it pending (`obl`/`oll`/`omem`) while it is written.
            let mut info = self.handle.info.lock();
            info.obuf = self.out.len();
            info.obuf_capacity = self.out.capacity();
        }
        let mailbox = self.subs.mailbox.clone();
        let dropped = async {
            match &mailbox {
                Some(m) => loop {
                    if m.dropped() {
                        return;
                    }
                    m.ready.notified().await;
                },
                None => std::future::pending().await,
            }
        };
        // A TLS stream may keep the end of a reply in its session buffer when the socket is
        // full: flush sends it (for TCP, flush does nothing).
        let out = &self.out;
        let write = async { socket.write_all(out).await.is_ok() && socket.flush().await.is_ok() };
        let written = tokio::select! {
            biased;
            ok = write => ok,
            _ = &mut self.stop => false,
            _ = dropped => false,
        };
        if written {
            let metrics = self.shared.engine.metrics();
            metrics
                .net_output
                .fetch_add(self.out.len() as u64, Ordering::Relaxed);
            self.shared.stats.writes.fetch_add(1, Ordering::Relaxed);
        }
        self.out.clear();
        if self.out.capacity() > KEPT_BUFFER {
            self.out = BytesMut::new();
        }
        written
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

    /// [`Client::process_input`], then, when its commands served a blocked client, one
    /// turn at the back of the run queue ([`BehindServed`]) so that the served client's
    /// reply is written before this connection's.
    async fn process_input_served_first(&mut self, input: &mut BytesMut) -> Flow {
        let served = self.shared.engine.pubsub().blocking.served();
        let flow = self.process_input(input).await;
        if self.shared.engine.pubsub().blocking.served() != served {
            BehindServed::default().await;
        }
        flow
    }

    /// Parse and answer every complete request in `input`.
    async fn process_input(&mut self, input: &mut BytesMut) -> Flow {
        self.read = (input.len(), input.capacity());
        let mut limits = self.limits();
        let mut count = 0;
        // The command is looked up once, here; a command that only borrows its arguments
        // gets them as a frame (in a cluster too: the Raft log is written from the frame's
        // slices, see `engine::replicated::Proposal::ops`).
        let classify = |name: &[u8]| {
            let spec = command::lookup(name);
            (spec, spec.is_some_and(|s| s.fast.is_some()))
        };
        let flow = loop {
            match parse_request(input, &limits, classify) {
                Ok(Some((request, spec))) => {
                    if request.is_empty() {
                        continue;
                    }
                    count += 1;
                    let (request, spec) = match (request, spec) {
                        (Request::Frame(frame), Some(spec))
                            if spec.fast.is_some() && self.plain_call(spec, &frame) =>
                        {
                            self.queue_frame(frame, spec);
                            continue;
                        }
                        other => other,
                    };
                    let was_authenticated = self.authenticated;
                    let flow = self.handle_request(request, spec).await;
                    if self.authenticated != was_authenticated {
                        limits = self.limits();
                    }
                    if flow == Flow::Close {
                        break Flow::Close;
                    }
                    if self.blocked.is_some() {
                        // The rest of the input runs once the client is released.
                        break Flow::Continue;
                    }
                }
                Ok(None) => {
                    if !input.is_empty() {
                        room_for_big_arg(input, &limits);
                    }
                    break Flow::Continue;
                }
                Err(e) => {
                    self.flush_pending().await;
                    Reply::err(e.to_string()).encode(self.resp, &mut self.out);
                    break Flow::Close;
                }
            }
        };
        self.flush_pending().await;
        if count > 0 {
            // CLIENT LIST's `cmd` (the last command of what was read) and `idle`, set
            // once per read.
            let mut info = self.handle.info.lock();
            info.last_cmd = self.last_cmd;
            info.last_interaction = super::coarse_ds();
        }
        rewind(input);
        flow
    }

    /// Publish the buffers' sizes to CLIENT LIST and INFO clients (once per read).
    fn publish_buffers(&self, input: &BytesMut) {
        let (multi_len, multi_mem) = self.multi.as_ref().map_or((0, 0), |q| {
            let mem = q
                .iter()
                .map(|(args, _)| args.iter().map(|a| a.len() + 32).sum::<usize>())
                .sum();
            (q.len(), mem)
        });
        let mut info = self.handle.info.lock();
        info.qbuf = input.len();
        info.qbuf_capacity = input.capacity();
        info.obuf = self.out.len();
        info.obuf_capacity = self.out.capacity();
        info.multi_len = multi_len;
        info.multi_mem = multi_mem;
    }

    pub(super) fn push(&mut self, r: Reply) {
        // CLIENT REPLY OFF/SKIP silence replies, not pub/sub confirmations (Redis 7.0 sends
        // those as pushes in both protocols).
        let push = matches!(r, Reply::Push(_));
        if (self.reply_off || self.skipping) && !push {
            return;
        }
        r.encode(self.resp, &mut self.out);
    }

    /// Run the queued keyspace commands and append their replies.
    async fn flush_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let capacity = self.pending.len();
        let ops = std::mem::take(&mut self.pending);
        let publishes = self.cluster_publishes(&ops);
        let result = self.run_batch(ops, None, false).await;
        // The next batch goes into this one's list, which the engine hands back emptied
        // when the batch ran here: an operation is about 120 bytes, and a new list per
        // batch (from an allocator that does not hand the block just freed out first)
        // wrote each pipeline into memory no cache held, about 0.6 last-level write misses
        // a pipelined SADD in `bench/cache_misses.sh` (issue 21). A list grown past
        // `KEPT_OPS` is not kept. Otherwise (a cluster's proposal) the next batch is likely
        // as long as this one: sized once, as growing by doubling copied more than it
        // allocated.
        let spare = result.spare;
        self.pending = if (capacity..=KEPT_OPS).contains(&spare.capacity()) {
            spare
        } else {
            Vec::with_capacity(capacity)
        };
        let mut replies = result.replies.unwrap_or_default();
        for (i, channel, shard) in publishes {
            if let Some(r @ Reply::Integer(_)) = replies.get_mut(i) {
                *r = Reply::Integer(self.shared.engine.pubsub().receivers(&channel, shard));
            }
        }
        // Messages this batch delivered to the client itself come before its replies; a
        // monitor's own commands' lines come after them, as Redis feeds after replying.
        if !self.monitor {
            if let Some(m) = &self.subs.mailbox {
                m.drain_into(&mut self.out);
            }
        }
        for r in replies {
            self.push(r);
        }
        if self.monitor {
            if let Some(m) = &self.subs.mailbox {
                m.drain_into(&mut self.out);
            }
        }
    }

    /// In a cluster, the PUBLISH and SPUBLISH calls among `ops` (reply index, channel,
    /// shard): their reply is the number of receivers on this node, as Redis Cluster
    /// answers (the state machine answers 0 on every node; see `pubsub::Hub::publish`).
    fn cluster_publishes(&self, ops: &[Op]) -> Vec<(usize, Bytes, bool)> {
        if !self.shared.engine.pubsub().replicated() {
            return Vec::new();
        }
        let mut found = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            if let Op::Command(args, Some(spec)) = op {
                // The publishing rows: PUBSUB with a keyspace handler (SPUBLISH names its
                // channel as a key).
                if spec.has(flags::PUBSUB) && spec.handler.is_some() && args.len() == 3 {
                    found.push((i, args[1].clone(), spec.has_keys()));
                }
            }
        }
        found
    }

    /// Run `ops` in the engine as one atomic batch from this client's database; a
    /// `transaction` (EXEC) is refused whole under `maxmemory` rather than per command.
    pub(super) async fn run_batch(
        &self,
        ops: Vec<Op>,
        watch: Option<WatchGuard>,
        transaction: bool,
    ) -> BatchResult {
        let batch = Batch {
            db: self.db,
            resp: self.resp,
            ops,
            watch,
            transaction,
            client: Some(self.handle.clone()),
        };
        self.shared.engine.execute(batch).await
    }

    /// Whether a call of `spec` (its arguments in `call`) needs none of
    /// [`Client::handle_request`]'s checks: its arity is right, it has no subcommands, and
    /// the client is in no special state (authenticated, outside MULTI, replies on, not a
    /// monitor, not in RESP2 subscribe mode, its ACL epoch current) with a user that may
    /// make the call (every permission, or the call passes [`crate::acl::User::check`];
    /// a restricted user's script takes the checked path, which passes its user on).
    ///
    /// The one predicate both paths use: [`Client::process_input`] queues a plain call of
    /// a `fast` row's frame at once ([`Client::queue_frame`], without building
    /// `handle_request`'s future: moving the request into it, polling and dropping it cost
    /// about 40 instructions per INCR under callgrind), and `handle_request` skips its
    /// checks for a plain call. A check added there runs only when this is false, so a
    /// new client state must be added here, or its check never runs at all.
    #[inline]
    fn plain_call(&mut self, spec: &'static CommandSpec, call: &impl CallArgs) -> bool {
        self.authenticated
            && self.multi.is_none()
            && !(self.reply_off || self.skip_next || self.skipping)
            && !self.monitor
            && !(self.resp == 2 && self.subs.active())
            && self.acl_epoch == self.shared.engine.acl().epoch()
            && !spec.has(flags::SUBCOMMANDS)
            && command::arity_ok(spec, call.argc())
            && (self.user.unrestricted() || self.user_may(spec, call))
    }

    /// [`Client::plain_call`]'s test for a restricted user: the call passes its ACL check
    /// (a refused call takes `handle_request`'s path, which refuses and logs it). The
    /// command's verdict is kept by the connection; only the keys are read per call.
    #[inline]
    fn user_may(&mut self, spec: &'static CommandSpec, call: &impl CallArgs) -> bool {
        match self.user.fast_check(spec, call.argc(), |i| call.arg(i)) {
            Some(allowed) => allowed,
            None => self.user_may_checked(spec, call),
        }
    }

    /// [`Client::user_may`] past the kept verdict's fast form.
    #[inline(never)]
    fn user_may_checked(&mut self, spec: &'static CommandSpec, call: &impl CallArgs) -> bool {
        match self.user.quick_check(spec, call.argc(), |i| call.arg(i)) {
            Some(allowed) => allowed,
            None => call.with_args(|a| self.user.check(spec, a).is_ok()),
        }
    }

    /// [`Client::handle_request`] for a call [`Client::plain_call`] accepted: count it
    /// and add it to the pending batch.
    #[inline]
    fn queue_frame(&mut self, frame: crate::protocol::parser::Frame, spec: &'static CommandSpec) {
        self.shared
            .stats
            .total_commands
            .fetch_add(1, Ordering::Relaxed);
        self.last_cmd = spec.name;
        self.pending.push(Op::Frame(frame, spec));
    }

    /// The connection's list of pending operations, emptied, to build a batch in (a
    /// command that runs its own batch flushes what is pending first; were anything still
    /// pending, a new list); give it back with [`Client::keep_ops`].
    pub(super) fn take_ops(&mut self) -> Vec<Op> {
        if self.pending.is_empty() {
            std::mem::take(&mut self.pending)
        } else {
            Vec::with_capacity(1)
        }
    }

    /// Keep `ops` (a batch's list the engine handed back emptied) as the pending list, if
    /// the pending list has no memory and it is not one grown past `KEPT_OPS`.
    pub(super) fn keep_ops(&mut self, ops: Vec<Op>) {
        if self.pending.is_empty()
            && self.pending.capacity() == 0
            && ops.is_empty()
            && ops.capacity() <= KEPT_OPS
        {
            self.pending = ops;
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
            self.last_cmd = if spec.has(flags::SUBCOMMANDS) {
                // As Redis: `client|list`, not `client`.
                with_request_args(&request, |a| crate::acl::categories::call_name(spec, a))
            } else {
                spec.name
            };
        } else if self.shared.security.cross_protocol(request.name()) {
            // HTTP sent to the Redis port: close before this or anything after it runs.
            return Flow::Close;
        }
        // A plain call (see `plain_call`) needs none of the checks `screen` makes.
        let spec = match spec {
            Some(spec) if self.plain_call(spec, &request) => spec,
            spec => match self.screen(&request, spec).await {
                Ok(spec) => spec,
                Err(flow) => return flow,
            },
        };
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
        if self.multi.is_some() && !spec.has(flags::NOT_QUEUED) {
            if spec.has(flags::NO_MULTI) {
                self.reject_call(
                    spec,
                    Reply::err("ERR Command not allowed inside a transaction"),
                )
                .await;
                return Flow::Continue;
            }
            // As in Redis, a command arriving while a script is busy is refused (and dooms
            // the transaction) rather than queued.
            if let Some(busy) = self.shared.engine.busy() {
                self.reject_call(spec, Reply::err(busy)).await;
                return Flow::Continue;
            }
            // As in Redis, a queue may not grow while memory is over `maxmemory`.
            if self.shared.engine.out_of_memory().await {
                self.reject_call(spec, Reply::err(crate::engine::memory::OOM_ERROR))
                    .await;
                return Flow::Continue;
            }
            // As in Redis (`processCommand`), a write is refused when it is queued while
            // `min-replicas-to-write` is not met, and the transaction is doomed (EXEC
            // checks again: the setting may change in between).
            if self.shared.engine.no_good_replicas()
                && command::with_slices(&args, |a| crate::acl::categories::call_writes(spec, a))
            {
                self.reject_call(spec, Reply::err(crate::store::NOREPLICAS))
                    .await;
                return Flow::Continue;
            }
            self.flush_pending().await;
            if let Some(q) = self.multi.as_mut() {
                q.push((args, spec));
            }
            self.push(Reply::Status("QUEUED".into()));
            return Flow::Continue;
        }
        if let Some(client) = spec.client {
            self.flush_pending().await;
            let started = std::time::Instant::now();
            let answer = client(self, &args).await;
            // (A blocking command's pop ran in the engine, which fed it.)
            if !matches!(answer, Answer::Engine)
                && !spec.has(flags::BLOCKING)
                && self.shared.engine.pubsub().monitors.active()
            {
                self.feed_monitors(spec, &args);
            }
            self.count_connection_call(spec, &args, started, &answer);
            match answer {
                Answer::Reply(reply) | Answer::Rejected(reply) => self.push(reply),
                Answer::Close(reply) => {
                    if let Some(reply) = reply {
                        self.push(reply);
                    }
                    return Flow::Close;
                }
                Answer::Engine => self.pending.push(Op::Command(args, Some(spec))),
                Answer::Block(b) => {
                    let mut info = self.handle.info.lock();
                    info.blocked = true;
                    info.blocked_with_timeout = b.timeout.is_some();
                    info.argv_mem = args.iter().map(|a| a.len()).sum();
                    drop(info);
                    self.blocked = Some(b);
                }
            }
            return Flow::Continue;
        }
        if spec.has(flags::SCRIPT) && !self.user.unrestricted() {
            // Its `redis.call`s are checked against this user where the script runs.
            self.pending.push(Op::AsUser(self.user.name.clone()));
        }
        self.pending.push(Op::Command(args, Some(spec)));
        Flow::Continue
    }

    /// [`Client::handle_request`]'s checks of a call that is not plain, in Redis's order
    /// (CLIENT REPLY, authentication, the command, its arity and subcommand, the ACL user,
    /// MONITOR and RESP2 subscribe mode): the command when the call goes on, or the flow
    /// after the refusal it answered.
    async fn screen(
        &mut self,
        request: &Request,
        spec: Option<&'static CommandSpec>,
    ) -> Result<&'static CommandSpec, Flow> {
        if self.reply_off || self.skip_next || self.skipping {
            // CLIENT REPLY OFF/SKIP decide per command: run each one on its own.
            self.flush_pending().await;
            self.skipping = std::mem::take(&mut self.skip_next);
        }
        if !self.authenticated && !spec.is_some_and(|s| s.has(flags::NO_AUTH)) {
            if let Some(spec) = spec {
                self.shared.engine.metrics().record_rejected(spec);
            }
            self.reject(Reply::err("NOAUTH Authentication required."))
                .await;
            return Err(Flow::Continue);
        }
        let Some(spec) = spec else {
            self.reject(command::unknown_command(&request_args(request)))
                .await;
            return Err(Flow::Continue);
        };
        if !command::arity_ok(spec, request.len()) {
            self.shared.engine.metrics().record_rejected(spec);
            if self.multi.is_some() && spec.has(flags::RUNS_TRANSACTION) {
                self.flush_pending().await;
                let reply = self
                    .abort_transaction(command::arity_error(spec.name))
                    .await;
                self.push(reply);
                // Redis's `execCommandAbort` feeds the refused EXEC to the monitors.
                if self.shared.engine.pubsub().monitors.active() {
                    self.feed_monitors(spec, &request_args(request));
                }
                return Err(Flow::Continue);
            }
            self.reject(command::arity_error(spec.name)).await;
            return Err(Flow::Continue);
        }
        // A container's subcommand is looked up and its arity checked before the call runs
        // or is queued (so a bad one dooms a transaction), as Redis does.
        if spec.has(flags::SUBCOMMANDS) {
            let refused = with_request_args(request, |a| {
                crate::acl::categories::subcommand_refusal(spec, a).inspect(|(_, sub)| {
                    if *sub {
                        self.shared.engine.metrics().record_rejected_call(spec, a);
                    }
                })
            });
            if let Some((reply, _)) = refused {
                self.reject(reply).await;
                return Err(Flow::Continue);
            }
        }
        // ACL: one epoch compare, and nothing more for a user with every permission.
        if self.acl_epoch != self.shared.engine.acl().epoch() && !self.refresh_user() {
            self.flush_pending().await;
            return Err(Flow::Close);
        }
        if !self.user.unrestricted() && !spec.has(flags::NO_AUTH) {
            let checked = with_request_args(request, |a| self.acl_check(spec, a));
            if let Err(e) = checked {
                self.reject_call(spec, e).await;
                return Err(Flow::Continue);
            }
        }
        // Redis counts a monitor as a replica, which may not touch the keyspace.
        // A container's call is judged by its subcommand's flags (MEMORY USAGE reads).
        if self.monitor
            && with_request_args(request, |a| spec.call_flags(a))
                & (flags::WRITE | flags::READONLY | flags::MAY_REPLICATE)
                != 0
        {
            self.reject_call(
                spec,
                Reply::err("ERR Replica can't interact with the keyspace"),
            )
            .await;
            return Err(Flow::Continue);
        }
        // RESP2 subscribe mode: only the subscription commands, PING, QUIT and RESET.
        if self.resp == 2 && self.subs.active() && self.multi.is_none() {
            if !spec.has(flags::SUBSCRIBED) {
                self.reject_call(spec, Reply::err(format!(
                    "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                    spec.name
                )))
                .await;
                return Err(Flow::Continue);
            }
            if spec.client.is_none() {
                // PING, the one keyspace row allowed here, answers as a message would.
                self.flush_pending().await;
                let message = with_request_args(request, |a| {
                    a.get(1)
                        .map(|m| Bytes::copy_from_slice(m))
                        .unwrap_or_default()
                });
                self.push(Reply::Array(vec![
                    Reply::bulk("pong"),
                    Reply::Bulk(message),
                ]));
                return Err(Flow::Continue);
            }
        }
        Ok(spec)
    }

    /// Count a connection command's call that started at `started` and answered `answer`
    /// (as its row's, or its subcommand's, stats; errorstats; the slow log): a refusal
    /// before it ran as a rejected call, an error as a failed one. Nothing for a call
    /// passed on to the engine, which counts it there.
    pub(super) fn count_connection_call(
        &self,
        spec: &'static CommandSpec,
        args: &[Bytes],
        started: std::time::Instant,
        answer: &Answer,
    ) {
        let metrics = self.shared.engine.metrics();
        if let Answer::Rejected(reply) = answer {
            command::with_slices(args, |a| metrics.record_rejected_call(spec, a));
            if let Reply::Error(e) = reply {
                metrics.record_error(e);
            }
            return;
        }
        if matches!(answer, Answer::Engine) {
            return;
        }
        let elapsed = started.elapsed();
        let failed = matches!(answer, Answer::Reply(Reply::Error(_)));
        command::with_slices(args, |a| metrics.record_call(spec, a, elapsed, failed));
        if let Answer::Reply(Reply::Error(e)) = answer {
            metrics.record_error(e);
        }
        let elapsed_ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        if metrics.is_notable(elapsed_ns) && metrics.note_command(spec, elapsed_ns) {
            let (addr, name) = {
                let info = self.handle.info.lock();
                (info.addr.to_string(), info.name.clone())
            };
            command::with_slices(args, |a| metrics.slowlog.push(a, elapsed, addr, name));
        }
    }

    /// Read this client's user again after an ACL change; false if it was deleted (the
    /// connection closes, as Redis kills the clients of a deleted user).
    pub(super) fn refresh_user(&mut self) -> bool {
        let acl = self.shared.engine.acl();
        self.acl_epoch = acl.epoch();
        match acl.get(&self.user.name) {
            Some(u) => {
                self.user.set(u);
                true
            }
            None => false,
        }
    }

    /// Check a call against the client's user; the refusal (Redis's NOPERM text) is
    /// logged in ACL LOG.
    pub(super) fn acl_check(&self, spec: &CommandSpec, args: &[&[u8]]) -> Result<(), Reply> {
        let context = if self.multi.is_some() {
            crate::acl::log::Context::Multi
        } else {
            crate::acl::log::Context::Toplevel
        };
        self.acl_check_in(spec, args, context, args)
            .map_err(|(denied, name)| Reply::err(denied.message(name)))
    }

    /// Check a call; on refusal log it with `context` and this client's line as it runs
    /// `running` (the call itself, or the EXEC that runs it), and give why and the
    /// command's full name.
    pub(super) fn acl_check_in(
        &self,
        spec: &CommandSpec,
        args: &[&[u8]],
        context: crate::acl::log::Context,
        running: &[&[u8]],
    ) -> Result<(), (crate::acl::Denied, &'static str)> {
        let Err(denied) = self.user.check(spec, args) else {
            return Ok(());
        };
        let name = crate::acl::categories::call_name(spec, args);
        let object = match denied {
            crate::acl::Denied::Command => name.to_string(),
            crate::acl::Denied::Key(at) | crate::acl::Denied::Channel(at) => {
                String::from_utf8_lossy(args[at]).into_owned()
            }
        };
        let info = self.own_line(running);
        self.shared.engine.acl().log.lock().add(
            denied.reason(),
            context,
            object,
            self.user.name.clone(),
            info,
        );
        Err((denied, name))
    }

    /// [`Client::reject`] a call of `spec` refused before it ran (INFO commandstats
    /// `rejected_calls`, as Redis's `rejectCommand` counts).
    async fn reject_call(&mut self, spec: &CommandSpec, r: Reply) {
        self.shared.engine.metrics().record_rejected(spec);
        self.reject(r).await;
    }

    /// Reply with an error; inside MULTI the error also dooms the transaction.
    async fn reject(&mut self, r: Reply) {
        if let Reply::Error(e) = &r {
            self.shared.engine.metrics().record_error(e);
        }
        self.flush_pending().await;
        if self.multi.is_some() {
            self.multi_dirty = true;
        }
        self.push(r);
    }

    /// Publish the database, protocol and MULTI state to CLIENT LIST.
    pub(super) fn sync_info(&self) {
        if let Some(m) = &self.subs.mailbox {
            m.set_resp(self.resp);
        }
        let mut info = self.handle.info.lock();
        info.db = self.db;
        info.resp = self.resp;
        info.in_multi = self.multi.is_some() || self.executing;
    }

    /// Publish the subscription counts to CLIENT LIST.
    pub(super) fn sync_subs(&self) {
        let (sub, psub, ssub) = self.subs.sizes();
        let mut info = self.handle.info.lock();
        info.subs = (sub, psub, ssub);
    }

    /// Feed a connection command that has just run to the monitors (`pubsub::monitor`).
    #[cold]
    pub(super) fn feed_monitors(&self, spec: &CommandSpec, args: &[Bytes]) {
        let source = crate::pubsub::monitor::Source::Client(self.handle.info.lock().addr);
        let monitors = &self.shared.engine.pubsub().monitors;
        command::with_slices(args, |a| monitors.after(spec, a, self.db, source));
    }

    /// MONITOR: from now on this connection gets a line for every command the node runs
    /// (a second MONITOR is answered nothing, as in Redis).
    pub(super) fn start_monitor(&mut self) -> Reply {
        if self.monitor {
            self.skipping = true;
            return Reply::ok();
        }
        let id = self.id();
        let mailbox = self
            .subs
            .mailbox
            .get_or_insert_with(|| crate::pubsub::Subscriber::new(id, self.resp))
            .clone();
        self.shared.engine.pubsub().monitors.add(mailbox);
        self.monitor = true;
        self.handle.info.lock().monitor = true;
        Reply::ok()
    }

    /// Leave MONITOR mode (RESET).
    pub(super) fn stop_monitor(&mut self) {
        if std::mem::take(&mut self.monitor) {
            let id = self.id();
            self.shared.engine.pubsub().monitors.remove(id);
            self.handle.info.lock().monitor = false;
        }
    }

    /// Bytes of replies not yet written, and the output buffer's capacity.
    pub(super) fn output(&self) -> (usize, usize) {
        (self.out.len(), self.out.capacity())
    }

    /// The name of the command being run (CLIENT LIST `cmd`, published once per read).
    pub(super) fn last_cmd(&self) -> &'static str {
        self.last_cmd
    }

    /// This client's CLIENT LIST line while it runs the call `a`, as Redis shows a client
    /// to itself (CLIENT INFO, CLIENT LIST) and in ACL LOG's `client-info`: `cmd` is the
    /// call itself (the published line still names the last command of the previous
    /// read), `argv-mem` its arguments, `qbuf` the whole read the call came in (commands
    /// before and after it in a pipeline included) and `obl` the replies ahead of this one
    /// not yet written.
    pub(super) fn own_line<A: AsRef<[u8]>>(&self, a: &[A]) -> String {
        let mut info = self.handle.info.lock().clone();
        info.argv_mem = a.iter().map(|x| x.as_ref().len()).sum();
        info.last_cmd = self.last_cmd();
        if let Some(queued) = &self.multi {
            (info.in_multi, info.multi_len) = (true, queued.len());
        }
        (info.qbuf, info.qbuf_capacity) = self.read;
        (info.obuf, info.obuf_capacity) = self.output();
        super::info::client_line(&info)
    }

    /// This client's id.
    pub(super) fn id(&self) -> u64 {
        self.handle.info.lock().id
    }
}

/// A large value on its way (a partial request whose next argument is a bulk string of at
/// least `parser::BIG_ARG` bytes): make room for all of it now, as Redis does, rather than
/// a read per doubling of the buffer. Off the hot path: only a partial request gets here.
#[cold]
#[inline(never)]
fn room_for_big_arg(input: &mut BytesMut, limits: &Limits) {
    if let Some(end) = crate::protocol::parser::big_bulk_end(input, limits) {
        if end > input.capacity() {
            input.reserve(end - input.len());
        }
    }
}

/// Move what is left of the input (a partial request, or nothing) to the front of its
/// buffer, as Redis's `sdsrange` moves the rest of its query buffer after a read's
/// commands ran, so that the next read lands in the lines the last one used (and CLIENT
/// LIST's `rbs`/`qbuf-free` show the whole buffer). Parsing advances the buffer's start,
/// and `BytesMut` moved it back only once the end was full: a pipelining connection's
/// reads walked its whole 16 KiB. Callgrind's cache simulation (`bench/cache_misses.sh`),
/// which does not see the kernel's copy into the buffer, counts the parser's read misses
/// about the same either way (0.52 and 0.50 a pipelined SADD, issue 21): with 50 busy
/// connections a line read once per turn of the event loop is evicted before that
/// connection's next read. Asking for one byte more than is free moves the data when the
/// room before it is at least as large as the data (at most one partial request), and
/// never allocates.
fn rewind(input: &mut BytesMut) {
    let free = input.capacity() - input.len();
    let _ = input.try_reclaim(free + 1);
}

/// Wait until messages arrive in `mailbox` (forever without one).
/// Resolves once the connection must close: it was killed (CLIENT KILL, an ACL change:
/// `ClientHandle::kill`) or the server shuts down. One future for the connection's life,
/// which every wait of the connection task polls (the read, the write, a blocked
/// command). A `notified()` and a `changed()` made for each read and each write
/// registered with the kill `Notify` and the shutdown `watch` and unregistered every time
/// (with select!'s random start, about 1,100 instructions an unpipelined request under
/// callgrind); polling the same two again still costs their locks (about 390). So the
/// two futures are registered once and polled again only after one of them woke
/// (`StopWaker`); otherwise a poll is a check of that flag and of the task's waker. A kill
/// sent while nothing polls is kept: its waiter stays registered. Once resolved it stays
/// resolved.
struct Stop {
    wait: Pin<Box<dyn Future<Output = ()> + Send + Sync>>,
    /// What `wait`'s futures wake: sets the flag, then wakes the connection task.
    waker: Arc<StopWaker>,
    /// `waker` as a `Waker`, made once.
    inner: std::task::Waker,
    done: bool,
}

/// The waker `Stop` gives its futures.
struct StopWaker {
    /// Set when `wait` must be polled again (and at first, so that it registers).
    woken: std::sync::atomic::AtomicBool,
    /// The connection task, to wake.
    task: Mutex<Option<std::task::Waker>>,
}

impl std::task::Wake for StopWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        if let Some(task) = self.task.lock().as_ref() {
            task.wake_by_ref();
        }
    }
}

impl Stop {
    fn new(shared: &Shared, handle: &Arc<ClientHandle>) -> Stop {
        let handle = handle.clone();
        let mut shutdown = shared.shutdown.subscribe();
        let waker = Arc::new(StopWaker {
            woken: std::sync::atomic::AtomicBool::new(true),
            task: Mutex::new(None),
        });
        Stop {
            wait: Box::pin(async move {
                if *shutdown.borrow_and_update() {
                    return;
                }
                tokio::select! {
                    _ = handle.kill.notified() => {}
                    _ = shutdown.changed() => {}
                }
            }),
            inner: std::task::Waker::from(waker.clone()),
            waker,
            done: false,
        }
    }
}

impl Future for Stop {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.done {
            return Poll::Ready(());
        }
        {
            let mut task = self.waker.task.lock();
            if !task.as_ref().is_some_and(|t| t.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        if !self.waker.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let this = &mut *self;
        let mut inner = Context::from_waker(&this.inner);
        if this.wait.as_mut().poll(&mut inner).is_pending() {
            return Poll::Pending;
        }
        this.done = true;
        Poll::Ready(())
    }
}

/// Returns `Pending` once, having woken its task: the task goes to the back of the
/// worker's run queue at once (tokio's `yield_now` instead waits for the next poll of the
/// I/O driver). A connection whose command served a blocked client (standalone: the woken
/// client's task was queued then) awaits it before writing its own reply, so that the
/// woken client's reply and its own leave one after the other, as redis-server writes
/// every reply of an event-loop turn at its end: a client process that holds both
/// connections (a ping-pong's pair) then wakes once for the two, not once for each with
/// the other tasks' reads and writes between (`bench/pingpong_counts.sh`, README
/// "pp85").
#[derive(Default)]
struct BehindServed(bool);

impl Future for BehindServed {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

async fn mailbox_ready(mailbox: &Option<Arc<crate::pubsub::Subscriber>>) {
    match mailbox {
        Some(m) => m.ready.notified().await,
        None => std::future::pending().await,
    }
}

/// A request's arguments as a list (a copy of a frame's), for the refusals that need one.
fn request_args(request: &Request) -> Vec<Bytes> {
    match request {
        Request::Frame(frame) => frame.clone().into_args(),
        Request::Args(args) => args.clone(),
    }
}

/// A call's arguments as [`Client::plain_call`] reads them: a frame (the fast path) or a
/// request (either form).
trait CallArgs {
    /// Number of arguments, the name included.
    fn argc(&self) -> usize;
    /// Argument `i` (empty past the last).
    fn arg(&self, i: usize) -> &[u8];
    /// `f` over the arguments as slices.
    fn with_args<T>(&self, f: impl FnOnce(&[&[u8]]) -> T) -> T;
}

impl CallArgs for crate::protocol::parser::Frame {
    #[inline]
    fn argc(&self) -> usize {
        self.len()
    }

    #[inline]
    fn arg(&self, i: usize) -> &[u8] {
        self.get(i).unwrap_or_default()
    }

    fn with_args<T>(&self, f: impl FnOnce(&[&[u8]]) -> T) -> T {
        crate::protocol::parser::Frame::with_args(self, f)
    }
}

impl CallArgs for Request {
    #[inline]
    fn argc(&self) -> usize {
        self.len()
    }

    fn arg(&self, i: usize) -> &[u8] {
        match self {
            Request::Frame(frame) => frame.get(i).unwrap_or_default(),
            Request::Args(args) => args.get(i).map_or(&[][..], |a| &a[..]),
        }
    }

    fn with_args<T>(&self, f: impl FnOnce(&[&[u8]]) -> T) -> T {
        with_request_args(self, f)
    }
}

/// `f` over a request's arguments as slices, borrowed from a frame or from an argument list.
fn with_request_args<T>(request: &Request, f: impl FnOnce(&[&[u8]]) -> T) -> T {
    match request {
        Request::Frame(frame) => frame.with_args(f),
        Request::Args(args) => command::with_slices(args, f),
    }
}
