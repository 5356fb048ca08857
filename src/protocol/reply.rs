//! `Reply`: the value a command answers with, independent of the wire version.
//!
//! Commands build RESP3-shaped replies (maps, sets, doubles, booleans); the encoder
//! lowers them to RESP2 for clients that did not say `HELLO 3`, exactly as Redis does.

use bytes::{BufMut, Bytes, BytesMut};

/// A reply to one command, before encoding. Serializable, because in a cluster the
/// node that applies a command sends its reply back to the node the client is on.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Reply {
    /// `+OK` style status line; must not contain CR or LF.
    Status(String),
    /// `-ERR ...` error; the text includes its code prefix (`ERR`, `WRONGTYPE`, ...).
    Error(String),
    /// `:n`
    Integer(i64),
    /// `$n` binary-safe string.
    Bulk(Bytes),
    /// Null bulk string (`$-1` in RESP2, `_` in RESP3).
    Nil,
    /// Null array (`*-1` in RESP2, `_` in RESP3), e.g. EXEC aborted by WATCH.
    NilArray,
    /// `*n` array.
    Array(Vec<Reply>),
    /// RESP3 map; flattened to an array of 2n items in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// RESP3 set; an array in RESP2.
    Set(Vec<Reply>),
    /// RESP3 double; a bulk string in RESP2.
    Double(f64),
    /// RESP3 boolean; `:1` / `:0` in RESP2.
    Bool(bool),
    /// RESP3 big number; a bulk string in RESP2.
    BigNumber(String),
    /// RESP3 verbatim string with a 3-letter format; a bulk string in RESP2.
    Verbatim(#[serde(with = "verbatim_format")] VerbatimFormat, Bytes),
    /// An array of five integers held inline: the reply of every limiter decision
    /// (`CL.THROTTLE`, `LIMIT.*`), made and encoded without allocating. Clients see exactly
    /// what `Array` of five `Integer` would give them.
    Ints5([i64; 5]),
    /// RESP3 push (`>n`: pub/sub messages and subscription confirmations); an array in
    /// RESP2.
    Push(Vec<Reply>),
    /// A double printed as Redis's `addReplyHumanLongDouble` prints it (`%.17Lf` without
    /// trailing zeros: GEOPOS, WITHCOORD): a bulk string in RESP2, a `,` double with that
    /// text in RESP3. Last, so that replies serialized before it was added still decode.
    HumanDouble(f64),
}

