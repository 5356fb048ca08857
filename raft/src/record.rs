//! On-disk record framing shared by the log, the vote file, the repair record and snapshot
//! files: each record is `[len: u32 LE][crc32 of payload: u32 LE][payload]`. A reader stops at
//! the first record that is short or whose CRC does not match, so damage is detected, never
//! applied. Zero bytes where a header would start end the data without error: the log file is
//! allocated ahead of its records (see `log_store`), and no record has an empty payload, so a
//! real header is never all zeros.
//!
//! What lies after a bad record decides what the damage means (see `log_store`): nothing
//! intact is a torn tail, intact records proving the damaged bytes had been made durable are
//! corruption. So [`scan_records`] can resynchronise: it looks for intact records after the
//! first bad one, byte by byte where it must (a damaged length field hides where the next
//! record starts).
//!
//! Small files that must survive one damaged byte (the vote, the repair record) hold their
//! record twice ([`write_twice`], [`read_twice`]): a flipped byte hits one copy, and the
//! other still says what the file said. Also owns the write-to-temp, fsync, rename,
//! fsync-directory sequence that makes whole-file replacement atomic.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Bytes of header before each payload.
pub(crate) const HEADER_LEN: usize = 8;

/// Records larger than this are treated as corruption (a garbage length field).
const MAX_RECORD_LEN: usize = 1 << 30;

/// Append one framed record holding `payload` to `out`.
pub(crate) fn encode_record(payload: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// One intact record found in a buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record<'a> {
    /// What the record holds.
    pub payload: &'a [u8],
    /// Offset of its header.
    pub start: usize,
    /// Offset just past it.
    pub end: usize,
}

/// The result of scanning a buffer of framed records.
pub(crate) struct Scan<'a> {
    /// The intact records before the first bad one, in order.
    pub records: Vec<Record<'a>>,
    /// The first bad record, if the data does not end cleanly (with the buffer or with zeros).
    pub bad: Option<Bad<'a>>,
}

/// Where intact data stopped, why, and (when asked for) what intact records follow.
pub(crate) struct Bad<'a> {
    /// Offset of the first byte that is not part of an intact record.
    pub offset: usize,
    /// Why the record there was rejected.
    pub why: &'static str,
    /// Intact records found after it by resynchronising, in order (empty unless asked for).
    pub after: Vec<Record<'a>>,
}

/// Split `buf` into intact records, stopping at the first torn, corrupt or zeroed one. With
/// `resync`, also look for intact records after that point; zeros with nothing intact after
/// them are then a clean end, zeros followed by intact records are reported as bad.
pub(crate) fn scan_records(buf: &[u8], resync: bool) -> Scan<'_> {
    let mut records = Vec::new();
    let mut pos = 0usize;
    while pos < buf.len() {
        match read_record(buf, pos) {
            Ok(Some(record)) => {
                pos = record.end;
                records.push(record);
            }
            Ok(None) => {
                // Zeros: allocated space after the last record, unless intact records follow.
                let after = if resync {
                    resync_from(buf, pos + 1)
                } else {
                    Vec::new()
                };
                if after.is_empty() {
                    break;
                }
                return Scan {
                    records,
                    bad: Some(Bad {
                        offset: pos,
                        why: "zeroed bytes",
                        after,
                    }),
                };
            }
            Err(why) => {
                let after = if resync {
                    resync_from(buf, pos + 1)
                } else {
                    Vec::new()
                };
                return Scan {
                    records,
                    bad: Some(Bad {
                        offset: pos,
                        why,
                        after,
                    }),
                };
            }
        }
    }
    Scan { records, bad: None }
}

