use super::*;
use crate::ErrorReply as R;

fn lim() -> Limits {
    Limits::default()
}

/// Parses a complete request that must use all of `input`, and checks every
/// strict prefix is merely incomplete.
fn ok(input: &[u8]) -> Request<'_> {
    for i in 0..input.len() {
        assert_eq!(parse(&input[..i], &lim()), Ok(None), "prefix {i} of {:?}", String::from_utf8_lossy(input));
    }
    match parse(input, &lim()) {
        Ok(Some((req, n))) => {
            assert_eq!(n, input.len(), "consumed for {:?}", String::from_utf8_lossy(input));
            req
        }
        other => panic!("{:?} -> {other:?}", String::from_utf8_lossy(input)),
    }
}

fn err(input: &[u8]) -> Error {
    match parse(input, &lim()) {
        Err(e) => e,
        other => panic!("{:?} -> {other:?}", String::from_utf8_lossy(input)),
    }
}

/// An error that replies (not silently) and consumes exactly `input`.
fn reply_err(input: &[u8], r: ErrorReply) {
    assert_eq!(
        err(input),
        Error::Reply { reply: r, consumed: input.len(), silent: false },
        "{:?}",
        String::from_utf8_lossy(input)
    );
}

fn silent_err(input: &[u8], r: ErrorReply) {
    assert_eq!(
        err(input),
        Error::Reply { reply: r, consumed: input.len(), silent: true },
        "{:?}",
        String::from_utf8_lossy(input)
    );
}

fn store(input: &[u8]) -> Store<'_> {
    match ok(input) {
        Request::Store(s) => s,
        r => panic!("{r:?}"),
    }
}

fn keys(input: &[u8]) -> (RetrieveCommand, i32, Vec<&[u8]>) {
    match ok(input) {
        Request::Get { command, exptime, keys } => {
            assert_eq!(keys.len(), keys.count());
            (command, exptime, keys.collect())
        }
        r => panic!("{r:?}"),
    }
}

// ---------------------------------------------------------------- storage

#[test]
fn set_forms() {
    let s = store(b"set foo 5 100 3\r\nbar\r\n");
    assert_eq!(
        s,
        Store { command: StoreCommand::Set, key: b"foo", flags: 5, exptime: 100, data: b"bar", cas: 0, noreply: false }
    );
    assert!(store(b"set foo 0 0 3 noreply\r\nbar\r\n").noreply);
    // Any other token in the noreply slot is ignored.
    assert!(!store(b"set foo 0 0 3 norepl\r\nbar\r\n").noreply);
    assert_eq!(store(b"add k 0 0 1\r\nx\r\n").command, StoreCommand::Add);
    assert_eq!(store(b"replace k 0 0 1\r\nx\r\n").command, StoreCommand::Replace);
    assert_eq!(store(b"append k 0 0 1\r\nx\r\n").command, StoreCommand::Append);
    assert_eq!(store(b"prepend k 0 0 1\r\nx\r\n").command, StoreCommand::Prepend);
    let c = store(b"cas k 1 2 1 99\r\nx\r\n");
    assert_eq!((c.command, c.cas, c.noreply), (StoreCommand::Cas, 99, false));
    let c = store(b"cas k 1 2 1 18446744073709551615 noreply\r\nx\r\n");
    assert_eq!((c.cas, c.noreply), (u64::MAX, true));
    // Negative exptime is valid (immediately expired); flags up to u32::MAX.
    let s = store(b"set k 4294967295 -1 0\r\n\r\n");
    assert_eq!((s.flags, s.exptime, s.data), (u32::MAX, -1, &b""[..]));
    // Bare \n ends the line; extra spaces separate tokens.
    assert_eq!(store(b"set  k  0 0 1\nx\r\n").key, b"k");
    // Data may contain CRLF.
    assert_eq!(store(b"set k 0 0 4\r\na\r\nb\r\n").data, b"a\r\nb");
    // 250-byte key is fine.
    let line = [b"set ".as_slice(), &[b'k'; 250], b" 0 0 1\r\nx\r\n"].concat();
    assert_eq!(store(&line).key.len(), 250);
}

#[test]
fn set_token_counts() {
    reply_err(b"set k 0 0\r\n", R::Error);
    reply_err(b"set k 0 0 1 noreply extra\r\n", R::Error);
    reply_err(b"set\r\n", R::Error);
    reply_err(b"cas k 0 0 1\r\n", R::Error);
    reply_err(b"cas k 0 0 1 2 noreply x\r\n", R::Error);
    let many = b"set k 0 0 1 a b c d e f g h i j k l m n o p q r s t u v w x y z\r\n";
    reply_err(many, R::Error);
}

