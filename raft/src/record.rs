//! On-disk record framing shared by the log, the vote file and snapshot files: each record is
//! `[len: u32 LE][crc32 of payload: u32 LE][payload]`. A reader stops at the first record that
//! is short (torn write) or whose CRC does not match, so a crash mid-write is detected, never
//! applied. Zero bytes where a header would start end the data without error: the log file is
//! allocated ahead of its records (see `log_store`), and no record has an empty payload, so a
//! real header is never all zeros. Also owns the write-to-temp, fsync, rename,
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

/// The result of scanning a buffer of framed records.
pub(crate) struct Scan<'a> {
    /// Each intact record's payload with the offset just past it.
    pub records: Vec<(&'a [u8], usize)>,
    /// Where intact data ends, and why the rest was rejected, if something other than
    /// zeros follows.
    pub bad_tail: Option<(usize, &'static str)>,
}

/// Split `buf` into intact records, stopping at the first torn or corrupt one.
pub(crate) fn scan_records(buf: &[u8]) -> Scan<'_> {
    let mut records = Vec::new();
    let mut pos = 0usize;
    while pos < buf.len() {
        let rest = &buf[pos..];
        if rest.iter().take(HEADER_LEN).all(|&b| b == 0) {
            // Allocated space after the last record.
            break;
        }
        if rest.len() < HEADER_LEN {
            return Scan {
                records,
                bad_tail: Some((pos, "truncated record header")),
            };
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        if len > MAX_RECORD_LEN {
            return Scan {
                records,
                bad_tail: Some((pos, "implausible record length")),
            };
        }
        let Some(payload) = rest.get(HEADER_LEN..HEADER_LEN + len) else {
            return Scan {
                records,
                bad_tail: Some((pos, "truncated record payload")),
            };
        };
        if crc32fast::hash(payload) != crc {
            return Scan {
                records,
                bad_tail: Some((pos, "record checksum mismatch")),
            };
        }
        pos += HEADER_LEN + len;
        records.push((payload, pos));
    }
    Scan {
        records,
        bad_tail: None,
    }
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

    #[test]
    fn detects_torn_and_corrupt_tails() {
        let mut buf = Vec::new();
        encode_record(b"one", &mut buf);
        encode_record(b"two", &mut buf);
        let good = buf.len();
        let scan = scan_records(&buf);
        assert_eq!(scan.records.len(), 2);
        assert!(scan.bad_tail.is_none());

        let mut torn = buf.clone();
        encode_record(b"three", &mut torn);
        torn.truncate(torn.len() - 2);
        let scan = scan_records(&torn);
        assert_eq!(scan.records.len(), 2);
        assert_eq!(scan.bad_tail.map(|t| t.0), Some(good));

        let mut flipped = buf.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0xff;
        let scan = scan_records(&flipped);
        assert_eq!(scan.records.len(), 1);
        assert_eq!(scan.bad_tail.map(|t| t.1), Some("record checksum mismatch"));
    }
}
