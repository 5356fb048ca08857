//! Pure rate-limiter algorithms: each one is a function of
//! `(stored state, parameters, cost, now_ms)` that returns a verdict and the
//! state to store back.
//!
//! This module owns the arithmetic of every native limiter and nothing else:
//! no I/O, no clock, no keyspace. The command layer loads a key's bytes,
//! decodes them with the algorithm's `State::decode`, calls `evaluate` with the
//! entry's `now_ms`, stores `Outcome::new_state` (encoded) with
//! `Outcome::ttl_ms`, and replies with `Outcome::decision`. Because the result
//! depends only on the inputs, the same call is the standalone engine and the
//! Raft state machine, and replicas never diverge.
//!
//! Rules shared by every algorithm:
//!
//! - **Cost 0 peeks**: it reports the current verdict and never asks for a
//!   write (`new_state` is `None`).
//! - **A rejected request consumes nothing** (`new_state` is `None`).
//! - **Impossible requests** (a cost larger than the limit or capacity, which
//!   no amount of waiting can admit) are rejected with `retry_after_ms = -1`,
//!   as redis-cell does for them.
//! - **Time going backwards** (a `now_ms` older than what the state has seen)
//!   counts as no elapsed time; nothing underflows.
//! - **All arithmetic on user numbers saturates** or runs in `u128`/`i128`
//!   wide enough to be exact, so huge periods or `u64::MAX` costs never
//!   overflow or panic.
//! - `reset_after_ms` is the time until the limiter is back to its initial
//!   state if nothing else is admitted (0 when it already is), and `ttl_ms`
//!   is the same time (at least 1 ms): past it the stored key equals an
//!   absent one and may expire.
//!
//! Encoded states start with the magic `b"TGL"` and one tag byte per
//! algorithm. The tag bytes are in `0x81..=0x88`: after three ASCII bytes such
//! a byte is invalid UTF-8, so no valid UTF-8 string a user stores can be
//! misread as a limiter state, and a state of one algorithm is never decoded
//! as another. Decoders reject garbage, truncated and trailing bytes.
//!
//! The algorithms: [`fixed`] (fixed window counter), [`sliding`] (sliding
//! window counter on sub-buckets), [`log`] (exact sliding log), [`token`]
//! (token bucket), [`leaky`] (leaky bucket as a meter), [`gcra`] (generic cell
//! rate algorithm), [`cell`] (redis-cell's `CL.THROTTLE`, reply-compatible)
//! and [`concurrency`] (leased concurrency slots).
//!
//! Two traits make an algorithm: every stored state implements [`Codec`] (its
//! name, tag byte, encoding, decoding and `LIMIT.INFO` fields), and the
//! parameters of a rate rule implement [`Algorithm`] (how a rule's arguments
//! parse, and `evaluate`). Each algorithm is listed once, in [`algorithms!`];
//! from that list come [`Rule`] and [`rule_syntax`] (LIMIT.ALL's rules),
//! [`AnyState`] and [`decode_any`] (LIMIT.INFO, LIMIT.RESET) and, in
//! `command/limiter.rs`, the `LIMIT.<NAME>` commands. Adding an algorithm is
//! one new file and one line there.

pub mod cell;
pub mod concurrency;
pub mod fixed;
pub mod gcra;
pub mod leaky;
pub mod log;
mod meter;
pub mod sliding;
#[cfg(test)]
mod testkit;
pub mod token;

use std::fmt::Debug;

/// Every algorithm, listed once: `Variant => module tag`. Rate rules (`LIMIT.<NAME>` and
/// LIMIT.ALL's rules, parameters implementing [`Algorithm`]) first, then the states of
/// algorithms with commands of their own (CL.THROTTLE, LIMIT.ACQUIRE). A module's name is
/// its algorithm's name ([`Named::NAME`]) and the tag goes after the magic in its encoded
/// states ([`Named::TAG`]: in `0x81..=0x8f`, see above, distinct, checked at compile time). The list is handed to `$callback!` (here
/// `registry!`, and `command/limiter.rs` for its command rows).
macro_rules! algorithms {
    ($callback:ident) => {
        $callback! {
            rules:
                Fixed => fixed 0x81,
                Sliding => sliding 0x82,
                Log => log 0x83,
                Token => token 0x84,
                Leaky => leaky 0x85,
                Gcra => gcra 0x86;
            others:
                Cell => cell 0x87,
                Concurrency => concurrency 0x88;
        }
    };
}
pub(crate) use algorithms;