/// memcached 1.6.18 parses flags with `safe_strtoul` and exptime and length with
/// `safe_strtol`: a 64-bit `strtoul`/`strtol` stored into 32 bits. Out-of-range values are
/// truncated, not refused (each checked against 1.6.18's replies).
#[test]
fn numbers_truncate_to_32_bits() {
    let store = |input: &[u8]| match ok(input) {
        Request::Store(s) => (s.flags, s.exptime, s.data.len()),
        other => panic!("{other:?}"),
    };
    assert_eq!(store(b"set k 4294967296 0 1\r\na\r\n"), (0, 0, 1));
    assert_eq!(store(b"set k 4294967297 0 1\r\na\r\n"), (1, 0, 1));
    assert_eq!(store(b"set k 18446744073709551615 0 1\r\na\r\n"), (u32::MAX, 0, 1));
    assert_eq!(store(b"set k 9223372036854775808 0 1\r\na\r\n"), (0, 0, 1));
    // strtoul negates modulo 2^64; only a result that looks negative as a long is refused.
    assert_eq!(store(b"set k -18446744073709551615 0 1\r\na\r\n"), (1, 0, 1));
    assert_eq!(store(b"set k -9223372036854775809 0 1\r\na\r\n"), (u32::MAX, 0, 1));
    reply_err(b"set k -4294967295 0 1\r\n", R::BadFormat);
    assert_eq!(store(b"set k 1 4294967296 1\r\na\r\n"), (1, 0, 1));
    assert_eq!(store(b"set k 1 4294967295 1\r\na\r\n"), (1, -1, 1));
    assert_eq!(store(b"set k 1 2147483648 1\r\na\r\n"), (1, i32::MIN, 1));
    assert_eq!(store(b"set k 1 -2147483649 1\r\na\r\n"), (1, i32::MAX, 1));
    assert_eq!(store(b"set k 1 4294967396 1\r\na\r\n"), (1, 100, 1));
    assert_eq!(store(b"set k 1 9223372036854775807 1\r\na\r\n"), (1, -1, 1));
    assert_eq!(store(b"set k 1 0 4294967298\r\nab\r\n"), (1, 0, 2));
    assert_eq!(store(b"set k 1 0 -4294967294\r\nab\r\n"), (1, 0, 2));
    match ok(b"touch k 4294967396\r\n") {
        Request::Touch { exptime, .. } => assert_eq!(exptime, 100),
        other => panic!("{other:?}"),
    }
    match ok(b"gat 4294967296 k\r\n") {
        Request::Get { exptime, .. } => assert_eq!(exptime, 0),
        other => panic!("{other:?}"),
    }
    match ok(b"flush_all -4294967296\r\n") {
        Request::FlushAll { delay, .. } => assert_eq!(delay, Some(0)),
        other => panic!("{other:?}"),
    }
    match ok(b"verbosity 4294967297\r\n") {
        Request::Verbosity { level, .. } => assert_eq!(level, 1),
        other => panic!("{other:?}"),
    }
    reply_err(b"verbosity -1\r\n", R::BadFormat);
    match ok(b"ms k 4294967298 F4294967297 T4294967396 N4294967296\r\nab\r\n") {
        Request::MetaSet { flags, data, .. } => {
            assert_eq!(data, b"ab");
            assert_eq!(flags.client_flags, Some(1));
            assert_eq!(flags.ttl, Some(100));
            assert_eq!(flags.vivify_ttl, Some(0));
        }
        other => panic!("{other:?}"),
    }
    match ok(b"mg k R4294967396\r\n") {
        Request::MetaGet { flags, .. } => assert_eq!(flags.recache_ttl, Some(100)),
        other => panic!("{other:?}"),
    }
    reply_err(b"mg k T9223372036854775808\r\n", R::BadToken);
}

#[test]
fn set_bad_line() {
    reply_err(b"set k x 0 1\r\n", R::BadFormat);
    reply_err(b"set k 0 x 1\r\n", R::BadFormat);
    reply_err(b"set k 0 0 x\r\n", R::BadFormat);
    reply_err(b"set k -1 0 1\r\n", R::BadFormat);
    reply_err(b"set k 18446744073709551616 0 1\r\n", R::BadFormat);
    reply_err(b"set k 0 9223372036854775808 1\r\n", R::BadFormat);
    reply_err(b"set k 0 0 -1\r\n", R::BadFormat);
    reply_err(b"set k 0 0 2147483646\r\n", R::BadFormat);
    // A length that truncates to a negative i32 (or past i32::MAX - 2) is no length.
    reply_err(b"set k 0 0 4294967295\r\n", R::BadFormat);
    reply_err(b"set k 0 0 2147483648\r\n", R::BadFormat);
    reply_err(b"cas k 0 0 1 x\r\n", R::BadFormat);
    reply_err(b"cas k 0 0 1 -1\r\n", R::BadFormat);
    let long = [b"set ".as_slice(), &[b'k'; 251], b" 0 0 1\r\n"].concat();
    reply_err(&long, R::BadFormat);
    // With noreply memcached stays silent about these too.
    silent_err(b"set k 0 0 -1 noreply\r\n", R::BadFormat);
    let long = [b"set ".as_slice(), &[b'k'; 251], b" 0 0 1 noreply\r\n"].concat();
    silent_err(&long, R::BadFormat);
    // The data line of a rejected set is then parsed as a command.
    let buf = b"set k 0 0 -1\r\nhello\r\n";
    let e = err(buf);
    assert_eq!(e.consumed(), 14);
    assert_eq!(err(&buf[14..]), Error::Reply { reply: R::Error, consumed: 7, silent: false });
}

#[test]
fn set_too_large_swallows() {
    // memcached's -I counts the item: 48-byte header, 8-byte CAS, key + NUL, 4 bytes of
    // flags unless 0, value + \r\n. Key "k", flags 0, -I 1024: values up to 964 bytes.
    let l = Limits { item_size_max: 1024, ..lim() };
    let line = b"set k 0 0 965\r\n";
    // Reported as soon as the line is complete, data not yet buffered; set drops the
    // key's old value.
    assert_eq!(
        parse(line, &l),
        Err(Error::Swallow {
            reply: R::TooLarge,
            consumed: line.len(),
            skip: 967,
            silent: false,
            unlink: Some(KeyAt { start: 4, len: 1, base64: false }),
        })
    );
    let e = parse(line, &l).unwrap_err();
    assert_eq!(e.unlink(line).map(|k| k.bytes().to_vec()), Some(b"k".to_vec()));
    let buf = [&b"set k 0 0 965 noreply\r\n"[..], &[b'x'; 965], b"\r\n"].concat();
    let e = parse(&buf, &l).unwrap_err();
    assert_eq!(e.skip(), 967);
    assert_eq!(e.reply(), None);
    assert!(e.unlink(&buf).is_some(), "even with noreply");
    // The other storage commands refuse the same way but leave the old value.
    for line in [
        &b"add k 0 0 965\r\n"[..],
        b"replace k 0 0 965\r\n",
        b"append k 0 0 965\r\n",
        b"prepend k 0 0 965\r\n",
        b"cas k 0 0 965 1\r\n",
    ] {
        let e = parse(line, &l).unwrap_err();
        assert_eq!((e.kind(), e.unlink(line)), (Some(R::TooLarge), None));
    }
    // Exactly the limit is fine; flags take 4 bytes of it, a longer key its length.
    let at = |line: &[u8], n: usize| [line, &vec![b'x'; n], b"\r\n"].concat();
    assert!(parse(&at(b"set k 0 0 964\r\n", 964), &l).unwrap().is_some());
    assert!(parse(&at(b"set k 1 0 960\r\n", 960), &l).unwrap().is_some());
    assert_eq!(parse(b"set k 1 0 961\r\n", &l).unwrap_err().kind(), Some(R::TooLarge));
    assert!(parse(&at(b"set kkk 0 0 962\r\n", 962), &l).unwrap().is_some());
    assert_eq!(parse(b"set kkk 0 0 963\r\n", &l).unwrap_err().kind(), Some(R::TooLarge));
    // memcached 1.6.18's defaults (-I 1m): a 3-byte key takes 1,048,514 bytes.
    assert!(matches!(ok(&at(b"set kkk 0 0 1048514\r\n", 1_048_514)), Request::Store(_)));
    assert_eq!(err(b"set kkk 0 0 1048515\r\n").kind(), Some(R::TooLarge));
    assert_eq!(err(b"set k 0 0 1048577\r\n").reply(), Some(&b"SERVER_ERROR object too large for cache\r\n"[..]));
}

