//! Lua 5.1's `tonumber` on a string, and Redis's conversion of the Lua number it returns to an
//! integer reply: what the unlock scripts reply for a latch value (`return tonumber(value)`).
//!
//! Lua converts with the C library (`luaO_str2d`): `strtod`, a retry with `strtoul(.., 16)`
//! when `strtod` stops at an `x`, then only whitespace may follow; the string ends at its first
//! NUL byte, as a C string does. Calling the same C library as the server gives the same
//! answers for every input (hex floats, `inf`, `nan`, leading blanks, exponents...). Redis then
//! replies `(long long)` of the number: truncation toward zero, and the CPU's answer for NaN
//! and out-of-range values (x86: `i64::MIN`; others saturate, as Rust's `as` does).

use std::os::raw::{c_char, c_ulong};

extern "C" {
    fn strtod(s: *const c_char, end: *mut *mut c_char) -> f64;
    fn strtoul(s: *const c_char, end: *mut *mut c_char, base: i32) -> c_ulong;
}

/// C `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Lua 5.1 `tonumber(s)` for a string `s`: `None` where Lua gives nil.
pub fn tonumber(s: &[u8]) -> Option<f64> {
    let len = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    let mut c: Vec<u8> = Vec::with_capacity(len + 1);
    c.extend_from_slice(s.get(..len)?);
    c.push(0);
    let start = c.as_ptr().cast::<c_char>();
    let mut end: *mut c_char = std::ptr::null_mut();
    // SAFETY: `c` is NUL-terminated and outlives the calls; `end` points into it.
    let mut value = unsafe { strtod(start, &mut end) };
    let mut off = (end as usize).checked_sub(start as usize)?;
    if off == 0 {
        return None;
    }
    if matches!(c.get(off), Some(b'x' | b'X')) {
        // SAFETY: as above.
        value = unsafe { strtoul(start, &mut end, 16) } as f64;
        off = (end as usize).checked_sub(start as usize)?;
    }
    let rest = c.get(off..len)?;
    rest.iter().all(|&b| is_c_space(b)).then_some(value)
}

/// Redis's integer reply for a Lua number: `(long long)n` in C.
pub fn to_reply_integer(n: f64) -> i64 {
    if cfg!(any(target_arch = "x86_64", target_arch = "x86")) {
        // cvttsd2si: the "integer indefinite" value for NaN and anything out of range.
        if n.is_nan() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) {
            return i64::MIN;
        }
    }
    n as i64
}

/// The unlock script's reply for latch value `s`: `Some(integer)`, or `None` for nil.
pub fn latch_reply(s: &[u8]) -> Option<i64> {
    tonumber(s).map(to_reply_integer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_lua_tonumber() {
        let cases: [(&[u8], Option<f64>); 22] = [
            (b"1", Some(1.0)),
            (b"0", Some(0.0)),
            (b"-7", Some(-7.0)),
            (b"1.5", Some(1.5)),
            (b" 1", Some(1.0)),
            (b"1 \t\r\n", Some(1.0)),
            (b"0x10", Some(16.0)),
            (b"0X1f", Some(31.0)),
            (b"1e2", Some(100.0)),
            (b".5", Some(0.5)),
            (b"+3", Some(3.0)),
            (b"1\0junk", Some(1.0)),
            (b"", None),
            (b" ", None),
            (b"abc", None),
            (b"1x", None),
            (b"1 2", None),
            (b"0x", None),
            (b"\0", None),
            (b"--1", None),
            (b"1e", None),
            (b"1.5.", None),
        ];
        for (s, want) in cases {
            assert_eq!(tonumber(s), want, "{:?}", String::from_utf8_lossy(s));
        }
        assert_eq!(tonumber(b"inf"), Some(f64::INFINITY));
        assert!(tonumber(b"nan").is_some_and(f64::is_nan));
    }

    #[test]
    fn replies_truncate_like_c() {
        assert_eq!(latch_reply(b"-2.9"), Some(-2));
        assert_eq!(latch_reply(b"2.9"), Some(2));
        assert_eq!(latch_reply(b"9007199254740993"), Some(9_007_199_254_740_992));
        assert_eq!(latch_reply(b"abc"), None);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(latch_reply(b"1e300"), Some(i64::MIN));
            assert_eq!(latch_reply(b"nan"), Some(i64::MIN));
            assert_eq!(latch_reply(b"-9223372036854775808"), Some(i64::MIN));
        }
    }
}
