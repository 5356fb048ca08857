//! Concurrency limit with leases: at most `limit` live holders at once, each
//! holding a slot under an id until it releases it or its lease of
//! `lease_ms` runs out (a crashed holder frees its slot by itself).
//!
//! [`acquire`] takes or renews a slot: a live holder acquiring again renews
//! its lease (its expiry becomes the later of the old one and
//! `now + lease_ms`) without taking a second slot; a new id gets a slot only
//! while fewer than `limit` other holders are live. A holder is live while
//! `now < expires_at`. [`release`] frees a slot, [`peek`] reports without
//! writing. Never more than `limit` holders are live: an admission needs the
//! other live holders to number fewer than `limit` (if `limit` shrinks below
//! the live count, no one is admitted or renewed until enough leases end).
//!
//! Holders are kept sorted by id, so the state and every reply are the same
//! on every replica. The state remembers the latest `now` it has seen; a
//! clock stepping back is treated as that time, so leases never revive or
//! shorten. `retry_after_ms` is the time until enough leases expire for a
//! slot to free up (ignoring releases), `reset_after_ms` the time until the
//! last lease ends.

use super::{encoder, info_i64, put_u64, put_varint, sat_i64, ttl_for, Decision};
use super::{require, LimitError, Outcome, Reader};
use super::{Codec, Named};

/// A validated concurrency-limit configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    limit: u64,
    lease_ms: u64,
}

impl Params {
    /// At most `limit` live holders, each lease lasting `lease_ms`; both positive.
    pub fn new(limit: u64, lease_ms: u64) -> Result<Params, LimitError> {
        require(limit > 0, LimitError::InvalidLimit)?;
        require(lease_ms > 0, LimitError::InvalidPeriod)?;
        Ok(Params { limit, lease_ms })
    }

    /// The most live holders at once.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Lease length in milliseconds.
    pub fn lease_ms(&self) -> u64 {
        self.lease_ms
    }
}

/// The holders and their lease expiries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// The latest `now_ms` this state has seen.
    clock: u64,
    /// `(id, expires_at_ms)`, sorted by id, ids unique.
    holders: Vec<(Vec<u8>, u64)>,
}

impl Codec for State {
    /// Compact binary form: header, clock, the number of holders as a
    /// varint, then per holder a varint id length, the id and its expiry.
    fn encode(&self) -> Vec<u8> {
        encode_holders(self.clock, &self.borrowed())
    }

    /// Parses [`State::encode`]'s output; `None` for anything else
    /// (including unsorted or repeated ids).
    fn decode(bytes: &[u8]) -> Option<State> {
        let (clock, holders) = decode_holders(bytes)?;
        Some(State::owned(clock, &holders))
    }

    /// Fields for `LIMIT.INFO` (`holders` may include leases that have
    /// expired since the last write).
    fn info(&self) -> Vec<(&'static str, i64)> {
        let mut fields = vec![
            ("holders", info_i64(self.holders.len() as u64)),
            ("clock_ms", info_i64(self.clock)),
        ];
        let expiries = self.holders.iter().map(|h| h.1);
        if let (Some(first), Some(last)) = (expiries.clone().min(), expiries.max()) {
            fields.push(("next_expiry_ms", info_i64(first)));
            fields.push(("last_expiry_ms", info_i64(last)));
        }
        fields
    }
}

/// A holder as the algorithm works on it: the id borrowed from a decoded state
/// or straight from the stored bytes, and its lease expiry.
type Holder<'a> = (&'a [u8], u64);

impl State {
    /// Whether no holder is stored (the key can be deleted).
    pub fn is_empty(&self) -> bool {
        self.holders.is_empty()
    }

    fn borrowed(&self) -> Vec<Holder<'_>> {
        self.holders
            .iter()
            .map(|(id, t)| (id.as_slice(), *t))
            .collect()
    }

    fn owned(clock: u64, holders: &[Holder<'_>]) -> State {
        State {
            clock,
            holders: holders.iter().map(|&(id, t)| (id.to_vec(), t)).collect(),
        }
    }
}