#[test]
fn set_bad_data_chunk() {
    let buf = b"set k 0 0 2\r\nabcd\r\n";
    assert_eq!(err(buf), Error::Reply { reply: R::BadDataChunk, consumed: 17, silent: false });
    // memcached then reads the leftover "\r\n" as an (invalid) command.
    assert_eq!(err(&buf[17..]), Error::Reply { reply: R::Error, consumed: 2, silent: false });
    // LF alone does not terminate data.
    assert_eq!(err(b"set k 0 0 1\r\nx\nz").kind(), Some(R::BadDataChunk));
    let e = err(b"set k 0 0 1 noreply\r\nxyz");
    assert_eq!((e.kind(), e.reply(), e.consumed()), (Some(R::BadDataChunk), None, 24));
}

#[test]
fn storage_incomplete_data() {
    let full = b"set k 0 0 5\r\nhello\r\n";
    for i in 0..full.len() {
        assert_eq!(parse(&full[..i], &lim()), Ok(None));
    }
    let big = [b"set k 0 0 100000\r\n".as_slice(), &vec![b'x'; 99_999]].concat();
    assert_eq!(parse(&big, &lim()), Ok(None));
}

// -------------------------------------------------------------- retrieval

#[test]
fn get_forms() {
    assert_eq!(keys(b"get a\r\n"), (RetrieveCommand::Get, 0, vec![&b"a"[..]]));
    assert_eq!(keys(b"get a  b c \r\n").2, vec![&b"a"[..], b"b", b"c"]);
    assert_eq!(keys(b"gets a b\n").0, RetrieveCommand::Gets);
    assert_eq!(keys(b"bget a\r\n").0, RetrieveCommand::Get);
    assert_eq!(keys(b"gat 10 a b\r\n"), (RetrieveCommand::Gat, 10, vec![&b"a"[..], b"b"]));
    assert_eq!(keys(b"gats -1 a\r\n"), (RetrieveCommand::Gats, -1, vec![&b"a"[..]]));
    // gat with only an exptime: memcached answers END.
    assert_eq!(keys(b"gat 10\r\n"), (RetrieveCommand::Gat, 10, vec![]));
    assert!(RetrieveCommand::Gats.returns_cas() && RetrieveCommand::Gats.touches());
    assert!(!RetrieveCommand::Get.returns_cas() && !RetrieveCommand::Gets.touches());
}

#[test]
fn get_errors() {
    reply_err(b"get\r\n", R::Error);
    reply_err(b"get   \r\n", R::Error);
    reply_err(b"gets\r\n", R::Error);
    reply_err(b"gat\r\n", R::Error);
    reply_err(b"gett a\r\n", R::Error);
    reply_err(b"g a\r\n", R::Error);
    reply_err(b"gat x a\r\n", R::InvalidExptime);
    reply_err(b"gats 1x a\r\n", R::InvalidExptime);
    let long = [b"get a ".as_slice(), &[b'k'; 251], b" b\r\n"].concat();
    reply_err(&long, R::BadFormat);
    let ok250 = [b"get a ".as_slice(), &[b'k'; 250], b" b\r\n"].concat();
    assert_eq!(keys(&ok250).2.len(), 3);
}

#[test]
fn get_many_keys() {
    let mut line = b"get".to_vec();
    for i in 0..10_000 {
        line.extend_from_slice(format!(" key:{i}").as_bytes());
    }
    line.extend_from_slice(b"\r\n");
    let (req, n) = parse(&line, &lim()).unwrap().unwrap();
    assert_eq!(n, line.len());
    let Request::Get { keys, .. } = req else { panic!() };
    assert_eq!(keys.len(), 10_000);
    assert_eq!(keys.clone().nth(9_999), Some(&b"key:9999"[..]));
    assert_eq!(keys.last(), Some(&b"key:9999"[..]));
    // A prefix longer than the unterminated-line limit is still pending.
    assert_eq!(parse(&line[..line.len() - 2], &lim()), Ok(None));
}

// ------------------------------------------------------- other classics

#[test]
fn incr_decr() {
    assert_eq!(ok(b"incr k 5\r\n"), Request::Incr { key: b"k", delta: 5, noreply: false });
    assert_eq!(ok(b"decr k 5 noreply\r\n"), Request::Decr { key: b"k", delta: 5, noreply: true });
    assert_eq!(ok(b"incr k 18446744073709551615\r\n"), Request::Incr { key: b"k", delta: u64::MAX, noreply: false });
    reply_err(b"incr k\r\n", R::Error);
    reply_err(b"incr k 1 noreply x\r\n", R::Error);
    reply_err(b"decr\r\n", R::Error);
    reply_err(b"incr k x\r\n", R::InvalidDelta);
    reply_err(b"incr k -1\r\n", R::InvalidDelta);
    reply_err(b"decr k 18446744073709551616\r\n", R::InvalidDelta);
    silent_err(b"incr k x noreply\r\n", R::InvalidDelta);
    let long = [b"incr ".as_slice(), &[b'k'; 251], b" 1\r\n"].concat();
    reply_err(&long, R::BadFormat);
}

#[test]
fn touch() {
    assert_eq!(ok(b"touch k 10\r\n"), Request::Touch { key: b"k", exptime: 10, noreply: false });
    assert_eq!(ok(b"touch k -1 noreply\r\n"), Request::Touch { key: b"k", exptime: -1, noreply: true });
    reply_err(b"touch k\r\n", R::Error);
    reply_err(b"touch k 1 2 3\r\n", R::Error);
    reply_err(b"touch k x\r\n", R::InvalidExptime);
    silent_err(b"touch k x noreply\r\n", R::InvalidExptime);
    let long = [b"touch ".as_slice(), &[b'k'; 251], b" 1\r\n"].concat();
    reply_err(&long, R::BadFormat);
}