/// The 3-letter format of a verbatim string. An alias on purpose: serde's derive would
/// otherwise see `&'static str` and require `'de: 'static`, so `Reply` would not be
/// `DeserializeOwned` (the cluster decodes replies from a buffer it owns).
pub type VerbatimFormat = &'static str;

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Status("OK".into())
    }

    /// An error reply; `msg` must carry its prefix, e.g. `"ERR syntax error"`.
    pub fn err(msg: impl Into<String>) -> Reply {
        Reply::Error(msg.into())
    }

    /// A bulk reply from anything byte-like.
    pub fn bulk(b: impl Into<Bytes>) -> Reply {
        Reply::Bulk(b.into())
    }

    /// A bulk reply holding the decimal text of `n`.
    pub fn bulk_int(n: i64) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(
            itoa::Buffer::new().format(n).as_bytes(),
        ))
    }

    /// Whether this reply is an error.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Encode this reply for protocol version `resp` (2 or 3) onto `out`.
    pub fn encode(&self, resp: u8, out: &mut BytesMut) {
        match self {
            Reply::Status(s) => simple_line(out, b'+', s.as_bytes()),
            Reply::Error(e) => simple_line(out, b'-', e.as_bytes()),
            Reply::Integer(n) => int_line(out, b':', *n),
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil => {
                if resp >= 3 {
                    out.put_slice(b"_\r\n")
                } else {
                    out.put_slice(b"$-1\r\n")
                }
            }
            Reply::NilArray => {
                if resp >= 3 {
                    out.put_slice(b"_\r\n")
                } else {
                    out.put_slice(b"*-1\r\n")
                }
            }
            Reply::Array(items) => {
                int_line(out, b'*', items.len() as i64);
                items.iter().for_each(|r| r.encode(resp, out));
            }
            Reply::Set(items) => {
                int_line(out, if resp >= 3 { b'~' } else { b'*' }, items.len() as i64);
                items.iter().for_each(|r| r.encode(resp, out));
            }
            Reply::Push(items) => {
                int_line(out, if resp >= 3 { b'>' } else { b'*' }, items.len() as i64);
                items.iter().for_each(|r| r.encode(resp, out));
            }
            Reply::Map(pairs) => {
                if resp >= 3 {
                    int_line(out, b'%', pairs.len() as i64);
                } else {
                    int_line(out, b'*', 2 * pairs.len() as i64);
                }
                for (k, v) in pairs {
                    k.encode(resp, out);
                    v.encode(resp, out);
                }
            }
            Reply::Double(d) => {
                let text = format_double(*d);
                if resp >= 3 {
                    line(out, b',', text.as_bytes())
                } else {
                    bulk(out, text.as_bytes())
                }
            }
            Reply::HumanDouble(d) => {
                let text = crate::numbers::format_human(*d);
                if resp >= 3 {
                    line(out, b',', text.as_bytes())
                } else {
                    bulk(out, text.as_bytes())
                }
            }
            Reply::Bool(b) => {
                if resp >= 3 {
                    out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" })
                } else {
                    out.put_slice(if *b { b":1\r\n" } else { b":0\r\n" })
                }
            }
            Reply::BigNumber(n) => {
                if resp >= 3 {
                    line(out, b'(', n.as_bytes())
                } else {
                    bulk(out, n.as_bytes())
                }
            }
            Reply::Ints5(items) => {
                // `*5` and five `:n` lines assembled on the stack, appended with one copy.
                let mut buf = [0u8; 4 + 5 * INT_LINE_MAX];
                buf[..4].copy_from_slice(b"*5\r\n");
                let mut at = 4;
                for n in items {
                    // Always a slot: the buffer holds five of the longest lines.
                    let Some(slot) = buf[at..].first_chunk_mut() else {
                        break;
                    };
                    at += put_int_line(slot, b':', *n);
                }
                out.extend_from_slice(&buf[..at]);
            }
            Reply::Verbatim(fmt, text) => {
                if resp >= 3 {
                    int_line(out, b'=', (text.len() + 4) as i64);
                    out.put_slice(fmt.as_bytes());
                    out.put_u8(b':');
                    out.put_slice(text);
                    out.put_slice(b"\r\n");
                } else {
                    bulk(out, text)
                }
            }
        }
    }
}

/// Redis's text for a double in RESP3 `,` frames and RESP2 bulk replies: `%.17g` as
/// Redis 7.0 prints it (`inf`, `-inf`, `3`, `1.5`, `0.10000000000000001`).
pub fn format_double(d: f64) -> String {
    crate::numbers::format_double(d)
}

/// Verbatim formats are `txt` or `mkd`; (de)serialize the static name.
mod verbatim_format {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(f: &&'static str, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(f)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
        let f = String::deserialize(d)?;
        Ok(if f == "mkd" { "mkd" } else { "txt" })
    }
}

/// A status or error line. CR and LF inside would end the line early and desync the
/// client, so they go out as spaces (Redis does the same to the error texts it builds
/// from user input).
fn simple_line(out: &mut BytesMut, tag: u8, text: &[u8]) {
    let at = out.len();
    line(out, tag, text);
    let end = out.len() - 2;
    for c in &mut out[at + 1..end] {
        if *c == b'\r' || *c == b'\n' {
            *c = b' ';
        }
    }
}

fn line(out: &mut BytesMut, tag: u8, text: &[u8]) {
    out.reserve(text.len() + 3);
    out.put_u8(tag);
    out.put_slice(text);
    out.put_slice(b"\r\n");
}

/// The longest integer line: a tag, 20 characters of `i64::MIN`, CR LF.
const INT_LINE_MAX: usize = 23;

fn int_line(out: &mut BytesMut, tag: u8, n: i64) {
    // Integers and lengths are most of what is encoded: assemble the line on the stack
    // and append it with one copy.
    let mut buf = [0u8; INT_LINE_MAX];
    let len = put_int_line(&mut buf, tag, n);
    out.extend_from_slice(&buf[..len]);
}

