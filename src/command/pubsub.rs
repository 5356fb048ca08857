//! Pub/Sub: PUBLISH and SPUBLISH (keyspace commands, so they run in pipelines, MULTI,
//! scripts and, in a cluster, through the Raft log, each node delivering to its own
//! subscribers when it applies the entry), and the rows of the connection commands
//! (SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and their UNSUBSCRIBEs, PUBSUB), whose handlers keep
//! the client's subscriptions in `crate::server::pubsub`. Delivery is `crate::pubsub`.

use bytes::Bytes;

use super::flags::{FAST, MAY_REPLICATE, NOSCRIPT, PUBSUB, SUBSCRIBED};
use super::Ctx;
use crate::protocol::Reply;
use crate::server::pubsub as conn;

/// PUBLISH channel message: the number of clients that received it (in a cluster, see
/// `Hub::publish`).
pub fn publish(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    Reply::Integer(ctx.ks.pubsub.publish(&a[1], &a[2], false))
}

/// SPUBLISH shardchannel message: as PUBLISH, to SSUBSCRIBE's subscribers.
pub fn spublish(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    Reply::Integer(ctx.ks.pubsub.publish(&a[1], &a[2], true))
}

/// Subscription commands: on the connection only, allowed in subscribe mode.
const SUB: u32 = PUBSUB | NOSCRIPT | SUBSCRIBED;

/// Pub/Sub commands.
pub const COMMANDS: &[super::CommandSpec] = &[
    crate::cmd!(
        "publish",
        3,
        PUBSUB | FAST | MAY_REPLICATE,
        0,
        0,
        0,
        publish
    ),
    crate::cmd!(
        "spublish",
        3,
        PUBSUB | FAST | MAY_REPLICATE,
        1,
        1,
        1,
        spublish
    ),
    crate::cmd!("subscribe", -2, SUB, 0, 0, 0, client: conn::subscribe),
    crate::cmd!("unsubscribe", -1, SUB, 0, 0, 0, client: conn::unsubscribe),
    crate::cmd!("psubscribe", -2, SUB, 0, 0, 0, client: conn::psubscribe),
    crate::cmd!("punsubscribe", -1, SUB, 0, 0, 0, client: conn::punsubscribe),
    crate::cmd!("ssubscribe", -2, SUB, 1, -1, 1, client: conn::ssubscribe),
    crate::cmd!("sunsubscribe", -1, SUB, 1, -1, 1, client: conn::sunsubscribe),
    crate::cmd!("pubsub", -2, super::flags::SUBCOMMANDS, 0, 0, 0, client: conn::pubsub)
        .subcommands(&[
            crate::sub!("pubsub|channels", PUBSUB),
            crate::sub!("pubsub|help", 0),
            crate::sub!("pubsub|numpat", PUBSUB),
            crate::sub!("pubsub|numsub", PUBSUB),
            crate::sub!("pubsub|shardchannels", PUBSUB),
            crate::sub!("pubsub|shardnumsub", PUBSUB),
        ]),
];