#[test]
fn delete() {
    assert_eq!(ok(b"delete k\r\n"), Request::Delete { key: b"k", noreply: false });
    assert_eq!(ok(b"delete k noreply\r\n"), Request::Delete { key: b"k", noreply: true });
    assert_eq!(ok(b"delete k 0\r\n"), Request::Delete { key: b"k", noreply: false });
    assert_eq!(ok(b"delete k 0 noreply\r\n"), Request::Delete { key: b"k", noreply: true });
    reply_err(b"delete\r\n", R::Error);
    reply_err(b"delete k 0 noreply x\r\n", R::Error);
    reply_err(b"delete k 1\r\n", R::DeleteUsage);
    reply_err(b"delete k noreply 0\r\n", R::DeleteUsage);
    silent_err(b"delete k 1 noreply\r\n", R::DeleteUsage);
    assert_eq!(R::DeleteUsage.as_str(), "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]");
    let long = [b"delete ".as_slice(), &[b'k'; 251], b"\r\n"].concat();
    reply_err(&long, R::BadFormat);
    let long = [b"delete ".as_slice(), &[b'k'; 251], b" noreply\r\n"].concat();
    silent_err(&long, R::BadFormat);
}

#[test]
fn flush_all() {
    assert_eq!(ok(b"flush_all\r\n"), Request::FlushAll { delay: None, noreply: false });
    assert_eq!(ok(b"flush_all 10\r\n"), Request::FlushAll { delay: Some(10), noreply: false });
    assert_eq!(ok(b"flush_all noreply\r\n"), Request::FlushAll { delay: None, noreply: true });
    assert_eq!(ok(b"flush_all 0 noreply\r\n"), Request::FlushAll { delay: Some(0), noreply: true });
    // Third token not noreply: ignored, like memcached.
    assert_eq!(ok(b"flush_all 5 x\r\n"), Request::FlushAll { delay: Some(5), noreply: false });
    reply_err(b"flush_all x\r\n", R::InvalidExptime);
    reply_err(b"flush_all noreply x\r\n", R::InvalidExptime);
    silent_err(b"flush_all x noreply\r\n", R::InvalidExptime);
    reply_err(b"flush_all 1 2 3\r\n", R::Error);
}

#[test]
fn misc_commands() {
    assert_eq!(ok(b"version\r\n"), Request::Version);
    assert_eq!(ok(b"version please\r\n"), Request::Version);
    assert_eq!(ok(b"quit\r\n"), Request::Quit);
    assert_eq!(ok(b"verbosity 1\r\n"), Request::Verbosity { level: 1, noreply: false });
    assert_eq!(ok(b"verbosity 1 noreply\r\n"), Request::Verbosity { level: 1, noreply: true });
    reply_err(b"verbosity\r\n", R::Error);
    reply_err(b"verbosity 1 2 3\r\n", R::Error);
    reply_err(b"verbosity x\r\n", R::BadFormat);
    silent_err(b"verbosity noreply\r\n", R::BadFormat);
    let Request::Stats { args } = ok(b"stats\r\n") else { panic!() };
    assert_eq!(args.count(), 0);
    let Request::Stats { args } = ok(b"stats detail  dump\r\n") else { panic!() };
    assert_eq!(args.collect::<Vec<_>>(), vec![&b"detail"[..], b"dump"]);
}

#[test]
fn unknown_and_degenerate_lines() {
    for line in [
        &b"\r\n"[..],
        b"\n",
        b"\r\r\n",
        b"   \r\n",
        b"x\r\n",
        b"foo\r\n",
        b"SET k 0 0 1\r\n",
        b"shutdown\r\n",
        b"slabs reassign 1 2\r\n",
        b"gets\tk\r\n",
        b"mx k\r\n",
        b"mgg k\r\n",
        b"m\r\n",
    ] {
        reply_err(line, R::Error);
    }
}

#[test]
fn nul_ends_the_command() {
    assert_eq!(keys(b"get a\0b c\r\n").2, vec![&b"a"[..]]);
    reply_err(b"get\0 a\r\n", R::Error);
    reply_err(b"\0\r\n", R::Error);
    // The data block is binary-safe.
    assert_eq!(store(b"set k 0 0 3\r\n\0\n\0\r\n").data, b"\0\n\0");
}

#[test]
fn long_lines() {
    let junk = vec![b'a'; 2049];
    assert_eq!(parse(&junk, &lim()), Err(Error::Close));
    assert!(Error::Close.closes() && Error::Close.reply().is_none());
    assert_eq!(parse(&junk[..2048], &lim()), Ok(None));
    let mut get = b"get ".to_vec();
    get.resize(5000, b'k');
    assert_eq!(parse(&get, &lim()), Ok(None));
    let mut gets = vec![b' '; 100];
    gets.extend_from_slice(b"gets ");
    gets.resize(5000, b'k');
    assert_eq!(parse(&gets, &lim()), Ok(None));
    let mut spaced = vec![b' '; 101];
    spaced.extend_from_slice(b"get ");
    spaced.resize(5000, b'k');
    assert_eq!(parse(&spaced, &lim()), Err(Error::Close));
    let mut gat = b"gat 1 ".to_vec();
    gat.resize(5000, b'k');
    assert_eq!(parse(&gat, &lim()), Err(Error::Close));
    // With the newline buffered, a long line is just parsed.
    let mut line = b"version ".to_vec();
    line.resize(5000, b'v');
    line.extend_from_slice(b"\r\n");
    assert_eq!(parse(&line, &lim()), Ok(Some((Request::Version, 5002))));
}

