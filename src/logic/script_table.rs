//! The table of known script texts: every kind's built-in rows plus the entries of
//! `lock.redisson-extra-scripts`, looked up by SHA1 (EVALSHA, either case) or by body (EVAL,
//! hashed only when its length is one a known text has). Pure.

use crate::logic::args::parse_i64;
use crate::logic::scripts::{OpDef, OpId, Row};

/// A known script: SHA1 (raw bytes), body length, operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub sha: [u8; 20],
    pub len: usize,
    pub op: OpId,
}

/// Lowercase hex of a SHA1, as Redisson sends it.
fn to_hex(sha: &[u8; 20]) -> [u8; 40] {
    let digit = |n: u8| if n < 10 { b'0' + n } else { b'a' + (n - 10) };
    let mut out = [0u8; 40];
    for (pair, b) in out.chunks_exact_mut(2).zip(sha) {
        if let [hi, lo] = pair {
            *hi = digit(b >> 4);
            *lo = digit(b & 15);
        }
    }
    out
}

/// Lowercase or uppercase hex of a SHA1 to bytes (EVALSHA accepts both cases).
pub fn parse_sha(hex: &[u8]) -> Option<[u8; 20]> {
    if hex.len() != 40 {
        return None;
    }
    let mut out = [0u8; 20];
    let digit = |c: u8| (c as char).to_digit(16);
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let &[hi, lo] = pair else { return None };
        *o = u8::try_from(digit(hi)? * 16 + digit(lo)?).ok()?;
    }
    Some(out)
}

/// The scripts the filter knows: the built-in rows and registered extras.
#[derive(Debug, Clone, Default)]
pub struct Table {
    entries: Vec<Entry>,
    /// Lowercase hex of each entry's SHA1, same order: EVALSHA is matched without decoding.
    hex: Vec<[u8; 40]>,
    /// (first 8 bytes of `hex[i]`, i), sorted: EVALSHA is looked up by binary search.
    index: Vec<(u64, u32)>,
}

/// The first 8 bytes of a hex SHA1, as a number (the index key).
fn head(b: &[u8]) -> Option<u64> {
    b.get(..8).and_then(|p| <[u8; 8]>::try_from(p).ok()).map(u64::from_ne_bytes)
}

