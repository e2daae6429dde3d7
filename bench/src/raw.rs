//! A minimal RESP2 connection over a plain socket, for what the redis crate's sync API does not do
//! well: a pub/sub connection that waits for a message with a timeout without losing half-read
//! frames, fire-and-forget sends (Redisson's UNSUBSCRIBE), and thousands of blocked clients.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Frame>>),
}

impl Frame {
    fn bulk_eq(&self, s: &[u8]) -> bool {
        matches!(self, Frame::Bulk(Some(b)) if b.eq_ignore_ascii_case(s))
    }
}

pub struct RawConn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// commands sent so far
    pub sent: u64,
}

fn find_crlf(b: &[u8], from: usize) -> Option<usize> {
    b[from..].windows(2).position(|w| w == b"\r\n").map(|p| p + from)
}

/// Parse one frame at `pos`; `None` when the buffer does not hold a whole frame yet.
fn parse(b: &[u8], pos: usize) -> Option<(Frame, usize)> {
    if pos >= b.len() {
        return None;
    }
    let end = find_crlf(b, pos + 1)?;
    let line = std::str::from_utf8(&b[pos + 1..end]).ok()?;
    let next = end + 2;
    match b[pos] {
        b'+' => Some((Frame::Simple(line.to_string()), next)),
        b'-' => Some((Frame::Error(line.to_string()), next)),
        b':' => Some((Frame::Int(line.parse().ok()?), next)),
        b'$' => {
            let n: i64 = line.parse().ok()?;
            if n < 0 {
                return Some((Frame::Bulk(None), next));
            }
            let n = n as usize;
            if b.len() < next + n + 2 {
                return None;
            }
            Some((Frame::Bulk(Some(b[next..next + n].to_vec())), next + n + 2))
        }
        b'*' => {
            let n: i64 = line.parse().ok()?;
            if n < 0 {
                return Some((Frame::Array(None), next));
            }
            let mut items = Vec::with_capacity(n as usize);
            let mut p = next;
            for _ in 0..n {
                let (f, np) = parse(b, p)?;
                items.push(f);
                p = np;
            }
            Some((Frame::Array(Some(items)), p))
        }
        other => panic!("unexpected RESP type byte {other:#x}"),
    }
}

pub fn pack(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + args.iter().map(|a| a.len() + 16).sum::<usize>());
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

impl RawConn {
    pub fn connect(port: u16) -> RawConn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("raw connect");
        stream.set_nodelay(true).ok();
        RawConn { stream, buf: Vec::with_capacity(256), sent: 0 }
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        self.sent += 1;
        self.stream.write_all(&pack(args)).expect("raw write");
    }

    /// Next frame, or `None` if `deadline` passes first (then nothing is lost: partial data stays
    /// buffered for the next call).
    pub fn read_frame(&mut self, deadline: Option<Instant>) -> Option<Frame> {
        loop {
            if let Some((f, used)) = parse(&self.buf, 0) {
                self.buf.drain(..used);
                return Some(f);
            }
            let timeout = match deadline {
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return None;
                    }
                    Some((d - now).max(Duration::from_micros(100)))
                }
                None => Some(Duration::from_secs(60)),
            };
            self.stream.set_read_timeout(timeout).expect("set_read_timeout");
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("server closed a raw connection"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if deadline.is_none() {
                        panic!("no reply within 60 s on a raw connection");
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => panic!("raw read: {e}"),
            }
        }
    }

    /// SUBSCRIBE and wait for its confirmation. Frames still buffered from an earlier episode
    /// (messages, UNSUBSCRIBE confirmations) are dropped: Redisson drops its lock entry, and the
    /// semaphore permits in it, when the last local waiter unsubscribes.
    pub fn subscribe(&mut self, channel: &[u8]) {
        self.send(&[b"SUBSCRIBE", channel]);
        loop {
            let f = self.read_frame(None).expect("subscribe confirmation");
            if let Frame::Array(Some(items)) = &f {
                if items.len() == 3 && items[0].bulk_eq(b"subscribe") && items[1].bulk_eq(channel) {
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
        while let Some(f) = self.read_frame(Some(deadline)) {
            if let Frame::Array(Some(items)) = &f {
                if items.len() == 3 && items[0].bulk_eq(b"message") && items[1].bulk_eq(channel) {
                    return true;
                }
            }
        }
        false
    }
}
