//! Property tests over the public API.

use larder_resp::{
    parse_command, parse_command_into, parse_reply, reply_len, write_command, Args, Limits, Protocol, Reply, Writer,
};
use proptest::prelude::*;

fn lim() -> Limits {
    Limits::default()
}

type Parsed = Result<Option<(Vec<Vec<u8>>, usize)>, larder_resp::ProtoError>;

/// Arguments of the request at the start of `buf`, via the reusable path.
fn args_of(buf: &[u8]) -> Parsed {
    let mut args = Args::new();
    parse_command_into(buf, &lim(), &mut args).map(|o| o.map(|n| (args.iter(buf).map(<[u8]>::to_vec).collect(), n)))
}

/// Fragments that make random input look like RESP often enough to reach
/// deep parser states.
const TOKENS: &[&[u8]] = &[
    b"*", b"$", b"\r\n", b"\r", b"\n", b"1", b"2", b"-1", b"0", b"\"", b"'", b"\\", b"x", b" ", b"%", b"~", b"|", b">",
    b"=", b"!", b",", b"#t", b"_", b"(", b":", b"+", b"-", b"txt:", b"\\x4",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..256)) {
        let a = args_of(&buf);
        if let Ok(Some((ref args, n))) = a {
            prop_assert!(n > 0 && n <= buf.len());
            // A complete request stays the same whatever arrives after it.
            if !args.is_empty() {
                let mut longer = buf.clone();
                longer.extend_from_slice(b"*1\r\n$1\r\nx\r\nPING\r\n");
                prop_assert_eq!(args_of(&longer), a.clone());
            }
        }
        let b = parse_command(&buf, &lim())
            .map(|o| o.map(|(c, n)| (c.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), n)));
        prop_assert_eq!(&a, &b);
        if let Ok(Some((_, n))) = parse_reply(&buf) {
            prop_assert!(n > 0 && n <= buf.len());
            prop_assert_eq!(reply_len(&buf), Ok(Some(n)));
        }
    }

    #[test]
    fn protocol_shaped_bytes_never_panic(parts in proptest::collection::vec(
        proptest::sample::select(TOKENS),
        0..64,
    )) {
        let buf: Vec<u8> = parts.concat();
        let _ = parse_command(&buf, &lim());
        if let Ok(Some((_, n))) = args_of(&buf) {
            prop_assert!(n <= buf.len());
        }
        if let Ok(Some((_, n))) = parse_reply(&buf) {
            prop_assert!(n <= buf.len());
        }
    }

    #[test]
    fn multibulk_round_trip(
        args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..48), 1..8),
        split in any::<prop::sample::Index>(),
    ) {
        let mut buf = Vec::new();
        write_command(&mut buf, &args);
        prop_assert_eq!(args_of(&buf), Ok(Some((args.clone(), buf.len()))));
        let (cmd, n) = parse_command(&buf, &lim()).unwrap().unwrap();
        prop_assert_eq!(n, buf.len());
        prop_assert_eq!(cmd.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), args.clone());

        let cut = split.index(buf.len());
        prop_assert_eq!(args_of(&buf[..cut]), Ok(None));
        prop_assert_eq!(parse_command(&buf[..cut], &lim()), Ok(None));

        // Pipelined after itself.
        let mut two = buf.clone();
        two.extend_from_slice(&buf);
        prop_assert_eq!(args_of(&two), Ok(Some((args.clone(), buf.len()))));
        prop_assert_eq!(args_of(&two[buf.len()..]), Ok(Some((args, buf.len()))));
    }

    /// A well-formed multibulk with one byte changed, cut or doubled: the reusable path
    /// (whose fast path takes plain multibulks) and the allocating one (the general parser
    /// alone) agree on every outcome, arguments, length and error alike.
    #[test]
    fn damaged_multibulks_parse_alike_on_both_paths(
        args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..24), 0..6),
        at in any::<prop::sample::Index>(),
        byte in proptest::sample::select(&b"*$\r\n0123456789-+ x"[..]),
        how in 0..4u8,
    ) {
        let mut buf = Vec::new();
        write_command(&mut buf, &args);
        buf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        let i = at.index(buf.len());
        match how {
            0 => buf[i] = byte,
            1 => buf.insert(i, byte),
            2 => { buf.remove(i); }
            _ => buf.truncate(i),
        }
        let b = parse_command(&buf, &lim())
            .map(|o| o.map(|(c, n)| (c.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), n)));
        prop_assert_eq!(args_of(&buf), b);
    }

    #[test]
    fn inline_quoted_round_trip(
        args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..24), 1..6),
        single in any::<bool>(),
    ) {
        // Quote every argument the way redis-cli's sdscatrepr would, so any
        // bytes survive the inline path.
        let mut line = Vec::new();
        for a in &args {
            // In single quotes only `\'` is an escape, so a trailing
            // backslash would swallow the closing quote; such args (and raw
            // newlines, which end the line) go double-quoted instead.
            let use_single = single && !a.contains(&b'\n') && !a.contains(&b'\r') && a.last() != Some(&b'\\');
            if use_single {
                line.push(b'\'');
                for &b in a {
                    if b == b'\'' {
                        line.extend_from_slice(b"\\'");
                    } else {
                        line.push(b);
                    }
                }
                line.extend_from_slice(b"' ");
            } else {
                line.push(b'"');
                for &b in a {
                    match b {
                        b'"' | b'\\' => { line.push(b'\\'); line.push(b); }
                        0x20..=0x7e => line.push(b),
                        _ => line.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
                    }
                }
                line.extend_from_slice(b"\" ");
            }
        }
        line.extend_from_slice(b"\r\n");
        prop_assert_eq!(args_of(&line), Ok(Some((args.clone(), line.len()))));
        for i in 0..line.len() {
            prop_assert_eq!(args_of(&line[..i]), Ok(None));
        }
    }

    #[test]
    fn inline_plain_round_trip(words in proptest::collection::vec("[a-zA-Z0-9_:.-]{1,12}", 1..8), crlf in any::<bool>()) {
        let mut line = words.join(" ").into_bytes();
        line.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
        let expected: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        prop_assert_eq!(args_of(&line), Ok(Some((expected, line.len()))));
    }

    #[test]
    fn reply_round_trip(v in value(), resp3 in any::<bool>(), split in any::<prop::sample::Index>()) {
        let proto = if resp3 { Protocol::Resp3 } else { Protocol::Resp2 };
        let mut out = Vec::new();
        write_value(&mut Writer::new(&mut out, proto), &v);
        let (r, n) = parse_reply(&out).unwrap().unwrap();
        prop_assert_eq!(n, out.len());
        prop_assert!(matches_value(&r, &v, proto), "{:?} vs {:?}", r, v);
        prop_assert_eq!(parse_reply(&out[..split.index(out.len())]), Ok(None));
    }
}

