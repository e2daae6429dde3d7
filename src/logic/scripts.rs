//! Scripts run natively (`lock.redisson-scripts native`), as data, for every kind.
//!
//! Pure. A kind's file lists its operations ([`OpDef`]: the kind of object, what the script
//! does, the role of each KEYS / ARGV slot) and one [`Row`] per script text (SHA1, body length,
//! operation). The number of keys and arguments follows from the roles. The facts come from the
//! research files (hashes, lengths, layouts); no script text is needed or kept. `Table` is
//! what the filter looks calls up in (the built-in rows and `lock.redisson-extra-scripts`,
//! `logic/script_table.rs`), and [`parse`] the one check of a call's shape: a call matches only when it has the operation's
//! layout exactly and arguments the native code runs. Whatever does not match is left to Lua,
//! untouched.

use crate::logic::args::parse_i64;
use crate::logic::script_layout::position;
pub use crate::logic::script_layout::{Layout, Role};

/// The kind of object a script works on (its rows and transitions are in the kind's folder).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Object {
    /// The reentrant lock (`logic/lock`).
    Lock,
    /// The read-write lock (`logic/rwlock`).
    RwLock,
    /// The semaphore and the permit-expirable semaphore (`logic/semaphore`).
    Semaphore,
    /// The fair lock and the non-reentrant fair lock (`logic/fair`).
    FairLock,
    /// The count-down latch (`logic/latch`).
    Latch,
}

/// An operation: the kind of object, and the kind's own operation number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Op {
    pub object: Object,
    pub code: u8,
}

/// An operation with its name (in `lock.redisson-extra-scripts` and, with `_` for `-`, in INFO)
/// and its layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpDef {
    pub op: Op,
    pub name: &'static str,
    pub layout: Layout,
}

/// A script text: SHA1 (lowercase hex of the UTF-8 body), body length in bytes, operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub sha: &'static str,
    pub len: usize,
    pub op: Op,
}

/// An operation's place in the list of every kind's operations (`kinds::OPS`): its INFO
/// counters and the filter's name objects are by this index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpId(pub usize);

/// A publish command a script may be given (case-insensitive, as `redis.call` accepts it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publish {
    Publish,
    SPublish,
}

fn publish_cmd(b: &[u8]) -> Option<Publish> {
    if b.eq_ignore_ascii_case(b"PUBLISH") {
        Some(Publish::Publish)
    } else if b.eq_ignore_ascii_case(b"SPUBLISH") {
        Some(Publish::SPublish)
    } else {
        None
    }
}

/// numkeys as EVAL reads it: a non-negative integer in Redis's spelling.
pub fn numkeys(b: &[u8]) -> Option<usize> {
    parse_i64(b).and_then(|n| usize::try_from(n).ok())
}

/// Why a call of a known script is left to Lua.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mismatch {
    /// numkeys or the number of arguments differs from the script's layout.
    Shape,
    /// An argument the module does not run natively (a publish command other than PUBLISH and
    /// SPUBLISH).
    Argument,
}

/// A call that matched its layout. Byte slices borrow the argv; the typed slots (lease, latch
/// time) are read where a transition uses them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call<'a> {
    pub layout: &'static Layout,
    pub keys: &'a [&'a [u8]],
    pub args: &'a [&'a [u8]],
    /// How many times the layout's repeated tail occurs (1 without one).
    pub units: usize,
    /// The [`Role::PublishCmd`] slot, `None` without one.
    pub publish: Option<Publish>,
}

