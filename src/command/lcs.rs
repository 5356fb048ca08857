//! LCS: the longest common subsequence of two string values, with Redis 7.0's options
//! (LEN, IDX, MINMATCHLEN, WITHMATCHLEN), replies and limits.
//!
//! The table is Redis's: one `u32` per pair of prefixes, `(len(a)+1) * (len(b)+1)` of
//! them, and Redis refuses a table larger than `proto-max-bulk-len`'s default (512 MB:
//! two strings of about 11,585 bytes each) with `ERR Insufficient memory, transient memory
//! for LCS exceeds proto-max-bulk-len`, before allocating anything. The walk back through
//! the table, and so which of several equally long subsequences is answered and the order
//! of the IDX ranges (last first), is Redis's.

use bytes::Bytes;

use super::args::{int, is, syntax_error, CmdResult, MAX_STRING};
use super::Ctx;
use crate::protocol::Reply;
use crate::store::{Entry, Value};

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]
pub fn lcs(ctx: &mut Ctx, a: &[Bytes]) -> Reply {
    run(lcs_inner(ctx, a))
}

fn lcs_inner(ctx: &mut Ctx, a: &[Bytes]) -> CmdResult<Reply> {
    let now = ctx.now_ms;
    let db = ctx.db();
    let value = |key: &[u8]| match db.read(key, now) {
        None => Ok(Bytes::new()),
        Some(Entry {
            value: Value::Str(s),
            ..
        }) => Ok(s.to_bytes()),
        Some(_) => Err(Reply::err(
            "ERR The specified keys must contain string values",
        )),
    };
    let (x, y) = (value(&a[1]), value(&a[2]));
    let (x, y) = (x?, y?);
    let (mut len_only, mut idx, mut with_len) = (false, false, false);
    let mut min_len: i64 = 0;
    let mut j = 3;
    while j < a.len() {
        let more = j + 1 < a.len();
        if is(&a[j], "idx") {
            idx = true;
        } else if is(&a[j], "len") {
            len_only = true;
        } else if is(&a[j], "withmatchlen") {
            with_len = true;
        } else if is(&a[j], "minmatchlen") && more {
            min_len = int(&a[j + 1])?.max(0);
            j += 1;
        } else {
            return Err(syntax_error());
        }
        j += 1;
    }
    if len_only && idx {
        return Err(Reply::err(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    let cells = (x.len() as u64 + 1) * (y.len() as u64 + 1);
    if cells.saturating_mul(4) > MAX_STRING as u64 {
        return Err(Reply::err(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let table = Table::build(&x, &y);
    let total = table.at(x.len(), y.len());
    if len_only {
        return Ok(Reply::Integer(i64::from(total)));
    }
    let (common, ranges) = table.walk(&x, &y);
    if !idx {
        return Ok(Reply::Bulk(Bytes::from(common)));
    }
    let matches = ranges
        .into_iter()
        .filter(|r| min_len == 0 || i64::from(r.len) >= min_len)
        .map(|r| {
            let pair = |s: u32, e: u32| {
                Reply::Array(vec![
                    Reply::Integer(i64::from(s)),
                    Reply::Integer(i64::from(e)),
                ])
            };
            let mut item = vec![pair(r.a.0, r.a.1), pair(r.b.0, r.b.1)];
            if with_len {
                item.push(Reply::Integer(i64::from(r.len)));
            }
            Reply::Array(item)
        })
        .collect();
    Ok(Reply::Map(vec![
        (Reply::bulk("matches"), Reply::Array(matches)),
        (Reply::bulk("len"), Reply::Integer(i64::from(total))),
    ]))
}

/// The LCS lengths of every pair of prefixes: `at(i, j)` is the LCS length of `a[..i]`
/// and `b[..j]`.
struct Table {
    cells: Vec<u32>,
    width: usize,
}

/// A common run: its first and last positions in each string, and its length.
struct Range {
    a: (u32, u32),
    b: (u32, u32),
    len: u32,
}

impl Table {
    fn build(a: &[u8], b: &[u8]) -> Table {
        let width = b.len() + 1;
        let mut cells = vec![0u32; (a.len() + 1) * width];
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                cells[i * width + j] = if a[i - 1] == b[j - 1] {
                    cells[(i - 1) * width + j - 1] + 1
                } else {
                    cells[(i - 1) * width + j].max(cells[i * width + j - 1])
                };
            }
        }
        Table { cells, width }
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }

    /// Walk back from the end: the subsequence, and its contiguous runs (last first).
    fn walk(&self, a: &[u8], b: &[u8]) -> (Vec<u8>, Vec<Range>) {
        let total = self.at(a.len(), b.len()) as usize;
        let mut common = vec![0u8; total];
        let mut ranges = Vec::new();
        let (mut i, mut j, mut k) = (a.len(), b.len(), total);
        let mut current: Option<Range> = None;
        while i > 0 && j > 0 {
            let mut emit = false;
            if a[i - 1] == b[j - 1] {
                common[k - 1] = a[i - 1];
                let (ai, bj) = ((i - 1) as u32, (j - 1) as u32);
                match &mut current {
                    None => {
                        current = Some(Range {
                            a: (ai, ai),
                            b: (bj, bj),
                            len: 0,
                        })
                    }
                    Some(r) if r.a.0 == i as u32 && r.b.0 == j as u32 => {
                        r.a.0 -= 1;
                        r.b.0 -= 1;
                    }
                    Some(_) => emit = true,
                }
                if let Some(r) = &current {
                    emit |= r.a.0 == 0 || r.b.0 == 0;
                }
                k -= 1;
                i -= 1;
                j -= 1;
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                emit = current.is_some();
            }
            if emit {
                if let Some(mut r) = current.take() {
                    r.len = r.a.1 - r.a.0 + 1;
                    ranges.push(r);
                }
            }
        }
        (common, ranges)
    }
}

use super::flags::READONLY;
use super::strings::run;

/// The LCS command.
pub const COMMANDS: &[super::CommandSpec] = &[crate::cmd!("lcs", -3, READONLY, 1, 2, 1, lcs)];
