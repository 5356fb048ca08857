//! Exact sliding log: never more than `limit` units admitted in ANY window of
//! length `window_ms` — for every `t`, the admitted units with timestamps in
//! `(t − window_ms, t]` sum to at most `limit` — not just in aligned windows.
//!
//! This is the sorted-set log of seeds 001–003 (`ZADD now`, `ZREMRANGEBYSCORE`,
//! `ZCARD`) kept as one compact value: a queue of `(timestamp ms, units)`
//! entries, oldest first, where requests admitted in the same millisecond
//! share one entry and a cost of `n` counts as `n` units. Why the bound holds:
//! when the last request admitted inside a window was admitted, everything
//! admitted earlier in that window was still in its log and was counted.
//!
//! The state grows with the traffic (at most one entry per distinct
//! millisecond and never more entries than `limit`), so `limit` is capped at
//! [`MAX_LIMIT`]; the encoding delta-codes timestamps as varints. If the
//! clock steps back, the request is stamped with the newest timestamp in the
//! log, keeping the log ordered.

use super::{count, parse_duration, Codec, Encoded, LimitError, Named};
use super::{encoder, info_i64, put_u64, put_varint, Algorithm, Decision, Outcome};
use super::{Reader, Tally, WindowParams};

/// The largest `limit` the log accepts (its size grows with the limit).
pub const MAX_LIMIT: u64 = 100_000;

/// A validated sliding-log configuration: `limit` units (`1..=MAX_LIMIT`) in
/// any window of `window_ms` (> 0).
pub type Params = WindowParams<MAX_LIMIT>;

/// The admitted requests still inside the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// `(timestamp ms, units)`, strictly increasing timestamps, units ≥ 1.
    entries: Vec<(u64, u64)>,
}

fn encode_entries(entries: &[(u64, u64)]) -> Vec<u8> {
    let mut out = encoder(State::TAG, 11 + entries.len() * 3);
    put_varint(&mut out, entries.len() as u64);
    let mut previous = None;
    for &(at, units) in entries {
        match previous {
            None => put_u64(&mut out, at),
            Some(p) => put_varint(&mut out, at - p),
        }
        put_varint(&mut out, units);
        previous = Some(at);
    }
    out
}

/// The entries of an encoded log: [`scan`]'s checks, with a window that keeps them all.
fn decode_entries(bytes: &[u8]) -> Option<Vec<(u64, u64)>> {
    let all = scan(bytes, u64::MAX, 0)?;
    Some(
        all.first_live
            .map_or_else(Vec::new, |(_, first)| live_from(bytes, first).collect()),
    )
}

impl Codec for State {
    /// Compact binary form: header, the number of entries as a varint, then
    /// (if any) the first timestamp as u64 and its units as a varint, then
    /// per further entry the timestamp delta and the units as varints.
    fn encode(&self) -> Vec<u8> {
        encode_entries(&self.entries)
    }

    /// Parses [`State::encode`]'s output; `None` for anything else
    /// (including unordered timestamps or zero units).
    fn decode(bytes: &[u8]) -> Option<State> {
        decode_entries(bytes).map(|entries| State { entries })
    }

    /// Fields for `LIMIT.INFO` (`count` includes entries that may have left
    /// the window since the last write).
    fn info(&self) -> Vec<(&'static str, i64)> {
        let total = self.entries.iter().fold(0u64, |a, e| a.saturating_add(e.1));
        let mut fields = vec![
            ("entries", info_i64(self.entries.len() as u64)),
            ("count", info_i64(total)),
        ];
        if let (Some(oldest), Some(newest)) = (self.entries.first(), self.entries.last()) {
            fields.push(("oldest_ms", info_i64(oldest.0)));
            fields.push(("newest_ms", info_i64(newest.0)));
        }
        fields
    }
}

impl Algorithm for Params {
    /// Charges `cost` units at `now_ms` (cost 0 peeks).
    fn evaluate(&self, state: Option<&State>, cost: u64, now_ms: u64) -> Outcome<State> {
        let entries = state.map_or(&[][..], |s| &s.entries[..]);
        let (decision, admit) = decide(entries, self, cost, now_ms);
        let new_state = admit.map(|(first_live, at)| {
            let mut kept = Vec::with_capacity(entries.len() - first_live + 1);
            kept.extend_from_slice(&entries[first_live..]);
            record(&mut kept, at, cost);
            State { entries: kept }
        });
        Outcome::new(decision, new_state)
    }

