//! The replicated state machine: what one Raft command carries ([`Proposal`]) and how every
//! node applies it to the shared [`State`] ([`ReplicatedState`]).
//!
//! A proposal is one client batch (a pipeline chunk, a MULTI/EXEC block or a script) or one
//! expiry sweep of the leader, applied atomically under the state lock with the entry's
//! leader-stamped `now_ms`, through exactly the code the standalone engine runs. WATCH cannot
//! ride along as a process-local flag, so a WATCHed EXEC carries the content digest of each
//! watched key taken at WATCH time and aborts (null reply) when any differs at apply: every
//! replica sees the same state at that log position and so decides the same way.
//!
//! A snapshot holds the keyspace (`store::snapshot::encode`, expired-but-not-yet-purged keys
//! included, since their deletion is itself a replicated entry) and the scripting state
//! (cached EVAL bodies and function libraries).

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use serde::ser::{SerializeSeq, SerializeTupleVariant, Serializer};
use serde::{Deserialize, Serialize};

use super::{apply_ops, Batch, BatchResult, Op, Stamp, State};
use crate::protocol::parser::Frame;
use crate::scripting::ScriptsExport;
use crate::store::snapshot;

/// One replicated command: a client batch with its WATCH digests.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Proposal {
    /// The client's selected database at the start of the batch.
    pub db: usize,
    /// The client's protocol version (replies are built for it).
    pub resp: u8,
    /// The operations, in order. A parsed [`Op::Frame`] stays one here (the leader's own
    /// apply runs it on its borrowed arguments, as a standalone server does) and is written
    /// to the log as the [`Op::Command`] of its arguments, byte for byte what that command
    /// encodes to, so every other copy decodes as a `Command` ([`serialize_ops`]).
    #[serde(serialize_with = "serialize_ops")]
    pub ops: Vec<Op>,
    /// For a WATCHed EXEC: `(db, key, digest at WATCH time)`; abort if any differs.
    pub watch: Option<Vec<(usize, Bytes, u64)>>,
}

impl Proposal {
    /// The replicated form of `batch` (its WATCH flag is dropped; its digests are kept).
    pub fn from_batch(batch: Batch) -> Proposal {
        Proposal {
            db: batch.db,
            resp: batch.resp,
            ops: batch.ops,
            watch: batch.watch.map(|w| w.digests),
        }
    }
}

/// Write `ops` for the log, each [`Op::Frame`] as the [`Op::Command`] of its arguments. A
/// frame's fast handler and the command's handler are one function (`cmd!`'s `fast:` rows),
/// so a replica applying the decoded `Command` does what the leader did with the frame
/// (the determinism rule). The connection then never builds the argument list a `Command`
/// needs (an allocation and a reference count per argument): with `-P 32` LIMIT.TOKEN on a
/// durable node, 5,778 -> 4,959 instructions per request under callgrind.
fn serialize_ops<S: Serializer>(ops: &[Op], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(ops.iter().map(LogOp))
}

/// One operation as the log holds it (see [`serialize_ops`]).
struct LogOp<'a>(&'a Op);

/// `Op::Command`'s place among `Op`'s variants, which serde writes before its fields.
const COMMAND_VARIANT: u32 = 0;

impl Serialize for LogOp<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Op::Frame(frame, _) => {
                // `Op::Command`'s derived form: a tuple variant of one field (the table
                // entry is skipped), the arguments.
                let mut variant =
                    serializer.serialize_tuple_variant("Op", COMMAND_VARIANT, "Command", 1)?;
                variant.serialize_field(&FrameArgs(frame))?;
                variant.end()
            }
            op => op.serialize(serializer),
        }
    }
}

/// A frame's arguments, written as a `Vec<Bytes>` is: a sequence of byte strings.
struct FrameArgs<'a>(&'a Frame);

impl Serialize for FrameArgs<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for i in 0..self.0.len() {
            seq.serialize_element(&ArgBytes(self.0.arg(i)))?;
        }
        seq.end()
    }
}

/// One argument, written as `Bytes` is (`serialize_bytes`).
struct ArgBytes<'a>(&'a [u8]);

impl Serialize for ArgBytes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

/// What a snapshot stores.
#[derive(Serialize, Deserialize)]
struct SnapshotData {
    /// `store::snapshot::encode` of the keyspace.
    keyspace: Vec<u8>,
    /// Cached EVAL scripts and function libraries.
    scripts: ScriptsExport,
    /// The ACL users as (name, rules). Snapshots written before ACL users existed end
    /// before this field and are read as [`SnapshotDataV1`].
    users: Vec<(String, Vec<String>)>,
}