/// Which algorithm a stored state belongs to: given to each state type by its line in
/// [`algorithms!`].
pub trait Named {
    /// The algorithm's lower-case name (`LIMIT.<NAME>`, LIMIT.ALL's rule keyword,
    /// LIMIT.INFO's `algorithm`): its module's name.
    const NAME: &'static str;
    /// The byte after the magic in encoded states.
    const TAG: u8;
}

/// A limiter state as stored in a key: the encoding and decoding, and what `LIMIT.INFO`
/// shows of it.
pub trait Codec: Named + Sized + Clone + PartialEq + Debug {
    /// The compact binary form stored as the key's value.
    fn encode(&self) -> Vec<u8>;
    /// Parses [`Codec::encode`]'s output; `None` for anything else.
    fn decode(bytes: &[u8]) -> Option<Self>;
    /// Fields for `LIMIT.INFO`, as name/value pairs.
    fn info(&self) -> Vec<(&'static str, i64)>;
}

/// A rate rule's validated parameters: how they parse and how they judge a request.
pub trait Algorithm: Sized + Copy + Debug {
    /// The state the rule keeps.
    type State: Codec;
    /// Positional arguments after the key (`LIMIT.FIXED key limit window`: 2).
    const ARGS: usize;
    /// Options besides `COST`, lower-case, each taking a count (SLIDING: `precision`).
    const OPTIONS: &'static [&'static str] = &[];

    /// Parses the positional arguments (`args`, exactly [`Algorithm::ARGS`]) and the
    /// options' values (`options[i]` for `OPTIONS[i]`, `None` when not given).
    fn parse(args: &[&[u8]], options: &[Option<u64>]) -> Result<Self, LimitError>;

    /// Charges `cost` at `now_ms` against `state` (cost 0 peeks).
    fn evaluate(&self, state: Option<&Self::State>, cost: u64, now_ms: u64)
        -> Outcome<Self::State>;

    /// [`Algorithm::evaluate`] on an encoded state, returning the encoded state to
    /// store; `None` when `stored` is not a state of this algorithm.
    fn evaluate_encoded(&self, stored: Option<&[u8]>, cost: u64, now_ms: u64) -> Option<Encoded> {
        let state = match stored {
            None => None,
            Some(bytes) => Some(Self::State::decode(bytes)?),
        };
        let out = self.evaluate(state.as_ref(), cost, now_ms);
        Some(Outcome {
            decision: out.decision,
            new_state: out.new_state.as_ref().map(Codec::encode),
            ttl_ms: out.ttl_ms,
        })
    }
}

/// [`Algorithm::parse`] of some algorithm, into a [`Rule`].
pub type RuleParser = fn(&[&[u8]], &[Option<u64>]) -> Result<Rule, LimitError>;

/// An [`Outcome`] whose state is already encoded.
pub type Encoded = Outcome<Vec<u8>>;

/// The syntax of one rate rule: what LIMIT.ALL needs to split and parse its arguments.
#[derive(Debug)]
pub struct RuleSyntax {
    /// The algorithm's name.
    pub name: &'static str,
    /// Positional arguments after the key.
    pub args: usize,
    /// Options besides `COST`.
    pub options: &'static [&'static str],
    /// Parses the rule (see [`Algorithm::parse`]).
    pub parse: RuleParser,
}

/// The rate rule named `name` (ASCII case-insensitive).
pub fn rule_syntax(name: &[u8]) -> Option<&'static RuleSyntax> {
    // Names are lower-case letters, and `b | 0x20` equals a lower-case letter exactly
    // when `b` is that letter in either case: the same test as `eq_ignore_ascii_case`,
    // at a third of its cost (this runs for every argument LIMIT.ALL scans for a rule).
    RULES.iter().find(|r| {
        r.name.len() == name.len() && name.iter().zip(r.name.bytes()).all(|(b, c)| b | 0x20 == c)
    })
}

/// [`Algorithm::parse`] into a [`Rule`].
fn parse_rule<P: Algorithm + Into<Rule>>(
    args: &[&[u8]],
    options: &[Option<u64>],
) -> Result<Rule, LimitError> {
    P::parse(args, options).map(Into::into)
}

