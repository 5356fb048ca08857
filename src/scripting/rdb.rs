//! The FUNCTION DUMP / RESTORE payload, in Redis's own format so payloads move
//! between Redis and Tollgate: for each library `RDB_OPCODE_FUNCTION2` (245) and
//! its code as an RDB string, then the RDB version (2 bytes, little endian) and a
//! CRC64 (Jones polynomial, reflected, little endian) of everything before it.
//! Dumps write plain strings; restores also accept Redis's integer-encoded and
//! LZF-compressed strings.

/// `RDB_OPCODE_FUNCTION2`.
const OPCODE_FUNCTION2: u8 = 245;
/// `RDB_OPCODE_FUNCTION_PRE_GA` (Redis 7.0 release candidates).
const OPCODE_FUNCTION_PRE_GA: u8 = 246;
/// The RDB version written (Redis 7.2); payloads up to it are accepted.
pub(crate) const RDB_VERSION: u16 = 11;

/// Redis's `crc64` (Jones polynomial, reflected input/output, initial value 0).
pub(crate) fn crc64(data: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
    let mut crc: u64 = 0;
    for &b in data {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
        }
    }
    crc
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if let Ok(l32) = u32::try_from(len) {
        out.push(0x80);
        out.extend_from_slice(&l32.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// The DUMP payload for these library codes.
pub(crate) fn dump<'a>(codes: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        put_len(&mut out, code.len());
        out.extend_from_slice(code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// `verifyDumpPayload`: version not newer than ours and a matching checksum.
fn verify(payload: &[u8]) -> bool {
    if payload.len() < 10 {
        return false;
    }
    let footer = &payload[payload.len() - 10..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > RDB_VERSION {
        return false;
    }
    let crc = crc64(&payload[..payload.len() - 8]);
    crc.to_le_bytes() == footer[2..]
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    /// An RDB length; `Err(kind)` for the special string encodings.
    fn len(&mut self) -> Option<Result<usize, u8>> {
        let b = self.byte()?;
        Some(match b >> 6 {
            0 => Ok(usize::from(b & 0x3f)),
            1 => Ok((usize::from(b & 0x3f) << 8) | usize::from(self.byte()?)),
            2 => match b {
                0x80 => Ok(u32::from_be_bytes(self.take(4)?.try_into().ok()?) as usize),
                0x81 => {
                    Ok(usize::try_from(u64::from_be_bytes(self.take(8)?.try_into().ok()?)).ok()?)
                }
                _ => return None,
            },
            _ => Err(b & 0x3f),
        })
    }

    fn plain_len(&mut self) -> Option<usize> {
        self.len()?.ok()
    }

    /// An RDB string (plain, integer-encoded or LZF-compressed).
    fn string(&mut self) -> Option<Vec<u8>> {
        match self.len()? {
            Ok(n) => self.take(n).map(<[u8]>::to_vec),
            Err(0) => Some((self.byte()? as i8).to_string().into_bytes()),
            Err(1) => Some(
                i16::from_le_bytes(self.take(2)?.try_into().ok()?)
                    .to_string()
                    .into_bytes(),
            ),
            Err(2) => Some(
                i32::from_le_bytes(self.take(4)?.try_into().ok()?)
                    .to_string()
                    .into_bytes(),
            ),
            Err(3) => {
                let clen = self.plain_len()?;
                let len = self.plain_len()?;
                let compressed = self.take(clen)?;
                lzf_decompress(compressed, len)
            }
            Err(_) => None,
        }
    }
}

/// LZF decompression to exactly `len` bytes.
pub(crate) fn lzf_decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(len.min(1 << 26));
    let mut i = 0usize;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            out.extend_from_slice(input.get(i..i.checked_add(run)?)?);
            i += run;
        } else {
            let mut run = ctrl >> 5;
            if run == 7 {
                run += usize::from(*input.get(i)?);
                i += 1;
            }
            run += 2;
            let back = ((ctrl & 0x1f) << 8) + usize::from(*input.get(i)?) + 1;
            i += 1;
            let start = out.len().checked_sub(back)?;
            for k in 0..run {
                let b = out[start + k];
                out.push(b);
            }
        }
        if out.len() > len {
            return None;
        }
    }
    (out.len() == len).then_some(out)
}

/// Parse a RESTORE payload into library codes, or Redis's error text.
pub(crate) fn parse(payload: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    if !verify(payload) {
        return Err("ERR DUMP payload version or checksum are wrong");
    }
    let body_end = payload.len() - 10;
    let mut r = Reader {
        data: &payload[..body_end],
        pos: 0,
    };
    let mut codes = Vec::new();
    while r.pos < body_end {
        let Some(opcode) = r.byte() else {
            return Err("ERR can not read data type");
        };
        if opcode == OPCODE_FUNCTION_PRE_GA {
            return Err("ERR Pre-GA function format not supported");
        }
        if opcode != OPCODE_FUNCTION2 {
            return Err("ERR given type is not a function");
        }
        match r.string() {
            Some(code) => codes.push(code),
            None => return Err("ERR Failed loading library payload"),
        }
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_matches_redis_test_vector() {
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

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
    fn reads_redis_lzf_payload() {
        // FUNCTION DUMP captured from redis-server 7.0 (library code LZF-compressed).
        let payload: &[u8] = b"\xf5\xc3@\x90@\x9a\x1f#!lua name=mylib\nredis.register_\x08function{\xc0\x08\x00_`+\x0e'f1', callback=\xc0\x1c\x1f(keys, args) return 1 end, descr\x01ip@K\x02='d <\x13flags={'no-writes',' O\x08ow-oom'}}\n\x00\xe5%\x0e\x7f\xf1\x99\x13\x92";
        let codes = parse(payload).unwrap();
        assert_eq!(
            String::from_utf8(codes[0].clone()).unwrap(),
            "#!lua name=mylib\nredis.register_function{function_name='f1', callback=function(keys, args) return 1 end, description='d', flags={'no-writes','allow-oom'}}"
        );
    }
}
