use proptest::prelude::*;

use super::*;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// Payloads DUMPed by redis-server 7.0.15 (tests/python/test_dump.py makes them again and
/// checks them against a live server), and what they hold.
#[test]
fn reads_redis_7_payloads() {
    let cases: Vec<(&str, Value)> = vec![
        ("000568656c6c6f0a006372df766534200a", Value::String(b("hello"))),
        ("00c139300a009d94ea2793fc08b9", Value::String(b("12345"))),
        ("000d313039393531313632373737360a00dcd5c1feb95f4c57", Value::String(b("1099511627776"))),
        // LZF-compressed.
        ("00c31240c80a6162636465666768696a61e0b20901696a0a007a9b7c8ecbd1e20e", Value::String(b(&"abcdefghij".repeat(20)))),
        // A quicklist of one listpack, itself LZF-compressed.
        (
            "120102c3184058105800000004008161020101ded402e04678e03c000148ff0a0044cc546ab27d5d40",
            Value::List(vec![b("a"), b("1"), b("-300"), b(&"x".repeat(70))]),
        ),
        ("0b140400000003000000fbffffff01000000701101000a0086a0bbcf3a22ed25", Value::Set(vec![b("-5"), b("1"), b("70000")])),
        ("0202016101620a00fe642125eb033d0d", Value::Set(vec![b("a"), b("b")])),
        ("1012120000000400816602817602816e020701ff0a00b82adea8407ffaa8", Value::Hash(vec![(b("f"), b("v")), (b("n"), b("7"))])),
        ("0402c3094046016666e039000166660176016ec0070a00804be7542a2f2a8d", Value::Hash(vec![(b(&"f".repeat(70)), b("v")), (b("n"), b("7"))])),
        (
            "11c327311a310000000600816202dffe0281610283312e350481630297322e39e0060006652b31303018ff0a00404252d9608c3607",
            Value::ZSet(vec![(b("b"), -2.0), (b("a"), 1.5), (b("c"), 3e100)]),
        ),
        ("0502c3094046016d6de03900016d6d000000000000f83f016200000000000000c00a0025f99249b21344ee", Value::ZSet(vec![(b(&"m".repeat(70)), 1.5), (b("b"), -2.0)])),
    ];
    for (hex, want) in cases {
        assert_eq!(decode(&unhex(hex)), Ok(want), "{hex}");
    }
}

#[test]
fn crc_is_redis_crc64() {
    // crc64.c's test vector.
    assert_eq!(crc64(b"123456789"), 0xe9c6d914c4b8d9ca);
}

#[test]
fn writes_what_redis_writes_for_strings() {
    // Same bytes as redis-server 7.0.15's DUMP for these (no compression involved).
    assert_eq!(encode(&Value::String(b("hello"))), unhex("000568656c6c6f0a006372df766534200a"));
    assert_eq!(encode(&Value::String(b("12345"))), unhex("00c139300a009d94ea2793fc08b9"));
    assert_eq!(encode(&Value::String(b("1099511627776"))), unhex("000d313039393531313632373737360a00dcd5c1feb95f4c57"));
    // Compressed, to the same bytes as Redis's lzf_compress.
    assert_eq!(
        encode(&Value::String(b(&"abcdefghij".repeat(20)))),
        unhex("00c31240c80a6162636465666768696a61e0b20901696a0a007a9b7c8ecbd1e20e")
    );
}

#[test]
fn footer_is_checked() {
    let good = encode(&Value::String(b("hello")));
    assert_eq!(verify(&good), Ok(()));
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x20;
        assert_eq!(decode(&bad), Err(Error::VersionOrChecksum), "byte {i}");
    }
    assert_eq!(decode(&good[..9]), Err(Error::VersionOrChecksum));
    // A newer RDB version is refused even with a good checksum; an older one is read.
    for (v, ok) in [(11u16, false), (9, true), (1, true)] {
        let mut p = good[..good.len() - 10].to_vec();
        p.extend_from_slice(&v.to_le_bytes());
        let c = crc64(&p);
        p.extend_from_slice(&c.to_le_bytes());
        assert_eq!(decode(&p).is_ok(), ok, "version {v}");
    }
}

/// A body with a good footer.
fn sealed(body: &[u8]) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let c = crc64(&p);
    p.extend_from_slice(&c.to_le_bytes());
    p
}

