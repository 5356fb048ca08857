//! The per-VM memory cap for memory that Rust code holds on a script's behalf.
//!
//! Lua's own allocations go through the capped allocator in [`super::lua`]. The
//! libraries written in Rust (cjson, cmsgpack, struct, `redis.*`) run relaxed, so
//! that no Lua allocation inside them can fail while Rust values are alive; before
//! this module their output buffers were not counted at all, and `cjson.encode` of a
//! table holding one 1 MB string 2,000 times grew a 2 GB `Vec` in a VM capped at
//! 256 MiB. Now:
//!
//! - [`Output`] is the buffer an encoder builds. It may hold at most half of what the
//!   VM has left (the bytes are then copied into a Lua string of the same size, and
//!   both exist at once), and the encoders call [`Output::check`] after every element
//!   and copy strings with [`Output::extend_checked`], so they stop within one small
//!   step of that bound.
//! - [`lua_room`] is what decoders and reply conversion call as they create Lua
//!   values while relaxed: they stop once the VM is past its cap (by at most one
//!   value or one table resize).
//! - [`fits`] checks an estimate before a large copy (`redis.call` arguments, a command
//!   reply pushed into Lua, a script's reply).
//!
//! Running out is reported as Lua's own out-of-memory error ([`Raise::Memory`]):
//! `pcall` sees `false, "not enough memory"`, and an uncaught one is answered
//! `ERR Error running script <sha>, not enough memory`, the same as a script whose Lua
//! allocations hit the cap.

use std::ops::{Deref, DerefMut};

use super::lua::{lua_State, push_bytes, CResult, Raise, VmShared};

/// Strings are copied into an [`Output`] in pieces of this size, so a string that
/// expands (JSON escapes) overshoots the bound by at most one piece.
const PIECE: usize = 64 * 1024;

/// An encoder's output buffer, bounded by what the VM has left.
pub(crate) struct Output {
    bytes: Vec<u8>,
    max: usize,
}

impl Output {
    /// An empty buffer for a C function of the VM owning `l`.
    ///
    /// # Safety
    /// `l` must be a state created by `Vm::new`.
    pub(crate) unsafe fn for_vm(l: *mut lua_State) -> Output {
        Output {
            bytes: Vec::new(),
            max: free_bytes(l) / 2,
        }
    }

    /// A buffer that may hold at most `max` bytes (tests).
    #[cfg(test)]
    pub(crate) fn with_max(max: usize) -> Output {
        Output {
            bytes: Vec::new(),
            max,
        }
    }

    /// `Err(Raise::Memory)` once the buffer is past its bound.
    #[inline]
    pub(crate) fn check(&self) -> Result<(), Raise> {
        if self.bytes.len() > self.max {
            Err(Raise::Memory)
        } else {
            Ok(())
        }
    }

    /// Append `s` escaped by `escape` (which appends the encoding of its input),
    /// checking the bound between pieces.
    pub(crate) fn extend_with(
        &mut self,
        s: &[u8],
        mut escape: impl FnMut(&[u8], &mut Vec<u8>),
    ) -> Result<(), Raise> {
        if self.bytes.len().saturating_add(s.len()) > self.max {
            return Err(Raise::Memory);
        }
        for piece in s.chunks(PIECE) {
            escape(piece, &mut self.bytes);
            self.check()?;
        }
        Ok(())
    }

    /// Append `s` as is, if it fits.
    pub(crate) fn extend_checked(&mut self, s: &[u8]) -> Result<(), Raise> {
        self.extend_with(s, |piece, out| out.extend_from_slice(piece))
    }

    /// Push the bytes as a Lua string; one result.
    ///
    /// # Safety
    /// Called from a relaxed C function body of the VM owning `l`.
    pub(crate) unsafe fn into_lua(self, l: *mut lua_State) -> CResult {
        self.check()?;
        push_bytes(l, &self.bytes);
        Ok(1)
    }
}

impl Deref for Output {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.bytes
    }
}

impl DerefMut for Output {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }
}

/// Bytes the VM owning `l` may still allocate.
///
/// # Safety
/// `l` must be a state created by `Vm::new`.
pub(crate) unsafe fn free_bytes(l: *mut lua_State) -> usize {
    let shared = VmShared::get(l);
    shared.limit().saturating_sub(shared.used())
}

