//! Transactions on a connection: MULTI, EXEC, DISCARD, WATCH and UNWATCH.
//!
//! MULTI starts a queue on the client (`Client::multi`; the connection queues every
//! command whose row is not `NOT_QUEUED`). EXEC sends the queued keyspace commands to
//! the engine as one batch, so they run atomically, with a [`WatchGuard`] when keys are
//! WATCHed: standalone a flag the keyspace sets when a watched key is written, in a cluster
//! the keys' content digests, compared where the batch is applied.

use bytes::Bytes;

use super::connection::{Answer, Client};
use crate::engine::{Op, WatchGuard};
use crate::protocol::Reply;
use crate::store::WatchFlag;

/// The keys a client WATCHes.
pub(super) struct WatchState {
    flag: WatchFlag,
    keys: Vec<(usize, Bytes)>,
    existed: Vec<(usize, Bytes)>,
    /// Cluster mode: content digests at WATCH time (see `engine::WatchGuard::digests`).
    digests: Vec<(usize, Bytes, u64)>,
}

/// MULTI
pub async fn multi(c: &mut Client, _a: &[Bytes]) -> Answer {
    c.multi().into()
}

/// EXEC
pub async fn exec(c: &mut Client, _a: &[Bytes]) -> Answer {
    if let Some(refusal) = c.exec_refusal() {
        return Answer::Rejected(match c.multi.is_some() {
            true => c.abort_transaction(refusal).await,
            false => refusal,
        });
    }
    c.exec().await
}

/// DISCARD
pub async fn discard(c: &mut Client, _a: &[Bytes]) -> Answer {
    c.discard().await.into()
}

/// WATCH key [key ...]
pub async fn watch(c: &mut Client, a: &[Bytes]) -> Answer {
    c.watch_keys(&a[1..]).await.into()
}

/// UNWATCH
pub async fn unwatch(c: &mut Client, _a: &[Bytes]) -> Answer {
    c.unwatch().await;
    Reply::ok().into()
}

impl Client {
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

    /// EXEC refused before it ran (Redis's `execCommandAbort`): the transaction is
    /// discarded and `refusal` becomes the reason of an EXECABORT (without its `ERR`, as
    /// Redis formats those refusals).
    pub(super) async fn abort_transaction(&mut self, refusal: Reply) -> Reply {
        self.multi = None;
        self.multi_dirty = false;
        self.unwatch().await;
        self.sync_info();
        let text = match &refusal {
            Reply::Error(e) => e.strip_prefix("ERR ").unwrap_or(e).to_string(),
            _ => String::new(),
        };
        Reply::err(format!(
            "EXECABORT Transaction discarded because of: {text}"
        ))
    }

    /// Redis's `processCommand` refusals of EXEC, before it runs: while a script is busy
    /// (EXEC has no `allow-busy`), and when the transaction writes while
    /// `min-replicas-to-write` is not met (the setting changed after its writes were
    /// queued). A transaction refused so is discarded; none of it runs.
    fn exec_refusal(&self) -> Option<Reply> {
        if let Some(busy) = self.shared.engine.busy() {
            return Some(Reply::err(busy));
        }
        let writes = |queued: &super::connection::Queued| {
            queued.iter().any(|(args, spec)| {
                crate::command::with_slices(args, |a| crate::acl::categories::call_writes(spec, a))
            })
        };
        if self.shared.engine.no_good_replicas() && self.multi.as_ref().is_some_and(writes) {
            return Some(Reply::err(crate::store::NOREPLICAS));
        }
        None
    }

    async fn exec(&mut self) -> Answer {
        let Some(queued) = self.multi.take() else {
            return Reply::err("ERR EXEC without MULTI").into();
        };
        if std::mem::take(&mut self.multi_dirty) {
            self.sync_info();
            self.unwatch().await;
            return Reply::err("EXECABORT Transaction discarded because of previous errors.")
                .into();
        }
        // While EXEC runs, the client is shown still in its transaction (Redis's flags `x`
        // and `multi=<queued>` in ACL LOG's client-info) until it has run.
        {
            let mut info = self.handle.info.lock();
            info.in_multi = true;
            info.multi_len = queued.len();
        }
        self.executing = true;
        let reply = self.run_transaction(queued).await;
        self.executing = false;
        self.sync_info();
        reply
    }

