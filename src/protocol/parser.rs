//! Request parsing: RESP multibulk arrays and inline (telnet) commands, with Redis's limits.
//!
//! The parser works on the connection's read buffer and consumes a request only once it
//! is complete, so pipelined requests are taken out one after another. Every length read
//! from the wire is checked against a limit before anything is allocated for it.

use std::borrow::Cow;

use bytes::{Buf, Bytes, BytesMut};

/// Size limits applied while parsing; tighter ones apply before AUTH.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest bulk string accepted (proto-max-bulk-len).
    pub max_bulk: usize,
    /// Largest multibulk element count accepted.
    pub max_multibulk: usize,
    /// Largest inline request line.
    pub max_inline: usize,
}

impl Limits {
    /// Limits for a client that has not authenticated while a password is set (as Redis 7).
    pub const UNAUTHENTICATED: Limits = Limits {
        max_bulk: 16 * 1024,
        max_multibulk: 10,
        max_inline: 16 * 1024,
    };
}

/// A malformed request; the connection replies `-ERR Protocol error: ...` and closes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("ERR Protocol error: {0}")]
pub struct ProtocolError(pub Cow<'static, str>);

impl From<&'static str> for ProtocolError {
    fn from(text: &'static str) -> ProtocolError {
        ProtocolError(Cow::Borrowed(text))
    }
}

/// Parse one complete request from the front of `buf`.
///
/// Returns `Ok(None)` when more bytes are needed. An empty inline line yields an empty
/// argument list, which callers skip (as Redis does).
pub fn parse_request(
    buf: &mut BytesMut,
    limits: &Limits,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    if buf.is_empty() {
        return Ok(None);
    }
    if buf[0] == b'*' {
        parse_multibulk(buf, limits)
    } else {
        parse_inline(buf, limits)
    }
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf[from..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| i + from)
}

/// Parse a signed decimal length as Redis's string2ll would, for a header line.
fn parse_len(line: &[u8]) -> Option<i64> {
    if line.is_empty() || line.len() > 20 {
        return None;
    }
    let (neg, digits) = match line[0] {
        b'-' => (true, &line[1..]),
        _ => (false, line),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as i64)?;
    }
    Some(if neg { -v } else { v })
}

/// The common header line: the tag at `pos`, then 1 to 18 digits and CRLF, all buffered.
/// Returns the number and the position after the CRLF; `None` for anything else (a sign,
/// more digits, a missing or partial CRLF), which the caller hands to the general path
/// (`find_crlf` + `parse_len`) so that incomplete and malformed lines behave the same.
#[inline]
fn simple_header(buf: &[u8], pos: usize) -> Option<(i64, usize)> {
    let mut v: i64 = 0;
    let mut i = pos + 1;
    // At most 18 digits (the tag is at `pos`), so `v` cannot overflow; longer numbers take
    // the checked general path.
    let end = buf.len().min(pos + 19);
    while i < end {
        let c = buf[i];
        if c.is_ascii_digit() {
            v = v * 10 + i64::from(c - b'0');
            i += 1;
        } else {
            break;
        }
    }
    (i > pos + 1 && buf.get(i) == Some(&b'\r') && buf.get(i + 1) == Some(&b'\n'))
        .then_some((v, i + 2))
}

/// Most argument spans reserved up front (a client declaring a huge count must send the
/// arguments before it costs more memory).
const SPILL_RESERVE_MAX: usize = 1024;

/// Longest header line (`*<count>` or `$<len>`) we wait for before calling it malformed.
const MAX_HEADER: usize = 64;

