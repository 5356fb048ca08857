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

/// Most arguments a [`Frame`] holds; requests with more, or longer than 64 KiB, become an
/// argument list.
pub const FRAME_ARGS: usize = 16;

/// A parsed request.
#[derive(Debug)]
pub enum Request {
    /// Arguments as spans of one copy of the request's bytes.
    Frame(Frame),
    /// Arguments as a list (inline requests, and more than [`FRAME_ARGS`] arguments).
    Args(Vec<Bytes>),
}

impl Request {
    /// Number of arguments, the command name included.
    pub fn len(&self) -> usize {
        match self {
            Request::Frame(f) => f.len(),
            Request::Args(a) => a.len(),
        }
    }

    /// Whether there is no argument at all (an empty inline line).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first argument (the command's name), empty if there is none.
    pub fn name(&self) -> &[u8] {
        match self {
            Request::Frame(f) => f.get(0).unwrap_or_default(),
            Request::Args(a) => a.first().map_or(&[][..], |b| &b[..]),
        }
    }

    /// The arguments as a list.
    pub fn into_args(self) -> Vec<Bytes> {
        match self {
            Request::Frame(f) => f.into_args(),
            Request::Args(a) => a,
        }
    }
}

/// A request of at most [`FRAME_ARGS`] arguments: one copy of its bytes and where each
/// argument lies in it. Commands that only read their arguments borrow them from here
/// (see `CommandSpec::fast`): no list to allocate and no reference count per argument.
#[derive(Debug, Clone)]
pub struct Frame {
    bytes: Bytes,
    /// Where each argument starts and ends in `bytes` (frames are at most 64 KiB).
    spans: [(u16, u16); FRAME_ARGS],
    len: u8,
}

impl Frame {
    /// Number of arguments (at least one).
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether there is no argument (never, for a parsed frame).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Argument `i`; panics past [`Frame::len`].
    pub fn arg(&self, i: usize) -> &[u8] {
        self.slice(self.spans[..self.len()][i])
    }

    fn slice(&self, (start, end): (u16, u16)) -> &[u8] {
        &self.bytes[usize::from(start)..usize::from(end)]
    }

    /// Argument `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        (i < self.len()).then(|| self.arg(i))
    }

    /// Call `f` with the arguments as borrowed slices.
    pub fn with_args<'s, T>(&'s self, f: impl FnOnce(&[&'s [u8]]) -> T) -> T {
        let mut args: [&[u8]; FRAME_ARGS] = [&[]; FRAME_ARGS];
        for (slot, &span) in args.iter_mut().zip(&self.spans[..self.len()]) {
            *slot = self.slice(span);
        }
        f(&args[..self.len()])
    }

    /// The arguments as a list of slices of the copy (see `split_copy`).
    pub fn into_args(self) -> Vec<Bytes> {
        let spans = &self.spans[..self.len()];
        let (&(last_start, _), others) = spans.split_last().expect("a frame has arguments");
        let others = others
            .iter()
            .map(|&(s, e)| (usize::from(s), usize::from(e)));
        split_copy(self.bytes, others, usize::from(last_start))
    }
}