/// `Err(Raise::Memory)` once the VM owning `l` is past its cap (decoders call this as
/// they create values while relaxed).
///
/// # Safety
/// `l` must be a state created by `Vm::new`.
#[inline]
pub(crate) unsafe fn lua_room(l: *mut lua_State) -> Result<(), Raise> {
    let shared = VmShared::get(l);
    if shared.used() > shared.limit() {
        Err(Raise::Memory)
    } else {
        Ok(())
    }
}

/// Bytes of one array slot (a `TValue`) and one hash node of a Lua 5.1 table.
pub(crate) const ARRAY_SLOT: usize = 16;
/// See [`ARRAY_SLOT`].
pub(crate) const HASH_NODE: usize = 40;

/// Before a decoder stores entry number `n` (from 1) of a table it builds: the VM must
/// be under its cap, and when `n` is a power of two (where Lua may double the table)
/// the doubled part must fit too, so that the resize itself cannot overshoot the cap.
///
/// # Safety
/// `l` must be a state created by `Vm::new`.
#[inline]
pub(crate) unsafe fn table_room(l: *mut lua_State, n: usize, slot: usize) -> Result<(), Raise> {
    lua_room(l)?;
    if n.is_power_of_two() && n >= 1024 {
        fits(l, n.saturating_mul(2 * slot))?;
    }
    Ok(())
}

/// `Err(Raise::Memory)` unless `bytes` more fit under the cap of the VM owning `l`.
///
/// # Safety
/// `l` must be a state created by `Vm::new`.
pub(crate) unsafe fn fits(l: *mut lua_State, bytes: usize) -> Result<(), Raise> {
    if bytes > free_bytes(l) {
        Err(Raise::Memory)
    } else {
        Ok(())
    }
}

/// A generous estimate of what pushing `reply` into Lua allocates: strings with their
/// header, tables with their array or hash slots.
pub(crate) fn reply_lua_bytes(reply: &crate::protocol::Reply) -> usize {
    use crate::protocol::Reply;
    const STRING: usize = 32;
    const TABLE: usize = 64;
    const SLOT: usize = 48;
    match reply {
        Reply::Status(s) | Reply::Error(s) | Reply::BigNumber(s) => TABLE + STRING + s.len(),
        Reply::Bulk(b) => STRING + b.len(),
        Reply::Verbatim(_, b) => 2 * TABLE + 2 * STRING + b.len(),
        Reply::Integer(_) | Reply::Nil | Reply::NilArray | Reply::Bool(_) => SLOT,
        Reply::Double(_) => TABLE + SLOT,
        Reply::HumanDouble(_) => TABLE + STRING + SLOT,
        Reply::Ints5(_) => TABLE + 5 * SLOT,
        Reply::Array(items) | Reply::Set(items) | Reply::Push(items) => {
            items.iter().fold(2 * TABLE, |acc, r| {
                acc.saturating_add(SLOT + reply_lua_bytes(r))
            })
        }
        Reply::Map(pairs) => pairs.iter().fold(2 * TABLE, |acc, (k, v)| {
            acc.saturating_add(SLOT + reply_lua_bytes(k) + reply_lua_bytes(v))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_stops_at_its_bound() {
        let mut out = Output::with_max(10);
        assert!(out.extend_checked(b"0123456789").is_ok());
        assert!(out.check().is_ok());
        assert!(matches!(out.extend_checked(b"x"), Err(Raise::Memory)));
        out.push(b'x');
        assert!(matches!(out.check(), Err(Raise::Memory)));
    }

    #[test]
    fn expanding_strings_stop_within_one_piece() {
        let mut out = Output::with_max(PIECE * 3);
        let s = vec![0u8; PIECE * 2];
        // Each input byte becomes six output bytes.
        let r = out.extend_with(&s, |piece, o| {
            for _ in piece {
                o.extend_from_slice(b"\\u0000");
            }
        });
        assert!(matches!(r, Err(Raise::Memory)));
        assert!(out.len() <= PIECE * 3 + PIECE * 6);
    }
}
