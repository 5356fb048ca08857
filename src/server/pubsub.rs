//! The pub/sub connection commands: SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, their UNSUBSCRIBEs
//! (the client's subscriptions, `pubsub::ClientSubs`, registered in the engine's
//! `pubsub::Hub`) and PUBSUB's introspection. Subscriptions are this node's: in a cluster
//! each node delivers every applied message to its own subscribers.
//!
//! A confirmation per channel is sent as a RESP3 push (an array in RESP2). While a RESP2
//! client has a subscription it is in subscribe mode: `connection.rs` refuses the commands
//! whose row lacks `SUBSCRIBED`.

use bytes::Bytes;

use super::connection::{Answer, Client};
use crate::command;
use crate::command::args::is;
use crate::protocol::Reply;
use crate::pubsub::Kind;

async fn subscribe_kind(c: &mut Client, a: &[Bytes], kind: Kind) -> Answer {
    let hub = c.shared.engine.pubsub().clone();
    let id = c.id();
    let replies = c.subs.subscribe(&hub, kind, &a[1..], id, c.resp);
    c.sync_subs();
    // The user changed between the check of this call and the subscription (an ACL
    // change applied meanwhile, which did not see it): check again, as the change would
    // have (`server::acl::close_clients`).
    if c.acl_epoch != c.shared.engine.acl().epoch()
        && (!c.refresh_user() || !super::acl::subscriptions_allowed(&c.user, &hub, id))
    {
        return Answer::Close(None);
    }
    many(c, replies)
}

async fn unsubscribe_kind(c: &mut Client, a: &[Bytes], kind: Kind) -> Answer {
    let hub = c.shared.engine.pubsub().clone();
    let id = c.id();
    let replies = c.subs.unsubscribe(&hub, kind, &a[1..], id);
    c.sync_subs();
    many(c, replies)
}

/// Send all replies but the last, answer with the last.
fn many(c: &mut Client, mut replies: Vec<Reply>) -> Answer {
    let last = replies.pop().unwrap_or(Reply::Nil);
    for r in replies {
        c.push(r);
    }
    last.into()
}

/// SUBSCRIBE channel [channel ...]
pub async fn subscribe(c: &mut Client, a: &[Bytes]) -> Answer {
    subscribe_kind(c, a, Kind::Channel).await
}

/// UNSUBSCRIBE [channel ...]
pub async fn unsubscribe(c: &mut Client, a: &[Bytes]) -> Answer {
    unsubscribe_kind(c, a, Kind::Channel).await
}

/// PSUBSCRIBE pattern [pattern ...]
pub async fn psubscribe(c: &mut Client, a: &[Bytes]) -> Answer {
    subscribe_kind(c, a, Kind::Pattern).await
}

/// PUNSUBSCRIBE [pattern ...]
pub async fn punsubscribe(c: &mut Client, a: &[Bytes]) -> Answer {
    unsubscribe_kind(c, a, Kind::Pattern).await
}

/// SSUBSCRIBE shardchannel [shardchannel ...]
pub async fn ssubscribe(c: &mut Client, a: &[Bytes]) -> Answer {
    subscribe_kind(c, a, Kind::Shard).await
}

/// SUNSUBSCRIBE [shardchannel ...]
pub async fn sunsubscribe(c: &mut Client, a: &[Bytes]) -> Answer {
    unsubscribe_kind(c, a, Kind::Shard).await
}

const HELP: &[&str] = &[
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
];

/// PUBSUB CHANNELS|NUMSUB|NUMPAT|SHARDCHANNELS|SHARDNUMSUB|HELP: this node's subscriptions
/// (the subcommand and its arity checked against the command table before this runs).
pub async fn pubsub(c: &mut Client, a: &[Bytes]) -> Answer {
    let hub = c.shared.engine.pubsub();
    let sub = &a[1];
    let reply = if is(sub, "help") {
        command::help_reply("PUBSUB", HELP)
    } else if is(sub, "channels") || is(sub, "shardchannels") {
        let shard = is(sub, "shardchannels");
        if a.len() > 3 {
            command::subcommand_syntax_error(a)
        } else {
            let names = hub.channels(a.get(2).map(|p| &p[..]), shard);
            Reply::Array(names.into_iter().map(Reply::Bulk).collect())
        }
    } else if is(sub, "numsub") || is(sub, "shardnumsub") {
        let shard = is(sub, "shardnumsub");
        let mut out = Vec::with_capacity(2 * (a.len() - 2));
        for ch in &a[2..] {
            out.push(Reply::Bulk(ch.clone()));
            out.push(Reply::Integer(hub.numsub(ch, shard) as i64));
        }
        Reply::Array(out)
    } else if is(sub, "numpat") {
        Reply::Integer(hub.numpat() as i64)
    } else {
        command::unknown_subcommand(&a[0], sub)
    };
    reply.into()
}
