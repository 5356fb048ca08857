//! The engine: where keyspace commands are applied, with `now_ms` from one clock.
//!
//! Standalone, a batch of commands from one client is applied under one lock of the
//! state, so a pipeline of many commands costs one lock acquisition and a MULTI block
//! or script is atomic. The `apply` path (`command::execute` with a `Ctx`) depends only on
//! the state, the command and `now_ms`, so the replicated engine reuses it unchanged as
//! its state machine.

pub mod clock;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};

use crate::command::{self, flags, Ctx, Scripts};
use crate::protocol::Reply;
use crate::scripting::{self, ScriptControl, ScriptEngine, ScriptLimits};
use crate::store::{Keyspace, WatchFlag};
pub use clock::Clock;

/// Everything commands execute against.
pub struct State {
    /// The databases.
    pub ks: Keyspace,
    /// The Lua engine: script cache and function libraries are state too.
    pub scripts: ScriptEngine,
    /// BUSY / SCRIPT KILL control of the running script.
    pub control: Arc<ScriptControl>,
}

impl Default for State {
    fn default() -> Self {
        State {
            ks: Keyspace::default(),
            scripts: ScriptEngine::new(ScriptLimits::default()),
            control: Arc::new(ScriptControl::new()),
        }
    }
}

/// One step of a batch: a keyspace command, or a switch of the selected database
/// (SELECT inside MULTI).
#[derive(Debug, Clone)]
pub enum Op {
    /// A keyspace command with its arguments (name first).
    Command(Vec<Bytes>),
    /// Select another database for the following commands.
    Select(usize),
}

/// What EXEC checks before running a transaction.
#[derive(Debug, Clone, Default)]
pub struct WatchGuard {
    /// Set by the keyspace when a watched key is written.
    pub flag: WatchFlag,
    /// Watched keys that existed at WATCH time: if one has expired since, EXEC fails.
    pub existed: Vec<(usize, Bytes)>,
}

/// A batch of operations from one client.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The client's selected database at the start of the batch.
    pub db: usize,
    /// The client's protocol version.
    pub resp: u8,
    /// The operations, in order.
    pub ops: Vec<Op>,
    /// For EXEC: abort with a null reply if a watched key changed.
    pub watch: Option<WatchGuard>,
}

impl Batch {
    /// Whether any command of the batch runs a Lua script.
    pub fn runs_script(&self) -> bool {
        self.ops.iter().any(|op| match op {
            Op::Command(args) => args
                .first()
                .and_then(|n| command::lookup(n))
                .is_some_and(|s| s.has(flags::SCRIPT)),
            Op::Select(_) => false,
        })
    }
}

/// The result of a batch: one reply per `Op::Command`, and the database selected at the end.
#[derive(Debug)]
pub struct BatchResult {
    /// Replies in order (None for the whole batch means EXEC aborted by WATCH).
    pub replies: Option<Vec<Reply>>,
    /// The selected database after the batch.
    pub db: usize,
}

/// Settings the engine reads on every batch.
#[derive(Debug)]
pub struct EngineSettings {
    /// After this long a running script makes other clients get -BUSY.
    pub busy_reply_threshold: Duration,
}

/// The standalone engine.
pub struct Engine {
    state: Mutex<State>,
    control: Arc<ScriptControl>,
    clock: Clock,
    settings: parking_lot::RwLock<EngineSettings>,
}

/// BUSY text for a running script.
pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

impl Engine {
    /// A new engine with empty state.
    pub fn new(clock: Clock) -> Arc<Engine> {
        let state = State::default();
        Arc::new(Engine {
            control: state.control.clone(),
            state: Mutex::new(state),
            clock,
            settings: parking_lot::RwLock::new(EngineSettings {
                busy_reply_threshold: Duration::from_millis(5000),
            }),
        })
    }

    /// The engine's clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Change the BUSY threshold (CONFIG SET busy-reply-threshold).
    pub fn set_busy_threshold(&self, d: Duration) {
        self.settings.write().busy_reply_threshold = d;
    }

    /// The BUSY threshold.
    pub fn busy_threshold(&self) -> Duration {
        self.settings.read().busy_reply_threshold
    }

    /// Lock the state for direct access (server commands, tests). While a script runs
    /// this waits without blocking the runtime's thread.
    pub async fn lock(&self) -> MutexGuard<'_, State> {
        loop {
            if let Some(g) = self.state.try_lock() {
                return g;
            }
            if self.control.running_for().is_none() {
                return self.state.lock();
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// The running script's control block (SCRIPT KILL, FUNCTION KILL, BUSY).
    pub fn script_control(&self) -> &Arc<ScriptControl> {
        &self.control
    }

    /// Apply a batch atomically and return its replies.
    ///
    /// While a script holds the state, other clients wait; once it has run past
    /// `busy-reply-threshold` they get `-BUSY` instead, as in Redis.
    pub async fn execute(&self, batch: Batch) -> BatchResult {
        let mut guard = loop {
            if let Some(g) = self.state.try_lock() {
                break g;
            }
            if self.control.running_for().is_none() {
                break self.state.lock();
            }
            if let Some(text) = scripting::busy_error(&self.control, self.busy_threshold()) {
                let n = batch
                    .ops
                    .iter()
                    .filter(|o| matches!(o, Op::Command(_)))
                    .count();
                return BatchResult {
                    replies: Some(vec![Reply::err(text); n]),
                    db: batch.db,
                };
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        let now_ms = self.clock.now_ms();
        if batch.runs_script() {
            // A script may run for seconds: let the runtime move this worker's other
            // connections to another thread meanwhile.
            tokio::task::block_in_place(|| apply_batch(&mut guard, &batch, now_ms))
        } else {
            apply_batch(&mut guard, &batch, now_ms)
        }
    }

    /// Delete up to `limit` expired keys per database; returns how many were deleted.
    pub fn expire_cycle(&self, limit: usize) -> usize {
        let now = self.clock.now_ms();
        // Never wait behind a running script: the next cycle will catch up.
        let Some(mut state) = self.state.try_lock() else {
            return 0;
        };
        state
            .ks
            .dbs
            .iter_mut()
            .map(|db| db.delete_expired(now, limit))
            .sum()
    }
}

/// Apply a batch to `state` at time `now_ms`: the deterministic core shared by the
/// standalone engine and the replicated state machine.
pub fn apply_batch(state: &mut State, batch: &Batch, now_ms: u64) -> BatchResult {
    if let Some(w) = &batch.watch {
        let expired = w
            .existed
            .iter()
            .any(|(db, key)| !state.ks.dbs[*db].contains(key, now_ms));
        if w.flag.load(Ordering::Relaxed) || expired {
            return BatchResult {
                replies: None,
                db: batch.db,
            };
        }
    }
    let mut db = batch.db;
    let mut replies = Vec::with_capacity(batch.ops.len());
    for op in &batch.ops {
        match op {
            Op::Select(d) => db = *d,
            Op::Command(args) => {
                let mut ctx = Ctx {
                    ks: &mut state.ks,
                    db,
                    now_ms,
                    resp: batch.resp,
                    scripts: Some(Scripts {
                        engine: &mut state.scripts,
                        control: &state.control,
                    }),
                };
                replies.push(command::execute(&mut ctx, args));
            }
        }
    }
    BatchResult {
        replies: Some(replies),
        db,
    }
}