/// `"00"` to `"99"`, so that integers are written two digits at a time.
const DIGIT_PAIRS: [[u8; 2]; 100] = {
    let mut pairs = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        pairs[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    pairs
};

/// The number of decimal digits of `v` (1 for 0): its bit length times log10(2)
/// (1233/4096) is the count or one less, and one comparison with a power of ten tells
/// which. A quarter of the cost of `u64::ilog10`, here on every integer of every reply.
fn decimal_digits(v: u64) -> usize {
    const POWERS: [u64; 20] = {
        let mut powers = [1u64; 20];
        let mut i = 1;
        while i < 20 {
            powers[i] = powers[i - 1] * 10;
            i += 1;
        }
        powers
    };
    // `| 1` makes 0 count as 1, and changes no other count (the powers are even).
    let v = v | 1;
    let approx = (((64 - v.leading_zeros()) * 1233) >> 12) as usize;
    approx + usize::from(v >= POWERS[approx])
}

/// Writes `tag`, the decimal `n` and CR LF at the start of `buf`; returns the length
/// written.
///
/// The digits go straight to their place, last first, once their count is known,
/// rather than being formatted with `itoa` and copied (a `memcpy` call for a few
/// bytes): integers are most of what a limiter reply is made of. Single digits and -1
/// (a limiter's verdict, and its retry time whenever it allows) are written here, inlined
/// into the caller; longer numbers by [`put_long_int_line`].
#[inline(always)]
fn put_int_line(buf: &mut [u8; INT_LINE_MAX], tag: u8, n: i64) -> usize {
    buf[0] = tag;
    if let Ok(digit @ 0..=9) = u8::try_from(n) {
        buf[1..4].copy_from_slice(&[b'0' + digit, b'\r', b'\n']);
        return 4;
    }
    if n == -1 {
        buf[1..5].copy_from_slice(b"-1\r\n");
        return 5;
    }
    put_long_int_line(buf, n)
}

/// [`put_int_line`] past its shortcuts: numbers of up to eight digits (a limiter's
/// limits, counts and milliseconds) in one go by [`eight_digits`], longer ones four
/// digits a division.
fn put_long_int_line(buf: &mut [u8; INT_LINE_MAX], n: i64) -> usize {
    let mut v = n.unsigned_abs();
    let digits = decimal_digits(v);
    let start = 1 + usize::from(n < 0);
    let end = start + digits;
    // The sign, when there is one; otherwise the first digit overwrites it.
    buf[1] = b'-';
    if let Ok(short @ 0..=99_999_999) = u32::try_from(v) {
        // The digits, then zeros that the line's end overwrites.
        let text = eight_digits(short) >> (8 * (8 - digits));
        buf[start..start + 8].copy_from_slice(&text.to_le_bytes());
    } else {
        let mut at = end;
        while v >= 10_000 {
            let four = (v % 10_000) as usize;
            v /= 10_000;
            at -= 4;
            buf[at..at + 2].copy_from_slice(digit_pair(four / 100));
            buf[at + 2..at + 4].copy_from_slice(digit_pair(four % 100));
        }
        let mut v = v as usize;
        if v >= 100 {
            at -= 2;
            buf[at..at + 2].copy_from_slice(digit_pair(v % 100));
            v /= 100;
        }
        if v >= 10 {
            buf[at - 2..at].copy_from_slice(digit_pair(v));
        } else {
            buf[at - 1] = b'0' + v as u8;
        }
    }
    buf[end..end + 2].copy_from_slice(b"\r\n");
    end + 2
}

/// The eight decimal digits of `v` (below 10^8, with leading zeros) as ASCII in the bytes
/// of a little-endian u64, most significant first: the halves of the number, their
/// halves and theirs computed side by side in the lanes of one register (divisions by 100
/// and 10 as exact multiply-and-shift for numbers below 10^4 and 10^2), about fifteen
/// instructions for all eight digits.
fn eight_digits(v: u32) -> u64 {
    let v = u64::from(v);
    // Digits 1-4 in the low 32-bit lane, 5-8 in the high one.
    let x = (v / 10_000) | ((v % 10_000) << 32);
    // Each lane's hundreds and rest into 16-bit lanes (n / 100 = n * 10486 >> 20).
    let hundreds = ((x * 10_486) >> 20) & 0x0000_007f_0000_007f;
    let x = hundreds | ((x - hundreds * 100) << 16);
    // Each 16-bit lane's tens and units into bytes (n / 10 = n * 103 >> 10).
    let tens = ((x * 103) >> 10) & 0x000f_000f_000f_000f;
    let x = tens | ((x - tens * 10) << 8);
    x | 0x3030_3030_3030_3030
}

/// The two digits of `v` (below 100).
#[inline]
fn digit_pair(v: usize) -> &'static [u8; 2] {
    &DIGIT_PAIRS[v % 100]
}