fn parse_multibulk(
    buf: &mut BytesMut,
    limits: &Limits,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let (count, mut pos) = match simple_header(buf, 0) {
        Some(header) => header,
        None => {
            let Some(eol) = find_crlf(buf, 0) else {
                if buf.len() > MAX_HEADER {
                    return Err(ProtocolError::from("too big mbulk count string"));
                }
                return Ok(None);
            };
            let count =
                parse_len(&buf[1..eol]).ok_or(ProtocolError::from("invalid multibulk length"))?;
            (count, eol + 2)
        }
    };
    if count > limits.max_multibulk as i64 {
        return Err(ProtocolError::from("invalid multibulk length"));
    }
    if count <= 0 {
        buf.advance(pos);
        return Ok(Some(Vec::new()));
    }
    let count = count as usize;
    // First pass: check the whole request is buffered; typical requests keep their
    // argument spans on the stack.
    let mut inline = [(0usize, 0usize); 8];
    // Sized once: `count` is bounded by `max_multibulk`, and growing one push at a time
    // cost more than the rest of parsing for a 10-argument request.
    let mut spilled = if count > inline.len() {
        Vec::with_capacity(count.min(SPILL_RESERVE_MAX))
    } else {
        Vec::new()
    };
    for i in 0..count {
        if pos >= buf.len() {
            return Ok(None);
        }
        if buf[pos] != b'$' {
            return Err(dollar_error(buf[pos]));
        }
        let (len, start) = match simple_header(buf, pos) {
            Some(header) => header,
            None => {
                let Some(eol) = find_crlf(buf, pos) else {
                    if buf.len() - pos > MAX_HEADER {
                        return Err(ProtocolError::from("too big bulk count string"));
                    }
                    return Ok(None);
                };
                let len = parse_len(&buf[pos + 1..eol])
                    .ok_or(ProtocolError::from("invalid bulk length"))?;
                (len, eol + 2)
            }
        };
        if len < 0 || len as u64 > limits.max_bulk as u64 {
            return Err(ProtocolError::from("invalid bulk length"));
        }
        let end = start + len as usize;
        if buf.len() < end + 2 {
            return Ok(None);
        }
        if count <= inline.len() {
            inline[i] = (start, end);
        } else {
            spilled.push((start, end));
        }
        pos = end + 2;
    }
    let spans = if count <= inline.len() {
        &inline[..count]
    } else {
        &spilled[..]
    };
    // One allocation per request: the arguments are slices of a copy of the frame, so
    // nothing ever pins the connection's read buffer. The keyspace copies what it keeps
    // for long (new keys, string values), see `store`.
    //
    // The copy stops where the last argument does, so that argument can be the copy
    // itself rather than one more reference to it: a reference count taken and dropped
    // less per request, and no shared-buffer promotion at all for a single argument.
    let (&(last_start, last_end), others) = spans.split_last().expect("count > 0");
    let mut last = Bytes::copy_from_slice(&buf[..last_end]);
    buf.advance(pos);
    let mut args = Vec::with_capacity(count);
    args.extend(others.iter().map(|&(s, e)| last.slice(s..e)));
    last.advance(last_start);
    args.push(last);
    Ok(Some(args))
}

/// Redis's text, naming the byte found where a bulk string's `$` should be (a byte that
/// is not UTF-8 on its own shows as U+FFFD: error replies are text here).
fn dollar_error(got: u8) -> ProtocolError {
    ProtocolError(Cow::Owned(format!(
        "expected '$', got '{}'",
        String::from_utf8_lossy(&[got])
    )))
}

fn parse_inline(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let Some(nl) = buf.iter().position(|&c| c == b'\n') else {
        if buf.len() > limits.max_inline {
            return Err(ProtocolError::from("too big inline request"));
        }
        return Ok(None);
    };
    if nl > limits.max_inline {
        return Err(ProtocolError::from("too big inline request"));
    }
    let line = buf.split_to(nl + 1);
    let mut text = &line[..nl];
    if text.last() == Some(&b'\r') {
        text = &text[..text.len() - 1];
    }
    let args = sds_split_args(text).ok_or(ProtocolError::from("unbalanced quotes in request"))?;
    if args.len() > limits.max_multibulk {
        return Err(ProtocolError::from("invalid multibulk length"));
    }
    Ok(Some(args.into_iter().map(Bytes::from).collect()))
}

