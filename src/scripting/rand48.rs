//! Redis's `redisLrand48`/`redisSrand48` (the 48-bit `lrand48` LCG) and the
//! `math.random`/`math.randomseed` built on it, so scripts see exactly the numbers
//! Redis produces. The generator is seeded before every script from the command's seed
//! (`ScriptContext::seed`): different draws per call, the same on every replica.

use std::ffi::c_int;

use super::lua::{ffi, lua_State, VmShared};

const MASK48: u64 = (1 << 48) - 1;
const MULTIPLIER: u64 = 0x5_DEEC_E66D;
const ADDEND: u64 = 0xB;
/// `REDIS_LRAND48_MAX` (`INT32_MAX`).
const LRAND48_MAX: i32 = i32::MAX;

/// The 48-bit linear congruential generator state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rand48 {
    x: u64,
}

impl Rand48 {
    /// The generator in its initial state (`X0, X1, X2` of Redis's rand.c).
    pub(crate) fn new() -> Rand48 {
        Rand48 {
            x: 0x1234_ABCD_330E,
        }
    }

    /// `redisSrand48(seed)`.
    pub(crate) fn seed(&mut self, seed: i32) {
        let low = u64::from(seed as u32 & 0xffff);
        let high = u64::from((seed >> 16) as u32 & 0xffff);
        self.x = 0x330E | (low << 16) | (high << 32);
    }

    /// `redisLrand48()`: the next value in `0..2^31`.
    pub(crate) fn next(&mut self) -> i32 {
        self.x = MULTIPLIER.wrapping_mul(self.x).wrapping_add(ADDEND) & MASK48;
        (self.x >> 17) as i32
    }

    /// The `[0, 1)` double `math.random()` derives from the next value.
    pub(crate) fn next_unit(&mut self) -> f64 {
        f64::from(self.next() % LRAND48_MAX) / f64::from(LRAND48_MAX)
    }
}

/// `luaL_checkint`: the C `(int)` of `luaL_checkinteger`.
unsafe fn check_int(l: *mut lua_State, n: c_int) -> i64 {
    i64::from(ffi::luaL_checkinteger(l, n) as i32)
}

/// `math.random([m [, n]])`.
pub(crate) unsafe extern "C-unwind" fn math_random(l: *mut lua_State) -> c_int {
    let shared = VmShared::get(l);
    if shared.run.is_null() {
        return ffi::luaL_error(
            l,
            c"math.random can only be called inside a script invocation".as_ptr(),
        );
    }
    let r = shared.rng.next_unit();
    match ffi::lua_gettop(l) {
        0 => ffi::lua_pushnumber(l, r),
        1 => {
            let u = check_int(l, 1);
            if u < 1 {
                ffi::luaL_argerror(l, 1, c"interval is empty".as_ptr());
            }
            ffi::lua_pushnumber(l, (r * u as f64).floor() + 1.0);
        }
        2 => {
            let lo = check_int(l, 1);
            let up = check_int(l, 2);
            if lo > up {
                ffi::luaL_argerror(l, 2, c"interval is empty".as_ptr());
            }
            ffi::lua_pushnumber(l, (r * (up - lo + 1) as f64).floor() + lo as f64);
        }
        _ => return ffi::luaL_error(l, c"wrong number of arguments".as_ptr()),
    }
    1
}

/// `math.randomseed(n)`.
pub(crate) unsafe extern "C-unwind" fn math_randomseed(l: *mut lua_State) -> c_int {
    let shared = VmShared::get(l);
    if shared.run.is_null() {
        return ffi::luaL_error(
            l,
            c"math.randomseed can only be called inside a script invocation".as_ptr(),
        );
    }
    let seed = check_int(l, 1) as i32;
    VmShared::get(l).rng.seed(seed);
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(seed: i32, n: usize) -> Vec<String> {
        let mut r = Rand48::new();
        r.seed(seed);
        (0..n)
            .map(|_| super::super::lua::fmt_g(r.next_unit(), 14))
            .collect()
    }

    #[test]
    fn matches_redis_sequences() {
        // Captured from redis-server 7 with `math.randomseed(s); tostring(math.random())`.
        assert_eq!(
            first(0, 3),
            ["0.17082803611217", "0.74990198051087", "0.09637165539729"]
        );
        assert_eq!(first(-7, 2), ["0.07521187517569", "0.81776873106964"]);
    }

    #[test]
    fn seed_wraps_like_c_int() {
        // math.randomseed(2^33+5) passes (int)(2^33+5) == 5 to redisSrand48.
        assert_eq!(first(5, 2), ["0.52483957937213", "0.27285430173988"]);
    }
}
