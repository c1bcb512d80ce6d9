//! Property tests: the parser never panics, never claims more bytes than it
//! was given, and treats every prefix of valid input as incomplete.

use larder_memcache::{advance_window, item_size, parse, parse_window, Error, Limits, Request};
use proptest::prelude::*;

/// Runs the parser over `buf` as a connection would, checking invariants.
/// Returns the number of requests parsed.
fn drive(buf: &[u8], limits: &Limits) -> usize {
    let mut off = 0;
    let mut n = 0;
    loop {
        let rest = &buf[off..];
        match parse(rest, limits) {
            Ok(None) => return n,
            Ok(Some((req, used))) => {
                assert!(used > 0 && used <= rest.len(), "used {used} of {}", rest.len());
                touch(&req);
                off += used;
                n += 1;
            }
            Err(Error::Close) => return n,
            Err(e) => {
                let used = e.consumed();
                assert!(used > 0 && used <= rest.len(), "{e:?} of {}", rest.len());
                off += (used + e.skip()).min(rest.len());
            }
        }
    }
}

/// As [`drive`], through memcached's read buffer ([`parse_window`]): the same invariants,
/// and the window never makes the parser claim bytes past `buf`. Returns the requests
/// parsed.
fn drive_windowed(buf: &[u8], limits: &Limits) -> usize {
    let mut off = 0;
    let mut n = 0;
    let mut window = limits.read_buffer_size;
    loop {
        let rest = &buf[off..];
        match parse_window(rest, &mut window, limits) {
            Ok(None) | Err(Error::Close) => return n,
            Ok(Some((req, used))) => {
                assert!(used > 0 && used <= rest.len(), "used {used} of {}", rest.len());
                touch(&req);
                off += used;
                n += 1;
                window = advance_window(window, used, limits);
            }
            Err(e) => {
                let used = e.consumed();
                assert!(used > 0 && used <= rest.len(), "{e:?} of {}", rest.len());
                off += (used + e.skip()).min(rest.len());
                window = advance_window(window, used + e.skip(), limits);
            }
        }
    }
}

/// Walks every borrowed piece so slicing bugs would show.
fn touch(req: &Request<'_>) {
    match req {
        Request::Get { keys, .. } => {
            let n = keys.len();
            assert_eq!(keys.count(), n);
        }
        Request::Stats { args } => {
            let _ = args.count();
        }
        Request::MetaGet { key, flags }
        | Request::MetaDelete { key, flags }
        | Request::MetaArithmetic { key, flags, .. }
        | Request::MetaSet { key, flags, .. } => {
            let _ = key.bytes().len() + flags.tokens().count();
        }
        _ => {}
    }
}

const VOCAB: &[&str] = &[
    "get",
    "gets",
    "gat",
    "gats",
    "bget",
    "set",
    "add",
    "replace",
    "append",
    "prepend",
    "cas",
    "incr",
    "decr",
    "touch",
    "delete",
    "flush_all",
    "version",
    "verbosity",
    "quit",
    "stats",
    "mn",
    "me",
    "mg",
    "ms",
    "md",
    "ma",
    "noreply",
    "0",
    "1",
    "2",
    "5",
    "-1",
    "10",
    "4294967296",
    "18446744073709551615",
    "k",
    "key",
    "Zm9v",
    "b",
    "v",
    "c",
    "f",
    "k",
    "q",
    "s",
    "t",
    "T10",
    "N5",
    "R3",
    "Oabc",
    "MS",
    "ME",
    "MA",
    "MP",
    "MR",
    "MD",
    "M-",
    "MX",
    "D2",
    "J7",
    "C1",
    "E9",
    "F3",
    "I",
    "x",
    "u",
    "h",
    "l",
    "P",
    "L",
    "z",
    "Tx",
    "\t",
    "\0",
    "",
];

fn token_line() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(prop::sample::select(VOCAB), 0..12),
        prop::sample::select(&["\r\n", "\n", "\r\r\n", " \r\n"][..]),
        prop::collection::vec(any::<u8>(), 0..12),
    )
        .prop_map(|(toks, eol, tail)| {
            let mut v = toks.join(" ").into_bytes();
            v.extend_from_slice(eol.as_bytes());
            v.extend_from_slice(&tail);
            v
        })
}

fn key() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9:_.-]{1,40}"
}