/// Check `rest` (everything after the script or SHA1: numkeys, keys, args) against `layout`.
#[inline]
pub fn parse<'a>(layout: &'static Layout, rest: &'a [&'a [u8]]) -> Result<Call<'a>, Mismatch> {
    let (&first, rest) = rest.split_first().ok_or(Mismatch::Shape)?;
    let n = numkeys(first).ok_or(Mismatch::Shape)?;
    let (fk, fa) = (layout.keys.len(), layout.args.len());
    let (units, nargs) = match layout.each {
        None if n == fk => (1, fa),
        None => return Err(Mismatch::Shape),
        Some((_, ea)) if layout.args_tail => {
            let tail = rest.len().checked_sub(n).and_then(|a| a.checked_sub(fa)).ok_or(Mismatch::Shape)?;
            if n != fk || ea.is_empty() || tail == 0 || tail % ea.len() != 0 {
                return Err(Mismatch::Shape);
            }
            (tail / ea.len(), rest.len().saturating_sub(n))
        }
        Some((ek, ea)) => {
            let tail = n.checked_sub(fk).filter(|t| *t > 0).ok_or(Mismatch::Shape)?;
            if ek.is_empty() || tail % ek.len() != 0 {
                return Err(Mismatch::Shape);
            }
            let units = tail / ek.len();
            if layout.counted {
                (units, counted_args(rest.get(n..).ok_or(Mismatch::Shape)?, fa, units)?)
            } else {
                (units, units.checked_mul(ea.len()).and_then(|a| a.checked_add(fa)).ok_or(Mismatch::Shape)?)
            }
        }
    };
    if n.checked_add(nargs) != Some(rest.len()) {
        return Err(Mismatch::Shape);
    }
    let (keys, args) = rest.split_at_checked(n).ok_or(Mismatch::Shape)?;
    let publish = match position(&layout.fixed_at, Role::PublishCmd).and_then(|i| args.get(i)) {
        Some(b) => Some(publish_cmd(b).ok_or(Mismatch::Argument)?),
        None => None,
    };
    Ok(Call { layout, keys, args, units, publish })
}

/// The number of ARGV a counted batch of `units` groups takes after `fixed` slots: each group
/// is a count (a non-negative integer in Redis's spelling; anything else is left to Lua) and
/// that many fields.
fn counted_args(args: &[&[u8]], fixed: usize, units: usize) -> Result<usize, Mismatch> {
    let mut at = fixed;
    for _ in 0..units {
        let m = numkeys(args.get(at).ok_or(Mismatch::Shape)?).ok_or(Mismatch::Argument)?;
        at = at.checked_add(1).and_then(|a| a.checked_add(m)).ok_or(Mismatch::Shape)?;
        if at > args.len() {
            return Err(Mismatch::Shape);
        }
    }
    Ok(at)
}

/// Slot `first + u * stride` (a fixed slot, stride 0, is unit 0's only).
pub fn unit(first: usize, stride: usize, u: usize) -> Option<usize> {
    if stride == 0 && u > 0 {
        return None;
    }
    first.checked_add(u.checked_mul(stride)?)
}