/// A reply shape to compose with [`Writer`] and read back.
#[derive(Clone, Debug)]
enum Value {
    Simple(String),
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    Double(f64),
    Bool(bool),
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Set(Vec<Value>),
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        "[a-zA-Z0-9 ]{0,10}".prop_map(Value::Simple),
        any::<i64>().prop_map(Value::Int),
        proptest::collection::vec(any::<u8>(), 0..20).prop_map(Value::Bulk),
        Just(Value::Null),
        any::<f64>().prop_filter("nan never equals", |d| !d.is_nan()).prop_map(Value::Double),
        any::<bool>().prop_map(Value::Bool),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((inner.clone(), inner.clone()), 0..3).prop_map(Value::Map),
            proptest::collection::vec(inner, 0..4).prop_map(Value::Set),
        ]
    })
}

fn write_value(w: &mut Writer<'_>, v: &Value) {
    match v {
        Value::Simple(s) => {
            w.simple(s.as_bytes());
        }
        Value::Int(n) => {
            w.integer(*n);
        }
        Value::Bulk(b) => {
            w.bulk(b);
        }
        Value::Null => {
            w.null();
        }
        Value::Double(d) => {
            w.double(*d);
        }
        Value::Bool(b) => {
            w.boolean(*b);
        }
        Value::Array(items) => {
            w.array(items.len());
            items.iter().for_each(|i| write_value(w, i));
        }
        Value::Set(items) => {
            w.set(items.len());
            items.iter().for_each(|i| write_value(w, i));
        }
        Value::Map(pairs) => {
            w.map(pairs.len());
            for (k, v) in pairs {
                write_value(w, k);
                write_value(w, v);
            }
        }
    }
}

fn matches_value(r: &Reply<'_>, v: &Value, p: Protocol) -> bool {
    let r3 = p == Protocol::Resp3;
    let all =
        |rs: &[Reply<'_>], vs: &[Value]| rs.len() == vs.len() && rs.iter().zip(vs).all(|(r, v)| matches_value(r, v, p));
    match (r, v) {
        (Reply::Simple(s), Value::Simple(t)) => *s == t.as_bytes(),
        (Reply::Integer(n), Value::Int(m)) => n == m,
        (Reply::Bulk(b), Value::Bulk(c)) => b == c,
        (Reply::Null, Value::Null) => r3,
        (Reply::NullBulk, Value::Null) => !r3,
        (Reply::Double(d), Value::Double(e)) => r3 && d.to_bits() == e.to_bits(),
        (Reply::Bulk(b), Value::Double(e)) => {
            !r3 && std::str::from_utf8(b).ok().and_then(|s| s.parse::<f64>().ok()).map(f64::to_bits)
                == Some(e.to_bits())
        }
        (Reply::Boolean(b), Value::Bool(c)) => r3 && b == c,
        (Reply::Integer(n), Value::Bool(c)) => !r3 && *n == i64::from(*c),
        (Reply::Array(rs), Value::Array(vs)) => all(rs, vs),
        (Reply::Set(rs), Value::Set(vs)) => r3 && all(rs, vs),
        (Reply::Array(rs), Value::Set(vs)) => !r3 && all(rs, vs),
        (Reply::Map(rs), Value::Map(vs)) => {
            r3 && rs.len() == vs.len()
                && rs.iter().zip(vs).all(|((rk, rv), (vk, vv))| matches_value(rk, vk, p) && matches_value(rv, vv, p))
        }
        (Reply::Array(rs), Value::Map(vs)) => {
            !r3 && rs.len() == 2 * vs.len()
                && rs.chunks(2).zip(vs).all(|(c, (vk, vv))| matches_value(&c[0], vk, p) && matches_value(&c[1], vv, p))
        }
        _ => false,
    }
}
