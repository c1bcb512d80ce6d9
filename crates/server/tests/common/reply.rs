//! Reads whole replies off a raw connection, for tests whose replies are not one fixed byte
//! string (random picks, large collections). Include with `#[path = "common/reply.rs"] mod reply;`.
#![allow(dead_code)]

use std::io::Read;

use crate::common::{cmd, Raw};

/// An owned reply.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Val {
    Int(i64),
    Bulk(Vec<u8>),
    Simple(String),
    Err(String),
    Nil,
    /// `*`, `~` (set) and `%` (map, flattened) all read as an array here.
    Arr(Vec<Val>),
    /// Any other RESP3 scalar, as its text (`,1.5`, `#t`).
    Other(String),
}

impl Val {
    pub fn arr(self) -> Vec<Val> {
        match self {
            Val::Arr(v) => v,
            other => panic!("not an array: {other:?}"),
        }
    }
    pub fn bulk(self) -> Vec<u8> {
        match self {
            Val::Bulk(v) => v,
            other => panic!("not a bulk string: {other:?}"),
        }
    }
    pub fn int(self) -> i64 {
        match self {
            Val::Int(v) => v,
            other => panic!("not an integer: {other:?}"),
        }
    }
    /// The bulk strings of an array, as text.
    pub fn strings(self) -> Vec<String> {
        self.arr().into_iter().map(|v| String::from_utf8(v.bulk()).unwrap()).collect()
    }
}

struct Reader<'a> {
    c: &'a mut Raw,
    buf: Vec<u8>,
}

impl Reader<'_> {
    fn fill(&mut self) {
        let mut b = [0u8; 65536];
        let n = self.c.s.read(&mut b).expect("read reply");
        assert!(n > 0, "connection closed");
        self.buf.extend_from_slice(&b[..n]);
    }
    fn line(&mut self) -> String {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let l = String::from_utf8(self.buf[..i].to_vec()).unwrap();
                self.buf.drain(..i + 2);
                return l;
            }
            self.fill();
        }
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n + 2 {
            self.fill();
        }
        let v = self.buf[..n].to_vec();
        self.buf.drain(..n + 2);
        v
    }
    fn val(&mut self) -> Val {
        let l = self.line();
        let (t, rest) = l.split_at(1);
        match t {
            ":" => Val::Int(rest.parse().unwrap()),
            "+" => Val::Simple(rest.to_string()),
            "-" => Val::Err(rest.to_string()),
            "_" => Val::Nil,
            "$" if rest == "-1" => Val::Nil,
            "*" if rest == "-1" => Val::Nil,
            "$" => {
                let n = rest.parse().unwrap();
                Val::Bulk(self.bytes(n))
            }
            "*" | "~" => Val::Arr((0..rest.parse::<usize>().unwrap()).map(|_| self.val()).collect()),
            "%" => Val::Arr((0..2 * rest.parse::<usize>().unwrap()).map(|_| self.val()).collect()),
            _ => Val::Other(l),
        }
    }
}

/// Sends one command (words separated by single spaces) and reads its whole reply.
pub fn call(c: &mut Raw, req: &str) -> Val {
    let args: Vec<&[u8]> = req.split(' ').map(str::as_bytes).collect();
    call_args(c, &args)
}

pub fn call_args(c: &mut Raw, args: &[&[u8]]) -> Val {
    use std::io::Write;
    c.s.write_all(&cmd(args)).unwrap();
    let mut r = Reader { c, buf: Vec::new() };
    let v = r.val();
    assert!(r.buf.is_empty(), "bytes after the reply: {:?}", String::from_utf8_lossy(&r.buf));
    v
}