    /// Run a transaction's `queued` commands (EXEC after its checks). A transaction the
    /// engine refused whole (`-OOM` over `maxmemory`, `NOREPLICAS`) is a rejected EXEC, as
    /// Redis's `rejectCommand` counts it.
    async fn run_transaction(&mut self, queued: super::connection::Queued) -> Answer {
        // Keyspace commands (SELECT among them) run in the engine as one atomic batch; the
        // connection commands queued run once it has (so that a transaction the engine
        // refuses or a changed WATCHed key aborts runs nothing at all).
        let mut ops = Vec::with_capacity(queued.len() + 1);
        if !self.user.unrestricted() {
            // Scripts in the transaction check their calls against this user.
            ops.push(Op::AsUser(self.user.name.clone()));
        }
        let mut close = false;
        let mut slots: Vec<Option<Reply>> = Vec::with_capacity(queued.len());
        // BGSAVE and BGREWRITEAOF are scheduled, as Redis schedules them inside EXEC: they
        // start once the transaction has run (so a snapshot holds its writes).
        let mut scheduled: Vec<(usize, Vec<Bytes>)> = Vec::new();
        let mut connection: Vec<(usize, Vec<Bytes>, &'static crate::command::CommandSpec)> =
            Vec::new();
        for (args, spec) in queued {
            // As Redis: permissions are checked again at EXEC, in case the user's rules
            // changed after the command was queued.
            if !self.user.unrestricted() {
                let checked = crate::command::with_slices(&args, |a| {
                    self.acl_check_in(spec, a, crate::acl::log::Context::Multi, &[b"exec"])
                });
                if let Err((denied, _)) = checked {
                    slots.push(Some(Reply::err(format!(
                        "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {}",
                        denied.exec_reason()
                    ))));
                    continue;
                }
            }
            if spec.runs_in_engine() {
                ops.push(Op::Command(args, Some(spec)));
                slots.push(None);
            } else if spec.name == "monitor" {
                // Redis's refusal: a transaction's client expects one reply per command.
                slots.push(Some(Reply::err(
                    "ERR MONITOR isn't allowed for DENY BLOCKING client",
                )));
            } else if spec.name == "bgsave" || spec.name == "bgrewriteaof" {
                scheduled.push((slots.len(), args));
                slots.push(Some(Reply::Nil));
            } else {
                // A connection command (CONFIG, CLIENT, AUTH, ...): run once the batch has
                // (see `run_connection_command`).
                connection.push((slots.len(), args, spec));
                slots.push(Some(Reply::Nil));
            }
        }
        let watch = self.watch.as_ref().map(|w| WatchGuard {
            flag: w.flag.clone(),
            existed: w.existed.clone(),
            digests: w.digests.clone(),
        });
        let result = self.run_batch(ops, watch, true).await;
        self.unwatch().await;
        if let Some(Reply::Error(reason)) = result.aborted {
            return Answer::Rejected(Reply::err(format!(
                "EXECABORT Transaction discarded because of: {reason}"
            )));
        }
        let Some(replies) = result.replies else {
            return Reply::NilArray.into();
        };
        // A transaction the cluster could not run at all gets one error, not one per command
        // (no command ever answers CLUSTERDOWN itself, so this is never a partial result).
        let down = |r: &Reply| matches!(r, Reply::Error(e) if e.starts_with("CLUSTERDOWN"));
        if self.shared.engine.cluster().is_some() && !replies.is_empty() && replies.iter().all(down)
        {
            return replies.into_iter().next().unwrap_or(Reply::NilArray).into();
        }
        self.db = result.db;
        for (slot, args, spec) in connection {
            let (reply, closes) = self.run_connection_command(spec, &args).await;
            close |= closes;
            slots[slot] = Some(reply);
        }
        self.sync_info();
        for (slot, args) in scheduled {
            slots[slot] = Some(super::persistence::schedule_in_exec(&self.shared, &args).await);
        }
        let mut replies = replies.into_iter();
        let reply = Reply::Array(
            slots
                .into_iter()
                .map(|s| s.unwrap_or_else(|| replies.next().unwrap_or(Reply::Nil)))
                .collect(),
        );
        match close {
            true => Answer::Close(Some(reply)),
            false => reply.into(),
        }
    }

    /// A connection command of a transaction (CONFIG, CLIENT, ACL, AUTH, HELLO, COMMAND,
    /// MEMORY, INFO, ...) run at EXEC through its row's connection handler, as outside
    /// MULTI and counted the same way; with whether the connection must close after the
    /// reply (CLIENT KILL of this client). It runs once the transaction's keyspace commands
    /// have run as one batch, in queue order with the other connection commands: it sees
    /// the state after all of them, and a change it makes (CONFIG SET, AUTH) takes effect
    /// for later commands, not for those keyspace commands, which were checked and ran
    /// first (README, Transactions). In a cluster it runs on the node that runs the EXEC.
    async fn run_connection_command(
        &mut self,
        spec: &'static crate::command::CommandSpec,
        args: &[Bytes],
    ) -> (Reply, bool) {
        // Rows with a keyspace handler or that block run in the engine's batch, never
        // here.
        let unsupported = || {
            let e = format!("ERR '{}' is not supported inside MULTI", spec.name);
            (Reply::err(e), false)
        };
        let Some(handler) = spec.client else {
            return unsupported();
        };
        let started = std::time::Instant::now();
        let answer = handler(self, args).await;
        if self.shared.engine.pubsub().monitors.active() {
            self.feed_monitors(spec, args);
        }
        self.count_connection_call(spec, args, started, &answer);
        match answer {
            Answer::Reply(reply) | Answer::Rejected(reply) => (reply, false),
            Answer::Close(reply) => (reply.unwrap_or(Reply::Nil), true),
            Answer::Engine | Answer::Block(_) => unsupported(),
        }
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

    /// Forget the WATCHed keys.
    pub(super) async fn unwatch(&mut self) {
        if let Some(w) = self.watch.take() {
            let mut state = self.shared.engine.lock().await;
            for (db, k) in &w.keys {
                state.ks.dbs[*db].unwatch(k, &w.flag);
            }
        }
    }
}