    fn parse(args: &[&[u8]], _options: &[Option<u64>]) -> Result<Params, LimitError> {
        Params::new(count(args[0])?, parse_duration(args[1])?)
    }

    fn evaluate_encoded(&self, stored: Option<&[u8]>, cost: u64, now: u64) -> Option<Encoded> {
        evaluate_encoded(stored, self, cost, now)
    }

    type State = State;
    const ARGS: usize = 2;
}

/// [`Algorithm::evaluate`] on an encoded state, returning the encoded state to store,
/// without building a [`State`]; `None` when `bytes` are not a log state.
///
/// One validating pass over the bytes finds the window's first live entry, the units
/// still in the window and the newest entry. The new state is then written from the
/// old bytes: the first live entry with an absolute timestamp, the following entries'
/// bytes as they are (their deltas do not change), and the request at the end. So a
/// call costs one decoding pass and a copy, whatever the log holds; a clock stepping
/// back behind the newest entry (rare) takes the general path.
pub fn evaluate_encoded(
    bytes: Option<&[u8]>,
    params: &Params,
    cost: u64,
    now_ms: u64,
) -> Option<Outcome<Vec<u8>>> {
    let window = params.window_ms;
    let (bytes, scan) = match bytes {
        Some(b) => (b, scan(b, window, now_ms)?),
        None => (&[][..], Scan::default()),
    };
    if scan.last.is_some_and(|l| l.at > now_ms) {
        let out = params.evaluate(Some(&State::decode(bytes)?), cost, now_ms);
        return Some(Outcome::new(
            out.decision,
            out.new_state.as_ref().map(State::encode),
        ));
    }
    // From here no entry is newer than `now_ms`: the request is stamped `now_ms`.
    let live = scan.first_live;
    let (decision, writes) = judge(
        params,
        cost,
        now_ms,
        now_ms,
        scan.used,
        live.and(scan.last).map(|l| l.at),
        || {
            live.into_iter()
                .flat_map(|(_, first)| live_from(bytes, first))
        },
    );
    let new_state = writes.then(|| append(bytes, &scan, cost, now_ms));
    Some(Outcome::new(decision, new_state))
}

/// Where an entry sits in an encoded log, and what it holds.
#[derive(Debug, Clone, Copy)]
struct Spot {
    /// Offsets of its first byte, of its units and past its end.
    start: usize,
    units_at: usize,
    end: usize,
    at: u64,
    units: u64,
}

/// What one pass over an encoded log finds for a request at `now_ms`.
#[derive(Debug, Default)]
struct Scan {
    entries: u64,
    /// The first entry still in the window, with its index.
    first_live: Option<(u64, Spot)>,
    /// The units of the entries in the window.
    used: u64,
    last: Option<Spot>,
}

/// Reads and checks an encoded log (`None` for a count over [`MAX_LIMIT`], a zero
/// count of units, timestamps not increasing, a short or overlong encoding) without
/// collecting its entries.
fn scan(bytes: &[u8], window: u64, now_ms: u64) -> Option<Scan> {
    let mut r = Reader::open(bytes, State::TAG)?;
    let entries = r.varint()?;
    if entries > MAX_LIMIT {
        return None;
    }
    let mut s = Scan {
        entries,
        ..Scan::default()
    };
    if entries == 0 {
        return r.finish(s);
    }
    let offset = |r: &Reader| bytes.len() - r.rest.len();
    // The entry being read: where it starts and where its units start, and its fields.
    let start = offset(&r);
    let mut at = r.u64()?;
    let mut spot = (start, offset(&r));
    let mut units = r.varint()?;
    let mut i = 0;
    loop {
        if units == 0 {
            return None;
        }
        if s.first_live.is_none() && at.saturating_add(window) > now_ms {
            let (start, units_at) = spot;
            let first = Spot {
                start,
                units_at,
                end: offset(&r),
                at,
                units,
            };
            s.first_live = Some((i, first));
        }
        if s.first_live.is_some() {
            s.used = s.used.saturating_add(units);
        }
        i += 1;
        if i == entries {
            break;
        }
        let start = offset(&r);
        at = match r.varint()? {
            0 => return None,
            delta => at.checked_add(delta)?,
        };
        spot = (start, offset(&r));
        units = r.varint()?;
    }
    let (start, units_at) = spot;
    s.last = Some(Spot {
        start,
        units_at,
        end: offset(&r),
        at,
        units,
    });
    r.finish(s)
}