/// Drives `stream` the way a connection does, through memcached's read buffer; returns
/// what happened to each request, and `"close"` if the connection closes.
fn windowed(stream: &[u8]) -> Vec<String> {
    let l = lim();
    let mut window = l.read_buffer_size;
    let mut off = 0;
    let mut seen = Vec::new();
    while off < stream.len() {
        match parse_window(&stream[off..], &mut window, &l) {
            Ok(Some((req, n))) => {
                seen.push(match req {
                    Request::Store(s) => format!("store {}", s.data.len()),
                    Request::Get { keys, .. } => format!("get {}", keys.len()),
                    Request::MetaNoop => "mn".into(),
                    r => format!("{r:?}"),
                });
                off += n;
                window = advance_window(window, n, &l);
            }
            Ok(None) => break,
            Err(Error::Close) => {
                seen.push("close".into());
                break;
            }
            Err(e) => {
                seen.push(e.kind().unwrap().as_str().to_string());
                let n = e.consumed() + e.skip();
                off += n;
                window = advance_window(window, n, &l);
            }
        }
    }
    seen
}

/// memcached 1.6.18 reads into a 16 KiB buffer and closes a connection when more than
/// 2 KiB of a line sit in it without their newline, unless the line is a get/gets. So what
/// happens to a long line depends on where the buffer ends (each case checked against
/// 1.6.18, the stream sent in one write).
#[test]
fn long_lines_through_the_read_buffer() {
    let junk = |n: usize| [vec![b'x'; n], b"\r\nmn\r\n".to_vec()].concat();
    assert_eq!(windowed(&junk(3000)), ["ERROR", "mn"]);
    // The buffer holds a line of 16382 bytes and its \r\n, not one byte more.
    assert_eq!(windowed(&junk(16382)), ["ERROR", "mn"]);
    assert_eq!(windowed(&junk(16383)), ["close"]);
    // Unwindowed, only the buffered bytes count (a prefix is incomplete, as before).
    assert_eq!(parse(&junk(16383), &lim()), Err(reply(R::Error, 16385, false)));
    // A 3000-byte line 2500 bytes before the end of the first read: 2500 bytes of it sit in
    // the buffer without a newline. 1000 bytes before: memcached moves those to the front
    // and reads on.
    let filler = |upto: usize| {
        let n = upto - b"set f 0 0 00000\r\n".len() - 2;
        [format!("set f 0 0 {n:05}\r\n").into_bytes(), vec![b'f'; n], b"\r\n".to_vec()].concat()
    };
    assert_eq!(filler(100).len(), 100);
    let straddle = |before: usize| [filler(16384 - before), junk(3000)].concat();
    assert_eq!(windowed(&straddle(2500)), ["store 13865", "close"]);
    assert_eq!(windowed(&straddle(2048)), ["store 14317", "ERROR", "mn"]);
    assert_eq!(windowed(&straddle(1000)), ["store 15365", "ERROR", "mn"]);
    // A data block that runs past the buffer is read on its own; the next read starts
    // after it.
    let past = [b"set d 0 0 20000\r\n".to_vec(), vec![b'd'; 20000], b"\r\n".to_vec(), junk(3000)].concat();
    assert_eq!(windowed(&past), ["store 20000", "ERROR", "mn"]);
    // So does a swallowed one.
    let big = [b"set d 0 0 2000000\r\n".to_vec(), vec![b'd'; 2_000_000], b"\r\n".to_vec(), junk(3000)].concat();
    assert_eq!(windowed(&big), ["SERVER_ERROR object too large for cache", "ERROR", "mn"]);
    // Lines over 16 KiB: only get and gets (after at most 100 spaces) survive, in full.
    let keys: Vec<u8> = (0..3000).flat_map(|i| format!(" k{i}").into_bytes()).collect();
    let with = |head: &[u8]| [head, &keys, b"\r\nmn\r\n"].concat();
    assert_eq!(windowed(&with(b"get")), ["get 3000", "mn"]);
    assert_eq!(windowed(&with(b"gets")), ["get 3000", "mn"]);
    assert_eq!(windowed(&[&[b' '; 100][..], &with(b"get")].concat()), ["get 3000", "mn"]);
    assert_eq!(windowed(&[&[b' '; 101][..], &with(b"get")].concat()), ["close"]);
    assert_eq!(windowed(&with(b"gat 0")), ["close"]);
    assert_eq!(windowed(&with(b"bget")), ["close"]);
    let set = [b"set ".to_vec(), vec![b'k'; 20000], b" 0 0 1\r\na\r\nmn\r\n".to_vec()].concat();
    assert_eq!(windowed(&set), ["close"]);
    let get = [b"get ".to_vec(), vec![b'k'; 20000], b"\r\nmn\r\n".to_vec()].concat();
    assert_eq!(windowed(&get), ["CLIENT_ERROR bad command line format", "mn"]);
    // A multiget leaves memcached's buffer grown: a long line after it is answered.
    assert_eq!(windowed(&[with(b"get"), junk(3000)].concat()), ["get 3000", "mn", "ERROR", "mn"]);
    // Short pipelined requests never notice the buffer.
    let many: Vec<u8> = (0..10_000).flat_map(|_| b"mn\r\n".to_vec()).collect();
    assert_eq!(windowed(&many).len(), 10_000);
}

#[test]
fn windows_advance() {
    let l = lim();
    assert_eq!(advance_window(16384, 100, &l), 16284);
    assert_eq!(advance_window(16384, 16384, &l), 0);
    // Past the buffer (a data block read straight into the item): a fresh read.
    assert_eq!(advance_window(16384, 20000, &l), 16384);
    assert_eq!(advance_window(usize::MAX, 20000, &l), usize::MAX - 20000);
    // An exhausted window is renewed at the next line.
    let mut w = 0;
    assert_eq!(parse_window(b"mn\r\n", &mut w, &l), Ok(Some((Request::MetaNoop, 4))));
    assert_eq!(w, 16384);
    // Waiting for the rest of a line inside the buffer leaves the window alone.
    let mut w = 100;
    assert_eq!(parse_window(b"set k 0", &mut w, &l), Ok(None));
    assert_eq!(w, 100);
}

