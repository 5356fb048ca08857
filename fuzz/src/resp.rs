//! The request parser on arbitrary bytes, parsed three ways that must agree.

use bytes::{Bytes, BytesMut};
use tollgate::protocol::parser::{parse_request, Limits, Request};

/// How one way of parsing went: the requests read, and whether it ended in a protocol error.
#[derive(Debug, PartialEq)]
struct Outcome {
    requests: Vec<Vec<Bytes>>,
    failed: bool,
}

/// Parse everything `feed` delivers, chunk after chunk, the way a connection does.
fn parse(chunks: &[&[u8]], limits: &Limits, frames: bool) -> Outcome {
    let mut buf = BytesMut::new();
    let mut out = Outcome {
        requests: Vec::new(),
        failed: false,
    };
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match parse_request(&mut buf, limits, |_| ((), frames)) {
                Ok(Some((request, ()))) => {
                    let args = match request {
                        Request::Frame(f) => {
                            assert!(frames, "a frame only when asked for");
                            f.into_args()
                        }
                        Request::Args(a) => a,
                    };
                    assert!(args.len() <= limits.max_multibulk);
                    assert!(args
                        .iter()
                        .all(|a| a.len() <= limits.max_bulk.max(limits.max_inline)));
                    out.requests.push(args);
                }
                Ok(None) => break,
                Err(_) => {
                    out.failed = true;
                    return out;
                }
            }
        }
    }
    out
}

/// Check one input: the first byte picks the limits and the chunk size.
pub fn check(data: &[u8]) {
    let Some((&head, body)) = data.split_first() else {
        return;
    };
    let limits = if head & 1 == 0 {
        Limits {
            max_bulk: 512,
            max_multibulk: 64,
            max_inline: 256,
        }
    } else {
        Limits::UNAUTHENTICATED
    };
    let chunk = usize::from(head >> 1).max(1);
    let whole = parse(&[body], &limits, true);
    assert_eq!(whole, parse(&[body], &limits, false), "frames vs lists");
    let pieces: Vec<&[u8]> = body.chunks(chunk).collect();
    let fed = parse(&pieces, &limits, true);
    assert_eq!(whole, fed, "whole vs fed in chunks of {chunk}");
}