fn encode_holders(clock: u64, holders: &[Holder<'_>]) -> Vec<u8> {
    let size: usize = holders.iter().map(|h| h.0.len() + 10).sum();
    let mut out = encoder(State::TAG, 18 + size);
    put_u64(&mut out, clock);
    put_varint(&mut out, holders.len() as u64);
    for &(id, expires) in holders {
        put_holder(&mut out, id, expires);
    }
    out
}

fn put_holder(out: &mut Vec<u8>, id: &[u8], expires: u64) {
    put_varint(out, id.len() as u64);
    out.extend_from_slice(id);
    put_u64(out, expires);
}

/// The clock and holders of an encoded state, ids borrowed from `bytes`.
fn decode_holders(bytes: &[u8]) -> Option<(u64, Vec<Holder<'_>>)> {
    let mut r = Reader::open(bytes, State::TAG)?;
    let clock = r.u64()?;
    let n = r.varint()?;
    // Each holder takes at least 9 bytes, so a bogus count stops at the end
    // (and cannot reserve more than the bytes could hold). One spare slot: an
    // acquire inserts its holder without reallocating.
    let mut holders: Vec<Holder<'_>> =
        Vec::with_capacity(n.min(bytes.len() as u64 / 9) as usize + 1);
    for _ in 0..n {
        let len = usize::try_from(r.varint()?).ok()?;
        let id = r.bytes(len)?;
        let expires = r.u64()?;
        if holders.last().is_some_and(|last| last.0 >= id) {
            return None;
        }
        holders.push((id, expires));
    }
    r.finish((clock, holders))
}

/// What [`release`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    /// Whether `id` was a live holder (and no longer is).
    pub released: bool,
    /// The state to store, or `None` to leave the key untouched; a state
    /// that [`State::is_empty`] may be stored or the key deleted.
    pub new_state: Option<State>,
    /// The TTL (ms, at least 1) the stored key should carry.
    pub ttl_ms: u64,
}

/// Takes a slot for `id` at `now_ms`, or renews the lease `id` holds.
pub fn acquire(state: Option<&State>, params: &Params, id: &[u8], now_ms: u64) -> Outcome<State> {
    let stored = state.map(|s| (s.clock, s.borrowed()));
    let out = acquire_live(stored, params, id, now_ms);
    Outcome {
        decision: out.decision,
        new_state: out.new_state.map(|(clock, h)| State::owned(clock, &h)),
        ttl_ms: out.ttl_ms,
    }
}

/// [`acquire`] on an encoded state, returning the encoded state to store:
/// the same decision without building owned holders. `None` when `bytes`
/// are not a concurrency state.
///
/// An admission, the usual case, takes one validating pass over the bytes and writes
/// the live holders' encodings back as they are, with the caller's holder inserted or
/// renewed in its place. A rejection (which needs the other leases' expiries sorted)
/// decodes the holders instead.
pub fn acquire_encoded(
    bytes: Option<&[u8]>,
    params: &Params,
    id: &[u8],
    now_ms: u64,
) -> Option<Outcome<Vec<u8>>> {
    let stored = match bytes {
        Some(b) => match acquire_in_place(b, params, id, now_ms)? {
            Some(admitted) => return Some(admitted),
            None => Some(decode_holders(b)?),
        },
        None => None,
    };
    let out = acquire_live(stored, params, id, now_ms);
    Some(Outcome {
        decision: out.decision,
        new_state: out.new_state.map(|(clock, h)| encode_holders(clock, &h)),
        ttl_ms: out.ttl_ms,
    })
}

