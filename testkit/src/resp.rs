//! A raw RESP2/RESP3 client on one socket, so replies (nil vs empty, exact error text, binary
//! bulk strings, RESP3 maps, pub/sub pushes) are seen exactly as the server sends them.
//!
//! Reads are buffered by the client itself: a read that times out (the socket's timeout, or a
//! deadline given to [`Conn::read_until`]) leaves any half-received frame in the buffer for the
//! next read, so a caller can check for a reply with a bound without disturbing the stream.

use std::cell::Cell;
use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq)]
pub enum R {
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
    Simple(String),
    Err(String),
    Arr(Vec<R>),
    Map(Vec<(R, R)>),
    Push(Vec<R>),
    /// Any other RESP3 type (double, boolean, big number), as its whole line.
    Other(String),
}

impl R {
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            R::Bulk(b) => b.clone(),
            R::Simple(s) => s.as_bytes().to_vec(),
            other => panic!("not a string reply: {other:?}"),
        }
    }
    pub fn str(&self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }
    pub fn int(&self) -> i64 {
        match self {
            R::Int(i) => *i,
            other => panic!("not an integer reply: {other:?}"),
        }
    }
    pub fn arr(&self) -> &[R] {
        match self {
            R::Arr(a) | R::Push(a) => a,
            other => panic!("not an array reply: {other:?}"),
        }
    }
    pub fn err(&self) -> &str {
        match self {
            R::Err(e) => e,
            other => panic!("expected an error reply, got {other:?}"),
        }
    }
    pub fn is_err(&self) -> bool {
        matches!(self, R::Err(_))
    }
    /// A bulk or simple string equal to `s`, ignoring ASCII case.
    pub fn eq_ignore_case(&self, s: &[u8]) -> bool {
        match self {
            R::Bulk(b) => b.eq_ignore_ascii_case(s),
            R::Simple(t) => t.as_bytes().eq_ignore_ascii_case(s),
            _ => false,
        }
    }
}

/// A command argument: strings, byte strings and integers (as their decimal text).
pub trait Arg {
    fn arg(&self) -> Vec<u8>;
}
impl Arg for str {
    fn arg(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl Arg for String {
    fn arg(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl Arg for [u8] {
    fn arg(&self) -> Vec<u8> {
        self.to_vec()
    }
}
impl Arg for Vec<u8> {
    fn arg(&self) -> Vec<u8> {
        self.clone()
    }
}
impl<const N: usize> Arg for [u8; N] {
    fn arg(&self) -> Vec<u8> {
        self.to_vec()
    }
}
macro_rules! int_arg {
    ($($t:ty),*) => { $(impl Arg for $t { fn arg(&self) -> Vec<u8> { self.to_string().into_bytes() } })* };
}
int_arg!(i32, i64, u16, u32, u64, usize);
impl<T: Arg + ?Sized> Arg for &T {
    fn arg(&self) -> Vec<u8> {
        (**self).arg()
    }
}

/// One command in RESP (an array of bulk strings).
pub fn pack<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + args.iter().map(|a| a.as_ref().len() + 16).sum::<usize>());
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn find_crlf(b: &[u8], from: usize) -> Option<usize> {
    b.get(from..)?.windows(2).position(|w| w == b"\r\n").map(|p| p + from)
}

fn num(b: &[u8]) -> i64 {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad RESP length or integer {:?}", String::from_utf8_lossy(b)))
}

/// Parse one value at `pos`: the value and the position after it, or `None` when the buffer
/// does not hold a whole value yet.
pub fn parse(b: &[u8], pos: usize) -> Option<(R, usize)> {
    let t = *b.get(pos)?;
    let end = find_crlf(b, pos + 1)?;
    let rest = &b[pos + 1..end];
    let next = end + 2;
    let text = || String::from_utf8_lossy(rest).into_owned();
    let items = |n: i64, mut p: usize| -> Option<(Vec<R>, usize)> {
        let mut v = Vec::with_capacity(n.clamp(0, 1024) as usize);
        for _ in 0..n {
            let (x, np) = parse(b, p)?;
            v.push(x);
            p = np;
        }
        Some((v, p))
    };
    Some(match t {
        b'+' => (R::Simple(text()), next),
        b'-' => (R::Err(text()), next),
        b':' => (R::Int(num(rest)), next),
        b'_' => (R::Nil, next),
        b'$' | b'=' | b'!' => {
            let n = num(rest);
            if n < 0 {
                return Some((R::Nil, next));
            }
            let n = n as usize;
            if b.len() < next + n + 2 {
                return None;
            }
            let mut s = b[next..next + n].to_vec();
            if t == b'=' {
                s.drain(..4.min(s.len())); // "txt:"
            }
            let v = if t == b'!' { R::Err(String::from_utf8_lossy(&s).into_owned()) } else { R::Bulk(s) };
            (v, next + n + 2)
        }
        b'*' | b'~' | b'>' => {
            let n = num(rest);
            if n < 0 {
                return Some((R::Nil, next));
            }
            let (v, p) = items(n, next)?;
            (if t == b'>' { R::Push(v) } else { R::Arr(v) }, p)
        }
        b'%' | b'|' => {
            let (v, p) = items(2 * num(rest), next)?;
            if t == b'|' {
                return parse(b, p); // attributes precede the real reply
            }
            let mut it = v.into_iter();
            let mut m = Vec::new();
            while let (Some(k), Some(x)) = (it.next(), it.next()) {
                m.push((k, x));
            }
            (R::Map(m), p)
        }
        _ => (R::Other(String::from_utf8_lossy(&b[pos..end]).into_owned()), next),
    })
}

/// A connection to `127.0.0.1:port`.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// The read timeout of [`Conn::read`] (30 s unless set).
    timeout: Cell<Duration>,
    /// Commands sent so far.
    pub sent: u64,
}

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

impl Conn {
    pub fn new(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_nodelay(true).ok();
        s.set_read_timeout(Some(DEFAULT_TIMEOUT)).expect("read timeout");
        Conn { stream: s, buf: Vec::with_capacity(256), timeout: Cell::new(DEFAULT_TIMEOUT), sent: 0 }
    }

    /// The read timeout of [`Conn::read`] and [`Conn::call`].
    pub fn set_timeout(&self, d: Duration) {
        self.timeout.set(d);
        self.stream.set_read_timeout(Some(d)).expect("read timeout");
    }

    /// Send one command without reading its reply.
    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        self.sent += 1;
        self.stream.write_all(&pack(args)).expect("write");
    }

    /// Send bytes as they are (several packed commands, or deliberately broken input).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    fn take(&mut self) -> Option<R> {
        let (v, used) = parse(&self.buf, 0)?;
        self.buf.drain(..used);
        Some(v)
    }