/// Builds the types and tables that range over every algorithm from [`algorithms!`].
macro_rules! registry {
    (
        rules: $($rule:ident => $rm:ident $rtag:literal),+;
        others: $($other:ident => $om:ident $otag:literal),+;
    ) => {
        $(
            impl Named for $rm::State {
                const NAME: &'static str = stringify!($rm);
                const TAG: u8 = $rtag;
            }
        )+
        $(
            impl Named for $om::State {
                const NAME: &'static str = stringify!($om);
                const TAG: u8 = $otag;
            }
        )+

        /// One rate rule of any algorithm: its validated parameters.
        #[derive(Debug, Clone, Copy)]
        pub enum Rule {
            $(
                #[doc = concat!("A [`", stringify!($rm), "`] rule.")]
                $rule($rm::Params),
            )+
        }

        $(
            impl From<$rm::Params> for Rule {
                fn from(p: $rm::Params) -> Rule {
                    Rule::$rule(p)
                }
            }
        )+

        impl Rule {
            /// [`Algorithm::evaluate_encoded`] of the rule's algorithm.
            pub fn evaluate_encoded(&self, stored: Option<&[u8]>, cost: u64, now: u64) -> Option<Encoded> {
                match self {
                    $(Rule::$rule(p) => p.evaluate_encoded(stored, cost, now),)+
                }
            }
        }

        /// Every rate rule's syntax, in [`algorithms!`] order.
        pub static RULES: &[RuleSyntax] = &[
            $(
                RuleSyntax {
                    name: <$rm::State as Named>::NAME,
                    args: <$rm::Params as Algorithm>::ARGS,
                    options: <$rm::Params as Algorithm>::OPTIONS,
                    parse: parse_rule::<$rm::Params>,
                },
            )+
        ];

        /// A decoded state of any algorithm, for commands that handle every kind
        /// (`LIMIT.INFO`, `LIMIT.RESET`).
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum AnyState {
            $(
                #[doc = concat!("A [`", stringify!($rm), "`] state.")]
                $rule($rm::State),
            )+
            $(
                #[doc = concat!("A [`", stringify!($om), "`] state.")]
                $other($om::State),
            )+
        }

        impl AnyState {
            /// The algorithm's name ([`Named::NAME`]).
            pub fn name(&self) -> &'static str {
                match self {
                    $(AnyState::$rule(_) => <$rm::State as Named>::NAME,)+
                    $(AnyState::$other(_) => <$om::State as Named>::NAME,)+
                }
            }

            /// The state's fields as name/value pairs for `LIMIT.INFO`.
            pub fn info(&self) -> Vec<(&'static str, i64)> {
                match self {
                    $(AnyState::$rule(s) => s.info(),)+
                    $(AnyState::$other(s) => s.info(),)+
                }
            }

            /// The state's binary encoding.
            pub fn encode(&self) -> Vec<u8> {
                match self {
                    $(AnyState::$rule(s) => s.encode(),)+
                    $(AnyState::$other(s) => s.encode(),)+
                }
            }
        }

        /// Decodes a state of any algorithm; `None` for bytes that are not a valid
        /// limiter state (a user's plain string, a truncated or corrupt encoding).
        pub fn decode_any(bytes: &[u8]) -> Option<AnyState> {
            let tag = tag_of(bytes)?;
            $(
                if tag == <$rm::State as Named>::TAG {
                    return $rm::State::decode(bytes).map(AnyState::$rule);
                }
            )+
            $(
                if tag == <$om::State as Named>::TAG {
                    return $om::State::decode(bytes).map(AnyState::$other);
                }
            )+
            None
        }

        /// Every algorithm's name and tag, in [`algorithms!`] order.
        pub const ALGORITHMS: &[(&str, u8)] = &[
            $((<$rm::State as Named>::NAME, <$rm::State as Named>::TAG),)+
            $((<$om::State as Named>::NAME, <$om::State as Named>::TAG),)+
        ];

        const _: () = {
            // Tags are distinct and in the range the module documentation promises.
            let mut i = 0;
            while i < ALGORITHMS.len() {
                assert!(ALGORITHMS[i].1 >= 0x81 && ALGORITHMS[i].1 <= 0x8f);
                let mut j = i + 1;
                while j < ALGORITHMS.len() {
                    assert!(ALGORITHMS[i].1 != ALGORITHMS[j].1, "two algorithms share a tag");
                    j += 1;
                }
                i += 1;
            }
        };
    };
}

algorithms!(registry);

/// The verdict every native limiter returns (one reply shape for all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request was admitted.
    pub allowed: bool,
    /// The configured limit (or capacity, burst, slot count).
    pub limit: u64,
    /// Units still admissible right now after this request.
    pub remaining: u64,
    /// Milliseconds until a retry of the same cost can succeed; -1 when
    /// allowed or when the request can never succeed.
    pub retry_after_ms: i64,
    /// Milliseconds until the limiter is back to its initial state.
    pub reset_after_ms: u64,
}