fn bulk(out: &mut BytesMut, b: &[u8]) {
    int_line(out, b'$', b.len() as i64);
    out.reserve(b.len() + 2);
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: &Reply, resp: u8) -> String {
        let mut b = BytesMut::new();
        r.encode(resp, &mut b);
        String::from_utf8(b.to_vec()).unwrap()
    }

    #[test]
    fn line_breaks_in_status_and_error_lines_become_spaces() {
        assert_eq!(
            enc(&Reply::Error("ERR Unsupported option a\r\nb".into()), 2),
            "-ERR Unsupported option a  b\r\n"
        );
        assert_eq!(enc(&Reply::Status("a\nb".into()), 3), "+a b\r\n");
    }

    #[test]
    fn ints5_encodes_like_an_array_of_integers() {
        let values = [1, 0, i64::MIN, i64::MAX, -1];
        let array = Reply::Array(values.iter().map(|&n| Reply::Integer(n)).collect());
        for resp in [2, 3] {
            assert_eq!(enc(&Reply::Ints5(values), resp), enc(&array, resp));
        }
        assert_eq!(
            enc(&Reply::Ints5([1, 10, 9, -1, 0]), 2),
            "*5\r\n:1\r\n:10\r\n:9\r\n:-1\r\n:0\r\n"
        );
    }

    #[test]
    fn integer_lines_match_the_decimal_text() {
        let mut values = vec![0, 1, -1, 9, 10, -10, 99, 100, -100, i64::MIN, i64::MAX];
        for p in 1..19 {
            let t = 10i64.pow(p);
            values.extend([t - 1, t, t + 1, -t + 1, -t, -t - 1]);
        }
        values.extend((1..200_000).map(|i| i * 7_919 - 600_000_000));
        for n in values {
            let text = n.to_string();
            assert_eq!(
                decimal_digits(n.unsigned_abs()),
                text.trim_start_matches('-').len()
            );
            assert_eq!(enc(&Reply::Integer(n), 2), format!(":{n}\r\n"));
            let mut buf = [0u8; INT_LINE_MAX];
            let len = put_int_line(&mut buf, b'*', n);
            assert_eq!(&buf[..len], format!("*{n}\r\n").as_bytes());
        }
    }

    #[test]
    fn eight_digits_match_the_padded_decimal_text() {
        let mut values: Vec<u32> = (0..20_000).chain(99_990_000..100_000_000).collect();
        values.extend((0..100_000_000).step_by(9_973));
        for v in values {
            assert_eq!(eight_digits(v).to_le_bytes(), *format!("{v:08}").as_bytes());
        }
    }

    #[test]
    fn map_lowers_to_flat_array_in_resp2() {
        let m = Reply::Map(vec![(Reply::bulk("a"), Reply::Integer(1))]);
        assert_eq!(enc(&m, 2), "*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&m, 3), "%1\r\n$1\r\na\r\n:1\r\n");
    }

    #[test]
    fn nulls_per_version() {
        assert_eq!(enc(&Reply::Nil, 2), "$-1\r\n");
        assert_eq!(enc(&Reply::NilArray, 2), "*-1\r\n");
        assert_eq!(enc(&Reply::Nil, 3), "_\r\n");
    }

    #[test]
    fn doubles_format_like_redis() {
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(1.5), "1.5");
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_double(0.1), "0.10000000000000001");
        assert_eq!(enc(&Reply::Double(2.5), 3), ",2.5\r\n");
        assert_eq!(enc(&Reply::Double(2.5), 2), "$3\r\n2.5\r\n");
    }
}
