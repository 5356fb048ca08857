//! The FUNCTION DUMP / RESTORE payload, in Redis's own format so payloads move
//! between Redis and Tollgate: for each library `RDB_OPCODE_FUNCTION2` (245) and
//! its code as an RDB string (LZF-compressed when that saves space, as Redis writes it),
//! then the RDB version (2 bytes, little endian) and a CRC64 of everything before it.
//! The encoding pieces are [`crate::persistence::rdb`]'s.

use crate::persistence::rdb::{crc64::crc64, opcodes, put_string, Reader, RDB_VERSION};

/// The DUMP payload for these library codes.
pub(crate) fn dump<'a>(codes: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(opcodes::FUNCTION2);
        put_string(&mut out, code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Parse a RESTORE payload into library codes, or Redis's error text.
pub(crate) fn parse(payload: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    if !crate::persistence::rdb::decode::verify_payload(payload) {
        return Err("ERR DUMP payload version or checksum are wrong");
    }
    let mut r = Reader::new(&payload[..payload.len() - 10]);
    let mut codes = Vec::new();
    while r.remaining() > 0 {
        let Ok(opcode) = r.byte() else {
            return Err("ERR can not read data type");
        };
        if opcode == opcodes::FUNCTION_PRE_GA {
            return Err("ERR Pre-GA function format not supported");
        }
        if opcode != opcodes::FUNCTION2 {
            return Err("ERR given type is not a function");
        }
        match r.string() {
            Ok(code) => codes.push(code.into_owned()),
            Err(_) => return Err("ERR Failed loading library payload"),
        }
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_roundtrips() {
        let codes: Vec<&[u8]> = vec![
            b"#!lua name=a\nredis.register_function('f', function() end)",
            &[b'x'; 300],
        ];
        let payload = dump(codes.iter().copied());
        assert_eq!(
            parse(&payload).unwrap(),
            codes.iter().map(|c| c.to_vec()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn rejects_corruption() {
        let mut payload = dump([b"#!lua name=a\n".as_slice()].into_iter());
        let last = payload.len() - 1;
        payload[last] ^= 1;
        assert_eq!(
            parse(&payload),
            Err("ERR DUMP payload version or checksum are wrong")
        );
        assert_eq!(
            parse(b"garbage"),
            Err("ERR DUMP payload version or checksum are wrong")
        );
    }

    #[test]
    fn reads_and_writes_redis_lzf_payload() {
        // FUNCTION DUMP captured from redis-server 7.0 (library code LZF-compressed).
        let payload: &[u8] = b"\xf5\xc3@\x90@\x9a\x1f#!lua name=mylib\nredis.register_\x08function{\xc0\x08\x00_`+\x0e'f1', callback=\xc0\x1c\x1f(keys, args) return 1 end, descr\x01ip@K\x02='d <\x13flags={'no-writes',' O\x08ow-oom'}}\n\x00\xe5%\x0e\x7f\xf1\x99\x13\x92";
        let codes = parse(payload).unwrap();
        assert_eq!(
            String::from_utf8(codes[0].clone()).unwrap(),
            "#!lua name=mylib\nredis.register_function{function_name='f1', callback=function(keys, args) return 1 end, description='d', flags={'no-writes','allow-oom'}}"
        );
        // Version 10 and the same compression: the same bytes Redis 7.0 writes.
        assert_eq!(dump(codes.iter().map(|c| &c[..])), payload);
    }
}