/// What an evaluation produced: the decision, the state to store (`None` =
/// leave the key untouched, e.g. a peek with cost 0 or a rejection that
/// changes nothing), and the TTL in ms the key should get so idle limiters
/// free their memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<S> {
    /// The verdict to reply with.
    pub decision: Decision,
    /// The state to encode and store, or `None` to leave the key as it is.
    pub new_state: Option<S>,
    /// The TTL (ms, at least 1) the stored key should carry.
    pub ttl_ms: u64,
}

impl<S> Outcome<S> {
    /// An outcome whose key lives until the limiter is back to its initial
    /// state (`decision.reset_after_ms`, at least 1 ms).
    fn new(decision: Decision, new_state: Option<S>) -> Outcome<S> {
        Outcome {
            decision,
            new_state,
            ttl_ms: ttl_for(decision.reset_after_ms),
        }
    }
}

/// A validated "`limit` units per window of `window_ms`" configuration: the
/// parameters of the fixed window ([`fixed::Params`]) and of the sliding log
/// ([`log::Params`]), whose state grows with the limit and so caps it at `MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowParams<const MAX: u64> {
    limit: u64,
    window_ms: u64,
}

impl<const MAX: u64> WindowParams<MAX> {
    /// `limit` units (`1..=MAX`) per window of `window_ms` (> 0).
    pub fn new(limit: u64, window_ms: u64) -> Result<Self, LimitError> {
        require(limit > 0, LimitError::InvalidLimit)?;
        require(limit <= MAX, LimitError::LogLimitTooLarge)?;
        require(window_ms > 0, LimitError::InvalidPeriod)?;
        Ok(WindowParams { limit, window_ms })
    }

    /// Units admitted per window.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Window length in milliseconds.
    pub fn window_ms(&self) -> u64 {
        self.window_ms
    }
}

/// Why limiter parameters or a duration were refused; `Display` is the exact
/// error line to send to the client (without the leading `-`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// A limit of zero (nothing could ever be admitted).
    #[error("ERR limit must be a positive integer")]
    InvalidLimit,
    /// A capacity or burst of zero.
    #[error("ERR capacity must be a positive integer")]
    InvalidCapacity,
    /// A refill, leak or emission count of zero.
    #[error("ERR rate must be a positive integer")]
    InvalidRate,
    /// A window, period or lease of zero milliseconds.
    #[error("ERR period must be a positive duration")]
    InvalidPeriod,
    /// A sub-bucket count outside `1..=min(sliding::MAX_BUCKETS, window_ms)`.
    #[error(
        "ERR precision must be between 1 and {} buckets and at most the window in milliseconds",
        sliding::MAX_BUCKETS
    )]
    InvalidBuckets,
    /// A sliding-log limit above `log::MAX_LIMIT` (its state grows with the limit).
    #[error(
        "ERR limit is too large for the sliding log (at most {})",
        log::MAX_LIMIT
    )]
    LogLimitTooLarge,
    /// A duration that is not digits with an optional unit.
    #[error(
        "ERR invalid duration, expected a positive integer with an optional unit ms, s, m, h or d"
    )]
    InvalidDuration,
    /// A duration of zero.
    #[error("ERR duration must be positive")]
    ZeroDuration,
    /// A duration that does not fit in u64 milliseconds.
    #[error("ERR duration is out of range")]
    DurationOutOfRange,
    /// `CL.THROTTLE` with the wrong number of arguments (redis-cell's text).
    #[error(
        "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"
    )]
    CellUsage,
    /// A `CL.THROTTLE` argument that is not an i64 (redis-cell's text).
    #[error("Cell error: Store error: Couldn't parse as integer: {0}")]
    CellNotInteger(String),
    /// A `CL.THROTTLE` rate whose emission interval is zero (redis-cell's text).
    #[error("Cell error: Store error: Zero rates are not supported")]
    CellZeroRate,
    /// A negative `CL.THROTTLE` argument or one whose arithmetic overflows
    /// (redis-cell has no check here; Redis's generic text, as Dragonfly uses).
    #[error("ERR value is not an integer or out of range")]
    CellOutOfRange,
    /// A count that is not an integer (Redis's generic text).
    #[error("ERR value is not an integer or out of range")]
    NotAnInteger,
}