/// The record whose header starts at `pos`: `Ok(None)` where a header would be all zeros,
/// `Err` with the reason when it is short or does not match its checksum.
fn read_record(buf: &[u8], pos: usize) -> Result<Option<Record<'_>>, &'static str> {
    let rest = &buf[pos..];
    if rest.iter().take(HEADER_LEN).all(|&b| b == 0) {
        return Ok(None);
    }
    if rest.len() < HEADER_LEN {
        return Err("truncated record header");
    }
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
    if len > MAX_RECORD_LEN {
        return Err("implausible record length");
    }
    let Some(payload) = rest.get(HEADER_LEN..HEADER_LEN + len) else {
        return Err("truncated record payload");
    };
    if crc32fast::hash(payload) != crc {
        return Err("record checksum mismatch");
    }
    Ok(Some(Record {
        payload,
        start: pos,
        end: pos + HEADER_LEN + len,
    }))
}

/// Intact records at or after `from`: try each offset until one holds an intact record, then
/// follow the chain from there, resynchronising again after the next bad spot. Runs of zeros
/// are skipped in one step (a header is never all zeros).
fn resync_from(buf: &[u8], from: usize) -> Vec<Record<'_>> {
    let mut found = Vec::new();
    let mut pos = from;
    while pos + HEADER_LEN < buf.len() {
        if buf[pos..pos + HEADER_LEN].iter().all(|&b| b == 0) {
            match buf[pos..].iter().position(|&b| b != 0) {
                // The first header that can hold that byte starts 7 bytes before it.
                Some(j) => pos += j + 1 - HEADER_LEN,
                None => break,
            }
            continue;
        }
        match read_record(buf, pos) {
            Ok(Some(record)) => {
                pos = record.end;
                found.push(record);
            }
            _ => pos += 1,
        }
    }
    found
}

/// What a file written by [`write_twice`] holds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Twice {
    /// No such file.
    Missing,
    /// Both copies intact and equal (or a file from before there were two copies).
    Intact(Vec<u8>),
    /// One copy was damaged; this is the other.
    OneCopy(Vec<u8>),
    /// No copy is intact (or two intact copies disagree): what the file said is lost.
    Lost,
}

/// Replace `path` atomically and durably with a file holding `payload` twice.
pub(crate) fn write_twice(path: &Path, payload: &[u8]) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(2 * (payload.len() + HEADER_LEN));
    encode_record(payload, &mut bytes);
    encode_record(payload, &mut bytes);
    write_atomic(path, &bytes)
}

/// Read a file written by [`write_twice`] (one holding a single record is read as intact).
pub(crate) fn read_twice(path: &Path) -> io::Result<Twice> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Twice::Missing),
        Err(e) => return Err(e),
    };
    let scan = scan_records(&bytes, true);
    let damaged = scan.bad.is_some();
    let copies: Vec<&[u8]> = scan
        .records
        .iter()
        .chain(scan.bad.iter().flat_map(|b| b.after.iter()))
        .map(|r| r.payload)
        .collect();
    let Some(first) = copies.first() else {
        return Ok(Twice::Lost);
    };
    if copies.iter().any(|c| c != first) {
        return Ok(Twice::Lost);
    }
    Ok(
        if damaged || copies.len() == 1 && bytes.len() > HEADER_LEN + first.len() {
            Twice::OneCopy(first.to_vec())
        } else {
            Twice::Intact(first.to_vec())
        },
    )
}

/// Replace `path` with `contents` atomically and durably (temp file, fsync, rename, fsync dir).
pub(crate) fn write_atomic(path: &Path, contents: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    sync_parent(path)
}

/// fsync the directory holding `path`, so a rename or file creation in it survives power loss.
pub(crate) fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => sync_dir(dir),
        _ => Ok(()),
    }
}