/// Parse one complete request from the front of `buf`.
///
/// Returns `Ok(None)` when more bytes are needed. An empty inline line yields an empty
/// argument list, which callers skip (as Redis does).
///
/// `classify` sees the command name (the first argument) of a non-empty request and
/// returns what the caller wants to keep about it (handed back with the request; the
/// default for an empty one) and whether the request should be a [`Frame`]. Only callers
/// that can borrow the arguments want one: handing a frame to code that needs an
/// argument list costs more than building the list at once.
///
/// Always inlined into the connection's read loop, its one caller on the hot path, with
/// the RESP array parser: when that loop changed shape, the compiler stopped inlining them
/// (and `BytesMut::advance` with them), +28 instructions per pipelined INCR under
/// callgrind.
#[inline(always)]
pub fn parse_request<T: Default>(
    buf: &mut BytesMut,
    limits: &Limits,
    classify: impl FnOnce(&[u8]) -> (T, bool),
) -> Result<Option<(Request, T)>, ProtocolError> {
    if buf.is_empty() {
        return Ok(None);
    }
    if buf[0] == b'*' {
        parse_multibulk(buf, limits, classify)
    } else {
        Ok(parse_inline(buf, limits)?.map(|args| {
            let tag = args
                .first()
                .map(|name| classify(name).0)
                .unwrap_or_default();
            (Request::Args(args), tag)
        }))
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

/// Always inlined, as [`parse_request`] is.
#[inline(always)]
fn parse_multibulk<T: Default>(
    buf: &mut BytesMut,
    limits: &Limits,
    classify: impl FnOnce(&[u8]) -> (T, bool),
) -> Result<Option<(Request, T)>, ProtocolError> {
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
        return Ok(Some((Request::Args(Vec::new()), T::default())));
    }
    let count = count as usize;
    // First pass: check the whole request is buffered; typical requests keep their
    // argument spans on the stack.
    let mut inline = [(0usize, 0usize); FRAME_ARGS];
    // Sized once: `count` is bounded by `max_multibulk`, and growing one push at a time
    // cost more than the rest of parsing for a 10-argument request.
    let mut spilled = if count > FRAME_ARGS {
        Vec::with_capacity(count.min(SPILL_RESERVE_MAX))
    } else {
        Vec::new()
    };
    for slot in 0..count {
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
        match inline.get_mut(slot) {
            Some(span) if count <= FRAME_ARGS => *span = (start, end),
            _ => spilled.push((start, end)),
        }
        pos = end + 2;
    }
    let spans = if count <= FRAME_ARGS {
        &inline[..count]
    } else {
        &spilled[..]
    };
    let (&(last_start, last_end), others) = spans.split_last().expect("count > 0");
    let (tag, wants_frame) = classify(&buf[spans[0].0..spans[0].1]);
    // One allocation per request: the arguments are slices of a copy of the frame, so
    // nothing ever pins the connection's read buffer. The keyspace copies what it keeps
    // for long (new keys, string values), see `store`.
    let request = if wants_frame && count <= FRAME_ARGS && last_end <= usize::from(u16::MAX) {
        Request::Frame(frame(&buf[..last_end], spans))
    } else {
        Request::Args(arg_list(&buf[..last_end], others, last_start))
    };
    buf.advance(pos);
    Ok(Some((request, tag)))
}

/// Bulk strings at least this long get room for all their bytes as soon as their header
/// arrives (Redis's `PROTO_MBULK_BIG_ARG`).
pub const BIG_ARG: usize = 32 * 1024;

/// Where the first incomplete argument of the partial request at the front of `buf` ends
/// (its bytes and CRLF included), when that argument is a bulk string of at least
/// [`BIG_ARG`] bytes whose header has arrived; `None` for anything else (a small or
/// complete request, an inline one, a header not yet complete or malformed: the parser
/// reports those). The connection makes room for that many bytes at once, as Redis's
/// `processMultibulkBuffer` does, so that the value arrives in as few reads as the socket
/// allows instead of one per doubling of the buffer.
pub fn big_bulk_end(buf: &[u8], limits: &Limits) -> Option<usize> {
    if buf.first() != Some(&b'*') {
        return None;
    }
    let header = |pos: usize| -> Option<(i64, usize)> {
        let eol = find_crlf(&buf[..buf.len().min(pos + MAX_HEADER)], pos)?;
        Some((parse_len(&buf[pos + 1..eol])?, eol + 2))
    };
    let (count, mut pos) = header(0)?;
    if count <= 0 || count > limits.max_multibulk as i64 {
        return None;
    }
    for _ in 0..count {
        if buf.get(pos) != Some(&b'$') {
            return None;
        }
        let (len, start) = header(pos)?;
        if len < 0 || len as u64 > limits.max_bulk as u64 {
            return None;
        }
        let end = start + len as usize + 2;
        if end > buf.len() {
            return (len as usize >= BIG_ARG).then_some(end);
        }
        pos = end;
    }
    None
}

/// A frame of `bytes` (at most 64 KiB) with arguments at `spans` (at most `FRAME_ARGS`).
#[inline(never)]
fn frame(bytes: &[u8], spans: &[(usize, usize)]) -> Frame {
    let mut frame = Frame {
        bytes: Bytes::copy_from_slice(bytes),
        spans: [(0, 0); FRAME_ARGS],
        len: spans.len() as u8,
    };
    for (to, &(start, end)) in frame.spans.iter_mut().zip(spans) {
        *to = (start as u16, end as u16);
    }
    frame
}

/// The arguments at `others` and then from `last_start` to the end, as slices of one copy
/// of `bytes`.
#[inline(never)]
fn arg_list(bytes: &[u8], others: &[(usize, usize)], last_start: usize) -> Vec<Bytes> {
    split_copy(
        Bytes::copy_from_slice(bytes),
        others.iter().copied(),
        last_start,
    )
}

/// The arguments at `others`, then the one from `last_start` to the end of `copy`, as
/// slices of `copy`. The copy ends where the last argument does, so that argument is the
/// copy itself rather than one more reference to it: a reference count taken and dropped
/// less per request, and no shared-buffer promotion at all for a single argument.
fn split_copy(
    mut last: Bytes,
    others: impl ExactSizeIterator<Item = (usize, usize)>,
    last_start: usize,
) -> Vec<Bytes> {
    let mut args = Vec::with_capacity(others.len() + 1);
    args.extend(others.map(|(s, e)| last.slice(s..e)));
    last.advance(last_start);
    args.push(last);
    args
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

    #[test]
    fn big_bulk_end_finds_a_large_value_on_its_way() {
        // SET k <40,000 bytes>: the value's end is after its header, its bytes and CRLF.
        let head = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$40000\r\n";
        let mut buf = head.to_vec();
        assert_eq!(big_bulk_end(&buf, &L), Some(head.len() + 40_002));
        buf.extend_from_slice(&[b'x'; 1000]);
        assert_eq!(big_bulk_end(&buf, &L), Some(head.len() + 40_002));
        // Small values, complete requests, partial headers, inline and malformed input:
        // nothing to make room for.
        assert_eq!(
            big_bulk_end(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nab", &L),
            None
        );
        assert_eq!(big_bulk_end(b"*1\r\n$4\r\nPING\r\n", &L), None);
        assert_eq!(
            big_bulk_end(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$400", &L),
            None
        );
        assert_eq!(big_bulk_end(b"SET k v", &L), None);
        assert_eq!(big_bulk_end(b"", &L), None);
        assert_eq!(big_bulk_end(b"*2\r\n$3\r\nGET\r\n+1\r\n", &L), None);
        assert_eq!(big_bulk_end(b"*1\r\n$-5\r\n", &L), None);
        assert_eq!(big_bulk_end(b"*1\r\n$99999999999999999999\r\n", &L), None);
        // Over the bulk limit: the parser's error, not an allocation.
        let small = Limits {
            max_bulk: 16 * 1024,
            ..L
        };
        assert_eq!(big_bulk_end(b"*1\r\n$40000\r\n", &small), None);
        assert_eq!(big_bulk_end(b"*1\r\n$40000\r\n", &L), Some(12 + 40_002));
    }

    fn parse(s: &[u8]) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        Ok(
            parse_request(&mut BytesMut::from(s), &L, |_| ((), false))?
                .map(|(r, ())| r.into_args()),
        )
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
        let big = "x".repeat(70_000);
        for args in [
            vec!["SET", "k", big.as_str()],
            vec![""],
            vec!["SET", "", "v"],
            vec!["SET", "k", ""],
            vec!["PING"],
            (0..FRAME_ARGS).map(|i| ["a", "", "bc"][i % 3]).collect(),
            (0..=FRAME_ARGS).map(|i| ["a", "", "bc"][i % 3]).collect(),
            (0..20).map(|i| ["a", "", "bc"][i % 3]).collect(),
        ] {
            let mut req = format!("*{}\r\n", args.len());
            for a in &args {
                req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
            }
            req.push_str("*1\r\n$4\r\nNEXT\r\n");
            let mut buf = BytesMut::from(req.as_bytes());
            let (parsed, name) = parse_request(&mut buf, &L, |name| (name.to_vec(), true))
                .unwrap()
                .unwrap();
            assert_eq!(name, args[0].as_bytes());
            let expected: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            // Up to FRAME_ARGS arguments make a frame, whose borrowed arguments are exact too.
            match &parsed {
                Request::Frame(frame) => {
                    assert!(args.len() <= FRAME_ARGS);
                    assert_eq!(frame.with_args(|a| a.to_vec()), expected);
                    assert_eq!(frame.get(args.len()), None);
                }
                Request::Args(_) => assert!(args.len() > FRAME_ARGS || req.len() > 65_535),
            }
            assert_eq!(parsed.len(), args.len());
            assert_eq!(
                parsed.into_args(),
                args.iter()
                    .map(|a| Bytes::copy_from_slice(a.as_bytes()))
                    .collect::<Vec<_>>()
            );
            assert_eq!(&buf[..], b"*1\r\n$4\r\nNEXT\r\n");
        }
    }

    #[test]
    fn pipelined_requests_come_out_in_order() {
        let mut b = BytesMut::from(&b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\nPING\r\n"[..]);
        for _ in 0..3 {
            assert_eq!(
                parse_request(&mut b, &L, |_| ((), true))
                    .unwrap()
                    .unwrap()
                    .0
                    .into_args(),
                vec![Bytes::from("PING")]
            );
        }
        assert!(b.is_empty());
    }

    #[test]
    fn limits_reject_before_allocating() {
        for (request, error) in [
            (&b"*2\r\n$600000000\r\n"[..], "invalid bulk length"),
            (b"*10000000\r\n", "invalid multibulk length"),
            (b"*1\r\n$-5\r\n", "invalid bulk length"),
            (b"*x\r\n", "invalid multibulk length"),
            (b"*1\r\n+OK\r\n", "expected '$', got '+'"),
            // Redis names whatever byte it found.
            (b"*1\r\nx\r\n", "expected '$', got 'x'"),
            (b"*2\r\n$1\r\na\r\n7\r\n", "expected '$', got '7'"),
        ] {
            assert_eq!(parse(request).unwrap_err().0, error);
        }
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
