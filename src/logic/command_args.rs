//! Argument parsing of the LOCK.* commands, shared by the kinds they serve: the plain lock, and
//! the read-write lock (`READ` / `WRITE`).
//!
//! Pure: works on byte slices, knows nothing about Redis, so it can be unit-tested and fuzzed
//! without a server. Every failure is an [`Error`] whose text is the Redis error reply.

use crate::logic::args::{parse_i64, LEASE, TIMEOUT};
use crate::logic::error::Error;

fn lease(b: &[u8]) -> Result<i64, Error> {
    match parse_i64(b) {
        None => Err(Error::NotInteger(LEASE)),
        Some(v) if v <= 0 => Err(Error::NotPositive(LEASE)),
        Some(v) => Ok(v),
    }
}

fn owner(b: &[u8]) -> Result<&[u8], Error> {
    if b.is_empty() {
        Err(Error::EmptyOwner)
    } else {
        Ok(b)
    }
}

/// `READ` / `WRITE`: which hold of a read-write lock a command is about (none: a plain lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    Write,
}

impl Access {
    fn parse(b: &[u8]) -> Option<Access> {
        if b.eq_ignore_ascii_case(b"READ") {
            Some(Access::Read)
        } else if b.eq_ignore_ascii_case(b"WRITE") {
            Some(Access::Write)
        } else {
            None
        }
    }
}

/// `LOCK.ACQUIRE key owner lease-ms [WAIT timeout-ms] [FENCE] [READ | WRITE]` (argv without
/// the command name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquireArgs<'a> {
    pub owner: &'a [u8],
    pub lease_ms: i64,
    /// `Some(0)` waits without limit.
    pub wait_ms: Option<i64>,
    /// Issue a fencing token and reply with the `[pttl, token]` array.
    pub fence: bool,
    /// `READ` / `WRITE`: a read-write lock's hold.
    pub access: Option<Access>,
}

pub fn acquire<'a>(argv: &[&'a [u8]]) -> Result<AcquireArgs<'a>, Error> {
    let [_key, own, lease_b, options @ ..] = argv else {
        return Err(Error::Arity);
    };
    let owner = owner(own)?;
    let lease_ms = lease(lease_b)?;
    let mut wait_ms = None;
    let mut fence = false;
    let mut access = None;
    let mut rest = options;
    while let Some((opt, tail)) = rest.split_first() {
        rest = tail;
        if opt.eq_ignore_ascii_case(b"FENCE") && !fence {
            fence = true;
            continue;
        }
        if let Some(a) = Access::parse(opt) {
            if access.is_some() {
                return Err(Error::Syntax);
            }
            access = Some(a);
            continue;
        }
        if !opt.eq_ignore_ascii_case(b"WAIT") || wait_ms.is_some() {
            return Err(Error::Syntax);
        }
        let Some((value, tail)) = rest.split_first() else {
            return Err(Error::Syntax);
        };
        let v = parse_i64(value).ok_or(Error::NotInteger(TIMEOUT))?;
        if v < 0 {
            return Err(Error::Negative(TIMEOUT));
        }
        wait_ms = Some(v);
        rest = tail;
    }
    // A read hold has no fencing token.
    if fence && access == Some(Access::Read) {
        return Err(Error::Syntax);
    }
    Ok(AcquireArgs { owner, lease_ms, wait_ms, fence, access })
}

/// The arguments after `key owner` of RELEASE and RENEW: at most one `READ` / `WRITE` (in any
/// place) and the others, in order.
fn split_access<'a>(rest: &[&'a [u8]]) -> Result<(Option<Access>, Vec<&'a [u8]>), Error> {
    let mut access = None;
    let mut others = Vec::with_capacity(rest.len());
    for &a in rest {
        match Access::parse(a) {
            Some(_) if access.is_some() => return Err(Error::Syntax),
            Some(x) => access = Some(x),
            None => others.push(a),
        }
    }
    Ok((access, others))
}

/// `LOCK.RELEASE key owner [lease-ms] [READ | WRITE]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseArgs<'a> {
    pub owner: &'a [u8],
    pub lease_ms: Option<i64>,
    pub access: Option<Access>,
}

pub fn release<'a>(argv: &[&'a [u8]]) -> Result<ReleaseArgs<'a>, Error> {
    let [_key, own, rest @ ..] = argv else {
        return Err(Error::Arity);
    };
    let owner = owner(own)?;
    let (access, others) = split_access(rest)?;
    match others.as_slice() {
        [] => Ok(ReleaseArgs { owner, lease_ms: None, access }),
        [l] => Ok(ReleaseArgs { owner, lease_ms: Some(lease(l)?), access }),
        _ => Err(Error::Syntax),
    }
}

/// `LOCK.RENEW key owner lease-ms [READ | WRITE]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenewArgs<'a> {
    pub owner: &'a [u8],
    pub lease_ms: i64,
    pub access: Option<Access>,
}

pub fn renew<'a>(argv: &[&'a [u8]]) -> Result<RenewArgs<'a>, Error> {
    let [_key, own, rest @ ..] = argv else {
        return Err(Error::Arity);
    };
    let owner = owner(own)?;
    let (access, others) = split_access(rest)?;
    match others.as_slice() {
        [l] => Ok(RenewArgs { owner, lease_ms: lease(l)?, access }),
        [] => Err(Error::Arity),
        _ => Err(Error::Syntax),
    }
}