/// A snapshot written before ACL users were part of the state (no `users`): it restores
/// the keyspace and scripts and keeps the node's users as they are.
#[derive(Deserialize)]
struct SnapshotDataV1 {
    keyspace: Vec<u8>,
    scripts: ScriptsExport,
}

/// The Raft state machine over the engine's state.
pub struct ReplicatedState {
    state: Arc<Mutex<State>>,
}

impl ReplicatedState {
    /// A state machine applying to `state` (shared with the engine's local reads).
    pub fn new(state: Arc<Mutex<State>>) -> ReplicatedState {
        ReplicatedState { state }
    }
}

/// Apply `p` to `state` at `stamp`: the WATCH check, then the operations.
pub fn apply_proposal(state: &mut State, p: &Proposal, stamp: Stamp) -> BatchResult {
    let now_ms = stamp.now_ms();
    if let Some(watched) = &p.watch {
        let changed = watched.iter().any(|(db, key, digest)| {
            state
                .ks
                .dbs
                .get(*db)
                .is_none_or(|d| snapshot::entry_digest(d, key, now_ms) != *digest)
        });
        if changed {
            return BatchResult::ran(None, p.db);
        }
    }
    apply_ops(state, p.db, p.resp, &p.ops, stamp)
}

impl tollgate_raft::StateMachine for ReplicatedState {
    type Command = Proposal;
    type Output = BatchResult;

    fn apply(&self, cmd: &Proposal, at: tollgate_raft::Stamp) -> BatchResult {
        // The seed of the proposal's random choices: its place in the log, the same on
        // every replica.
        let stamp = Stamp {
            now_us: at.time_us,
            seed: crate::command::collection::mix(at.index) ^ at.position as u64,
        };
        // A script that runs long hands this runtime worker to another thread from its
        // count hook (`command::scripting`), as on a standalone server.
        let mut state = self.state.lock();
        let result = apply_proposal(&mut state, cmd, stamp);
        // Clients blocked here on keys this entry made ready propose their pops now.
        super::blocking::wake_ready(&state);
        // The leader evicts when a write left memory over `maxmemory` (a follower's task
        // finds it is not the leader and does nothing).
        state.memory.wake_if_over();
        result
    }

    /// Each operation of a proposal runs a microsecond after the one before (see
    /// `engine::Stamp`), so a proposal takes as many microseconds as it has operations.
    fn span_us(&self, cmd: &Proposal) -> u64 {
        cmd.ops.len() as u64
    }

    fn snapshot(&self) -> Vec<u8> {
        let state = self.state.lock();
        let data = SnapshotData {
            keyspace: snapshot::encode(&state.ks),
            scripts: state.scripts.export(),
            users: state
                .acl
                .users()
                .iter()
                .map(|u| (u.name.clone(), u.rules()))
                .collect(),
        };
        postcard::to_stdvec(&data).unwrap_or_default()
    }

    fn key_count(&self) -> u64 {
        self.state.lock().ks.total_keys() as u64
    }