/// The entries from `first` to the end of a log that [`scan`] accepted.
fn live_from(bytes: &[u8], first: Spot) -> impl Iterator<Item = (u64, u64)> + '_ {
    let mut r = Reader {
        rest: &bytes[first.end..],
    };
    let mut at = first.at;
    std::iter::once((first.at, first.units)).chain(std::iter::from_fn(move || {
        at = at.saturating_add(r.varint()?);
        Some((at, r.varint()?))
    }))
}

/// The log of `scan` without the entries that left the window, with `cost` units
/// recorded at `now_ms` (no entry being newer), encoded as [`encode_entries`] would.
fn append(bytes: &[u8], scan: &Scan, cost: u64, now_ms: u64) -> Vec<u8> {
    let (Some((index, first)), Some(last)) = (scan.first_live, scan.last) else {
        return encode_entries(&[(now_ms, cost)]);
    };
    let merge = last.at == now_ms;
    let entries = scan.entries - index + u64::from(!merge);
    let mut out = encoder(State::TAG, 20 + last.end - first.end);
    put_varint(&mut out, entries);
    put_u64(&mut out, first.at);
    let last_units = if merge { last.units + cost } else { last.units };
    if first.start == last.start {
        put_varint(&mut out, last_units);
    } else {
        put_varint(&mut out, first.units);
        out.extend_from_slice(&bytes[first.end..last.units_at]);
        put_varint(&mut out, last_units);
    }
    if !merge {
        put_varint(&mut out, now_ms - last.at);
        put_varint(&mut out, cost);
    }
    out
}

/// Adds `cost` units at `at` (not before the newest entry) to a log.
fn record(entries: &mut Vec<(u64, u64)>, at: u64, cost: u64) {
    match entries.last_mut() {
        Some(last) if last.0 == at => last.1 += cost,
        _ => entries.push((at, cost)),
    }
}

/// The decision on a log, and if the cost is to be recorded, the index of
/// the first entry still in the window and the request's timestamp.
fn decide(
    entries: &[(u64, u64)],
    params: &Params,
    cost: u64,
    now_ms: u64,
) -> (Decision, Option<(usize, u64)>) {
    let at = entries.last().map_or(now_ms, |e| e.0.max(now_ms));
    let window = params.window_ms;
    let expires = |t: u64| t.saturating_add(window);
    let first_live = entries
        .iter()
        .position(|e| expires(e.0) > at)
        .unwrap_or(entries.len());
    let live = &entries[first_live..];
    let used = live.iter().fold(0u64, |a, e| a.saturating_add(e.1));
    let (decision, writes) = judge(
        params,
        cost,
        now_ms,
        at,
        used,
        live.last().map(|e| e.0),
        || live.iter().copied(),
    );
    (decision, writes.then_some((first_live, at)))
}