/// The admission path of [`acquire_encoded`]: `None` when `bytes` are not a
/// concurrency state, `Some(None)` when `id` is not admitted.
fn acquire_in_place(
    bytes: &[u8],
    params: &Params,
    id: &[u8],
    now_ms: u64,
) -> Option<Option<Outcome<Vec<u8>>>> {
    let mut r = Reader::open(bytes, State::TAG)?;
    let clock = r.u64()?;
    let now = clock.max(now_ms);
    let n = r.varint()?;
    let offset = |r: &Reader| bytes.len() - r.rest.len();
    // The live holders' encodings as byte ranges, runs of neighbours merged, split
    // where the caller's holder goes (`mine`: the range index it goes before, and its
    // current expiry if it holds a live lease).
    let mut live: Vec<(usize, usize)> = Vec::new();
    let (mut count, mut last_expiry) = (0u64, None::<u64>);
    let mut mine: Option<(usize, Option<u64>)> = None;
    let mut previous: Option<&[u8]> = None;
    for _ in 0..n {
        let start = offset(&r);
        let len = usize::try_from(r.varint()?).ok()?;
        let holder = r.bytes(len)?;
        let expires = r.u64()?;
        if previous.is_some_and(|p| p >= holder) {
            return None;
        }
        previous = Some(holder);
        if mine.is_none() && holder >= id {
            mine = Some((live.len(), None));
            if holder == id {
                if expires > now {
                    mine = Some((live.len(), Some(expires)));
                    count += 1;
                }
                continue;
            }
        }
        if expires <= now {
            continue;
        }
        count += 1;
        last_expiry = last_expiry.max(Some(expires));
        // A run may not grow across the place the caller's holder goes.
        let split = mine.is_some_and(|(at, _)| at == live.len());
        match live.last_mut() {
            Some(run) if run.1 == start && !split => run.1 = offset(&r),
            _ => live.push((start, offset(&r))),
        }
    }
    if !r.is_empty() {
        return None;
    }
    let (at, held) = mine.unwrap_or((live.len(), None));
    let others = count - u64::from(held.is_some());
    if others >= params.limit {
        return Some(None);
    }
    let expires = held.unwrap_or(0).max(now.saturating_add(params.lease_ms));
    let size: usize = live.iter().map(|r| r.1 - r.0).sum();
    let mut out = encoder(State::TAG, 28 + size + id.len());
    put_u64(&mut out, now);
    put_varint(&mut out, others + 1);
    for (i, run) in live.iter().enumerate() {
        if i == at {
            put_holder(&mut out, id, expires);
        }
        out.extend_from_slice(&bytes[run.0..run.1]);
    }
    if at == live.len() {
        put_holder(&mut out, id, expires);
    }
    let mut decision = verdict_of(params, others + 1, last_expiry.max(Some(expires)), now_ms);
    decision.allowed = true;
    Some(Some(Outcome {
        decision,
        new_state: Some(out),
        ttl_ms: ttl_for(decision.reset_after_ms),
    }))
}

/// The acquire algorithm on a stored clock and holders (`None` = no state);
/// the new state is the effective clock and the live holders.
fn acquire_live<'a>(
    stored: Option<(u64, Vec<Holder<'a>>)>,
    params: &Params,
    id: &'a [u8],
    now_ms: u64,
) -> Outcome<(u64, Vec<Holder<'a>>)> {
    let (now, mut live) = live_holders(stored, now_ms);
    let mine = live.binary_search_by(|h| h.0.cmp(id));
    let others = live.len() as u64 - u64::from(mine.is_ok());
    let allowed = others < params.limit;
    if allowed {
        let expires = now.saturating_add(params.lease_ms);
        match mine {
            Ok(i) => live[i].1 = live[i].1.max(expires),
            Err(i) => live.insert(i, (id, expires)),
        }
    }
    let mut decision = verdict(params, &live, now_ms);
    decision.allowed = allowed;
    if allowed {
        decision.retry_after_ms = -1;
    } else {
        decision.retry_after_ms = retry_after(params, &live, Some(id), now, now_ms);
    }
    Outcome {
        decision,
        new_state: allowed.then_some((now, live)),
        ttl_ms: ttl_for(decision.reset_after_ms),
    }
}

/// Frees the slot `id` holds, if its lease is live.
pub fn release(state: Option<&State>, id: &[u8], now_ms: u64) -> Released {
    let (now, mut live) = live_holders(state.map(|s| (s.clock, s.borrowed())), now_ms);
    let released = match live.binary_search_by(|h| h.0.cmp(id)) {
        Ok(i) => {
            live.remove(i);
            true
        }
        Err(_) => false,
    };
    let last_expiry = live.iter().map(|h| h.1).max().unwrap_or(now);
    Released {
        released,
        ttl_ms: ttl_for(last_expiry.saturating_sub(now_ms)),
        new_state: released.then(|| State::owned(now, &live)),
    }
}