#[test]
fn pipelined() {
    let stream: &[u8] =
        b"set a 1 0 1\r\nA\r\nget a b\r\nincr n 1 noreply\r\nmg a v\r\nms b 2 T0\r\nBB\r\nmn\r\ndelete a\r\nquit\r\n";
    let mut off = 0;
    let mut seen = Vec::new();
    while off < stream.len() {
        let (req, n) = parse(&stream[off..], &lim()).unwrap().unwrap();
        seen.push(std::mem::discriminant(&req));
        off += n;
    }
    assert_eq!(off, stream.len());
    assert_eq!(seen.len(), 8);
    // Every prefix of the stream parses to whole requests then None.
    for cut in 0..stream.len() {
        let buf = &stream[..cut];
        let mut off = 0;
        loop {
            match parse(&buf[off..], &lim()) {
                Ok(Some((_, n))) => off += n,
                Ok(None) => break,
                Err(e) => panic!("cut {cut}: {e:?}"),
            }
        }
        assert!(off <= cut);
    }
}

// ------------------------------------------------------------------ meta

fn mg(input: &[u8]) -> (MetaKey<'_>, MetaFlags<'_>) {
    match ok(input) {
        Request::MetaGet { key, flags } => (key, flags),
        r => panic!("{r:?}"),
    }
}

#[test]
fn meta_noop_and_debug() {
    assert_eq!(ok(b"mn\r\n"), Request::MetaNoop);
    assert_eq!(ok(b"mn extra\r\n"), Request::MetaNoop);
    let Request::MetaDebug { key } = ok(b"me foo\r\n") else { panic!() };
    assert_eq!((key.bytes(), key.is_binary()), (&b"foo"[..], false));
    let Request::MetaDebug { key } = ok(b"me Zm9v b\r\n") else { panic!() };
    assert_eq!((key.bytes(), key.raw(), key.is_binary()), (&b"foo"[..], &b"Zm9v"[..], true));
    // Only an exact "b" second argument decodes; others are ignored.
    let Request::MetaDebug { key } = ok(b"me Zm9v bx\r\n") else { panic!() };
    assert!(!key.is_binary());
    reply_err(b"me\r\n", R::BadFormat);
    reply_err(b"me Zm9 b\r\n", R::BadFormat);
    let long = [b"me ".as_slice(), &[b'k'; 251], b"\r\n"].concat();
    reply_err(&long, R::BadFormat);
}

#[test]
fn meta_get_flags() {
    let (key, f) = mg(b"mg foo\r\n");
    assert_eq!(key.bytes(), b"foo");
    assert_eq!(f, MetaFlags::default());
    assert_eq!(f.tokens().count(), 0);

    let (_, f) = mg(b"mg foo v f t c k s h l u q Oab12 T30 N-5 R10\r\n");
    assert!(f.return_value && f.return_flags && f.return_ttl && f.return_cas);
    assert!(f.return_key && f.return_size && f.return_hit && f.return_last_access);
    assert!(f.no_bump && f.quiet);
    assert_eq!((f.opaque, f.ttl, f.vivify_ttl, f.recache_ttl), (Some(&b"ab12"[..]), Some(30), Some(-5), Some(10)));
    let toks: Vec<&[u8]> = f.tokens().collect();
    assert_eq!(toks.len(), 14);
    assert_eq!(toks[0], b"v");
    assert_eq!(toks[13], b"R10");

    // Flags any meta command accepts are accepted (and ignored) by mg.
    let (_, f) = mg(b"mg k F5 C6 E7 MS D8 J9 I x P L\r\n");
    assert_eq!(f.client_flags, Some(5));
    assert_eq!((f.compare_cas, f.explicit_cas, f.mode), (Some(6), Some(7), Some(b'S')));
    assert_eq!((f.delta, f.initial, f.invalidate, f.remove_value), (Some(8), Some(9), true, true));
    // A flag's trailing junk is ignored for valueless flags.
    assert!(mg(b"mg k vvv\r\n").1.return_value);
}

#[test]
fn meta_base64_key() {
    let (key, f) = mg(b"mg Zm9vYmFy b v k\r\n");
    assert!(f.base64_key && key.is_binary());
    assert_eq!(key.bytes(), b"foobar");
    assert_eq!(key.raw(), b"Zm9vYmFy");
    let (key, _) = mg(b"mg AAEC/w== b\r\n");
    assert_eq!(key.bytes(), &[0, 1, 2, 255]);
    reply_err(b"mg Zm9 b\r\n", R::KeyDecode);
    reply_err(b"mg !!!! b\r\n", R::KeyDecode);
    // The length limit applies to the encoded form.
    let long = [b"mg ".as_slice(), &[b'A'; 252], b" b\r\n"].concat();
    reply_err(&long, R::BadFormat);
    let max = [b"mg ".as_slice(), &[b'A'; 248], b" b\r\n"].concat();
    assert_eq!(mg(&max).0.bytes().len(), 186);
}

#[test]
fn meta_get_errors() {
    reply_err(b"mg\r\n", R::Error);
    let long = [b"mg ".as_slice(), &[b'k'; 251], b" v\r\n"].concat();
    reply_err(&long, R::BadFormat);
    reply_err(b"mg k v v\r\n", R::DuplicateFlag);
    reply_err(b"mg k v vx\r\n", R::DuplicateFlag);
    reply_err(b"mg k \x7f\r\n", R::DuplicateFlag);
    reply_err(b"mg k \xff\r\n", R::DuplicateFlag);
    reply_err(b"mg k z\r\n", R::InvalidFlag);
    reply_err(b"mg k S10\r\n", R::InvalidFlag);
    reply_err(b"mg k Tx\r\n", R::BadToken);
    reply_err(b"mg k T\r\n", R::BadToken);
    reply_err(b"mg k N1x\r\n", R::BadToken);
    reply_err(b"mg k R\r\n", R::BadToken);
    reply_err(b"mg k C-1\r\n", R::BadToken);
    reply_err(b"mg k Ex\r\n", R::BadToken);
    reply_err(b"mg k Fx\r\n", R::BadFormat);
    reply_err(b"mg k MXY\r\n", R::ModeTokenLength);
    reply_err(b"mg k M\r\n", R::ModeTokenLength);
    reply_err(b"mg k Jx\r\n", R::InvalidInitial);
    reply_err(b"mg k Dx\r\n", R::InvalidDeltaValue);
    // Value errors keep scanning: the last message wins, but an unknown or
    // duplicate flag aborts at once with its own message.
    reply_err(b"mg k Tx Fx\r\n", R::BadToken);
    reply_err(b"mg k Fx Dx\r\n", R::InvalidDeltaValue);
    reply_err(b"mg k Tx zz\r\n", R::InvalidFlag);
    reply_err(b"mg k Tx Tx\r\n", R::DuplicateFlag);
    // Opaque: 32 bytes including the O are fine, 33 are not.
    let o32 = [b"mg k O".as_slice(), &[b'o'; 31], b"\r\n"].concat();
    assert_eq!(mg(&o32).1.opaque.unwrap().len(), 31);
    let o33 = [b"mg k O".as_slice(), &[b'o'; 32], b"\r\n"].concat();
    reply_err(&o33, R::OpaqueTooLong);
    // 17 flags are fine, 18 are too many ("are" only for mg).
    assert!(mg(b"mg k c f h k l q s t u v x I O1 P L N1 R1\r\n").1.invalidate);
    reply_err(b"mg k c f h k l q s t u v x I O1 P L N1 R1 T1\r\n", R::MgOptionsTooLong);
    assert_eq!(R::MgOptionsTooLong.as_str(), "CLIENT_ERROR options flags are too long");
}