/// A count (limit, capacity, rate, precision): an integer; zero and negative values
/// read as 0, for the algorithm's own error text.
pub fn count(arg: &[u8]) -> Result<u64, LimitError> {
    if let Some(n) = plain_u64(arg) {
        return Ok(n);
    }
    let n = crate::store::value::parse_canonical_i64(arg).ok_or(LimitError::NotAnInteger)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Digits without a sign or leading zero, short enough not to overflow: the usual
/// count or cost, read without the general integer parser's checks (anything else goes
/// through it, and gets its error text).
pub fn plain_u64(arg: &[u8]) -> Option<u64> {
    match arg {
        [b'1'..=b'9', ..] => short_decimal(arg),
        _ => None,
    }
}

/// Parses a duration into milliseconds: `"250"` (plain number = ms),
/// `"250ms"`, `"1s"`, `"5m"`, `"1h"`, `"1d"` (units case-insensitive).
pub fn parse_duration(s: &[u8]) -> Result<u64, LimitError> {
    // The unit is the last one or two bytes: taking it off first leaves the number
    // (this runs for every rule of every limiter call). `b | 0x20` equals a lower-case
    // letter exactly when `b` is that letter in either case.
    let (number, unit): (&[u8], u64) = match s {
        [.., last] if last.is_ascii_digit() => (s, 1),
        [number @ .., m, s] if *s | 0x20 == b's' && *m | 0x20 == b'm' => (number, 1),
        [number @ .., u] => match u | 0x20 {
            b's' => (number, 1_000),
            b'm' => (number, 60_000),
            b'h' => (number, 3_600_000),
            b'd' => (number, 86_400_000),
            _ => return Err(LimitError::InvalidDuration),
        },
        [] => return Err(LimitError::InvalidDuration),
    };
    // The usual number is a few digits, read without overflow checks; longer ones, and
    // anything that is not digits, take the checked pass below.
    let value = match short_decimal(number) {
        Some(v) => Some(v),
        None => checked_decimal(number)?,
    };
    let ms = value
        .and_then(|v| v.checked_mul(unit))
        .ok_or(LimitError::DurationOutOfRange)?;
    if ms == 0 {
        return Err(LimitError::ZeroDuration);
    }
    Ok(ms)
}

/// A duration's number of any length: `None` once it overflows a u64 (a later non-digit
/// still makes it invalid), an error when empty or not all digits.
fn checked_decimal(number: &[u8]) -> Result<Option<u64>, LimitError> {
    if number.is_empty() {
        return Err(LimitError::InvalidDuration);
    }
    let mut value = Some(0u64);
    for &c in number {
        if !c.is_ascii_digit() {
            return Err(LimitError::InvalidDuration);
        }
        value = value.and_then(|v| v.checked_mul(10)?.checked_add(u64::from(c - b'0')));
    }
    Ok(value)
}

/// The value of 1 to 18 ASCII digits (leading zeros allowed), `None` for anything
/// else: the fast path of every number parser here, which falls back to its general
/// parser (and error texts) on `None`. 18 digits cannot overflow an i64, and one pass
/// both checks and reads them.
pub(crate) fn short_decimal(arg: &[u8]) -> Option<u64> {
    if arg.is_empty() || arg.len() > 18 {
        return None;
    }
    arg.iter().try_fold(0u64, |v, &c| {
        c.is_ascii_digit().then(|| v * 10 + u64::from(c - b'0'))
    })
}

/// The tag byte of an encoded state, judged by its header only.
fn tag_of(bytes: &[u8]) -> Option<u8> {
    match bytes.split_first_chunk::<4>() {
        Some((&[a, b, c, tag], _)) if [a, b, c] == MAGIC => Some(tag),
        _ => None,
    }
}

/// The name of the algorithm an encoded state belongs to, judged by its header only.
pub fn algorithm_of(bytes: &[u8]) -> Option<&'static str> {
    let tag = tag_of(bytes)?;
    ALGORITHMS.iter().find(|a| a.1 == tag).map(|a| a.0)
}

const MAGIC: [u8; 3] = *b"TGL";