impl Call<'_> {
    pub fn numkeys(&self) -> usize {
        self.keys.len()
    }

    /// The [`Role::Lease`] slot as PEXPIRE takes it: any integer (<= 0 deletes the key), `None`
    /// when not one (the script fails if it reaches PEXPIRE with it) or without such a slot.
    pub fn lease(&self) -> Option<i64> {
        parse_i64(self.arg(self.arg_index(Role::Lease)?)?)
    }

    /// The [`Role::LatchMs`] slot as SET PX takes it: a positive integer, else `None` (whether
    /// `now + ms` overflows is checked when it runs).
    pub fn latch_ms(&self) -> Option<i64> {
        parse_i64(self.arg(self.arg_index(Role::LatchMs)?)?).filter(|v| *v > 0)
    }

    /// The KEYS index of a fixed `role`.
    #[inline]
    pub fn key_index(&self, role: Role) -> Option<usize> {
        position(&self.layout.fixed_at, role).filter(|_| role.is_key())
    }

    /// The ARGV index of a fixed `role`.
    #[inline]
    pub fn arg_index(&self, role: Role) -> Option<usize> {
        position(&self.layout.fixed_at, role).filter(|_| !role.is_key())
    }

    /// Where `role` is for each unit: (index for unit 0, stride), in KEYS for a key role, in
    /// ARGV for an argument role; from the repeated tail if it has the role, else the fixed
    /// slot (one unit).
    pub fn unit_slots(&self, role: Role) -> Option<(usize, usize)> {
        match (self.layout.each, position(&self.layout.each_at, role)) {
            (Some((k, _)), Some(pos)) if role.is_key() => Some((self.layout.keys.len() + pos, k.len())),
            (Some((_, a)), Some(pos)) => Some((self.layout.args.len() + pos, a.len())),
            _ if role.is_key() => Some((self.key_index(role)?, 0)),
            _ => Some((self.arg_index(role)?, 0)),
        }
    }

    /// The KEYS index of `role` for unit `u` (see [`Call::unit_slots`]).
    pub fn unit_key_index(&self, u: usize, role: Role) -> Option<usize> {
        let (first, stride) = self.unit_slots(role).filter(|_| role.is_key())?;
        unit(first, stride, u)
    }

    /// The ARGV index of `role` for unit `u` (see [`Call::unit_slots`]).
    pub fn unit_arg_index(&self, u: usize, role: Role) -> Option<usize> {
        let (first, stride) = self.unit_slots(role).filter(|_| !role.is_key())?;
        unit(first, stride, u)
    }

    /// The bytes of KEYS slot `i`.
    pub fn key(&self, i: usize) -> Option<&[u8]> {
        self.keys.get(i).copied()
    }

    /// The bytes of ARGV slot `i`.
    pub fn arg(&self, i: usize) -> Option<&[u8]> {
        self.args.get(i).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXED: Layout = Layout::fixed(&[Role::Lock, Role::Channel], &[Role::Message, Role::PublishCmd]);
    const BATCH: Layout = Layout::repeated(&[], &[Role::Lease], &[Role::Lock], &[Role::Owner]);

    /// A test argv, for as long as the test runs.
    fn argv(s: &[&'static str]) -> &'static [&'static [u8]] {
        Vec::leak(s.iter().map(|a| a.as_bytes()).collect())
    }

    #[test]
    fn fixed_layouts_match_exactly() {
        let ok = parse(&FIXED, argv(&["2", "k", "c", "0", "spublish"])).expect("match");
        assert_eq!((ok.numkeys(), ok.units, ok.publish), (2, 1, Some(Publish::SPublish)));
        assert_eq!(
            (ok.key(ok.key_index(Role::Channel).unwrap()), ok.arg(0)),
            (Some(&b"c"[..]), Some(&b"0"[..]))
        );
        assert_eq!(ok.unit_key_index(0, Role::Lock), Some(0));
        assert_eq!(ok.unit_key_index(1, Role::Lock), None);
        for bad in [
            &["1", "k", "c", "0", "PUBLISH"][..],
            &["2", "k", "c", "0"],
            &["02", "k", "c", "0", "PUBLISH"],
            &[],
        ] {
            assert_eq!(parse(&FIXED, argv(bad)), Err(Mismatch::Shape), "{bad:?}");
        }
        assert_eq!(parse(&FIXED, argv(&["2", "k", "c", "0", "RPUSH"])), Err(Mismatch::Argument));
    }

    #[test]
    fn a_repeated_tail_is_counted_from_numkeys() {
        let b = parse(&BATCH, argv(&["2", "a", "b", "x", "oa", "ob"])).expect("match");
        assert_eq!((b.units, b.lease()), (2, None));
        assert_eq!((b.unit_key_index(1, Role::Lock), b.unit_arg_index(1, Role::Owner)), (Some(1), Some(2)));
        assert_eq!(b.arg_index(Role::Lease), Some(0));
        assert_eq!((b.unit_slots(Role::Lock), b.unit_slots(Role::Owner)), (Some((0, 1)), Some((1, 1))));
        assert_eq!(
            (b.key_index(Role::Lease), b.arg_index(Role::Lock)),
            (None, None),
            "each role on its side"
        );
        for bad in [&["0", "30000"][..], &["2", "a", "b", "30000", "oa"], &["-1", "30000"]] {
            assert_eq!(parse(&BATCH, argv(bad)), Err(Mismatch::Shape), "{bad:?}");
        }
    }
}