fn ms(input: &[u8]) -> (MetaKey<'_>, MetaFlags<'_>, SetMode, &[u8]) {
    match ok(input) {
        Request::MetaSet { key, flags, mode, data } => (key, flags, mode, data),
        r => panic!("{r:?}"),
    }
}

fn swallow(input: &[u8], r: ErrorReply, skip: usize) {
    let e = err(input);
    let line = input.iter().position(|&b| b == b'\n').unwrap() + 1;
    assert_eq!(
        e,
        Error::Swallow { reply: r, consumed: line, skip, silent: false, unlink: None },
        "{:?}",
        String::from_utf8_lossy(input)
    );
}

#[test]
fn meta_set() {
    let (key, f, mode, data) = ms(b"ms foo 3\r\nbar\r\n");
    assert_eq!((key.bytes(), mode, data), (&b"foo"[..], SetMode::Set, &b"bar"[..]));
    assert_eq!(f, MetaFlags::default());
    let (_, f, mode, data) = ms(b"ms foo 0 T60 F7 c k Oxy q I C5 E6\r\n\r\n");
    assert_eq!((mode, data), (SetMode::Set, &b""[..]));
    assert_eq!((f.ttl, f.client_flags, f.compare_cas, f.explicit_cas), (Some(60), Some(7), Some(5), Some(6)));
    assert!(f.return_cas && f.return_key && f.quiet && f.invalidate);
    assert_eq!(f.tokens().next(), Some(&b"T60"[..]));
    for (m, want) in [
        ("MS", SetMode::Set),
        ("ME", SetMode::Add),
        ("MA", SetMode::Append),
        ("MP", SetMode::Prepend),
        ("MR", SetMode::Replace),
    ] {
        let line = format!("ms k 1 {m}\r\nx\r\n");
        assert_eq!(ms(line.as_bytes()).2, want);
    }
    let (key, _, _, _) = ms(b"ms Zm9v 1 b\r\nx\r\n");
    assert_eq!(key.bytes(), b"foo");
}

#[test]
fn meta_set_errors() {
    reply_err(b"ms\r\n", R::Error);
    reply_err(b"ms k\r\n", R::BadFormat);
    reply_err(b"ms k x\r\n", R::BadFormat);
    reply_err(b"ms k -1\r\n", R::BadFormat);
    let long = [b"ms ".as_slice(), &[b'k'; 251], b" 1\r\n"].concat();
    reply_err(&long, R::BadFormat);
    reply_err(b"ms k 1 c f h k l q s t u v x I O1 P L N1 R1\r\n", R::OptionsTooLong);
    // After a valid length, errors swallow the data block.
    swallow(b"ms k 2 z\r\n", R::InvalidFlag, 4);
    swallow(b"ms k 2 T1 T2\r\n", R::DuplicateFlag, 4);
    swallow(b"ms k 2 Fx\r\n", R::BadFormat, 4);
    swallow(b"ms k 2 MX\r\n", R::InvalidMsMode, 4);
    swallow(b"ms k 2 Ms\r\n", R::InvalidMsMode, 4);
    swallow(b"ms k 2 MSS\r\n", R::ModeTokenLength, 4);
    swallow(b"ms Zm9 2 b\r\n", R::KeyDecode, 4);
    let o33 = [b"ms k 2 O".as_slice(), &[b'o'; 32], b" q\r\n"].concat();
    swallow(&o33, R::OpaqueTooLong, 4);
    // Invalid mode is reported in preference to a long opaque.
    let both = [b"ms k 2 MX O".as_slice(), &[b'o'; 32], b"\r\n"].concat();
    swallow(&both, R::InvalidMsMode, 4);
    // Too large: never silent, even with q; the key's old value goes, whatever the mode.
    for buf in [&b"ms k 1048577 q\r\n"[..], b"ms k 1048577 ME\r\n", b"ms k 1048577 MA\r\n"] {
        let e = err(buf);
        assert_eq!((e.kind(), e.skip(), e.reply().is_some()), (Some(R::TooLarge), 1_048_579, true));
        assert_eq!(e.unlink(buf).map(|k| k.bytes().to_vec()), Some(b"k".to_vec()));
    }
    // The limit counts the item as memcached does: 1 MiB less 48 + 8 + 2 + 2 bytes for a
    // one-byte key, 4 more with flags; a base64 key counts decoded, and is unlinked decoded.
    let at = |line: &[u8], n: usize| {
        let mut v = line.to_vec();
        v.extend_from_slice(&vec![b'x'; n]);
        v.extend_from_slice(b"\r\n");
        v
    };
    assert!(matches!(ok(&at(b"ms k 1048516\r\n", 1_048_516)), Request::MetaSet { .. }));
    assert_eq!(err(b"ms k 1048517\r\n").kind(), Some(R::TooLarge));
    assert!(matches!(ok(&at(b"ms k 1048512 F1\r\n", 1_048_512)), Request::MetaSet { .. }));
    assert_eq!(err(b"ms k 1048513 F1\r\n").kind(), Some(R::TooLarge));
    assert!(matches!(ok(&at(b"ms ZWRnZQ== 1048513 b\r\n", 1_048_513)), Request::MetaSet { .. }));
    let buf = b"ms ZWRnZQ== 1048514 b\r\n";
    let e = err(buf);
    assert_eq!(e.unlink(buf).map(|k| k.bytes().to_vec()), Some(b"edge".to_vec()));
    // Bad chunk: never silent either.
    assert_eq!(err(b"ms k 1 q\r\nxyz"), Error::Reply { reply: R::BadDataChunk, consumed: 13, silent: false });
}

