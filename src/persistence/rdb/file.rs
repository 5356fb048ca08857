//! Whole RDB files (`dump.rdb`) as Redis 1.0 to 7.0 write them, read record by record:
//! the `REDISnnnn` header, AUX fields, database selection, key deadlines, LRU/LFU hints,
//! function libraries, keys with their values, and the trailing CRC64.
//!
//! [`Records`] yields each record with the raw bytes of its value (to forward as a RESTORE
//! payload) and the value decoded (which checks it). It stops at the first error with the
//! byte offset, and for a key it cannot load (a stream, a module value, a corrupt value)
//! with the key, its database and its type.

use std::borrow::Cow;

use super::crc64::Crc64Digest;
use super::decode::{is_value_type, read_value, type_name, DecodeError};
use super::{opcodes, Corrupt, Reader, RDB_VERSION};
use crate::store::{Value, DATABASES};

/// One record of an RDB file.
#[derive(Debug)]
pub enum Record<'a> {
    /// An AUX field (`redis-ver`, `ctime`, `lua`, ...).
    Aux {
        /// Field name.
        name: Cow<'a, [u8]>,
        /// Field value.
        value: Cow<'a, [u8]>,
    },
    /// A function library's code (`#!lua name=...`).
    Function(Vec<u8>),
    /// A key and its value.
    Key(KeyRecord<'a>),
    /// A key holding an empty collection: Redis skips these when loading (they were written
    /// by an old bug), and so does the importer.
    EmptyKey {
        /// Database index.
        db: usize,
        /// The key.
        key: Cow<'a, [u8]>,
    },
}

/// A key record.
#[derive(Debug)]
pub struct KeyRecord<'a> {
    /// Database index.
    pub db: usize,
    /// The key.
    pub key: Cow<'a, [u8]>,
    /// Deadline in unix milliseconds, if any.
    pub expires_at_ms: Option<i64>,
    /// The value's type id.
    pub type_id: u8,
    /// The value's serialization (what follows the type id in a DUMP payload).
    pub serialized: &'a [u8],
    /// The value.
    pub value: Value,
}

/// Why a file could not be read, with the byte offset where reading stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at byte {offset})")]
pub struct FileError {
    /// Offset in the file.
    pub offset: usize,
    /// What was wrong.
    pub message: String,
}

/// The records of an RDB file, in order; after the last one the checksum is checked.
pub struct Records<'a> {
    r: Reader<'a>,
    data: &'a [u8],
    version: u16,
    db: usize,
    done: bool,
    /// CRC of the bytes before `crc_pos`, advanced lazily.
    crc: Crc64Digest,
    crc_pos: usize,
}