/// Redis's `sdssplitargs` on a C string: a NUL byte ends the line; space-separated
/// arguments with `"..."` (C escapes, `\xHH`) and `'...'` quoting; None on unbalanced
/// quotes or a closing quote followed by something other than a space.
pub fn sds_split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let is_space = |c: u8| matches!(c, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c);
    let mut out = Vec::new();
    let mut p = 0usize;
    loop {
        while at(p) != 0 && is_space(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Some(out);
        }
        let (mut inq, mut insq) = (false, false);
        let mut cur = Vec::new();
        loop {
            let c = at(p);
            if inq {
                if c == b'\\'
                    && at(p + 1) == b'x'
                    && at(p + 2).is_ascii_hexdigit()
                    && at(p + 3).is_ascii_hexdigit()
                {
                    let hex = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
                    cur.push(hex(at(p + 2)) * 16 + hex(at(p + 3)));
                    p += 3;
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    cur.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return None;
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return None;
                } else {
                    cur.push(c);
                }
            } else if insq {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return None;
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return None;
                } else {
                    cur.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    other => cur.push(other),
                }
            }
            p += 1;
        }
        out.push(cur);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Limits = Limits {
        max_bulk: 512 * 1024 * 1024,
        max_multibulk: 1024 * 1024,
        max_inline: 64 * 1024,
    };

    fn parse(s: &[u8]) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        parse_request(&mut BytesMut::from(s), &L)
    }

    #[test]
    fn nul_ends_an_inline_line_and_vertical_tab_separates() {
        let args = |s: &[u8]| parse(s).unwrap().unwrap();
        assert!(args(b"\x00\r\n").is_empty());
        assert!(args(b"\x00\n").is_empty());
        assert_eq!(args(b"a\x00b\r\n"), vec![Bytes::from("a")]);
        assert_eq!(args(b"ECHO \x00\r\n"), vec![Bytes::from("ECHO")]);
        assert_eq!(
            args(b"ECHO \"a\"\x0bb\r\n"),
            vec![Bytes::from("ECHO"), Bytes::from("a"), Bytes::from("b")]
        );
        assert!(parse(b"ECHO \"a\x00\"\r\n").is_err());
    }

    #[test]
    fn counts_of_19_digits_and_more_are_refused_not_wrapped() {
        for req in [
            &b"*9223372036854775808\r\n"[..],
            b"*18446744073709551617\r\n",
            b"*1\r\n$9223372036854775808\r\n",
            b"*9999999999999999999\r\n",
        ] {
            assert!(parse(req).is_err(), "{}", String::from_utf8_lossy(req));
        }
        // 18 digits still take the fast path (and are refused by the limits).
        assert!(parse(b"*999999999999999999\r\n").is_err());
    }

    #[test]
    fn multibulk_complete_and_partial() {
        let r = parse(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").unwrap().unwrap();
        assert_eq!(r, vec![Bytes::from("GET"), Bytes::from("k")]);
        assert_eq!(parse(b"*2\r\n$3\r\nGET\r\n$1\r\n").unwrap(), None);
        assert_eq!(parse(b"*2\r\n$3\r\nGE").unwrap(), None);
    }

    #[test]
    fn arguments_are_exact_whatever_their_count_and_length() {
        for args in [
            vec![""],
            vec!["SET", "", "v"],
            vec!["SET", "k", ""],
            vec!["PING"],
            (0..20).map(|i| ["a", "", "bc"][i % 3]).collect(),
        ] {
            let mut req = format!("*{}\r\n", args.len());
            for a in &args {
                req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
            }
            req.push_str("*1\r\n$4\r\nNEXT\r\n");
            let mut buf = BytesMut::from(req.as_bytes());
            let parsed = parse_request(&mut buf, &L).unwrap().unwrap();
            assert_eq!(
                parsed,
                args.iter().map(|a| Bytes::from(*a)).collect::<Vec<_>>()
            );
            assert_eq!(&buf[..], b"*1\r\n$4\r\nNEXT\r\n");
        }
    }

    #[test]
    fn pipelined_requests_come_out_in_order() {
        let mut b = BytesMut::from(&b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\nPING\r\n"[..]);
        for _ in 0..3 {
            assert_eq!(
                parse_request(&mut b, &L).unwrap().unwrap(),
                vec![Bytes::from("PING")]
            );
        }
        assert!(b.is_empty());
    }

    #[test]
    fn limits_reject_before_allocating() {
        assert_eq!(
            parse(b"*2\r\n$600000000\r\n").unwrap_err().0,
            "invalid bulk length"
        );
        assert_eq!(
            parse(b"*10000000\r\n").unwrap_err().0,
            "invalid multibulk length"
        );
        assert_eq!(
            parse(b"*1\r\n$-5\r\n").unwrap_err().0,
            "invalid bulk length"
        );
        assert_eq!(parse(b"*x\r\n").unwrap_err().0, "invalid multibulk length");
        assert_eq!(
            parse(b"*1\r\n+OK\r\n").unwrap_err().0,
            "expected '$', got '+'"
        );
        // Redis names whatever byte it found.
        assert_eq!(
            parse(b"*1\r\nx\r\n").unwrap_err().0,
            "expected '$', got 'x'"
        );
        assert_eq!(
            parse(b"*2\r\n$1\r\na\r\n7\r\n").unwrap_err().0,
            "expected '$', got '7'"
        );
    }

    #[test]
    fn inline_commands_with_quotes() {
        let r = parse(b"SET k \"a b\\x41\"\r\n").unwrap().unwrap();
        assert_eq!(
            r,
            vec![Bytes::from("SET"), Bytes::from("k"), Bytes::from("a bA")]
        );
        assert_eq!(
            parse(b"SET 'it\\'s' v\n").unwrap().unwrap()[1],
            Bytes::from("it's")
        );
        assert_eq!(
            parse(b"SET \"open\r\n").unwrap_err().0,
            "unbalanced quotes in request"
        );
        assert_eq!(parse(b"\r\n").unwrap().unwrap(), Vec::<Bytes>::new());
    }

    #[test]
    fn empty_multibulk_is_skipped() {
        assert_eq!(parse(b"*0\r\n").unwrap().unwrap(), Vec::<Bytes>::new());
        assert_eq!(parse(b"*-1\r\n").unwrap().unwrap(), Vec::<Bytes>::new());
    }
}