#[test]
fn bad_bodies_are_bad_format() {
    let bad: &[&[u8]] = &[
        &[],
        &[8],                                                       // no such type
        &[6, 0],                                                    // a module value
        &[15, 0],                                                   // a stream
        &[0, 5, b'a'],                                              // string cut short
        &[1, 0],                                                    // empty list
        &[2, 2, 1, b'a', 1, b'a'],                                  // duplicate set member
        &[4, 2, 1, b'a', 0, 1, b'a', 0],                            // duplicate hash field
        &[5, 1, 1, b'a', 0, 0, 0, 0, 0, 0, 0xf8, 0x7f],             // NaN score
        &[3, 1, 1, b'a', 253],                                      // NaN score, text form
        &[1, 0x80, 0xff, 0xff, 0xff, 0xff, 0],                      // a count far beyond the bytes left
        &[0, 0xc3, 2, 0x80, 0x10, 0, 0, 0, 0, 0],                   // LZF claiming 1 GiB from 2 bytes
        &[0, 0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], // 64-bit length
        &[18, 1, 3, 1, b'x'],                                       // bad quicklist container
        &[18, 1, 2, 0],                                             // empty quicklist node
    ];
    for body in bad {
        assert_eq!(decode(&sealed(body)), Err(Error::BadFormat), "{body:?}");
    }
}

#[test]
fn old_encodings() {
    // RDB_TYPE_ZSET: scores as text, with the special lengths for infinities.
    let z = sealed(&[3, 3, 1, b'a', 3, b'1', b'.', b'5', 1, b'b', 254, 1, b'c', 255]);
    assert_eq!(decode(&z), Ok(Value::ZSet(vec![(b("a"), 1.5), (b("b"), f64::INFINITY), (b("c"), f64::NEG_INFINITY)])));
    // RDB_TYPE_HASH_ZIPMAP.
    let zm = [1, 1, b'a', 1, 0, b'1', 0xff];
    let mut body = vec![9, zm.len() as u8];
    body.extend_from_slice(&zm);
    assert_eq!(decode(&sealed(&body)), Ok(Value::Hash(vec![(b("a"), b("1"))])));
    // RDB_TYPE_LIST_QUICKLIST of one ziplist ["ab", 7].
    let zl = [17, 0, 0, 0, 14, 0, 0, 0, 2, 0, 0, 2, b'a', b'b', 4, 0xf8, 0xff];
    let mut body = vec![14, 1, zl.len() as u8];
    body.extend_from_slice(&zl);
    assert_eq!(decode(&sealed(&body)), Ok(Value::List(vec![b("ab"), b("7")])));
}

fn value() -> impl Strategy<Value = Value> {
    let bytes = prop::collection::vec(any::<u8>(), 0..80);
    // Integers in every range the encodings have, as strings.
    let ints = prop_oneof![any::<i8>().prop_map(|v| v as i64), any::<i16>().prop_map(|v| v as i64), any::<i64>()]
        .prop_map(|v| v.to_string().into_bytes());
    let elem = prop_oneof![bytes, ints];
    let score = any::<f64>().prop_filter("no NaN", |s| !s.is_nan());
    prop_oneof![
        elem.clone().prop_map(Value::String),
        prop::collection::vec(elem.clone(), 1..70).prop_map(Value::List),
        prop::collection::btree_set(elem.clone(), 1..70).prop_map(|s| Value::Set(s.into_iter().collect())),
        prop::collection::btree_map(elem.clone(), elem.clone(), 1..70)
            .prop_map(|m| Value::Hash(m.into_iter().collect())),
        prop::collection::btree_map(elem, score, 1..70).prop_map(|m| Value::ZSet(m.into_iter().collect())),
    ]
}

proptest! {
    #[test]
    fn encode_then_decode_is_identity(v in value()) {
        prop_assert_eq!(decode(&encode(&v)), Ok(v));
    }

    /// Whatever the bytes, decoding returns an answer (never panics), with or without a
    /// good footer.
    #[test]
    fn any_body_decodes_or_fails(body in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_body(&body);
        let _ = decode(&sealed(&body));
    }

    #[test]
    fn lzf_never_panics(input in prop::collection::vec(any::<u8>(), 0..100), len in 0usize..2000) {
        let _ = lzf_decompress(&input, len);
    }
}
