//! A minimal raw RESP2/RESP3 client, so replies (nil vs empty, exact error text, binary bulk
//! strings, RESP3 maps, pub/sub pushes) are seen exactly as the server sends them.
#![allow(dead_code)]

use std::io::{self, BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

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
}

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
int_arg!(i32, i64, u16, u64, usize);
impl<T: Arg + ?Sized> Arg for &T {
    fn arg(&self) -> Vec<u8> {
        (**self).arg()
    }
}

pub struct Conn {
    rd: BufReader<TcpStream>,
    wr: TcpStream,
}

impl Conn {
    pub fn new(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_nodelay(true).ok();
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("read timeout");
        Conn { rd: BufReader::new(s.try_clone().expect("clone")), wr: s }
    }
    pub fn set_timeout(&self, d: Duration) {
        self.wr.set_read_timeout(Some(d)).expect("read timeout");
    }
    pub fn send(&mut self, args: &[Vec<u8>]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.wr.write_all(&out).expect("write");
    }
    pub fn read(&mut self) -> io::Result<R> {
        read_value(&mut self.rd)
    }
    pub fn call(&mut self, args: &[Vec<u8>]) -> R {
        self.send(args);
        self.read().unwrap_or_else(|e| panic!("no reply to {:?}: {e}", String::from_utf8_lossy(&args[0])))
    }
}

fn line(rd: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut l = Vec::new();
    rd.read_until(b'\n', &mut l)?;
    if l.is_empty() {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    assert!(l.ends_with(b"\r\n"), "bad RESP line {l:?}");
    l.truncate(l.len() - 2);
    Ok(l)
}

fn num(b: &[u8]) -> i64 {
    std::str::from_utf8(b).unwrap().parse().unwrap()
}

pub fn read_value(rd: &mut impl BufRead) -> io::Result<R> {
    let l = line(rd)?;
    let (t, rest) = (l[0], &l[1..]);
    let text = || String::from_utf8_lossy(rest).into_owned();
    Ok(match t {
        b'+' => R::Simple(text()),
        b'-' => R::Err(text()),
        b':' => R::Int(num(rest)),
        b'_' => R::Nil,
        b'$' | b'=' => {
            let n = num(rest);
            if n < 0 {
                return Ok(R::Nil);
            }
            let mut b = vec![0; n as usize + 2];
            rd.read_exact(&mut b)?;
            b.truncate(n as usize);
            if t == b'=' {
                b.drain(..4);
            }
            R::Bulk(b)
        }
        b'*' | b'~' | b'>' => {
            let n = num(rest);
            if n < 0 {
                return Ok(R::Nil);
            }
            let mut v = Vec::new();
            for _ in 0..n {
                v.push(read_value(rd)?);
            }
            if t == b'>' {
                R::Push(v)
            } else {
                R::Arr(v)
            }
        }
        b'%' | b'|' => {
            let n = num(rest);
            let mut v = Vec::new();
            for _ in 0..n {
                let k = read_value(rd)?;
                v.push((k, read_value(rd)?));
            }
            if t == b'|' {
                return read_value(rd); // attributes precede the real reply
            }
            R::Map(v)
        }
        _ => R::Other(String::from_utf8_lossy(&l).into_owned()),
    })
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
        let marker = format!("marker-{}", uuid::Uuid::new_v4());
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
    pub fn try_next(&mut self, d: std::time::Duration) -> Option<Msg> {
        self.c.set_timeout(d);
        let m = self.next().ok();
        self.c.set_timeout(std::time::Duration::from_secs(30));
        m
    }
}