    fn restore(&self, data: &[u8]) -> Result<(), String> {
        // postcard is not self-describing: a snapshot without users fails to decode as the
        // new layout (it ends early) and is read as the old one.
        let data: SnapshotData = match postcard::from_bytes(data) {
            Ok(d) => d,
            Err(e) => {
                let old: SnapshotDataV1 =
                    postcard::from_bytes(data).map_err(|_| format!("bad state snapshot: {e}"))?;
                SnapshotData {
                    keyspace: old.keyspace,
                    scripts: old.scripts,
                    users: Vec::new(),
                }
            }
        };
        let encodings = self.state.lock().ks.encodings.clone();
        let mut ks = snapshot::decode(&data.keyspace, &encodings)?;
        let mut state = self.state.lock();
        state.scripts.import(&data.scripts.clone())?;
        ks.share_clock(state.memory.clock());
        ks.share_pubsub(&state.ks.pubsub.clone());
        ks.object = state.ks.object.clone();
        ks.hll_sparse_max_bytes = state.ks.hll_sparse_max_bytes;
        state.ks = ks;
        state.evictor.clear();
        if !data.users.is_empty() {
            state.acl.replace(
                data.users
                    .iter()
                    .map(|(n, rules)| crate::acl::User::from_rules(n, rules))
                    .collect(),
                crate::acl::Event::Installed,
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_raft::StateMachine;

    fn cmd(parts: &[&str]) -> Op {
        Op::Command(
            parts
                .iter()
                .map(|p| Bytes::copy_from_slice(p.as_bytes()))
                .collect(),
            None,
        )
    }

    fn proposal(ops: Vec<Op>) -> Proposal {
        Proposal {
            db: 0,
            resp: 2,
            ops,
            watch: None,
        }
    }

    /// The stamp of an entry at `ms` (its index too, so each test entry seeds differently).
    fn at(ms: u64) -> tollgate_raft::Stamp {
        tollgate_raft::Stamp {
            time_us: ms * 1000,
            index: ms,
            position: 0,
        }
    }

    fn sm() -> ReplicatedState {
        ReplicatedState::new(Arc::new(Mutex::new(State::default())))
    }

    #[test]
    fn acl_changes_apply_in_the_log_and_travel_in_snapshots() {
        let a = sm();
        let set = |rules: &[&str]| {
            Op::Acl(crate::acl::Change::SetUser(
                "alice".into(),
                rules.iter().map(|r| r.to_string()).collect(),
            ))
        };
        let out = a.apply(
            &proposal(vec![
                set(&["on", ">pw", "+@read", "~k*"]),
                set(&["bogus"]),
                cmd(&["SET", "k", "v"]),
            ]),
            at(1_000),
        );
        let replies = out.replies.unwrap();
        assert_eq!(replies[0], crate::protocol::Reply::ok());
        assert!(replies[1].is_error());
        let b = sm();
        b.restore(&a.snapshot()).unwrap();
        let alice = b.state.lock().acl.get("alice").unwrap();
        assert!(alice.password_ok(b"pw"));
        assert_eq!(
            alice.describe(),
            a.state.lock().acl.get("alice").unwrap().describe()
        );
        // A snapshot written before users were in the state still restores its keys.
        let old = {
            #[derive(Serialize)]
            struct V1 {
                keyspace: Vec<u8>,
                scripts: ScriptsExport,
            }
            let state = a.state.lock();
            postcard::to_stdvec(&V1 {
                keyspace: snapshot::encode(&state.ks),
                scripts: state.scripts.export(),
            })
            .unwrap()
        };
        let c = sm();
        c.restore(&old).unwrap();
        assert!(c.state.lock().acl.get("alice").is_none());
        let got = c.apply(&proposal(vec![cmd(&["GET", "k"])]), at(2_000));
        assert_eq!(got.replies.unwrap()[0], crate::protocol::Reply::bulk("v"));
    }

    #[test]
    fn snapshot_round_trip_keeps_keys_scripts_and_functions() {
        let a = sm();
        let lib = "#!lua name=mylib\nredis.register_function('f', function(keys, args) return redis.call('INCR', keys[1]) end)";
        a.apply(
            &proposal(vec![
                cmd(&["SET", "k", "v"]),
                cmd(&["EVAL", "return redis.call('INCR', KEYS[1])", "1", "n"]),
                cmd(&["FUNCTION", "LOAD", lib]),
            ]),
            at(1_000),
        );
        let b = sm();
        b.restore(&a.snapshot()).unwrap();
        let sha = sha1_smol::Sha1::from("return redis.call('INCR', KEYS[1])")
            .digest()
            .to_string();
        let out = b.apply(
            &proposal(vec![
                cmd(&["EVALSHA", &sha, "1", "n"]),
                cmd(&["FCALL", "f", "1", "n"]),
                cmd(&["GET", "k"]),
            ]),
            at(2_000),
        );
        let replies = out.replies.unwrap();
        assert_eq!(replies[0], crate::protocol::Reply::Integer(2));
        assert_eq!(replies[1], crate::protocol::Reply::Integer(3));
        assert_eq!(replies[2], crate::protocol::Reply::bulk("v"));
        // b ran two more INCRs on "n" than a.
        assert_ne!(
            snapshot::digest(&a.state.lock().ks, 2_000),
            snapshot::digest(&b.state.lock().ks, 2_000)
        );
        assert!(b.restore(b"garbage").is_err());
    }

    #[test]
    fn watch_digest_aborts_only_on_change() {
        let s = sm();
        s.apply(&proposal(vec![cmd(&["SET", "w", "1"])]), at(1_000));
        let digest = snapshot::entry_digest(&s.state.lock().ks.dbs[0], b"w", 1_000);
        let mut exec = proposal(vec![cmd(&["INCR", "w"])]);
        exec.watch = Some(vec![(0, Bytes::from("w"), digest)]);
        let first = s.apply(&exec, at(1_001));
        assert!(first.replies.is_some());
        // The same EXEC again: the key now holds 2, so the transaction aborts.
        let second = s.apply(&exec, at(1_002));
        assert!(second.replies.is_none());
    }

    #[test]
    fn proposals_survive_serialization_with_frames_as_commands() {
        use crate::protocol::parser::{parse_request, Limits, Request};
        let mut buf = bytes::BytesMut::from(
            &b"*5\r\n$11\r\nLIMIT.TOKEN\r\n$1\r\nk\r\n$2\r\n10\r\n$1\r\n1\r\n$2\r\n1s\r\n"[..],
        );
        let limits = Limits {
            max_bulk: 1 << 20,
            max_multibulk: 1 << 10,
            max_inline: 1 << 10,
        };
        let Some((Request::Frame(frame), ())) =
            parse_request(&mut buf, &limits, |_| ((), true)).unwrap()
        else {
            panic!("a short request parses to a frame");
        };
        let spec = crate::command::lookup(b"limit.token").unwrap();
        let batch = Batch {
            client: None,
            db: 0,
            resp: 2,
            ops: vec![
                Op::Frame(frame, spec),
                Op::Select(1),
                Op::PurgeExpired {
                    db: 1,
                    keys: vec![Bytes::from("a")],
                },
                cmd(&["GET", "k"]),
            ],
            watch: None,
            transaction: false,
        };
        let proposal = Proposal::from_batch(batch);
        // The leader keeps the frame, to run it as parsed.
        assert!(matches!(proposal.ops[0], Op::Frame(..)));
        let bytes = postcard::to_allocvec(&proposal).unwrap();
        // The log holds what the command's argument list encodes to.
        let as_command = Proposal {
            ops: vec![cmd(&["LIMIT.TOKEN", "k", "10", "1", "1s"])],
            ..proposal.clone()
        };
        let command_bytes = postcard::to_allocvec(&as_command).unwrap();
        let frame_only = Proposal {
            ops: vec![proposal.ops[0].clone()],
            ..proposal.clone()
        };
        assert_eq!(postcard::to_allocvec(&frame_only).unwrap(), command_bytes);
        assert_eq!(
            postcard::experimental::serialized_size(&frame_only).unwrap(),
            command_bytes.len()
        );
        let back: Proposal = postcard::from_bytes(&bytes).unwrap();
        let ops: Vec<String> = back.ops.iter().map(|op| format!("{op:?}")).collect();
        assert_eq!(
            ops,
            [
                format!("{:?}", cmd(&["LIMIT.TOKEN", "k", "10", "1", "1s"])),
                "Select(1)".to_string(),
                format!(
                    "{:?}",
                    Op::PurgeExpired {
                        db: 1,
                        keys: vec![Bytes::from("a")]
                    }
                ),
                format!("{:?}", cmd(&["GET", "k"])),
            ]
        );
    }

    #[test]
    fn purge_deletes_only_keys_expired_at_apply_time() {
        let s = sm();
        s.apply(
            &proposal(vec![
                cmd(&["SET", "a", "1", "PX", "100"]),
                cmd(&["SET", "b", "1", "PX", "1000"]),
            ]),
            at(1_000),
        );
        s.apply(
            &proposal(vec![Op::PurgeExpired {
                db: 0,
                keys: vec![Bytes::from("a"), Bytes::from("b")],
            }]),
            at(1_500),
        );
        let st = s.state.lock();
        assert_eq!(st.ks.dbs[0].len(), 1);
        assert!(st.ks.dbs[0].contains(b"b", 1_500));
    }

    #[test]
    fn random_picks_are_the_same_on_every_replica_and_differ_between_entries() {
        let members: Vec<String> = (0..50).map(|i| format!("m{i}")).collect();
        let mut sadd = vec!["SADD", "s"];
        sadd.extend(members.iter().map(String::as_str));
        let (a, b) = (sm(), sm());
        for r in [&a, &b] {
            r.apply(&proposal(vec![cmd(&sadd)]), at(1_000));
        }
        let picks = |r: &ReplicatedState, stamp| {
            r.apply(
                &proposal(vec![
                    cmd(&["SRANDMEMBER", "s", "5"]),
                    cmd(&["SRANDMEMBER", "s", "5"]),
                    cmd(&["SPOP", "s", "3"]),
                    cmd(&["RANDOMKEY"]),
                ]),
                stamp,
            )
            .replies
            .unwrap()
        };
        let first = picks(&a, at(2_000));
        assert_eq!(first, picks(&b, at(2_000)), "replicas picked differently");
        assert_ne!(
            first[0], first[1],
            "two commands of one entry drew the same"
        );
        // The same time, another entry: other picks.
        let mut other = at(2_000);
        other.index += 1;
        assert_ne!(first[0], picks(&a, other)[0]);
    }
}