#[test]
fn meta_delete() {
    let Request::MetaDelete { key, flags } = ok(b"md foo q I T30 C9 Oa k x\r\n") else { panic!() };
    assert_eq!(key.bytes(), b"foo");
    assert!(flags.quiet && flags.invalidate && flags.remove_value && flags.return_key);
    assert_eq!((flags.ttl, flags.compare_cas, flags.opaque), (Some(30), Some(9), Some(&b"a"[..])));
    assert!(matches!(ok(b"md foo\r\n"), Request::MetaDelete { .. }));
    reply_err(b"md\r\n", R::Error);
    let long = [b"md ".as_slice(), &[b'k'; 251], b"\r\n"].concat();
    reply_err(&long, R::BadFormat);
    // Every flag problem is "invalid or duplicate flag" for md.
    reply_err(b"md k z\r\n", R::InvalidOrDuplicateFlag);
    reply_err(b"md k q q\r\n", R::InvalidOrDuplicateFlag);
    reply_err(b"md k Tx\r\n", R::InvalidOrDuplicateFlag);
    reply_err(b"md k Zm9 b\r\n", R::InvalidOrDuplicateFlag);
    let o33 = [b"md k O".as_slice(), &[b'o'; 32], b"\r\n"].concat();
    reply_err(&o33, R::OpaqueTooLong);
    reply_err(b"md k c f h k l q s t u v x I O1 P L N1 R1 T1\r\n", R::OptionsTooLong);
}

#[test]
fn meta_arithmetic() {
    let Request::MetaArithmetic { key, flags, mode } = ok(b"ma n\r\n") else { panic!() };
    assert_eq!((key.bytes(), mode), (&b"n"[..], ArithMode::Incr));
    assert_eq!((flags.delta_or_default(), flags.initial_or_default()), (1, 0));
    let Request::MetaArithmetic { flags, mode, .. } = ok(b"ma n MD D5 J10 N0 v t c q\r\n") else { panic!() };
    assert_eq!(mode, ArithMode::Decr);
    assert_eq!((flags.delta_or_default(), flags.initial_or_default(), flags.vivify_ttl), (5, 10, Some(0)));
    for (m, want) in
        [("MI", ArithMode::Incr), ("M+", ArithMode::Incr), ("MD", ArithMode::Decr), ("M-", ArithMode::Decr)]
    {
        let line = format!("ma n {m}\r\n");
        let Request::MetaArithmetic { mode, .. } = ok(line.as_bytes()) else { panic!() };
        assert_eq!(mode, want);
    }
    reply_err(b"ma\r\n", R::Error);
    reply_err(b"ma n MX\r\n", R::InvalidMaMode);
    reply_err(b"ma n MII\r\n", R::InvalidOrDuplicateFlag);
    reply_err(b"ma n Dx\r\n", R::InvalidOrDuplicateFlag);
    reply_err(b"ma n J-1\r\n", R::InvalidOrDuplicateFlag);
    let both = [b"ma n MX O".as_slice(), &[b'o'; 32], b"\r\n"].concat();
    reply_err(&both, R::InvalidMaMode);
    let o33 = [b"ma n O".as_slice(), &[b'o'; 32], b"\r\n"].concat();
    reply_err(&o33, R::OpaqueTooLong);
    reply_err(b"ma n c f h k l q s t u v x I O1 P L N1 R1 T1\r\n", R::OptionsTooLong);
}

#[test]
fn error_accessors() {
    let e = Error::Swallow { reply: R::TooLarge, consumed: 3, skip: 9, silent: false, unlink: None };
    assert_eq!((e.consumed(), e.skip(), e.closes()), (3, 9, false));
    assert!(e.unlink(b"set k").is_none());
    assert_eq!(e.to_string(), "SERVER_ERROR object too large for cache (swallowing 9 bytes)");
    let e = Error::Reply { reply: R::Error, consumed: 2, silent: true };
    assert_eq!((e.reply(), e.kind(), e.skip()), (None, Some(R::Error), 0));
    assert_eq!(Error::Close.consumed(), 0);
    for r in [R::Error, R::BadFormat, R::InvalidFlag, R::OpaqueTooLong] {
        assert!(r.line().ends_with(b"\r\n"));
        assert_eq!(r.to_string().len() + 2, r.line().len());
    }
}

#[test]
fn scan_line_finds_newline_and_nul() {
    for len in 0..40 {
        for nl in 0..len {
            let mut v = vec![b'a'; len];
            v[nl] = b'\n';
            assert_eq!(scan_line(&v), (Some(nl), None));
            for z in 0..len {
                let mut w = v.clone();
                if z == nl {
                    continue;
                }
                w[z] = 0;
                let want_nul = if z < nl { Some(z) } else { None };
                assert_eq!(scan_line(&w), (Some(nl), want_nul), "len {len} nl {nl} z {z}");
            }
        }
        assert_eq!(scan_line(&vec![b'a'; len]), (None, None));
    }
}

#[test]
fn a_long_multiget_is_incomplete_until_its_newline_whatever_comes_before() {
    let line = [&b"  gets "[..], &b"key\0 \r x ".repeat(400)].concat();
    assert!(is_long_multiget(&line, &lim()));
    for end in [3000, 3001, 3002, 3003, line.len()] {
        let mut w = lim().read_buffer_size;
        assert_eq!(parse_window(&line[..end], &mut w, &lim()), Ok(None), "{end} bytes");
    }
    // Not such a line: short, ended, another command, too many leading spaces.
    assert!(!is_long_multiget(&line[..2048], &lim()));
    assert!(!is_long_multiget(&[&line[..], b"\n"].concat(), &lim()));
    assert!(!is_long_multiget(&[&b"set "[..], &line[7..]].concat(), &lim()));
    assert!(!is_long_multiget(&[&b" ".repeat(101)[..], &line[2..]].concat(), &lim()));
}