/// The decision for `cost` stamped `at` against a window whose live entries hold `used`
/// units, the newest stamped `newest_live`; `live` walks them oldest first, and is asked
/// for only by a rejection that waiting can cure. Also whether the cost is to be recorded.
fn judge<I: Iterator<Item = (u64, u64)>>(
    params: &Params,
    cost: u64,
    now_ms: u64,
    at: u64,
    used: u64,
    newest_live: Option<u64>,
    live: impl FnOnce() -> I,
) -> (Decision, bool) {
    let expires = |t: u64| t.saturating_add(params.window_ms);
    let tally = Tally::new(params.limit, used, cost);
    // A rejection waits until enough of the oldest units have left the window.
    let wait = || {
        let must_leave = used.saturating_add(cost) - params.limit;
        let mut left = 0u64;
        let leaves_at = live()
            .find(|&(_, units)| {
                left = left.saturating_add(units);
                left >= must_leave
            })
            .map_or(at, |(t, _)| expires(t));
        leaves_at.saturating_sub(now_ms)
    };
    let newest = if tally.writes() {
        Some(at)
    } else {
        newest_live
    };
    let reset_after_ms = newest.map_or(0, |t| expires(t).saturating_sub(now_ms));
    (tally.decision(wait, reset_after_ms), tally.writes())
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{admitted_in, forward, jittery, LOG};
    use super::super::LimitError;
    use super::*;
    use proptest::prelude::*;

    /// The largest sum of admitted units in any window `(t − w, t]`; only
    /// windows ending on an admission can be maximal.
    fn busiest_window(admitted: &[(u64, u64)], w: u64) -> u64 {
        admitted
            .iter()
            .map(|&(t, _)| admitted_in(admitted, (t + 1).saturating_sub(w), t + 1))
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn entries_leave_exactly_one_window_later() {
        let p = Params::new(3, 1000).unwrap();
        let mut s = None;
        for t in [100, 100, 400] {
            s = p.evaluate(s.as_ref(), 1, t).new_state;
        }
        assert_eq!(s.as_ref().unwrap().entries, [(100, 2), (400, 1)]);
        let out = p.evaluate(s.as_ref(), 1, 1099);
        assert!(!out.decision.allowed);
        assert_eq!(out.decision.retry_after_ms, 1);
        assert_eq!(out.decision.reset_after_ms, 301);
        let out = p.evaluate(s.as_ref(), 3, 1099);
        assert_eq!(out.decision.retry_after_ms, 301);
        let out = p.evaluate(s.as_ref(), 2, 1100);
        assert!(out.decision.allowed);
        assert_eq!(out.new_state.unwrap().entries, [(400, 1), (1100, 2)]);
        assert_eq!(
            Params::new(MAX_LIMIT + 1, 1),
            Err(LimitError::LogLimitTooLarge)
        );
        assert_eq!(Params::new(0, 1), Err(LimitError::InvalidLimit));
        assert_eq!(Params::new(1, 0), Err(LimitError::InvalidPeriod));
    }

    #[test]
    fn decoding_refuses_what_encoding_never_writes() {
        let good = encode_entries(&[(100, 2), (400, 1)]);
        assert_eq!(State::decode(&good).unwrap().entries, [(100, 2), (400, 1)]);
        assert_eq!(State::decode(&encode_entries(&[])).unwrap().entries, []);
        // Zero units, a repeated timestamp (a zero delta), a short and an overlong encoding.
        assert_eq!(State::decode(&encode_entries(&[(100, 0)])), None);
        assert_eq!(State::decode(&encode_entries(&[(100, 1), (100, 1)])), None);
        assert_eq!(State::decode(&good[..good.len() - 1]), None);
        assert_eq!(State::decode(&[&good[..], &[1]].concat()), None);
        // More entries than any limit allows.
        let mut many = encoder(State::TAG, 8);
        put_varint(&mut many, MAX_LIMIT + 1);
        assert_eq!(State::decode(&many), None);
        // A delta up to the end of time, and one past it.
        let mut far = encode_entries(&[(u64::MAX - 1, 1)]);
        far[4] += 1;
        let (mut to_end, mut past) = (far.clone(), far);
        to_end.extend_from_slice(&[1, 1]);
        past.extend_from_slice(&[2, 1]);
        let last = State::decode(&to_end).unwrap().entries;
        assert_eq!(last, [(u64::MAX - 1, 1), (u64::MAX, 1)]);
        assert_eq!(State::decode(&past), None);
    }

    #[test]
    fn a_clock_stepping_back_stamps_the_newest_time() {
        let p = Params::new(3, 1000).unwrap();
        let s = p.evaluate(None, 1, 5000).new_state.unwrap();
        let s = p.evaluate(Some(&s), 1, 4990).new_state.unwrap();
        assert_eq!(s.entries, [(5000, 2)]);
    }

    /// Seed 000's "1000 per 3 s": no 3-second span, however placed, holds
    /// more than 1000, including a burst on each side of a window edge.
    #[test]
    fn seed_000_edge_burst_is_held_to_the_limit() {
        let p = Params::new(1000, 3000).unwrap();
        let mut times = Vec::new();
        for (second, n) in [(0u64, 10u64), (1, 10), (2, 980), (3, 900), (4, 100)] {
            times.extend((0..n).map(|i| second * 1000 + i * 1000 / n));
        }
        let admitted = LOG.admit_all(&p, &times);
        assert!(busiest_window(&admitted, 3000) <= 1000);
        let admitted = LOG.admit_all(&p, &[vec![2999; 1000], vec![3000; 1000]].concat());
        assert_eq!(admitted_in(&admitted, 2999, 3001), 1000);
    }

    proptest! {
        #[test]
        fn the_encoded_path_decides_and_stores_like_the_state_path(
            steps in proptest::collection::vec((0u64..3, 0u64..700), 1..40),
            limit in 1u64..6,
            window in 1u64..1500,
        ) {
            let p = Params::new(limit, window).unwrap();
            let (mut s, mut now) = (None::<State>, 1_000_000u64);
            for (cost, dt) in steps {
                // Small steps back as well as forward.
                now = (now + dt).saturating_sub(100);
                let out = p.evaluate(s.as_ref(), cost, now);
                let bytes = s.as_ref().map(State::encode);
                let enc = evaluate_encoded(bytes.as_deref(), &p, cost, now).unwrap();
                prop_assert_eq!(enc.decision, out.decision);
                prop_assert_eq!(enc.ttl_ms, out.ttl_ms);
                prop_assert_eq!(enc.new_state, out.new_state.as_ref().map(State::encode));
                if out.new_state.is_some() {
                    s = out.new_state;
                }
            }
        }

        #[test]
        fn never_exceeds_the_limit_in_any_window(
            limit in 1u64..20,
            window in 1u64..80,
            start in 0u64..1_000_000,
            steps in forward(30, 8, 150),
        ) {
            let p = Params::new(limit, window).unwrap();
            let r = LOG.run(&p, start, &steps, true);
            prop_assert!(busiest_window(&r.admitted, window) <= limit);
        }

        #[test]
        fn a_clock_stepping_back_keeps_the_bound_on_stamped_times(
            limit in 1u64..20,
            window in 1u64..80,
            start in 10_000u64..1_000_000,
            steps in jittery(30, 40, 8, 150),
        ) {
            let p = Params::new(limit, window).unwrap();
            // Re-run by hand to read the stamped times from the stored log.
            let mut state: Option<State> = None;
            let mut now = start;
            let mut stamped = Vec::new();
            for &(dt, cost) in &steps {
                now = now.saturating_add_signed(dt);
                let out = p.evaluate(state.as_ref(), cost, now);
                if let Some(s) = out.new_state {
                    stamped.push((s.entries.last().unwrap().0, cost));
                    state = Some(s);
                }
            }
            prop_assert!(stamped.windows(2).all(|w| w[0].0 <= w[1].0));
            prop_assert!(busiest_window(&stamped, window) <= limit);
            LOG.run(&p, start, &steps, false);
        }

        #[test]
        fn extreme_numbers_never_panic(
            limit in 1u64..=MAX_LIMIT,
            window in 1u64..,
            cost in proptest::num::u64::ANY,
            now in proptest::num::u64::ANY,
            entries in proptest::collection::vec((proptest::num::u64::ANY, 1u64..), 0..20),
        ) {
            let p = Params::new(limit, window).unwrap();
            let mut entries = entries;
            entries.sort();
            entries.dedup_by_key(|e| e.0);
            let s = State { entries };
            let _ = p.evaluate(Some(&s), cost, now);
            let _ = p.evaluate(None, cost, now);
        }

        #[test]
        fn encoding_round_trips(entries in proptest::collection::vec((proptest::num::u64::ANY, 1u64..), 0..40)) {
            let mut entries = entries;
            entries.sort();
            entries.dedup_by_key(|e| e.0);
            let s = State { entries };
            prop_assert_eq!(State::decode(&s.encode()), Some(s));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            let _ = State::decode(&bytes);
        }

        /// The encoded path reads any bytes as decoding them would: the same logs
        /// accepted, the same decision and a new state that decodes the same, around the
        /// window's edge, with units near the limit and with one byte of the encoding changed.
        #[test]
        fn the_encoded_path_agrees_with_decoding_any_bytes(
            entries in proptest::collection::vec((0u64..5_000, 1u64..30), 0..30),
            corrupt in proptest::option::of((
                0usize..400,
                prop_oneof![Just(0u8), Just(1), Just(0x80), Just(0xff), proptest::num::u8::ANY],
            )),
            limit in 1u64..120,
            window in 1u64..3_000,
            cost in 0u64..40,
            now in 0u64..8_000,
        ) {
            let mut entries = entries;
            entries.sort();
            entries.dedup_by_key(|e| e.0);
            let mut bytes = encode_entries(&entries);
            if let Some((at, byte)) = corrupt {
                let at = at % bytes.len();
                bytes[at] = byte;
            }
            let p = Params::new(limit, window).unwrap();
            let enc = evaluate_encoded(Some(&bytes), &p, cost, now);
            match State::decode(&bytes) {
                None => prop_assert!(enc.is_none()),
                Some(state) => {
                    let out = p.evaluate(Some(&state), cost, now);
                    let enc = enc.expect("a log that decodes");
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