/// `LOCK.FORCERELEASE key` and `LOCK.INFO key`.
pub fn key_only(argv: &[&[u8]]) -> Result<(), Error> {
    match argv {
        [_key] => Ok(()),
        _ => Err(Error::Arity),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquire_forms() {
        let a = acquire(&[b"k", b"me", b"100"]).unwrap();
        assert_eq!(a, AcquireArgs { owner: b"me", lease_ms: 100, wait_ms: None, fence: false, access: None });
        let a = acquire(&[b"k", b"me", b"100", b"fence"]).unwrap();
        assert_eq!(a, AcquireArgs { owner: b"me", lease_ms: 100, wait_ms: None, fence: true, access: None });
        let a = acquire(&[b"k", b"me", b"100", b"read", b"WAIT", b"5"]).unwrap();
        assert_eq!((a.access, a.wait_ms), (Some(Access::Read), Some(5)));
        let a = acquire(&[b"k", b"me", b"100", b"FENCE", b"Write"]).unwrap();
        assert_eq!((a.access, a.fence), (Some(Access::Write), true));
        let a = acquire(&[b"k", b"me", b"100", b"FENCE", b"WAIT", b"7"]).unwrap();
        assert_eq!((a.wait_ms, a.fence), (Some(7), true));
        let a = acquire(&[b"k", b"me", b"100", b"WAIT", b"7", b"Fence"]).unwrap();
        assert_eq!((a.wait_ms, a.fence), (Some(7), true));
        let a = acquire(&[b"k", b"me", b"100", b"wait", b"0"]).unwrap();
        assert_eq!(a.wait_ms, Some(0));
        let a = acquire(&[b"k", b"me", b"100", b"WAIT", b"250"]).unwrap();
        assert_eq!(a.wait_ms, Some(250));
    }

    #[test]
    fn acquire_errors() {
        assert_eq!(acquire(&[b"k", b"me"]), Err(Error::Arity));
        assert_eq!(acquire(&[b"k", b"", b"1"]), Err(Error::EmptyOwner));
        assert_eq!(acquire(&[b"k", b"me", b"x"]), Err(Error::NotInteger(LEASE)));
        assert_eq!(acquire(&[b"k", b"me", b"0"]), Err(Error::NotPositive(LEASE)));
        assert_eq!(acquire(&[b"k", b"me", b"-5"]), Err(Error::NotPositive(LEASE)));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"WAIT"]), Err(Error::Syntax));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"NOPE", b"1"]), Err(Error::Syntax));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"WAIT", b"1", b"WAIT", b"1"]), Err(Error::Syntax));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"WAIT", b"-1"]), Err(Error::Negative(TIMEOUT)));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"WAIT", b"z"]), Err(Error::NotInteger(TIMEOUT)));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"FENCE", b"FENCE"]), Err(Error::Syntax));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"FENCE", b"WAIT"]), Err(Error::Syntax));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"WAIT", b"FENCE"]), Err(Error::NotInteger(TIMEOUT)));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"FENCES"]), Err(Error::Syntax));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"READ", b"WRITE"]), Err(Error::Syntax));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"READ", b"READ"]), Err(Error::Syntax));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"READ", b"FENCE"]), Err(Error::Syntax));
        assert_eq!(acquire(&[b"k", b"me", b"1", b"WAIT", b"READ"]), Err(Error::NotInteger(TIMEOUT)));
    }

    #[test]
    fn release_renew_key_only() {
        assert_eq!(release(&[b"k", b"o"]).unwrap().lease_ms, None);
        assert_eq!(release(&[b"k", b"o", b"5"]).unwrap().lease_ms, Some(5));
        assert_eq!(release(&[b"k"]), Err(Error::Arity));
        assert_eq!(release(&[b"k", b"o", b"5", b"6"]), Err(Error::Syntax));
        assert_eq!(release(&[b"k", b"o", b"read"]).unwrap().access, Some(Access::Read));
        assert_eq!(
            release(&[b"k", b"o", b"5", b"WRITE"]).unwrap(),
            ReleaseArgs { owner: b"o", lease_ms: Some(5), access: Some(Access::Write) }
        );
        assert_eq!(release(&[b"k", b"o", b"READ", b"WRITE"]), Err(Error::Syntax));
        assert_eq!(renew(&[b"k", b"o", b"5", b"READ"]).unwrap().access, Some(Access::Read));
        assert_eq!(renew(&[b"k", b"o", b"READ"]), Err(Error::Arity));
        assert_eq!(renew(&[b"k", b"o", b"5", b"6"]), Err(Error::Syntax));
        assert_eq!(release(&[b"k", b"o", b"0"]), Err(Error::NotPositive(LEASE)));
        assert_eq!(renew(&[b"k", b"o", b"5"]).unwrap().lease_ms, 5);
        assert_eq!(renew(&[b"k", b"o"]), Err(Error::Arity));
        assert_eq!(renew(&[b"k", b"", b"5"]), Err(Error::EmptyOwner));
        assert!(key_only(&[b"k"]).is_ok());
        assert_eq!(key_only(&[b"k", b"x"]), Err(Error::Arity));
    }
}