/// fsync a directory (its entries: creations, renames, deletions).
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(payloads: &[&[u8]]) -> Vec<u8> {
        let mut buf = Vec::new();
        for p in payloads {
            encode_record(p, &mut buf);
        }
        buf
    }

    fn payloads<'a>(records: &[Record<'a>]) -> Vec<&'a [u8]> {
        records.iter().map(|r| r.payload).collect()
    }

    #[test]
    fn a_bad_last_record_has_nothing_after_it() {
        let buf = framed(&[b"one", b"two"]);
        let good = buf.len();
        let scan = scan_records(&buf, true);
        assert_eq!(payloads(&scan.records), vec![&b"one"[..], b"two"]);
        assert!(scan.bad.is_none());

        let mut torn = buf.clone();
        encode_record(b"three", &mut torn);
        torn.truncate(torn.len() - 2);
        let scan = scan_records(&torn, true);
        assert_eq!(scan.records.len(), 2);
        let bad = scan.bad.unwrap();
        assert_eq!((bad.offset, bad.why), (good, "truncated record payload"));
        assert!(bad.after.is_empty());

        let mut flipped = buf.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0xff;
        let scan = scan_records(&flipped, true);
        assert_eq!(scan.records.len(), 1);
        let bad = scan.bad.unwrap();
        assert_eq!(bad.why, "record checksum mismatch");
        assert!(bad.after.is_empty());
        // Allocated space (zeros) after the records is a clean end.
        let mut allocated = buf.clone();
        allocated.resize(buf.len() + 4096, 0);
        let scan = scan_records(&allocated, true);
        assert_eq!(scan.records.len(), 2);
        assert!(scan.bad.is_none());
    }

    #[test]
    fn intact_records_after_a_bad_one_are_found() {
        let buf = framed(&[b"one", b"two-two", b"three", b"four"]);
        let second = 8 + 3;
        // A flipped payload byte: the length still leads to the next record.
        let mut flipped = buf.clone();
        flipped[second + 8 + 2] ^= 0x01;
        let scan = scan_records(&flipped, true);
        assert_eq!(payloads(&scan.records), vec![&b"one"[..]]);
        let bad = scan.bad.unwrap();
        assert_eq!(bad.offset, second);
        assert_eq!(payloads(&bad.after), vec![&b"three"[..], b"four"]);
        // Without resync nothing after it is looked at.
        assert!(scan_records(&flipped, false).bad.unwrap().after.is_empty());

        // A flipped length byte: the next record is found byte by byte.
        let mut bad_len = buf.clone();
        bad_len[second] ^= 0x40;
        let bad = scan_records(&bad_len, true).bad.unwrap();
        assert_eq!(bad.offset, second);
        assert_eq!(payloads(&bad.after), vec![&b"three"[..], b"four"]);

        // Zeros where a record was, with records after them.
        let mut zeroed = buf.clone();
        zeroed[second..second + 8 + 7].fill(0);
        zeroed.extend_from_slice(&[0; 100]);
        let bad = scan_records(&zeroed, true).bad.unwrap();
        assert_eq!((bad.offset, bad.why), (second, "zeroed bytes"));
        assert_eq!(payloads(&bad.after), vec![&b"three"[..], b"four"]);
    }

    #[test]
    fn a_file_written_twice_survives_any_one_flipped_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vote");
        assert_eq!(read_twice(&path).unwrap(), Twice::Missing);
        write_twice(&path, b"term 7").unwrap();
        assert_eq!(
            read_twice(&path).unwrap(),
            Twice::Intact(b"term 7".to_vec())
        );
        let bytes = fs::read(&path).unwrap();
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x10;
            fs::write(&path, &damaged).unwrap();
            assert_eq!(
                read_twice(&path).unwrap(),
                Twice::OneCopy(b"term 7".to_vec()),
                "byte {i}"
            );
        }
        // Both copies damaged: lost.
        let mut both = bytes.clone();
        both[9] ^= 1;
        both[bytes.len() - 1] ^= 1;
        fs::write(&path, &both).unwrap();
        assert_eq!(read_twice(&path).unwrap(), Twice::Lost);
        // One record alone is a file from before there were two copies.
        fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        assert_eq!(
            read_twice(&path).unwrap(),
            Twice::Intact(b"term 7".to_vec())
        );
        // The second copy zeroed: one copy.
        let mut zeroed = bytes.clone();
        let half = bytes.len() / 2;
        zeroed[half..].fill(0);
        fs::write(&path, &zeroed).unwrap();
        assert_eq!(
            read_twice(&path).unwrap(),
            Twice::OneCopy(b"term 7".to_vec())
        );
    }
}
