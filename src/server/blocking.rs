//! The connection side of BLPOP & co.: run the pop once; when there is nothing to pop,
//! block the client on its keys until it is served, its timeout passes (local wall clock,
//! not replicated), CLIENT UNBLOCK releases it, or it disconnects.
//!
//! Standalone, the engine runs the first attempt and registers the waiter under one lock,
//! and serves it later from the batch that makes a key ready (`engine::blocking`). In a
//! cluster, a waiter is woken when its node applies an entry that touched one of its keys
//! and then proposes its pop through the log, like any write, so two clients on two nodes
//! never pop the same element; if the key is empty again when the pop applies, it stays
//! blocked. While blocked the connection keeps reading (and buffering) the socket so a
//! disconnect is seen; the buffered commands run once the client is released.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::connection::{Answer, Client};
use crate::command::blocking::parse_timeout;
use crate::command::{self, CommandSpec};
use crate::engine::blocking::nothing;
use crate::engine::{Batch, Op};
use crate::protocol::Reply;
use crate::pubsub::blocking::{Waiter, Want};

/// A client waiting in a blocking command (held by the connection until released; its
/// reply, once served or unblocked, is left in the waiter). Small enough to travel in
/// [`Answer`] without a box of its own.
pub struct Blocked {
    /// The registered waiter.
    pub waiter: Arc<Waiter>,
    /// How long to wait; None: forever.
    pub timeout: Option<Duration>,
    /// The command's row.
    pub spec: &'static CommandSpec,
    /// What it answers on timeout: a nil array (true) or nil.
    pub nil_array: bool,
}

impl Blocked {
    /// What it answers on timeout (nil, or a nil array).
    pub fn nothing(&self) -> Reply {
        if self.nil_array {
            Reply::NilArray
        } else {
            Reply::Nil
        }
    }
}

/// Where a blocking command's keys and timeout are.
#[derive(Clone, Copy)]
enum Shape {
    /// `key [key ...] timeout` (BLPOP, BRPOP, BZPOPMIN, BZPOPMAX).
    KeysThenTimeout,
    /// `source destination ... timeout`: blocks on the source only (BRPOPLPUSH, BLMOVE).
    Source,
    /// `timeout numkeys key [key ...] ...` (BLMPOP, BZMPOP).
    NumKeys,
}

/// BLPOP, BRPOP.
pub async fn list_keys_then_timeout(c: &mut Client, a: &[Bytes]) -> Answer {
    block(c, a, Want::List, Shape::KeysThenTimeout).await
}

/// BRPOPLPUSH, BLMOVE.
pub async fn list_source(c: &mut Client, a: &[Bytes]) -> Answer {
    block(c, a, Want::List, Shape::Source).await
}

/// BLMPOP.
pub async fn list_numkeys(c: &mut Client, a: &[Bytes]) -> Answer {
    block(c, a, Want::List, Shape::NumKeys).await
}

/// BZPOPMIN, BZPOPMAX.
pub async fn zset_keys_then_timeout(c: &mut Client, a: &[Bytes]) -> Answer {
    block(c, a, Want::ZSet, Shape::KeysThenTimeout).await
}

/// BZMPOP.
pub async fn zset_numkeys(c: &mut Client, a: &[Bytes]) -> Answer {
    block(c, a, Want::ZSet, Shape::NumKeys).await
}

async fn block(c: &mut Client, a: &[Bytes], want: Want, shape: Shape) -> Answer {
    let Some(spec) = command::lookup(&a[0]) else {
        return Answer::Engine;
    };
    let timeout_arg = match shape {
        Shape::KeysThenTimeout | Shape::Source => &a[a.len() - 1],
        Shape::NumKeys => &a[1],
    };
    // A bad timeout (or other argument) is answered by the handler's own checks.
    let timeout_ms = parse_timeout(timeout_arg).ok();
    // The batch's op list is the connection's (empty: the connection ran what was pending
    // before this command), handed back below: no list of its own per call.
    let mut ops = c.take_ops();
    ops.push(Op::Command(a.to_vec(), Some(spec)));
    let batch = Batch {
        db: c.db,
        resp: c.resp,
        ops,
        watch: None,
        transaction: false,
        client: Some(c.handle.clone()),
    };
    // Where the keys are in the arguments: the waiter keeps the range, not a list.
    let keys = match shape {
        Shape::KeysThenTimeout => 1..a.len().saturating_sub(1),
        Shape::Source => 1..2,
        Shape::NumKeys => {
            let n = command::args::int(&a[2]).unwrap_or(0).max(0) as usize;
            3..(3usize.saturating_add(n)).min(a.len())
        }
    };
    // The waiter is built only when the client is to block, on the batch's own argument
    // list (standalone; a cluster's waiter gets a copy, the batch going to the log).
    let (id, db, resp) = (c.id(), c.db, c.resp);
    let make = |args: Vec<Bytes>| Waiter::new(id, db, resp, args, keys, want);
    let (mut result, waiter) = c.shared.engine.execute_blocking(batch, make).await;
    c.keep_ops(std::mem::take(&mut result.spare));
    let reply = result
        .replies
        .and_then(|r| r.into_iter().next())
        .unwrap_or(Reply::Nil);
    let Some(waiter) = waiter else {
        return reply.into();
    };
    if !nothing(&reply) || timeout_ms.is_none() {
        c.shared.engine.pubsub().blocking.unblock(&waiter);
        return reply.into();
    }
    Answer::Block(Blocked {
        waiter,
        timeout: timeout_ms.filter(|ms| *ms > 0).map(Duration::from_millis),
        spec,
        nil_array: matches!(reply, Reply::NilArray),
    })
}