    /// Read more bytes into the buffer; `Ok(false)` when the socket timed out.
    fn fill(&mut self) -> io::Result<bool> {
        let mut chunk = [0u8; 4096];
        match self.stream.read(&mut chunk) {
            Ok(0) => Err(io::Error::new(ErrorKind::UnexpectedEof, "connection closed")),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(true)
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// The next reply; an error when the connection closes or nothing complete arrives within
    /// the read timeout (whatever arrived stays buffered).
    pub fn read(&mut self) -> io::Result<R> {
        let end = Instant::now() + self.timeout.get();
        loop {
            if let Some(v) = self.take() {
                return Ok(v);
            }
            if !self.fill()? && Instant::now() >= end {
                return Err(io::Error::new(ErrorKind::TimedOut, "no reply within the read timeout"));
            }
        }
    }

    /// The next reply, or `None` when `deadline` passes first (nothing is lost: a partial reply
    /// stays buffered for the next read). Panics when the connection closes.
    pub fn read_until(&mut self, deadline: Instant) -> Option<R> {
        let out = loop {
            if let Some(v) = self.take() {
                break Some(v);
            }
            let now = Instant::now();
            if now >= deadline {
                break None;
            }
            let wait = (deadline - now).max(Duration::from_micros(100));
            self.stream.set_read_timeout(Some(wait)).expect("read timeout");
            if let Err(e) = self.fill() {
                panic!("read: {e}");
            }
        };
        self.stream.set_read_timeout(Some(self.timeout.get())).expect("read timeout");
        out
    }

    /// Send one command and read its reply; panics when none comes.
    pub fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> R {
        self.send(args);
        self.read().unwrap_or_else(|e| {
            let name = args.first().map(|a| String::from_utf8_lossy(a.as_ref()).into_owned());
            panic!("no reply to {name:?}: {e}")
        })
    }

    /// SUBSCRIBE to one channel and wait for its confirmation. Replies still buffered from an
    /// earlier subscription (messages, UNSUBSCRIBE confirmations) are dropped, as Redisson drops
    /// its lock entry when the last local waiter unsubscribes.
    pub fn subscribe(&mut self, channel: &[u8]) {
        self.send(&[b"SUBSCRIBE", channel]);
        loop {
            let r = self.read().expect("subscribe confirmation");
            if let R::Arr(a) | R::Push(a) = &r {
                if a.len() == 3 && a[0].eq_ignore_case(b"subscribe") && a[1].eq_ignore_case(channel) {
                    return;
                }
            }
        }
    }

    /// UNSUBSCRIBE without waiting for the confirmation (Redisson does not wait either).
    pub fn unsubscribe_async(&mut self, channel: &[u8]) {
        self.send(&[b"UNSUBSCRIBE", channel]);
    }

    /// Wait for one message on `channel` until `deadline`; true if one came.
    pub fn wait_message(&mut self, channel: &[u8], deadline: Instant) -> bool {
        while let Some(r) = self.read_until(deadline) {
            if let R::Arr(a) | R::Push(a) = &r {
                if a.len() == 3 && a[0].eq_ignore_case(b"message") && a[1].eq_ignore_case(channel) {
                    return true;
                }
            }
        }
        false
    }
}

/// A pub/sub client. `kind` is SUBSCRIBE, SSUBSCRIBE or PSUBSCRIBE.
pub struct Sub {
    pub c: Conn,
}

/// A received message: (channel, payload).
pub type Msg = (Vec<u8>, Vec<u8>);

impl Sub {
    pub fn new(port: u16, kind: &str, channels: &[Vec<u8>]) -> Sub {
        let mut c = Conn::new(port);
        let mut args = vec![kind.as_bytes().to_vec()];
        args.extend(channels.iter().cloned());
        c.send(&args);
        for _ in channels {
            let r = c.read().expect("subscribe confirmation");
            let a = r.arr();
            assert!(
                a[0].str().to_lowercase().ends_with("subscribe"),
                "{kind} confirmation expected, got {r:?}"
            );
        }
        Sub { c }
    }

    fn next(&mut self) -> io::Result<Msg> {
        loop {
            let r = self.c.read()?;
            let a = r.arr();
            match a[0].str().as_str() {
                "message" | "smessage" => return Ok((a[1].bytes(), a[2].bytes())),
                "pmessage" => return Ok((a[2].bytes(), a[3].bytes())),
                _ => continue,
            }
        }
    }

    /// Publish a unique marker on `chan` with `pubcmd` (PUBLISH or SPUBLISH) through
    /// `publisher`, and return every message received before the marker. Messages are
    /// delivered in order, so this sees everything published before the marker.
    pub fn until_marker(&mut self, publisher: &mut Conn, pubcmd: &str, chan: &[u8]) -> Vec<Msg> {
        let marker = unique_marker();
        let r = publisher.call(&[pubcmd.arg(), chan.to_vec(), marker.arg()]);
        assert!(!r.is_err(), "{pubcmd} marker: {r:?}");
        let mut got = Vec::new();
        loop {
            let m = self.next().unwrap_or_else(|e| panic!("marker not received ({e}); got {got:?}"));
            if m.0 == chan && m.1 == marker.as_bytes() {
                return got;
            }
            if !m.1.starts_with(b"marker-") {
                got.push(m); // markers of other subscribers are not messages under test
            }
        }
    }

    /// Read with a short timeout: `None` when nothing arrives in `d`.
    pub fn try_next(&mut self, d: Duration) -> Option<Msg> {
        let old = self.c.timeout.get();
        self.c.set_timeout(d);
        let m = self.next().ok();
        self.c.set_timeout(old);
        m
    }
}

/// `marker-<pid>-<time>-<counter>`: unique across the processes and threads of a test run.
fn unique_marker() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    format!("marker-{}-{}-{}", std::process::id(), t.as_nanos(), N.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_type_and_waits_for_whole_values() {
        let b = b"*3\r\n$3\r\nfoo\r\n:-7\r\n$-1\r\n";
        assert_eq!(parse(b, 0), Some((R::Arr(vec![R::Bulk(b"foo".to_vec()), R::Int(-7), R::Nil]), b.len())));
        for cut in 0..b.len() {
            assert_eq!(parse(&b[..cut], 0), None, "cut at {cut}");
        }
        let m = b"%1\r\n+a\r\n_\r\n";
        assert_eq!(parse(m, 0), Some((R::Map(vec![(R::Simple("a".into()), R::Nil)]), m.len())));
        let p = b">2\r\n$7\r\nmessage\r\n=8\r\ntxt:abcd\r\n";
        assert_eq!(
            parse(p, 0),
            Some((R::Push(vec![R::Bulk(b"message".to_vec()), R::Bulk(b"abcd".to_vec())]), p.len()))
        );
        assert_eq!(parse(b"-ERR x\r\n", 0), Some((R::Err("ERR x".into()), 8)));
        assert_eq!(parse(b",1.5\r\n", 0), Some((R::Other(",1.5".into()), 6)));
        assert_eq!(pack(&[b"GET" as &[u8], b"k"]), b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    }
}
