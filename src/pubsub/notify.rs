//! Keyspace notifications: the `notify-keyspace-events` classes (Redis's flag letters and
//! their canonical text) and [`notify`], which commands call where Redis calls
//! `notifyKeyspaceEvent`. An event goes out as a message on `__keyspace@<db>__:<key>`
//! (payload: the event name) and/or `__keyevent@<db>__:<event>` (payload: the key),
//! delivered like any PUBLISH to this node's subscribers. Every event also tells the
//! blocked clients' registry (`blocking`) that the key changed.

use bytes::Bytes;

use super::Hub;

/// `K`: `__keyspace@<db>__:<key>` messages.
pub const KEYSPACE: u32 = 1;
/// `E`: `__keyevent@<db>__:<event>` messages.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME, ...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted-set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: a key expired.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: a key was evicted under `maxmemory`.
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands (Tollgate has no streams: never fired).
pub const STREAM: u32 = 1 << 10;
/// `m`: a key was missed.
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module events (Tollgate has no modules: never fired).
pub const MODULE: u32 = 1 << 13;
/// `n`: a new key was created.
pub const NEW: u32 = 1 << 14;
/// `A`: `g$lshzxetd`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Redis's `keyspaceEventsStringToFlags`: None for a character that is not a class.
pub fn parse(s: &str) -> Option<u32> {
    let mut flags = 0;
    for c in s.chars() {
        flags |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// Redis's `keyspaceEventsFlagsToString`: the text CONFIG GET shows.
pub fn to_text(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                s.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// Redis's `notifyKeyspaceEvent`: publish event `event` of class `class` on `key` of
/// database `db`, if `notify-keyspace-events` enables the class.
///
/// Inlined into every writing command: with no client blocked and the class off (the
/// default), two atomic loads and no call. Out of line, the call and its register saves
/// cost INCR 49 instructions per request (`bench/instructions.sh`, callgrind).
#[inline]
pub fn notify(hub: &Hub, class: u32, event: &str, key: &[u8], db: usize) {
    if hub.blocking.blocked() != 0 || hub.events() & class != 0 {
        deliver(hub, class, event, key, db);
    }
}

/// Not a `notify-keyspace-events` class (`parse` never sets it, so `notify`'s class test
/// ignores it): the emitter's mark on an event that only removes elements or the key (`del`,
/// `lpop`, `zrem`, `rename_from`, ...; `expired` and `evicted` are removals by their class).
/// Such an event never gives a blocked client something to pop (a client blocks only on a
/// key that is missing or of another type, and is served while the key holds anything), so
/// it does not make the key ready. Redis signals a key only on creation; before this, a
/// served pop that emptied its list fired `lpop` and `del` on a key its client still
/// waited on, which marked the key ready again (a copy of the key and another serving
/// round per blocking round trip, issue 19). A bit from the emitter rather than a match on
/// the event's name in `deliver`, which compared names on every event delivered;
/// `removes_only` keeps the list, and debug builds check every emitter against it.
pub const REMOVAL: u32 = 1 << 31;

/// The events that only remove: what the emitters mark with [`REMOVAL`] (or fire with
/// class [`EXPIRED`] or [`EVICTED`]). Debug builds only: `deliver` checks the mark.
#[cfg(debug_assertions)]
fn removes_only(event: &str) -> bool {
    matches!(
        event,
        "del"
            | "expired"
            | "evicted"
            | "lpop"
            | "rpop"
            | "lrem"
            | "ltrim"
            | "zpopmin"
            | "zpopmax"
            | "zrem"
            | "zremrangebyscore"
            | "zremrangebyrank"
            | "zremrangebylex"
            | "srem"
            | "spop"
            | "hdel"
            | "rename_from"
            | "move_from"
    )
}

#[inline(never)]
fn deliver(hub: &Hub, class: u32, event: &str, key: &[u8], db: usize) {
    // A client blocked on the key may now be served (whatever the setting says), unless
    // the event only took something away.
    let removal = class & (REMOVAL | EXPIRED | EVICTED) != 0;
    #[cfg(debug_assertions)]
    assert_eq!(
        removal,
        removes_only(event),
        "event {event}: the REMOVAL mark disagrees with the list of removals"
    );
    if !removal {
        hub.blocking.signal(db, key);
    }
    let flags = hub.events();
    if flags & class == 0 {
        return;
    }
    if flags & KEYSPACE != 0 {
        let mut channel = format!("__keyspace@{db}__:").into_bytes();
        channel.extend_from_slice(key);
        hub.publish(
            &Bytes::from(channel),
            &Bytes::copy_from_slice(event.as_bytes()),
            false,
        );
    }
    if flags & KEYEVENT != 0 {
        let channel = format!("__keyevent@{db}__:{event}");
        hub.publish(&Bytes::from(channel), &Bytes::copy_from_slice(key), false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_as_redis_prints_them() {
        // What redis-server 7.0.15 answers CONFIG GET with after CONFIG SET of the left.
        for (set, get) in [
            ("KEA", "AKE"),
            ("Kg", "gK"),
            ("Elx", "lxE"),
            ("", ""),
            ("A", "A"),
            ("Ag$lshzxeKEtmdn", "AKEm"),
            ("gx", "gx"),
            ("n", "n"),
            ("m", "m"),
            ("KEAn", "AKE"),
        ] {
            assert_eq!(to_text(parse(set).unwrap()), get, "{set}");
        }
        assert_eq!(parse("Q"), None);
    }

    #[test]
    fn the_removal_mark_is_no_class() {
        // `notify-keyspace-events` can never enable it: an event's class test sees only
        // its class.
        for c in "AKEg$lshzxetmdn".chars() {
            assert_eq!(parse(&c.to_string()).unwrap() & REMOVAL, 0, "{c}");
        }
        assert_eq!(to_text(ALL | REMOVAL), to_text(ALL));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "the REMOVAL mark disagrees")]
    fn an_unmarked_removal_is_caught_in_debug_builds() {
        let hub = Hub::default();
        hub.set_events(parse("KEA").unwrap());
        notify(&hub, GENERIC, "del", b"q", 0);
    }

    #[test]
    fn only_events_that_can_give_something_to_pop_make_a_key_ready() {
        use crate::pubsub::blocking::{Waiter, Want};
        let hub = Hub::default();
        let key = Bytes::from_static(b"q");
        let w = Waiter::new(1, 0, 2, vec![key.clone()], 0..1, Want::List);
        hub.blocking.block(&w);
        let take_ready = || {
            let mut ready = Vec::new();
            hub.blocking.swap_ready(&mut ready);
            ready
        };
        // What a served pop that empties its list fires, and other removals, as their
        // emitters mark them.
        for (class, event) in [
            (LIST | REMOVAL, "lpop"),
            (LIST | REMOVAL, "rpop"),
            (GENERIC | REMOVAL, "del"),
            (EXPIRED, "expired"),
            (EVICTED, "evicted"),
            (ZSET | REMOVAL, "zpopmin"),
            (GENERIC | REMOVAL, "rename_from"),
        ] {
            notify(&hub, class, event, b"q", 0);
        }
        assert!(take_ready().is_empty());
        // A key of another database or another key: not ready either.
        notify(&hub, LIST, "lpush", b"q", 1);
        notify(&hub, LIST, "lpush", b"other", 0);
        assert!(take_ready().is_empty());
        for event in [
            "lpush",
            "rpush",
            "linsert",
            "rename_to",
            "restore",
            "zadd",
            "sortstore",
        ] {
            notify(&hub, GENERIC | LIST | ZSET, event, b"q", 0);
            assert_eq!(take_ready(), vec![(0, key.clone())], "{event}");
        }
        // Nobody blocked: nothing is ever ready.
        hub.blocking.unblock(&w);
        notify(&hub, LIST, "lpush", b"q", 0);
        assert!(take_ready().is_empty());
    }
}