/// Starts an encoding with the magic and the algorithm's tag.
#[inline]
fn encoder(tag: u8, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + capacity);
    out.extend_from_slice(&MAGIC);
    out.push(tag);
    out
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u128(out: &mut Vec<u8>, v: u128) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// LEB128, so small counts and deltas take one byte.
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A bounds-checked cursor over an encoded state; every read is `None` past
/// the end so decoders never panic on truncated input.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Checks the magic and `tag`, and positions after them.
    fn open(bytes: &'a [u8], tag: u8) -> Option<Reader<'a>> {
        match bytes.split_first_chunk::<4>() {
            Some((&[a, b, c, t], rest)) if [a, b, c] == MAGIC && t == tag => Some(Reader { rest }),
            _ => None,
        }
    }

    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.rest.len() < n {
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes(8)?.try_into().ok()?))
    }

    fn u128(&mut self) -> Option<u128> {
        Some(u128::from_le_bytes(self.bytes(16)?.try_into().ok()?))
    }

    fn varint(&mut self) -> Option<u64> {
        // Most varints are one byte (a log's deltas and units, lengths of ids).
        if let Some((&byte, rest)) = self.rest.split_first() {
            if byte < 0x80 {
                self.rest = rest;
                return Some(u64::from(byte));
            }
        }
        let mut value = 0u64;
        let mut shift = 0u32;
        loop {
            let byte = *self.bytes(1)?.first()?;
            // The tenth byte may only carry the top bit of a u64.
            if shift == 63 && byte > 1 {
                return None;
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
            shift += 7;
        }
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Succeeds only when every byte was consumed (no trailing garbage).
    fn finish<T>(self, value: T) -> Option<T> {
        self.is_empty().then_some(value)
    }
}

/// `a / b` for u128 operands, through the hardware's u64 division when both fit
/// (a u128 division is a library call several times slower); same result.
fn div(a: u128, b: u128) -> u128 {
    match (u64::try_from(a), u64::try_from(b)) {
        (Ok(a), Ok(b)) => u128::from(a / b),
        _ => a / b,
    }
}

fn sat_u64(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

fn sat_i64(v: u128) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Info values are i64 (RESP integers); larger numbers saturate.
fn info_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn ceil_div(a: u128, b: u128) -> u128 {
    if b == 0 {
        return 0;
    }
    match (u64::try_from(a), u64::try_from(b)) {
        (Ok(a), Ok(b)) => u128::from(a.div_ceil(b)),
        _ => a.div_ceil(b),
    }
}

/// Re-expresses a quantity counted in units of `1/from` in units of `1/to`,
/// rounding to whole units first (up or down as the caller's safety needs);
/// used when a key is evaluated with a different period than it was written with.
fn rescale(v: u128, from: u64, to: u64, round_up: bool) -> u128 {
    if from == to || from == 0 {
        return v;
    }
    let whole = if round_up {
        ceil_div(v, u128::from(from))
    } else {
        div(v, u128::from(from))
    };
    whole.saturating_mul(u128::from(to))
}

/// The TTL a key gets: the time until it is back to its initial state, at
/// least 1 ms so a key is never stored already expired.
fn ttl_for(reset_after_ms: u64) -> u64 {
    reset_after_ms.max(1)
}

/// `Ok` when `ok`, else `err`: one line per rule in a `Params::new`, in the
/// order the rules are reported.
fn require(ok: bool, err: LimitError) -> Result<(), LimitError> {
    if ok {
        Ok(())
    } else {
        Err(err)
    }
}

/// A request of `cost` counted against `limit` units of which `used` are
/// taken: the verdict the counting limiters ([`fixed`], [`sliding`], [`log`])
/// share. The cost is admitted when `used + cost` stays within `limit`.
struct Tally {
    limit: u64,
    cost: u64,
    admitted: bool,
    /// Units taken after this request (`used`, plus `cost` if admitted).
    after: u64,
}

impl Tally {
    /// Counts `cost` against `limit` with `used` units already taken.
    fn new(limit: u64, used: u64, cost: u64) -> Tally {
        let admitted = used.checked_add(cost).is_some_and(|total| total <= limit);
        Tally {
            limit,
            cost,
            admitted,
            after: if admitted { used + cost } else { used },
        }
    }

    /// Whether the state must be written: a cost was admitted (not a peek).
    fn writes(&self) -> bool {
        self.admitted && self.cost > 0
    }

    /// The decision; `wait` (ms until the cost could fit) is asked only for
    /// a rejection that waiting can cure.
    fn decision(&self, wait: impl FnOnce() -> u64, reset_after_ms: u64) -> Decision {
        let retry_after_ms = if self.admitted || self.cost > self.limit {
            -1
        } else {
            sat_i64(u128::from(wait()))
        };
        Decision {
            allowed: self.admitted,
            limit: self.limit,
            remaining: self.limit.saturating_sub(self.after),
            retry_after_ms,
            reset_after_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The duration grammar spelled out: leading digits, then exactly a unit;
    /// a malformed duration is invalid before a too large one is out of range.
    fn duration_model(s: &[u8]) -> Result<u64, LimitError> {
        let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
        let unit = match std::str::from_utf8(&s[digits..]).map(str::to_ascii_lowercase) {
            _ if digits == 0 => return Err(LimitError::InvalidDuration),
            Ok(u) if u.is_empty() || u == "ms" => 1,
            Ok(u) if u == "s" => 1_000,
            Ok(u) if u == "m" => 60_000,
            Ok(u) if u == "h" => 3_600_000,
            Ok(u) if u == "d" => 86_400_000,
            _ => return Err(LimitError::InvalidDuration),
        };
        let value: u64 = std::str::from_utf8(&s[..digits])
            .unwrap()
            .parse()
            .map_err(|_| LimitError::DurationOutOfRange)?;
        match value.checked_mul(unit) {
            None => Err(LimitError::DurationOutOfRange),
            Some(0) => Err(LimitError::ZeroDuration),
            Some(ms) => Ok(ms),
        }
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration(b"250"), Ok(250));
        assert_eq!(parse_duration(b"250ms"), Ok(250));
        assert_eq!(parse_duration(b"1s"), Ok(1_000));
        assert_eq!(parse_duration(b"5m"), Ok(300_000));
        assert_eq!(parse_duration(b"1h"), Ok(3_600_000));
        assert_eq!(parse_duration(b"1d"), Ok(86_400_000));
        assert_eq!(parse_duration(b"2S"), Ok(2_000));
        assert_eq!(parse_duration(b"007ms"), Ok(7));
    }

    #[test]
    fn durations_reject_garbage_zero_and_overflow() {
        for bad in [
            &b""[..],
            b"ms",
            b"-5",
            b"+5",
            b" 5",
            b"5 ",
            b"1.5s",
            b"5sec",
            b"5x",
            b"s5",
        ] {
            assert_eq!(
                parse_duration(bad),
                Err(LimitError::InvalidDuration),
                "{bad:?}"
            );
        }
        assert_eq!(parse_duration(b"0"), Err(LimitError::ZeroDuration));
        assert_eq!(parse_duration(b"0s"), Err(LimitError::ZeroDuration));
        assert_eq!(
            parse_duration(b"18446744073709551616"),
            Err(LimitError::DurationOutOfRange)
        );
        assert_eq!(
            parse_duration(b"18446744073709551615d"),
            Err(LimitError::DurationOutOfRange)
        );
        assert_eq!(parse_duration(b"18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn error_texts_are_redis_style() {
        assert_eq!(
            LimitError::InvalidLimit.to_string(),
            "ERR limit must be a positive integer"
        );
        assert_eq!(
            LimitError::CellNotInteger("abc".into()).to_string(),
            "Cell error: Store error: Couldn't parse as integer: abc"
        );
        assert_eq!(
            LimitError::CellZeroRate.to_string(),
            "Cell error: Store error: Zero rates are not supported"
        );
        assert_eq!(
            LimitError::InvalidBuckets.to_string(),
            "ERR precision must be between 1 and 3600 buckets and at most the window in milliseconds"
        );
        assert_eq!(
            LimitError::LogLimitTooLarge.to_string(),
            "ERR limit is too large for the sliding log (at most 100000)"
        );
    }

    #[test]
    fn rule_names_are_found_in_any_case_and_nothing_else() {
        for r in RULES {
            assert!(std::ptr::eq(rule_syntax(r.name.as_bytes()).unwrap(), r));
            let upper = r.name.to_ascii_uppercase();
            assert!(std::ptr::eq(rule_syntax(upper.as_bytes()).unwrap(), r));
        }
        assert!(rule_syntax(b"bogus").is_none());
        // Algorithms with commands of their own are not rules.
        assert!(rule_syntax(b"cell").is_none());
        assert!(rule_syntax(b"concurrency").is_none());
        // Every byte in place of every letter: only the letter, in either case, matches.
        for r in RULES {
            for at in 0..r.name.len() {
                for b in 0..=255u8 {
                    let mut name = r.name.as_bytes().to_vec();
                    let letter = name[at];
                    name[at] = b;
                    let found = rule_syntax(&name).map(|f| f.name);
                    let expected = b.eq_ignore_ascii_case(&letter).then_some(r.name);
                    assert_eq!(found, expected, "{name:?}");
                }
            }
        }
    }

    #[test]
    fn names_are_distinct_lower_case_module_names() {
        let names: std::collections::BTreeSet<_> = ALGORITHMS.iter().map(|a| a.0).collect();
        assert_eq!(names.len(), ALGORITHMS.len());
        for (name, _) in ALGORITHMS {
            assert!(name.bytes().all(|b| b.is_ascii_lowercase()), "{name}");
        }
    }

    #[test]
    fn plain_strings_are_not_states() {
        assert_eq!(decode_any(b""), None);
        assert_eq!(decode_any(b"TGL"), None);
        assert_eq!(decode_any(b"TGLF12345678"), None);
        assert_eq!(decode_any(b"hello world"), None);
        assert_eq!(algorithm_of(b"TGL\x81"), Some("fixed"));
        // Every valid UTF-8 string is rejected by the header check alone.
        assert_eq!(algorithm_of("TGL\u{81}".as_bytes()), None);
    }

    /// The state `params` store after admitting one unit at time 10.
    fn first_state<P: Algorithm>(params: Result<P, LimitError>) -> P::State {
        params.unwrap().evaluate(None, 1, 10).new_state.unwrap()
    }

    #[test]
    fn decode_any_identifies_each_algorithm() {
        let states = [
            AnyState::Fixed(first_state(fixed::Params::new(5, 1000))),
            AnyState::Sliding(first_state(sliding::Params::new(5, 1000, 10))),
            AnyState::Log(first_state(log::Params::new(5, 1000))),
            AnyState::Token(first_state(token::Params::new(5, 1, 1000))),
            AnyState::Leaky(first_state(leaky::Params::new(5, 1, 1000))),
            AnyState::Gcra(first_state(gcra::Params::new(5, 1, 1000))),
            AnyState::Cell(
                cell::evaluate(None, &cell::Params::new(5, 1, 1).unwrap(), 1, 10)
                    .new_state
                    .unwrap(),
            ),
            AnyState::Concurrency(
                concurrency::acquire(None, &concurrency::Params::new(5, 1000).unwrap(), b"a", 10)
                    .new_state
                    .unwrap(),
            ),
        ];
        assert_eq!(states.len(), ALGORITHMS.len());
        for (state, (algorithm, _)) in states.iter().zip(ALGORITHMS) {
            assert_eq!(state.name(), *algorithm);
            let bytes = state.encode();
            assert_eq!(algorithm_of(&bytes), Some(*algorithm));
            assert_eq!(decode_any(&bytes).as_ref(), Some(state));
            assert!(!state.info().is_empty());
            // Truncation anywhere is rejected.
            for cut in 0..bytes.len() {
                assert_eq!(
                    decode_any(&bytes[..cut]),
                    None,
                    "{algorithm:?} cut at {cut}"
                );
            }
            // Trailing garbage is rejected.
            let mut longer = bytes.clone();
            longer.push(0);
            assert_eq!(
                decode_any(&longer),
                None,
                "{algorithm:?} with trailing byte"
            );
        }
    }

    #[test]
    fn varints_round_trip_and_reject_overlong() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut out = encoder(0x81, 10);
            put_varint(&mut out, v);
            let mut r = Reader::open(&out, 0x81).unwrap();
            assert_eq!(r.varint(), Some(v));
            assert!(r.is_empty());
        }
        let mut out = encoder(0x81, 11);
        out.extend_from_slice(&[0xff; 9]);
        out.push(0x02);
        assert_eq!(Reader::open(&out, 0x81).unwrap().varint(), None);
    }

    proptest::proptest! {
        #[test]
        fn decode_any_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let _ = decode_any(&bytes);
        }

        #[test]
        fn decode_any_never_panics_past_the_header(
            tag in 0x81u8..=0x88,
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..96),
        ) {
            let mut bytes = b"TGL".to_vec();
            bytes.push(tag);
            bytes.extend_from_slice(&body);
            if let Some(state) = decode_any(&bytes) {
                // Whatever decodes must re-encode to something that decodes the same.
                proptest::prop_assert_eq!(decode_any(&state.encode()), Some(state.clone()));
                let _ = state.info();
            }
        }

        #[test]
        fn parse_duration_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..24)) {
            let _ = parse_duration(&bytes);
        }

        #[test]
        fn parse_duration_accepts_every_positive_ms(n in 1u64..) {
            proptest::prop_assert_eq!(parse_duration(n.to_string().as_bytes()), Ok(n));
        }

        #[test]
        fn parse_duration_follows_its_grammar(s in "[0-9]{0,22}[0-9msMShdx ]{0,3}") {
            proptest::prop_assert_eq!(parse_duration(s.as_bytes()), duration_model(s.as_bytes()));
        }

        #[test]
        fn short_decimal_reads_up_to_18_digits(s in "[0-9a+-]{0,20}") {
            let plain = (1..=18).contains(&s.len()) && s.bytes().all(|c| c.is_ascii_digit());
            proptest::prop_assert_eq!(short_decimal(s.as_bytes()), s.parse().ok().filter(|_| plain));
        }
    }
}