impl<'a> Records<'a> {
    /// Start reading `data`: checks the signature and the version.
    pub fn new(data: &'a [u8]) -> Result<Records<'a>, FileError> {
        let fail = |message: String| FileError { offset: 0, message };
        if data.len() < 9 || &data[..5] != b"REDIS" {
            return Err(fail(
                "not an RDB file (it does not start with REDIS)".into(),
            ));
        }
        let version = std::str::from_utf8(&data[5..9])
            .ok()
            .and_then(|v| v.parse::<u16>().ok())
            .ok_or_else(|| fail("not an RDB file (bad version number)".into()))?;
        if version == 0 || version > RDB_VERSION {
            return Err(fail(format!(
                "RDB format version {version} is not supported (Redis 7.0 writes version \
                 {RDB_VERSION}; versions 1 to {RDB_VERSION} can be imported)"
            )));
        }
        let mut r = Reader::new(data);
        r.take(9).map_err(|e| fail(e.to_string()))?;
        Ok(Records {
            r,
            data,
            version,
            db: 0,
            done: false,
            crc: Crc64Digest::new(),
            crc_pos: 0,
        })
    }

    /// The file's RDB version.
    pub fn version(&self) -> u16 {
        self.version
    }

    fn error(&self, at: usize, message: impl Into<String>) -> FileError {
        FileError {
            offset: at,
            message: message.into(),
        }
    }

    fn corrupt(&self, at: usize, e: Corrupt) -> FileError {
        self.error(at, format!("corrupt file: {e}"))
    }

    /// The next record, or None after the end-of-file opcode and a good checksum.
    fn next_record(&mut self) -> Result<Option<Record<'a>>, FileError> {
        let mut expires_at_ms = None;
        loop {
            let at = self.r.pos();
            let op = self.r.byte().map_err(|e| self.corrupt(at, e))?;
            match op {
                opcodes::EOF => {
                    self.finish(at + 1)?;
                    return Ok(None);
                }
                opcodes::SELECTDB => {
                    let db = self.r.length().map_err(|e| self.corrupt(at, e))?;
                    self.db = usize::try_from(db)
                        .ok()
                        .filter(|&d| d < DATABASES)
                        .ok_or_else(|| {
                            self.error(
                                at,
                                format!(
                                    "the file selects database {db}, Tollgate has {DATABASES} \
                                     (0 to {})",
                                    DATABASES - 1
                                ),
                            )
                        })?;
                }
                opcodes::RESIZEDB => {
                    self.r.length().map_err(|e| self.corrupt(at, e))?;
                    self.r.length().map_err(|e| self.corrupt(at, e))?;
                }
                opcodes::EXPIRETIME_MS => {
                    let t = self.r.u64_le().map_err(|e| self.corrupt(at, e))?;
                    expires_at_ms = Some(t as i64);
                }
                opcodes::EXPIRETIME => {
                    let t = self.r.array::<4>().map_err(|e| self.corrupt(at, e))?;
                    expires_at_ms = Some(i64::from(i32::from_le_bytes(t)) * 1000);
                }
                opcodes::FREQ => {
                    self.r.byte().map_err(|e| self.corrupt(at, e))?;
                }
                opcodes::IDLE => {
                    self.r.length().map_err(|e| self.corrupt(at, e))?;
                }
                opcodes::AUX => {
                    let name = self.r.string().map_err(|e| self.corrupt(at, e))?;
                    let value = self.r.string().map_err(|e| self.corrupt(at, e))?;
                    return Ok(Some(Record::Aux { name, value }));
                }
                opcodes::MODULE_AUX => {
                    return Err(self.error(
                        at,
                        "the file holds module data (a Redis module's auxiliary data), which \
                         Tollgate cannot load",
                    ))
                }
                opcodes::FUNCTION2 => {
                    let code = self.r.string().map_err(|e| self.corrupt(at, e))?;
                    return Ok(Some(Record::Function(code.into_owned())));
                }
                opcodes::FUNCTION_PRE_GA => {
                    let code = self.pre_ga_function().map_err(|e| self.corrupt(at, e))?;
                    return Ok(Some(Record::Function(code)));
                }
                t if is_value_type(t) => return self.key(at, t, expires_at_ms).map(Some),
                t => {
                    return Err(self.error(at, format!("corrupt file: unknown opcode {t}")));
                }
            }
        }
    }

    /// A library in Redis 7.0-rc's format: name, engine, optional description, code.
    fn pre_ga_function(&mut self) -> Result<Vec<u8>, Corrupt> {
        let name = self.r.string()?;
        let engine = self.r.string()?;
        if self.r.length()? != 0 {
            self.r.string()?;
        }
        let code = self.r.string()?;
        let mut out = b"#!".to_vec();
        out.extend_from_slice(&engine);
        out.extend_from_slice(b" name=");
        out.extend_from_slice(&name);
        out.push(b'\n');
        out.extend_from_slice(&code);
        Ok(out)
    }