impl Table {
    /// `rows` (operations by their place in `ops`) plus `extra`: `op:sha1:length` entries
    /// separated by commas or spaces (an empty string adds nothing). `Err` says what is wrong.
    pub fn new<'r>(
        ops: &[OpDef],
        rows: impl IntoIterator<Item = &'r Row>,
        extra: &[u8],
    ) -> Result<Table, String> {
        let mut t = Table::default();
        for row in rows {
            let id = ops.iter().position(|d| d.op == row.op);
            if let (Some(sha), Some(id)) = (parse_sha(row.sha.as_bytes()), id) {
                t.push(Entry { sha, len: row.len, op: OpId(id) });
            }
        }
        for item in extra.split(|c| *c == b',' || *c == b' ').filter(|s| !s.is_empty()) {
            let mut parts = item.split(|c| *c == b':');
            let (Some(name), Some(sha), Some(len), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(format!("`{}` is not kind:sha1:length", String::from_utf8_lossy(item)));
            };
            let id = ops
                .iter()
                .position(|d| d.name.as_bytes().eq_ignore_ascii_case(name))
                .ok_or_else(|| format!("unknown script kind `{}`", String::from_utf8_lossy(name)))?;
            let sha = parse_sha(sha).ok_or("a sha1 is 40 hex digits")?;
            let len = parse_i64(len)
                .and_then(|l| usize::try_from(l).ok())
                .filter(|l| *l > 0)
                .ok_or("a script length is a positive integer")?;
            t.push(Entry { sha, len, op: OpId(id) });
        }
        t.reindex();
        Ok(t)
    }

    fn reindex(&mut self) {
        self.index = self
            .hex
            .iter()
            .enumerate()
            .filter_map(|(i, h)| Some((head(h)?, u32::try_from(i).ok()?)))
            .collect();
        self.index.sort_unstable();
    }

    fn push(&mut self, e: Entry) {
        if let Some(i) = self.entries.iter().position(|x| x.sha == e.sha) {
            self.entries.remove(i);
            self.hex.remove(i);
        }
        self.hex.push(to_hex(&e.sha));
        self.entries.push(e);
    }

    /// The operation of the script with this SHA1 in hex (EVALSHA's argument, either case).
    pub fn by_hex(&self, hex: &[u8]) -> Option<OpId> {
        if hex.len() != 40 {
            return None;
        }
        // Binary search on the first 8 bytes, then the whole string (lowercase, as Redisson
        // sends it); anything else is decoded.
        if let Some(want) = head(hex) {
            let from = self.index.partition_point(|(h, _)| *h < want);
            for &(h, i) in self.index.get(from..).unwrap_or_default() {
                if h != want {
                    break;
                }
                let i = usize::try_from(i).unwrap_or(usize::MAX);
                if self.hex.get(i).is_some_and(|x| x.as_slice() == hex) {
                    return self.entries.get(i).map(|e| e.op);
                }
            }
        }
        parse_sha(hex).and_then(|s| self.by_sha(&s))
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn by_sha(&self, sha: &[u8; 20]) -> Option<OpId> {
        self.entries.iter().find(|e| e.sha == *sha).map(|e| e.op)
    }

    /// Whether some known script body has this length (only those bodies are hashed).
    pub fn has_len(&self, len: usize) -> bool {
        self.entries.iter().any(|e| e.len == len)
    }

    /// The operation of the script whose body is `body`, hashing it only when its length is
    /// known.
    pub fn by_body(&self, body: &[u8]) -> Option<OpId> {
        if !self.has_len(body.len()) {
            return None;
        }
        let sha = sha1_smol::Sha1::from(body).digest().bytes();
        self.entries.iter().find(|e| e.sha == sha && e.len == body.len()).map(|e| e.op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logic::scripts::{Layout, Object, Op, Role};

    const L: Object = Object::Lock;
    const FIXED: Layout = Layout::fixed(&[Role::Lock, Role::Channel], &[Role::Message, Role::PublishCmd]);
    const BATCH: Layout = Layout::repeated(&[], &[Role::Lease], &[Role::Lock], &[Role::Owner]);
    const OPS: [OpDef; 2] = [
        OpDef { op: Op { object: L, code: 0 }, name: "force", layout: FIXED },
        OpDef { op: Op { object: L, code: 1 }, name: "batch", layout: BATCH },
    ];

    #[test]
    fn tables_take_rows_and_extras() {
        let row = Row { sha: "605e338249a7a1d40df83b04f7658354f883b41b", len: 107, op: OPS[0].op };
        let t = Table::new(&OPS, [&row], b"").expect("rows");
        let sha = parse_sha(row.sha.as_bytes()).expect("hex");
        assert_eq!(t.by_sha(&sha), Some(OpId(0)));
        assert_eq!(t.by_hex(row.sha.to_uppercase().as_bytes()), Some(OpId(0)), "EVALSHA takes either case");
        let body = b"return 1";
        let sha = sha1_smol::Sha1::from(&body[..]).digest().to_string();
        let t = Table::new(&OPS, [&row], format!("BATCH:{sha}:{}", body.len()).as_bytes()).expect("extra");
        assert_eq!(t.by_body(body), Some(OpId(1)));
        assert_eq!(t.by_body(b"return 2"), None, "same length, other hash");
        assert_eq!(t.entries().len(), 2);
        let err = |s: &str| Table::new(&OPS, [&row], s.as_bytes()).expect_err(s);
        assert_eq!(err("nope:00:1"), "unknown script kind `nope`");
        assert_eq!(err("force:abc:1"), "a sha1 is 40 hex digits");
        assert_eq!(err(&format!("force:{sha}:0")), "a script length is a positive integer");
        assert_eq!(err(&format!("force:{sha}")), format!("`force:{sha}` is not kind:sha1:length"));
    }
}