/// Reports whether a new holder would be admitted at `now_ms`, without writing.
pub fn peek(state: Option<&State>, params: &Params, now_ms: u64) -> Decision {
    let (now, live) = live_holders(state.map(|s| (s.clock, s.borrowed())), now_ms);
    let mut decision = verdict(params, &live, now_ms);
    decision.allowed = (live.len() as u64) < params.limit;
    if !decision.allowed {
        decision.retry_after_ms = retry_after(params, &live, None, now, now_ms);
    }
    decision
}

/// The effective time (never before the state's clock) and the holders
/// whose lease is live then.
fn live_holders(stored: Option<(u64, Vec<Holder<'_>>)>, now_ms: u64) -> (u64, Vec<Holder<'_>>) {
    let Some((clock, mut holders)) = stored else {
        return (now_ms, Vec::with_capacity(1));
    };
    let now = clock.max(now_ms);
    holders.retain(|h| h.1 > now);
    (now, holders)
}

/// The decision fields that depend only on the live holders.
fn verdict(params: &Params, live: &[Holder<'_>], now_ms: u64) -> Decision {
    let last_expiry = live.iter().map(|h| h.1).max();
    verdict_of(params, live.len() as u64, last_expiry, now_ms)
}

/// [`verdict`] from the number of live holders and the last of their expiries.
fn verdict_of(params: &Params, live: u64, last_expiry: Option<u64>, now_ms: u64) -> Decision {
    Decision {
        allowed: false,
        limit: params.limit,
        remaining: params.limit.saturating_sub(live),
        retry_after_ms: -1,
        reset_after_ms: last_expiry.map_or(0, |t| t.saturating_sub(now_ms)),
    }
}

/// Time until enough leases (other than `id`'s) expire that fewer than
/// `limit` remain.
fn retry_after(
    params: &Params,
    live: &[Holder<'_>],
    id: Option<&[u8]>,
    now: u64,
    now_ms: u64,
) -> i64 {
    let mut expiries: Vec<u64> = live
        .iter()
        .filter(|h| Some(h.0) != id)
        .map(|h| h.1)
        .collect();
    expiries.sort_unstable();
    let must_end = (expiries.len() as u64).saturating_sub(params.limit);
    let frees_at = usize::try_from(must_end)
        .ok()
        .and_then(|k| expiries.get(k))
        .copied()
        .unwrap_or(now);
    sat_i64(u128::from(frees_at.saturating_sub(now_ms)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn live_count(state: &State, now: u64) -> u64 {
        let now = now.max(state.clock);
        state.holders.iter().filter(|h| h.1 > now).count() as u64
    }

    #[test]
    fn slots_are_taken_renewed_released_and_expire() {
        let p = Params::new(2, 1000).unwrap();
        let out = acquire(None, &p, b"a", 0);
        assert!(out.decision.allowed);
        assert_eq!(out.decision.remaining, 1);
        assert_eq!(out.ttl_ms, 1000);
        let s = out.new_state.unwrap();
        let s = acquire(Some(&s), &p, b"b", 400).new_state.unwrap();
        let out = acquire(Some(&s), &p, b"c", 500);
        assert!(!out.decision.allowed);
        assert_eq!(out.decision.remaining, 0);
        assert_eq!(out.decision.retry_after_ms, 500);
        assert_eq!(out.decision.reset_after_ms, 900);
        assert_eq!(out.new_state, None);
        // Renewal keeps one slot and extends the lease.
        let out = acquire(Some(&s), &p, b"a", 600);
        assert!(out.decision.allowed);
        assert_eq!(out.decision.remaining, 0);
        let s = out.new_state.unwrap();
        assert_eq!(
            s.holders,
            vec![(b"a".to_vec(), 1600), (b"b".to_vec(), 1400)]
        );
        // Release frees a slot.
        let r = release(Some(&s), b"b", 700);
        assert!(r.released);
        assert_eq!(r.ttl_ms, 900);
        let s2 = r.new_state.unwrap();
        assert!(acquire(Some(&s2), &p, b"c", 700).decision.allowed);
        assert!(!release(Some(&s2), b"b", 700).released);
        // An expired lease no longer counts.
        assert!(acquire(Some(&s), &p, b"c", 1400).decision.allowed);
        assert!(!acquire(Some(&s), &p, b"c", 1399).decision.allowed);
        // Releasing the last holder leaves an empty state.
        let r = release(Some(&s2), b"a", 800);
        assert!(r.released && r.new_state.unwrap().is_empty());
        assert_eq!(Params::new(0, 1), Err(LimitError::InvalidLimit));
        assert_eq!(Params::new(1, 0), Err(LimitError::InvalidPeriod));
    }

    #[test]
    fn a_clock_stepping_back_neither_revives_nor_shortens_leases() {
        let p = Params::new(1, 100).unwrap();
        let s = acquire(None, &p, b"a", 1000).new_state.unwrap();
        let s = acquire(Some(&s), &p, b"a", 1050).new_state.unwrap();
        let s = acquire(Some(&s), &p, b"a", 900).new_state.unwrap();
        assert_eq!(s.holders, vec![(b"a".to_vec(), 1150)]);
        let s = acquire(Some(&s), &p, b"b", 1200).new_state.unwrap();
        // Back before a's expiry: a stays expired.
        assert!(!acquire(Some(&s), &p, b"a", 1100).decision.allowed);
        assert_eq!(live_count(&s, 1100), 1);
    }

    #[test]
    fn peek_matches_a_new_holder() {
        let p = Params::new(1, 100).unwrap();
        assert!(peek(None, &p, 0).allowed);
        let s = acquire(None, &p, b"a", 0).new_state.unwrap();
        let d = peek(Some(&s), &p, 50);
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 50);
        assert_eq!(d.remaining, 0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Acquire(u8),
        Release(u8),
        Peek,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => (0u8..6).prop_map(Op::Acquire),
            2 => (0u8..6).prop_map(Op::Release),
            1 => Just(Op::Peek),
        ]
    }

    proptest! {
        #[test]
        fn the_encoded_path_decides_and_stores_like_the_state_path(
            steps in proptest::collection::vec((0u8..6, 0u64..400), 1..40),
            limit in 1u64..4,
            lease in 1u64..1000,
        ) {
            let p = Params::new(limit, lease).unwrap();
            let (mut s, mut now) = (None::<State>, 10_000u64);
            for (id, dt) in steps {
                now = (now + dt).saturating_sub(100);
                let id = [b'a' + id];
                let out = acquire(s.as_ref(), &p, &id, now);
                let bytes = s.as_ref().map(State::encode);
                let enc = acquire_encoded(bytes.as_deref(), &p, &id, now).unwrap();
                prop_assert_eq!(enc.decision, out.decision);
                prop_assert_eq!(enc.ttl_ms, out.ttl_ms);
                prop_assert_eq!(enc.new_state, out.new_state.as_ref().map(State::encode));
                if out.new_state.is_some() {
                    s = out.new_state;
                }
            }
            prop_assert_eq!(acquire_encoded(Some(b"TGL\x81"), &p, b"a", now), None);
        }

        #[test]
        fn never_more_than_limit_live_holders(
            limit in 1u64..5,
            lease in 1u64..100,
            ops in proptest::collection::vec((-20i64..60, op()), 1..150),
        ) {
            let p = Params::new(limit, lease).unwrap();
            let mut state: Option<State> = None;
            let mut now = 10_000u64;
            for (dt, op) in ops {
                now = now.saturating_add_signed(dt);
                match op {
                    Op::Acquire(id) => {
                        let id = [id];
                        let before = state.as_ref().map_or(0, |s| live_count(s, now));
                        let was_live = state.as_ref().is_some_and(|s| {
                            s.holders.iter().any(|h| h.0 == id && h.1 > now.max(s.clock))
                        });
                        let fresh = peek(state.as_ref(), &p, now);
                        let out = acquire(state.as_ref(), &p, &id, now);
                        if !was_live {
                            prop_assert_eq!(fresh.allowed, out.decision.allowed);
                        }
                        if let Some(s) = out.new_state {
                            prop_assert!(out.decision.allowed);
                            prop_assert_eq!(live_count(&s, now), before + u64::from(!was_live));
                            prop_assert_eq!(State::decode(&s.encode()), Some(s.clone()));
                            state = Some(s);
                        } else {
                            prop_assert!(!out.decision.allowed);
                            prop_assert!(out.decision.retry_after_ms >= 1);
                        }
                    }
                    Op::Release(id) => {
                        let r = release(state.as_ref(), &[id], now);
                        if let Some(s) = r.new_state {
                            prop_assert!(r.released);
                            prop_assert!(!s.holders.iter().any(|h| h.0 == [id]));
                            state = Some(s);
                        }
                    }
                    Op::Peek => {
                        let d = peek(state.as_ref(), &p, now);
                        prop_assert_eq!(d.retry_after_ms == -1, d.allowed);
                    }
                }
                if let Some(s) = &state {
                    prop_assert!(live_count(s, now) <= limit);
                }
            }
        }

        #[test]
        fn encoding_round_trips(
            clock in proptest::num::u64::ANY,
            holders in proptest::collection::btree_map(
                proptest::collection::vec(proptest::num::u8::ANY, 0..20),
                proptest::num::u64::ANY,
                0..10,
            ),
        ) {
            let s = State { clock, holders: holders.into_iter().collect() };
            prop_assert_eq!(State::decode(&s.encode()), Some(s));
        }

        #[test]
        fn extreme_numbers_never_panic(
            limit in 1u64..,
            lease in 1u64..,
            now in proptest::num::u64::ANY,
            clock in proptest::num::u64::ANY,
            expiries in proptest::collection::vec(proptest::num::u64::ANY, 0..6),
        ) {
            let p = Params::new(limit, lease).unwrap();
            let holders = expiries.into_iter().enumerate().map(|(i, e)| (vec![i as u8], e)).collect();
            let s = State { clock, holders };
            let _ = acquire(Some(&s), &p, b"\x02", now);
            let _ = acquire(Some(&s), &p, b"new", now);
            let _ = release(Some(&s), b"\x01", now);
            let _ = peek(Some(&s), &p, now);
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            let _ = State::decode(&bytes);
        }

        /// The encoded path reads any bytes as decoding them would: the same states
        /// accepted, the same decision and a new state that decodes the same, with ids
        /// before, between and after the holders, live and expired leases, and one byte
        /// changed.
        #[test]
        fn the_encoded_path_agrees_with_decoding_any_bytes(
            clock in 0u64..3_000,
            // Ids up to 10 bytes from a 4-letter alphabet: many share a long prefix or
            // end where another goes on.
            holders in proptest::collection::btree_map(
                proptest::collection::vec(0u8..4, 0..11),
                0u64..4_000,
                0..12,
            ),
            corrupt in proptest::option::of((
                0usize..400,
                prop_oneof![Just(0u8), Just(1), Just(0x80), Just(0xff), proptest::num::u8::ANY],
            )),
            limit in 1u64..14,
            lease in 1u64..2_000,
            id in proptest::collection::vec(0u8..4, 0..11),
            now in 0u64..4_000,
        ) {
            let mut bytes = State { clock, holders: holders.into_iter().collect() }.encode();
            if let Some((at, byte)) = corrupt {
                let at = at % bytes.len();
                bytes[at] = byte;
            }
            let p = Params::new(limit, lease).unwrap();
            let enc = acquire_encoded(Some(&bytes), &p, &id, now);
            match State::decode(&bytes) {
                None => prop_assert!(enc.is_none()),
                Some(state) => {
                    let out = acquire(Some(&state), &p, &id, now);
                    let enc = enc.expect("a state that decodes");
                    prop_assert_eq!(enc.decision, out.decision);
                    prop_assert_eq!(enc.ttl_ms, out.ttl_ms);
                    // Kept bytes are copied as they are, so a crafted state's non-canonical varint
                    // stays non-canonical: compare what the stored bytes mean.
                    let stored = enc.new_state.as_deref().map(State::decode);
                    prop_assert_eq!(stored, out.new_state.map(Some));
                }
            }
        }
    }
}