/// Generates one valid request (as bytes).
fn valid_request() -> impl Strategy<Value = Vec<u8>> {
    let data = prop::collection::vec(any::<u8>(), 0..64);
    prop_oneof![
        (
            prop::sample::select(&["set", "add", "replace", "append", "prepend"][..]),
            key(),
            any::<u32>(),
            -5i32..3_000_000,
            data.clone(),
            any::<bool>()
        )
            .prop_map(|(c, k, f, e, d, nr)| {
                let mut v = format!("{c} {k} {f} {e} {}{}\r\n", d.len(), if nr { " noreply" } else { "" }).into_bytes();
                v.extend_from_slice(&d);
                v.extend_from_slice(b"\r\n");
                v
            }),
        (key(), any::<u64>(), data.clone()).prop_map(|(k, cas, d)| {
            let mut v = format!("cas {k} 0 0 {} {cas}\r\n", d.len()).into_bytes();
            v.extend_from_slice(&d);
            v.extend_from_slice(b"\r\n");
            v
        }),
        (prop::sample::select(&["get", "gets"][..]), prop::collection::vec(key(), 1..30)).prop_map(|(c, ks)| format!(
            "{c} {}\r\n",
            ks.join(" ")
        )
        .into_bytes()),
        (prop::sample::select(&["gat", "gats"][..]), any::<i32>(), prop::collection::vec(key(), 0..5))
            .prop_map(|(c, e, ks)| format!("{c} {e} {}\r\n", ks.join(" ")).into_bytes()),
        (prop::sample::select(&["incr", "decr"][..]), key(), any::<u64>())
            .prop_map(|(c, k, d)| format!("{c} {k} {d}\r\n").into_bytes()),
        (key(), any::<i32>()).prop_map(|(k, e)| format!("touch {k} {e} noreply\r\n").into_bytes()),
        key().prop_map(|k| format!("delete {k}\r\n").into_bytes()),
        Just(b"flush_all 10\r\n".to_vec()),
        Just(b"version\r\n".to_vec()),
        Just(b"stats items\r\n".to_vec()),
        Just(b"mn\r\n".to_vec()),
        (key(), prop::sample::subsequence(vec!["v", "f", "t", "c", "k", "s", "q", "Oxy", "T30", "h", "l"], 0..8))
            .prop_map(|(k, fl)| format!("mg {k} {}\r\n", fl.join(" ")).into_bytes()),
        (key(), data.clone(), prop::sample::subsequence(vec!["T0", "F5", "c", "k", "q", "MS", "I", "C9"], 0..6))
            .prop_map(|(k, d, fl)| {
                let mut v = format!("ms {k} {} {}\r\n", d.len(), fl.join(" ")).into_bytes();
                v.extend_from_slice(&d);
                v.extend_from_slice(b"\r\n");
                v
            }),
        (key(), prop::sample::subsequence(vec!["q", "I", "T5", "C3", "k", "Oz"], 0..4)).prop_map(|(k, fl)| format!(
            "md {k} {}\r\n",
            fl.join(" ")
        )
        .into_bytes()),
        (key(), prop::sample::subsequence(vec!["MD", "D5", "J1", "N0", "v", "t", "c"], 0..5))
            .prop_map(|(k, fl)| format!("ma {k} {}\r\n", fl.join(" ")).into_bytes()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..3000)) {
        drive(&buf, &Limits::default());
        drive_windowed(&buf, &Limits { read_buffer_size: 2100, ..Limits::default() });
    }

    #[test]
    fn token_soup_never_panics(lines in prop::collection::vec(token_line(), 1..6)) {
        let buf: Vec<u8> = lines.concat();
        drive(&buf, &Limits::default());
        // Room for 4 bytes of value under the longest key (the limit counts the whole item).
        let small = Limits { item_size_max: item_size(2, 0, 4), max_key_len: 2, max_unterminated_line: 8, read_buffer_size: 32 };
        drive(&buf, &small);
        drive_windowed(&buf, &Limits::default());
        drive_windowed(&buf, &small);
    }

    #[test]
    fn valid_request_split_anywhere(req in valid_request(), cut in any::<prop::sample::Index>()) {
        let l = Limits::default();
        let at = cut.index(req.len());
        prop_assert_eq!(parse(&req[..at], &l), Ok(None));
        let (_, used) = parse(&req, &l).unwrap().unwrap();
        prop_assert_eq!(used, req.len());
    }

    #[test]
    fn pipelined_valid_requests(reqs in prop::collection::vec(valid_request(), 1..10), cut in any::<prop::sample::Index>()) {
        let l = Limits::default();
        let stream = reqs.concat();
        prop_assert_eq!(drive(&stream, &l), reqs.len());
        // A cut stream parses to exactly the requests wholly before the cut.
        let at = cut.index(stream.len() + 1);
        let mut whole = 0;
        let mut total = 0;
        for r in &reqs {
            total += r.len();
            if total <= at {
                whole += 1;
            }
        }
        prop_assert_eq!(drive(&stream[..at], &l), whole);
    }
}
