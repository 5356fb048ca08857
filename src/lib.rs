//! Tollgate: a rate-limiter server that speaks the Redis protocol.
//!
//! Data flows top to bottom, never back up:
//!
//! - [`server`]: the listener and one task per connection, which owns the client's state
//!   (selected db, RESP version, AUTH, MULTI queue, WATCH) and parses requests with
//!   [`protocol`].
//! - [`command`]: the command table (one row per command: name, arity, flags, key
//!   positions, handlers) and one file per command family; a keyspace command is
//!   `fn(&mut Ctx, &[Bytes]) -> Reply`.
//! - [`engine`]: applies batches of commands to the [`store`] with one `now_ms`; this
//!   `apply` path is deterministic (no clock reads, no randomness, no dependence on hash
//!   iteration order), so the same code can serve as a replicated state machine.
//! - [`store`]: 16 databases of sharded maps of values with millisecond expiry.
//!
//! Beside them: [`limiter`] (the pure limiter algorithms), [`scripting`] (the Lua VM and
//! the `redis.*` API), [`persistence`] (Redis's RDB format: DUMP/RESTORE payloads, whole
//! `dump.rdb` files, the `tollgate import-rdb` client tool), [`numbers`] and [`glob`]
//! (number and pattern handling that must match Redis's C code), [`config`] and
//! [`alloc`], and [`metrics`] (what INFO and `/metrics` report about the commands run). `ARCHITECTURE.md` follows a request from socket to reply and lists what to
//! touch to add a command, an algorithm, a setting or a metric.

pub mod acl;
pub mod alloc;
pub mod command;
pub mod config;
pub mod engine;
pub mod glob;
pub mod limiter;
pub mod metrics;
pub mod numbers;
pub mod persistence;
pub mod protocol;
pub mod pubsub;
pub mod scripting;
pub mod server;
pub mod store;
