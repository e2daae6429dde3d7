//! What the glue reads of a read-write lock: the view for one owner (`logic/rwlock/state.rs`
//! decides from it), and the read holds its timeout keys keep alive.

use crate::ffi::key::{Key, KeyKind};
use crate::ffi::rm::{bytes, Ctx, OwnedStr, RStr};
use crate::logic::args::parse_i64;
use crate::logic::command_args::Access;
use crate::logic::error::Error;
use crate::logic::rwlock::names;
use crate::logic::rwlock::state::{self, Mode, RwView};

/// At most this many timeout keys are looked at in one walk; beyond, the holds are taken to
/// last as long as the hash (never shorter than Redisson would keep them).
pub const MAX_WALK: usize = 10_000;

/// Nor more than this many bytes of timeout-key names (a long field with a large count must not
/// stall or exhaust the server); beyond, the same rule as past [`MAX_WALK`].
pub const MAX_WALK_BYTES: usize = 32 << 20;

/// The hash's `mode`, `None` when absent, `Err` when neither value.
pub fn mode(key: &Key) -> Result<Option<Mode>, Error> {
    let f = crate::ffi::rm::mode_field();
    match key.hash_get(f.ptr(), |b| state::parse_mode(Some(b))) {
        None => Ok(None),
        Some(m) => m,
    }
}

/// The lock as `owner` (its read field; `<owner>:write` its write field) sees it, for a
/// command about its `access` hold. Only the counts the transitions of that access look at are
/// read: a read command needs the write count only in write mode (the writer's own reads), a
/// write command the read count only in read mode (no upgrade); the other is `None`.
pub fn view(key: &Key, owner: RStr, access: Access) -> RwView {
    match key.kind() {
        KeyKind::Empty => RwView::Free,
        KeyKind::String | KeyKind::SortedSet | KeyKind::Other => RwView::WrongType,
        KeyKind::Hash => match mode(key) {
            Err(_) => RwView::BadMode,
            Ok(None) => RwView::NoMode,
            Ok(Some(mode)) => {
                let read_count = || key.hash_get(owner, |b| state::count(Some(b))).flatten();
                let write_count = || {
                    let w = OwnedStr::new(&names::write_field(bytes(&owner)));
                    key.hash_get(w.ptr(), |b| state::count(Some(b))).flatten()
                };
                let (read, write) = match (access, mode) {
                    (Access::Read, Mode::Read) => (read_count(), None),
                    (Access::Read, Mode::Write) => (read_count(), write_count()),
                    (Access::Write, Mode::Read) => (read_count(), None),
                    (Access::Write, Mode::Write) => (None, write_count()),
                };
                RwView::Held { mode, read, write }
            }
        },
    }
}

/// The read holds of a lock, from their timeout keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holds {
    /// The largest PTTL of a timeout key (-2 when none exists), as Redisson's read unlock
    /// computes it.
    pub longest: i64,
    /// When the last live hold ends (unix ms); `None` when none is alive or one has no TTL.
    pub until: Option<i64>,
}

impl Holds {
    /// Whether any read hold is alive (a timeout key with time left).
    pub fn alive(&self) -> bool {
        self.longest > 0
    }
}

/// Every count field of the hash, `mode` and non-numeric values left out: the names end to end
/// in one buffer (a walk reads every reader's field: no allocation per field).
pub struct CountFields {
    text: Vec<u8>,
    items: Vec<(usize, usize, i64)>,
}

impl CountFields {
    /// (field, count) in HKEYS order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], i64)> + '_ {
        self.items.iter().map(|&(s, e, n)| (self.text.get(s..e).unwrap_or_default(), n))
    }
}

pub fn count_fields(key: &Key) -> CountFields {
    let n = key.hash_len();
    let mut out = CountFields { text: Vec::with_capacity(n * 48), items: Vec::with_capacity(n) };
    key.hash_each(&mut |f, v| {
        if f != names::MODE {
            if let Some(c) = parse_i64(v) {
                let start = out.text.len();
                out.text.extend_from_slice(f);
                out.items.push((start, out.text.len(), c));
            }
        }
    });
    out
}

/// Walk the timeout keys of every count field (counts n..1, as Redisson's read unlock does),
/// leaving out `skip` (the hold being dropped).
pub fn walk(ctx: Ctx, key: &Key, lock: &[u8], skip: Option<&[u8]>) -> Holds {
    let mut longest = -2i64;
    let mut until: Option<i64> = None;
    let (mut seen, mut bytes) = (0usize, 0usize);
    let now = crate::ffi::rm::millis();
    let fields = count_fields(key);
    let mut tk = Vec::new();
    for (field, count) in fields.iter() {
        // One buffer for every hold: the field's prefix, then each hold's number in turn.
        tk.clear();
        names::push_timeout_prefix(&mut tk, lock, field);
        let base = tk.len();
        for n in (1..=count).rev() {
            tk.truncate(base);
            names::push_hold_number(&mut tk, n);
            seen += 1;
            bytes = bytes.saturating_add(tk.len());
            if seen > MAX_WALK || bytes > MAX_WALK_BYTES {
                let d = key.deadline();
                return Holds { longest: key.pttl().max(longest), until: d.max(until) };
            }
            if skip == Some(tk.as_slice()) {
                continue;
            }
            let name = OwnedStr::new(&tk);
            let t = Key::read(ctx, name.ptr());
            // PTTL as Redis computes it, from one look at the deadline.
            let pttl = match (t.kind(), t.deadline()) {
                (crate::ffi::key::KeyKind::Empty, _) => -2,
                (_, None) => -1,
                (_, Some(d)) => {
                    until = Some(d).max(until);
                    d.saturating_sub(now).max(0)
                }
            };
            longest = longest.max(pttl);
        }
    }
    Holds { longest, until: if longest > 0 { until } else { None } }
}

/// The timeout keys of every hold (for a force release), at most [`MAX_WALK`] of them and
/// [`MAX_WALK_BYTES`] of names (the rest expire with their leases).
pub fn all_timeout_keys(key: &Key, lock: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut bytes = 0usize;
    for (field, count) in count_fields(key).iter() {
        let prefix = names::timeout_prefix(lock, field);
        for n in (1..=count).rev() {
            let tk = names::timeout_key(&prefix, n);
            bytes = bytes.saturating_add(tk.len());
            if out.len() >= MAX_WALK || bytes > MAX_WALK_BYTES {
                return out;
            }
            out.push(tk);
        }
    }
    out
}