    fn key(
        &mut self,
        at: usize,
        type_id: u8,
        expires_at_ms: Option<i64>,
    ) -> Result<Record<'a>, FileError> {
        let key = self.r.string().map_err(|e| self.corrupt(at, e))?;
        let start = self.r.pos();
        let describe = |key: &[u8], db: usize| {
            format!(
                "key '{}' in database {db} ({})",
                String::from_utf8_lossy(key),
                type_name(type_id)
            )
        };
        match read_value(&mut self.r, type_id) {
            Ok(value) => Ok(Record::Key(KeyRecord {
                db: self.db,
                type_id,
                serialized: self.r.slice(start, self.r.pos()),
                key,
                expires_at_ms,
                value,
            })),
            Err(DecodeError::Empty) => Ok(Record::EmptyKey { db: self.db, key }),
            Err(DecodeError::Unsupported(what)) => Err(self.error(
                at,
                format!(
                    "{}: {what} values cannot be imported (Tollgate stores strings, lists, \
                     sets, sorted sets and hashes)",
                    describe(&key, self.db)
                ),
            )),
            Err(DecodeError::Corrupt(e)) => Err(self.error(
                at,
                format!("{}: corrupt value: {e}", describe(&key, self.db)),
            )),
        }
    }

    /// After the EOF opcode at `end - 1`: the checksum (version 5 on; 0 means none).
    fn finish(&mut self, end: usize) -> Result<(), FileError> {
        self.done = true;
        if self.version >= 5 {
            let stored = self
                .r
                .u64_le()
                .map_err(|_| self.error(end, "the file ends before its checksum"))?;
            self.crc.update(&self.data[self.crc_pos..end]);
            self.crc_pos = end;
            let crc = std::mem::take(&mut self.crc).finish();
            if stored != 0 && stored != crc {
                return Err(self.error(
                    end,
                    format!(
                        "checksum mismatch: the file says {stored:016x}, its contents give \
                         {crc:016x} (the file is corrupt)"
                    ),
                ));
            }
        }
        if self.r.remaining() != 0 {
            return Err(self.error(self.r.pos(), "unexpected data after the end of the file"));
        }
        Ok(())
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, FileError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let result = self.next_record();
        // Keep the running checksum close behind the cursor (the bytes are in cache).
        if self.r.pos() - self.crc_pos > 1 << 20 && !self.done {
            let upto = self.r.pos();
            self.crc.update(&self.data[self.crc_pos..upto]);
            self.crc_pos = upto;
        }
        match result {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{put_length, put_string};
    use super::*;

    fn file(body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut f = b"REDIS0010".to_vec();
        body(&mut f);
        f.push(opcodes::EOF);
        let crc = super::super::crc64::crc64(&f);
        f.extend_from_slice(&crc.to_le_bytes());
        f
    }

    #[test]
    fn reads_aux_databases_deadlines_and_keys() {
        let data = file(|f| {
            f.push(opcodes::AUX);
            put_string(f, b"redis-ver");
            put_string(f, b"7.0.15");
            f.push(opcodes::SELECTDB);
            put_length(f, 3);
            f.push(opcodes::RESIZEDB);
            put_length(f, 1);
            put_length(f, 1);
            f.push(opcodes::EXPIRETIME_MS);
            f.extend_from_slice(&1_700_000_000_000u64.to_le_bytes());
            f.push(0);
            put_string(f, b"k");
            put_string(f, b"v");
        });
        let records: Vec<_> = Records::new(&data)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(records.len(), 2);
        let Record::Key(k) = &records[1] else {
            panic!("{records:?}")
        };
        assert_eq!(
            (k.db, &k.key[..], k.expires_at_ms),
            (3, &b"k"[..], Some(1_700_000_000_000))
        );
        assert_eq!((k.type_id, k.serialized), (0, &b"\x01v"[..]));
    }

    #[test]
    fn bad_files_say_where_and_why() {
        let good = file(|f| {
            f.push(0);
            put_string(f, b"k");
            put_string(f, b"v");
        });
        let all = |d: &[u8]| -> Result<usize, FileError> {
            Records::new(d)?.try_fold(0, |n, r| r.map(|_| n + 1))
        };
        assert_eq!(all(&good), Ok(1));
        let mut flipped = good.clone();
        flipped[13] ^= 0x01; // the value's byte
        assert!(all(&flipped)
            .unwrap_err()
            .message
            .contains("checksum mismatch"));
        for cut in 0..good.len() {
            assert!(all(&good[..cut]).is_err(), "cut at {cut}");
        }
        assert!(Records::new(b"REDIS0011").is_err());
        assert!(Records::new(b"HELLO0009").is_err());
        let stream = file(|f| {
            f.push(19);
            put_string(f, b"events");
        });
        let e = all(&stream).unwrap_err();
        assert!(
            e.message.contains("key 'events' in database 0 (stream)"),
            "{e}"
        );
    }
}
