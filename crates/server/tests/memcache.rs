//! The memcached protocol (text and meta) over real sockets: raw bytes in, exact bytes out,
//! on the same keyspace the RESP side sees.
mod common;
use common::*;

use std::io::Read;
use std::time::{Duration, Instant};

/// Reads until the reply ends with `suffix` (or 5 s pass).
fn read_until(c: &mut Raw, suffix: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(5);
    while !out.ends_with(suffix) && Instant::now() < deadline {
        match c.s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    out
}

/// Sends `req` and returns the reply line (up to and including `\r\n`).
fn line(c: &mut Raw, req: &[u8]) -> String {
    c.send(req);
    String::from_utf8_lossy(&read_until(c, b"\r\n")).into_owned()
}

/// The CAS unique from a `gets` reply for one key.
fn cas_of(c: &mut Raw, key: &str) -> u64 {
    c.send(format!("gets {key}\r\n").as_bytes());
    let r = String::from_utf8(read_until(c, b"END\r\n")).unwrap();
    let first = r.lines().next().unwrap();
    first.split(' ').nth(4).unwrap_or_else(|| panic!("no cas in {r:?}")).parse().unwrap()
}

#[test]
fn storage_commands() {
    let t = start();
    let mut c = Raw::connect(t.mc);
    c.check(b"set k 5 0 3\r\nabc\r\n", b"STORED\r\n");
    c.check(b"get k\r\n", b"VALUE k 5 3\r\nabc\r\nEND\r\n");
    c.check(b"get nope\r\n", b"END\r\n");
    c.check(b"get k nope k\r\n", b"VALUE k 5 3\r\nabc\r\nVALUE k 5 3\r\nabc\r\nEND\r\n");
    c.check(b"add k 0 0 1\r\nx\r\n", b"NOT_STORED\r\n");
    c.check(b"add a 1 0 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"replace nope 0 0 1\r\nx\r\n", b"NOT_STORED\r\n");
    c.check(b"replace a 2 0 2\r\nyy\r\n", b"STORED\r\n");
    c.check(b"get a\r\n", b"VALUE a 2 2\r\nyy\r\nEND\r\n");
    // append/prepend keep the flags and ignore the ones given.
    c.check(b"append a 9 0 2\r\nzz\r\n", b"STORED\r\n");
    c.check(b"prepend a 9 0 2\r\nxx\r\n", b"STORED\r\n");
    c.check(b"get a\r\n", b"VALUE a 2 6\r\nxxyyzz\r\nEND\r\n");
    c.check(b"append nope 0 0 1\r\nx\r\n", b"NOT_STORED\r\n");
    c.check(b"prepend nope 0 0 1\r\nx\r\n", b"NOT_STORED\r\n");
    // Empty values and values holding \r\n.
    c.check(b"set e 0 0 0\r\n\r\n", b"STORED\r\n");
    c.check(b"get e\r\n", b"VALUE e 0 0\r\n\r\nEND\r\n");
    c.check(b"set crlf 4294967295 0 4\r\na\r\nb\r\n", b"STORED\r\n");
    c.check(b"get crlf\r\n", b"VALUE crlf 4294967295 4\r\na\r\nb\r\nEND\r\n");
    // noreply on every storage command: nothing comes back, the effect happens.
    c.check(
        b"set n 0 0 1 noreply\r\n1\r\nadd n 0 0 1 noreply\r\n2\r\nreplace n 0 0 1 noreply\r\n3\r\nappend n 0 0 1 noreply\r\n4\r\nprepend n 0 0 1 noreply\r\n5\r\nget n\r\n",
        b"VALUE n 0 3\r\n534\r\nEND\r\n",
    );
    // A noreply that is not the last token is just ignored (memcached's rule).
    c.check(b"set j 0 0 1 junk\r\nx\r\n", b"STORED\r\n");
    // Negative exptime: stored, but expired at once.
    c.check(b"set gone 0 -1 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"get gone\r\n", b"END\r\n");
    // An absolute exptime in the past (1970 + 31 days) is expired too.
    c.check(b"set gone 0 2678400 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"get gone\r\n", b"END\r\n");
}

#[test]
fn errors_and_swallowing() {
    let t = start_with(|a| a.item_size_max = Some(1024));
    let mut c = Raw::connect(t.mc);
    c.check(b"bogus\r\n", b"ERROR\r\n");
    c.check(b"\r\n", b"ERROR\r\n");
    c.check(b"get\r\n", b"ERROR\r\n");
    c.check(b"set k 0 0\r\n", b"ERROR\r\n");
    c.check(b"set k abc 0 1\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.check(b"set k 0 0 -1\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.check(b"set k 0 0 2\r\nabc\r\n", b"CLIENT_ERROR bad data chunk\r\nERROR\r\n");
    let long = "k".repeat(251);
    c.check(format!("get {long}\r\n").as_bytes(), b"CLIENT_ERROR bad command line format\r\n");
    c.check(format!("set {long} 0 0 1\r\n").as_bytes(), b"CLIENT_ERROR bad command line format\r\n");
    c.check(b"incr k abc\r\n", b"CLIENT_ERROR invalid numeric delta argument\r\n");
    c.check(b"incr k -1\r\n", b"CLIENT_ERROR invalid numeric delta argument\r\n");
    c.check(b"touch k abc\r\n", b"CLIENT_ERROR invalid exptime argument\r\n");
    c.check(b"gat abc k\r\n", b"CLIENT_ERROR invalid exptime argument\r\n");
    c.check(b"delete k 1\r\n", b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n");
    c.check(b"flush_all abc\r\n", b"CLIENT_ERROR invalid exptime argument\r\n");
    c.check(b"verbosity\r\n", b"ERROR\r\n");
    c.check(b"verbosity x\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.check(b"touch k\r\n", b"ERROR\r\n");
    c.check(b"incr k\r\n", b"ERROR\r\n");

    // A value over the item size limit is refused and its data discarded, even when it
    // arrives in pieces over several reads; the next command works.
    c.send(b"set big 0 0 5000\r\n");
    let data = vec![b'x'; 5000];
    for chunk in data.chunks(1000) {
        c.send(chunk);
        std::thread::sleep(Duration::from_millis(20));
    }
    c.check(b"\r\nget big\r\n", b"SERVER_ERROR object too large for cache\r\nEND\r\n");
    c.check(b"set ok 0 0 2\r\nhi\r\n", b"STORED\r\n");
    // The same for ms, and quietly with noreply (the data is still swallowed).
    let mut req = b"ms big 5000 T0\r\n".to_vec();
    req.extend_from_slice(&data);
    req.extend_from_slice(b"\r\nmn\r\n");
    c.check(&req, b"SERVER_ERROR object too large for cache\r\nMN\r\n");
    let mut req = b"set big 0 0 5000 noreply\r\n".to_vec();
    req.extend_from_slice(&data);
    req.extend_from_slice(b"\r\nget ok\r\n");
    c.check(&req, b"VALUE ok 0 2\r\nhi\r\nEND\r\n");
    // The limit counts the item as memcached 1.6.18 does: a 48-byte header, the 8-byte CAS,
    // the key and a NUL, 4 bytes of flags unless they are 0, the value and its \r\n. So
    // under -I 1024, "edge" with flags 0 takes at most 1024 - 48 - 8 - 5 - 2 = 961 bytes.
    // `line` with {} standing for the length, then that many bytes of data.
    let sized = |line: &str, n: usize| {
        let mut req = line.replace("{}", &n.to_string()).into_bytes();
        req.extend_from_slice(b"\r\n");
        req.extend_from_slice(&vec![b'e'; n]);
        req.extend_from_slice(b"\r\n");
        req
    };
    let too_large = b"SERVER_ERROR object too large for cache\r\n";
    c.check(&sized("set edge 0 0 {}", 961), b"STORED\r\n");
    c.check(&sized("set edge2 0 0 {}", 961), too_large);
    c.check(&sized("set edge 1 0 {}", 957), b"STORED\r\n");
    c.check(&sized("set edge 1 0 {}", 958), too_large);
    c.check(&sized("ms edge {}", 961), b"HD\r\n");
    c.check(&sized("ms edge {}", 962), too_large);
    c.check(&sized("ms edge {} F1", 958), too_large);
    // A too-large set or ms also drops the key's old value (memcached unlinks it so stale
    // data does not outlive a failed overwrite); add, replace, append, prepend and cas
    // leave it.
    c.check(&sized("set edge 0 0 {}", 961), b"STORED\r\n");
    for cmd in ["add", "replace", "append", "prepend"] {
        c.check(&sized(&format!("{cmd} edge 0 0 {{}}"), 962), too_large);
    }
    c.check(&sized("cas edge 0 0 {} 1", 962), too_large);
    c.check(b"mg edge s\r\n", b"HD s961\r\n");
    c.check(&sized("set edge 0 0 {}", 962), too_large);
    c.check(b"mg edge s\r\n", b"EN\r\n");
    c.check(&sized("set edge 0 0 {}", 961), b"STORED\r\n");
    c.check(&sized("set edge 0 0 {} noreply", 962), b"");
    c.check(b"mg edge s\r\n", b"EN\r\n");
    c.check(&sized("set edge 0 0 {}", 961), b"STORED\r\n");
    c.check(&sized("ms edge {} MR q", 962), too_large);
    c.check(b"mg edge s\r\n", b"EN\r\n");
    // A base64 key counts with its decoded length: "ZWRnZQ==" is "edge".
    c.check(&sized("ms ZWRnZQ== {} b", 961), b"HD\r\n");
    c.check(b"mg edge s\r\n", b"HD s961\r\n");
    c.check(&sized("ms ZWRnZQ== {} b", 962), too_large);
    c.check(b"mg edge s\r\n", b"EN\r\n");
    // An append or prepend whose result would pass the limit is not stored (memcached
    // cannot allocate the new item), counted with the stored item's flags.
    c.check(&sized("set edge 0 0 {}", 960), b"STORED\r\n");
    c.check(b"append edge 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"append edge 0 0 1\r\nx\r\n", b"NOT_STORED\r\n");
    c.check(b"prepend edge 0 0 1\r\nx\r\n", b"NOT_STORED\r\n");
    c.check(&sized("set edge 1 0 {}", 957), b"STORED\r\n");
    c.check(b"append edge 0 0 1\r\nx\r\n", b"NOT_STORED\r\n");
    c.check(b"ms edge 1 MA\r\nx\r\n", b"NS\r\n");
    c.check(b"mg edge s\r\n", b"HD s957\r\n");

    // A line with no newline after 2048 bytes that is not a get: the connection closes.
    let mut c2 = Raw::connect(t.mc);
    c2.send(&vec![b'a'; 4096]);
    assert!(c2.closed());
    // But a long multiget is just waited for.
    let mut c3 = Raw::connect(t.mc);
    let mut req = b"get".to_vec();
    for i in 0..600 {
        req.extend_from_slice(format!(" key{i}").as_bytes());
    }
    req.extend_from_slice(b" ok\r\n");
    c3.check(&req, b"VALUE ok 0 2\r\nhi\r\nEND\r\n");
}

/// memcached 1.6.18 reads flags with `safe_strtoul` and exptimes, lengths and meta TTLs with
/// `safe_strtol`: 64-bit `strtoul`/`strtol` stored into 32 bits, so values past 32 bits are
/// truncated, not refused. (Every reply here was checked against memcached 1.6.18.)
#[test]
fn out_of_range_numbers_truncate_as_memcached() {
    let t = start();
    let mut c = Raw::connect(t.mc);
    c.check(b"set a 4294967297 0 1\r\na\r\nget a\r\n", b"STORED\r\nVALUE a 1 1\r\na\r\nEND\r\n");
    c.check(b"set a 18446744073709551615 0 1\r\na\r\nget a\r\n", b"STORED\r\nVALUE a 4294967295 1\r\na\r\nEND\r\n");
    c.check(b"set a -18446744073709551615 0 1\r\na\r\nget a\r\n", b"STORED\r\nVALUE a 1 1\r\na\r\nEND\r\n");
    c.check(b"set a -1 0 1\r\na\r\n", b"CLIENT_ERROR bad command line format\r\nERROR\r\n");
    // exptime 4294967295 is -1 (expired at once), 4294967396 is 100 s, -2147483649 is
    // i32::MAX (an absolute time in 2038).
    c.check(b"set b 1 4294967295 1\r\nb\r\nget b\r\n", b"STORED\r\nEND\r\n");
    c.check(b"set b 1 4294967396 1\r\nb\r\nmg b t\r\n", b"STORED\r\nHD t100\r\n");
    c.check(b"set b 1 -2147483649 1\r\nb\r\nget b\r\n", b"STORED\r\nVALUE b 1 1\r\nb\r\nEND\r\n");
    c.check(b"set b 1 9223372036854775808 1\r\nb\r\n", b"CLIENT_ERROR bad command line format\r\nERROR\r\n");
    // Lengths: 4294967298 is 2; 4294967295 is -1, an error.
    c.check(b"set c 1 0 4294967298\r\nab\r\nget c\r\n", b"STORED\r\nVALUE c 1 2\r\nab\r\nEND\r\n");
    c.check(b"set c 1 0 4294967295\r\nab\r\n", b"CLIENT_ERROR bad command line format\r\nERROR\r\n");
    c.check(b"touch c 4294967396\r\nmg c t\r\n", b"TOUCHED\r\nHD t100\r\n");
    c.check(b"touch c 4294967296\r\nmg c t\r\n", b"TOUCHED\r\nHD t-1\r\n");
    c.check(b"gat 4294967396 c\r\nmg c t\r\n", b"VALUE c 1 2\r\nab\r\nEND\r\nHD t100\r\n");
    c.check(b"verbosity 4294967296\r\n", b"OK\r\n");
    c.check(b"ms d 4294967298 F4294967297 T4294967396\r\nxy\r\nmg d f t v\r\n", b"HD\r\nVA 2 f1 t100\r\nxy\r\n");
    c.check(b"mg d T4294967296 t\r\n", b"HD t-1\r\n");
    c.check(b"mg d T-9223372036854775809 t\r\n", b"CLIENT_ERROR bad token in command line format\r\n");
    c.check(b"flush_all -4294967296\r\nget d\r\n", b"OK\r\nEND\r\n");
    // stats cachedump reads its class with safe_strtoul too, and knows 64 class ids.
    c.check(b"set e 0 0 1\r\ne\r\n", b"STORED\r\n");
    c.send(b"stats cachedump 4294967297 0\r\n");
    let dump = String::from_utf8(read_until(&mut c, b"END\r\n")).unwrap();
    assert!(dump.starts_with("ITEM e [1 b; "), "{dump:?}");
    c.check(b"stats cachedump 64 1\r\n", b"CLIENT_ERROR Illegal slab id\r\n");
    c.check(b"stats cachedump 1 -1\r\n", b"CLIENT_ERROR bad command line format\r\n");
}

/// Whether the server closed the connection (EOF or a reset within a second).
fn gone(c: &mut Raw) -> bool {
    c.s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut b = [0u8; 1];
    match c.s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

/// memcached 1.6.18 reads into a 16 KiB buffer and closes the connection when more than
/// 2 KiB of a line sit there without a newline, unless it is a get/gets: so a line over
/// 16 KiB sent in one write closes it, a shorter one is answered, and one that straddles
/// the end of a full buffer with more than 2 KiB inside closes it. (Each checked against
/// 1.6.18, the request sent in one write.)
#[test]
fn long_lines_close_as_in_memcached() {
    let t = start();
    let send = |req: &[u8]| {
        let mut c = Raw::connect(t.mc);
        c.send(req);
        c
    };
    let junk = |n: usize| [vec![b'x'; n], b"\r\nmn\r\n".to_vec()].concat();
    let mut c = send(&junk(3000));
    c.check(b"", b"ERROR\r\nMN\r\n");
    let mut c = send(&junk(16382));
    c.check(b"", b"ERROR\r\nMN\r\n");
    assert!(gone(&mut send(&junk(16383))), "a 16385-byte line closes");
    let set = [b"set ".to_vec(), vec![b'k'; 20000], b" 0 0 1\r\na\r\nmn\r\n".to_vec()].concat();
    assert!(gone(&mut send(&set)), "a set with a 20000-byte key closes");
    let get = [b"get ".to_vec(), vec![b'k'; 20000], b"\r\nmn\r\n".to_vec()].concat();
    send(&get).check(b"", b"CLIENT_ERROR bad command line format\r\nMN\r\n");
    // Long multigets are read in full (after at most 100 spaces); nothing else is.
    let mut c = Raw::connect(t.mc);
    c.check(b"set k7 0 0 1\r\n7\r\n", b"STORED\r\n");
    let keys: Vec<u8> = (0..3000).flat_map(|i| format!(" k{i}").into_bytes()).collect();
    let with = |head: &[u8]| [head, &keys, b"\r\nmn\r\n"].concat();
    send(&with(b"get")).check(b"", b"VALUE k7 0 1\r\n7\r\nEND\r\nMN\r\n");
    send(&[&[b' '; 100][..], &with(b"get")].concat()).check(b"", b"VALUE k7 0 1\r\n7\r\nEND\r\nMN\r\n");
    assert!(gone(&mut send(&[&[b' '; 101][..], &with(b"get")].concat())));
    assert!(gone(&mut send(&with(b"gat 0"))));
    assert!(gone(&mut send(&with(b"get\t"))));
    // A 3000-byte line starting 2049 bytes before the end of the first 16 KiB closes the
    // connection, after what came before it ran; 2048 bytes before, it is answered.
    let straddle = |key: &str, before: usize| {
        let head = format!("set {key} 0 0 00000 noreply\r\n").len();
        let n = 16384 - before - head - 2;
        let filler = format!("set {key} 0 0 {n:05} noreply\r\n").into_bytes();
        [filler, vec![b'f'; n], b"\r\n".to_vec(), junk(3000)].concat()
    };
    assert!(gone(&mut send(&straddle("s1", 2049))));
    send(&straddle("s2", 2048)).check(b"", b"ERROR\r\nMN\r\n");
    c.check(b"mg s1 s\r\nmg s2 s\r\n", b"HD s14307\r\nHD s14308\r\n");
    // After a data block read past the buffer, the next read starts afresh.
    let past = [b"set d 0 0 20000\r\n".to_vec(), vec![b'd'; 20000], b"\r\n".to_vec(), junk(3000)].concat();
    send(&past).check(b"", b"STORED\r\nERROR\r\nMN\r\n");
}

#[test]
fn counters() {
    let t = start();
    let mut c = Raw::connect(t.mc);
    c.check(b"set n 3 0 2\r\n10\r\n", b"STORED\r\n");
    c.check(b"incr n 5\r\n", b"15\r\n");
    c.check(b"decr n 3\r\n", b"12\r\n");
    c.check(b"decr n 100\r\n", b"0\r\n");
    c.check(b"incr n 18446744073709551615\r\n", b"18446744073709551615\r\n");
    c.check(b"incr n 2\r\n", b"1\r\n");
    // The wrapped result is written over the 20 digits, padded (memcached 1.6.18 does so).
    c.check(b"get n\r\n", b"VALUE n 3 20\r\n1                   \r\nEND\r\n");
    c.check(b"incr nope 1\r\n", b"NOT_FOUND\r\n");
    c.check(b"decr nope 1\r\n", b"NOT_FOUND\r\n");
    c.check(b"set s 0 0 3\r\nabc\r\n", b"STORED\r\n");
    c.check(b"incr s 1\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
    c.check(b"set m 0 0 2\r\n-5\r\n", b"STORED\r\n");
    c.check(b"decr m 1\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
    c.check(b"set e 0 0 0\r\n\r\n", b"STORED\r\n");
    c.check(b"incr e 1\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
    c.check(
        b"incr n 1 noreply\r\ndecr n 1 noreply\r\nincr n 7 noreply\r\nget n\r\n",
        b"VALUE n 3 20\r\n8                   \r\nEND\r\n",
    );
    c.check(b"incr s 1 noreply\r\nincr nope 1 noreply\r\nmn\r\n", b"MN\r\n");
}

#[test]
fn touch_delete_flush_and_admin() {
    let t = start();
    let mut c = Raw::connect(t.mc);
    let mut r = Raw::connect(t.resp);
    c.check(b"set k 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"touch k 100\r\n", b"TOUCHED\r\n");
    c.check(b"mg k t\r\n", b"HD t100\r\n");
    c.check(b"touch k 0\r\n", b"TOUCHED\r\n");
    c.check(b"mg k t\r\n", b"HD t-1\r\n");
    c.check(b"touch nope 10\r\n", b"NOT_FOUND\r\n");
    c.check(b"touch k 50 noreply\r\ntouch nope 1 noreply\r\nmn\r\n", b"MN\r\n");
    c.check(b"mg k t\r\n", b"HD t50\r\n");
    c.check(b"touch k -1\r\n", b"TOUCHED\r\n");
    c.check(b"get k\r\n", b"END\r\n");

    c.check(b"set k 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"delete k\r\n", b"DELETED\r\n");
    c.check(b"delete k\r\n", b"NOT_FOUND\r\n");
    c.check(b"set k 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"delete k 0\r\n", b"DELETED\r\n");
    c.check(b"set k 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"delete k noreply\r\ndelete k 0 noreply\r\nget k\r\n", b"END\r\n");

    c.check(b"set a 0 0 1\r\nx\r\nset b 0 0 1\r\ny\r\n", b"STORED\r\nSTORED\r\n");
    r.check(&cmd(&[b"SET", b"fromredis", b"v"]), b"+OK\r\n");
    c.check(b"flush_all\r\n", b"OK\r\n");
    c.check(b"get a b fromredis\r\n", b"END\r\n");
    r.check(&cmd(&[b"GET", b"fromredis"]), b"$-1\r\n");
    c.check(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"flush_all noreply\r\nget a\r\n", b"END\r\n");
    c.check(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"flush_all 0\r\nget a\r\n", b"OK\r\nEND\r\n");
    c.check(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"flush_all -1\r\nget a\r\n", b"OK\r\nEND\r\n");
    // A delayed flush: the key is there until the deadline, then gone. A later delayed
    // flush_all moves the deadline.
    c.check(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"flush_all 100\r\n", b"OK\r\n");
    c.check(b"flush_all 1\r\n", b"OK\r\n");
    c.check(b"get a\r\n", b"VALUE a 0 1\r\nx\r\nEND\r\n");
    std::thread::sleep(Duration::from_millis(1300));
    c.check(b"get a\r\n", b"END\r\n");
    // And an immediate flush_all cancels a pending one.
    c.check(b"flush_all 1\r\nflush_all\r\nset a 0 0 1\r\nx\r\n", b"OK\r\nOK\r\nSTORED\r\n");
    std::thread::sleep(Duration::from_millis(1300));
    c.check(b"get a\r\n", b"VALUE a 0 1\r\nx\r\nEND\r\n");
    // An absolute time already past flushes at once, before the next command runs
    // (memcached 1.6.18 does the same).
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    c.check(format!("flush_all {}\r\nget a\r\n", now - 1).as_bytes(), b"OK\r\nEND\r\n");
    // One before the server started (memcached dates its start 62 s early) flushes nothing
    // and cancels a pending flush.
    c.check(b"set a 0 0 1\r\nx\r\nflush_all 1\r\n", b"STORED\r\nOK\r\n");
    c.check(b"flush_all 1000000000\r\nget a\r\n", b"OK\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
    c.check(format!("flush_all {}\r\nget a\r\n", now - 70).as_bytes(), b"OK\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
    std::thread::sleep(Duration::from_millis(1300));
    c.check(b"get a\r\n", b"VALUE a 0 1\r\nx\r\nEND\r\n");

    c.check(b"version\r\n", b"VERSION 1.6.21\r\n");
    c.check(b"version extra tokens\r\n", b"VERSION 1.6.21\r\n");
    c.check(b"verbosity 1\r\n", b"OK\r\n");
    c.check(b"verbosity 1 noreply\r\nmn\r\n", b"MN\r\n");
    c.check(b"quit\r\n", b"");
    assert!(c.closed());
    // Replies before a quit in the same batch still go out.
    let mut c = Raw::connect(t.mc);
    c.check(b"get a\r\nquit\r\nget a\r\n", b"VALUE a 0 1\r\nx\r\nEND\r\n");
    assert!(c.closed());
}

#[test]
fn cross_protocol() {
    let t = start();
    let mut c = Raw::connect(t.mc);
    let mut r = Raw::connect(t.resp);
    // Redis SET, memcached get: flags 0.
    r.check(&cmd(&[b"SET", b"shared", b"from redis"]), b"+OK\r\n");
    c.check(b"get shared\r\n", b"VALUE shared 0 10\r\nfrom redis\r\nEND\r\n");
    // An integer written by Redis is a decimal string to memcached, and incr works on it.
    r.check(&cmd(&[b"SET", b"num", b"41"]), b"+OK\r\n");
    c.check(b"incr num 1\r\n", b"42\r\n");
    r.check(&cmd(&[b"GET", b"num"]), b"$2\r\n42\r\n");
    r.check(&cmd(&[b"INCR", b"num"]), b":43\r\n");
    c.check(b"get num\r\n", b"VALUE num 0 2\r\n43\r\nEND\r\n");
    // memcached set with flags and TTL: Redis sees the value and the TTL.
    c.check(b"set mc 7 100 5\r\nhello\r\n", b"STORED\r\n");
    r.check(&cmd(&[b"GET", b"mc"]), b"$5\r\nhello\r\n");
    r.check(&cmd(&[b"TTL", b"mc"]), b":100\r\n");
    c.check(b"mg mc f t v\r\n", b"VA 5 f7 t100\r\nhello\r\n");
    // Redis EXPIRE and PERSIST show in memcached's t.
    r.check(&cmd(&[b"EXPIRE", b"shared", b"60"]), b":1\r\n");
    c.check(b"mg shared t\r\n", b"HD t60\r\n");
    r.check(&cmd(&[b"PERSIST", b"shared"]), b":1\r\n");
    c.check(b"mg shared t\r\n", b"HD t-1\r\n");
    r.check(&cmd(&[b"SET", b"ex", b"v", b"EX", b"30"]), b"+OK\r\n");
    c.check(b"mg ex t v\r\n", b"VA 1 t30\r\nv\r\n");
    // Redis DEL, memcached miss; memcached delete, Redis miss.
    r.check(&cmd(&[b"DEL", b"mc"]), b":1\r\n");
    c.check(b"get mc\r\n", b"END\r\n");
    c.check(b"delete ex\r\n", b"DELETED\r\n");
    r.check(&cmd(&[b"GET", b"ex"]), b"$-1\r\n");
    // A Redis write replaces the memcached flags (a new value, as memcached set would).
    c.check(b"set f 9 0 1\r\nx\r\n", b"STORED\r\n");
    r.check(&cmd(&[b"SET", b"f", b"y"]), b"+OK\r\n");
    c.check(b"get f\r\n", b"VALUE f 0 1\r\ny\r\nEND\r\n");
    // memcached only sees database 0.
    r.check(&cmd(&[b"SELECT", b"1"]), b"+OK\r\n");
    r.check(&cmd(&[b"SET", b"db1", b"x"]), b"+OK\r\n");
    c.check(b"get db1\r\n", b"END\r\n");
    // A binary value round-trips.
    let mut v = Vec::new();
    for b in 0..=255u8 {
        v.push(b);
    }
    let mut req = format!("set bin 0 0 {}\r\n", v.len()).into_bytes();
    req.extend_from_slice(&v);
    req.extend_from_slice(b"\r\n");
    c.check(&req, b"STORED\r\n");
    r.check(&cmd(&[b"SELECT", b"0"]), b"+OK\r\n");
    let mut want = b"$256\r\n".to_vec();
    want.extend_from_slice(&v);
    want.extend_from_slice(b"\r\n");
    r.check(&cmd(&[b"GET", b"bin"]), &want);
}

#[test]
fn cas_round_trip() {
    let t = start();
    let mut c = Raw::connect(t.mc);
    let mut r = Raw::connect(t.resp);
    c.check(b"cas k 0 0 1 1\r\nx\r\n", b"NOT_FOUND\r\n");
    c.check(b"set k 3 0 1\r\nx\r\n", b"STORED\r\n");
    let v1 = cas_of(&mut c, "k");
    c.check(b"gets k\r\n", format!("VALUE k 3 1 {v1}\r\nx\r\nEND\r\n").as_bytes());
    c.check(format!("cas k 4 0 1 {v1}\r\ny\r\n").as_bytes(), b"STORED\r\n");
    c.check(format!("cas k 4 0 1 {v1}\r\nz\r\n").as_bytes(), b"EXISTS\r\n");
    let v2 = cas_of(&mut c, "k");
    assert_ne!(v1, v2);
    c.check(b"get k\r\n", b"VALUE k 4 1\r\ny\r\nEND\r\n");
    // Any write, from either protocol, changes the cas.
    r.check(&cmd(&[b"SET", b"k", b"w"]), b"+OK\r\n");
    c.check(format!("cas k 0 0 1 {v2}\r\nz\r\n").as_bytes(), b"EXISTS\r\n");
    let v3 = cas_of(&mut c, "k");
    c.check(format!("cas k 0 0 1 {v3} noreply\r\nq\r\nget k\r\n").as_bytes(), b"VALUE k 0 1\r\nq\r\nEND\r\n");
    // touch and gat keep the item's cas, as memcached does: gets, touch, cas succeeds.
    let before = cas_of(&mut c, "k");
    c.check(b"touch k 100\r\n", b"TOUCHED\r\n");
    c.check(b"gat 200 k\r\n", b"VALUE k 0 1\r\nq\r\nEND\r\n");
    assert_eq!(cas_of(&mut c, "k"), before, "touch or gat changed the cas");
    // A TTL on an item that had none rebuilds it in the engine; the cas stays all the same.
    c.check(b"set n 0 0 1\r\nx\r\n", b"STORED\r\n");
    let n = cas_of(&mut c, "n");
    c.check(b"touch n 100\r\n", b"TOUCHED\r\n");
    c.check(format!("cas n 0 0 1 {n}\r\ny\r\n").as_bytes(), b"STORED\r\n");
    // gats returns the version, so a following cas succeeds.
    c.send(b"gats 100 k\r\n");
    let reply = String::from_utf8(read_until(&mut c, b"END\r\n")).unwrap();
    let v4: u64 = reply.lines().next().unwrap().split(' ').nth(4).unwrap().parse().unwrap();
    c.check(format!("cas k 0 0 1 {v4}\r\nr\r\n").as_bytes(), b"STORED\r\n");
    // The meta protocol's c and C are the same number.
    let v5 = cas_of(&mut c, "k");
    c.check(b"mg k c\r\n", format!("HD c{v5}\r\n").as_bytes());
    let l = line(&mut c, format!("ms k 1 C{v5} c\r\ns\r\n").as_bytes());
    let v6: u64 = l.trim_end().strip_prefix("HD c").unwrap().parse().unwrap();
    assert_eq!(cas_of(&mut c, "k"), v6);
}

#[test]
fn gat_and_gats() {
    let t = start();
    let mut c = Raw::connect(t.mc);
    c.check(b"set a 1 0 1\r\nx\r\nset b 2 0 1\r\ny\r\n", b"STORED\r\nSTORED\r\n");
    c.check(b"gat 100 a nope b\r\n", b"VALUE a 1 1\r\nx\r\nVALUE b 2 1\r\ny\r\nEND\r\n");
    c.check(b"mg a t\r\n", b"HD t100\r\n");
    c.check(b"mg b t\r\n", b"HD t100\r\n");
    c.check(b"gat 0 a\r\n", b"VALUE a 1 1\r\nx\r\nEND\r\n");
    c.check(b"mg a t\r\n", b"HD t-1\r\n");
    c.check(b"gat 100\r\n", b"END\r\n");
    // An exptime in the past: returned this once, then gone (as memcached).
    c.check(b"gat -1 a\r\n", b"VALUE a 1 1\r\nx\r\nEND\r\n");
    c.check(b"get a\r\n", b"END\r\n");
    c.send(b"gats 10 b\r\n");
    let reply = String::from_utf8(read_until(&mut c, b"END\r\n")).unwrap();
    let v = cas_of(&mut c, "b");
    assert_eq!(reply, format!("VALUE b 2 1 {v}\r\ny\r\nEND\r\n"));
    c.check(b"mg b t\r\n", b"HD t10\r\n");
}

#[test]
fn pipelined_gets_of_1000_keys() {
    let t = start();
    let mut c = Raw::connect(t.mc);
    let mut req = Vec::new();
    for i in 0..1000 {
        req.extend_from_slice(format!("set key:{i} {i} 0 {}\r\nvalue-{i}\r\n", format!("value-{i}").len()).as_bytes());
    }
    let want: Vec<u8> = b"STORED\r\n".repeat(1000);
    c.check(&req, &want);
    // One multiget of 1000 keys.
    let mut req = b"get".to_vec();
    let mut want = Vec::new();
    for i in 0..1000 {
        req.extend_from_slice(format!(" key:{i}").as_bytes());
        want.extend_from_slice(format!("VALUE key:{i} {i} {}\r\nvalue-{i}\r\n", format!("value-{i}").len()).as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    want.extend_from_slice(b"END\r\n");
    c.check(&req, &want);
    // 1000 pipelined single gets, and a meta pipeline closed by mn.
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..1000 {
        req.extend_from_slice(format!("get key:{i}\r\nmg missing:{i} v q\r\n").as_bytes());
        want.extend_from_slice(
            format!("VALUE key:{i} {i} {}\r\nvalue-{i}\r\nEND\r\n", format!("value-{i}").len()).as_bytes(),
        );
    }
    req.extend_from_slice(b"mn\r\n");
    want.extend_from_slice(b"MN\r\n");
    c.check(&req, &want);
}

#[test]
fn meta_get() {
    let t = start();
    let mut c = Raw::connect(t.mc);
    c.check(b"mn\r\n", b"MN\r\n");
    c.check(b"set a 5 0 3\r\nabc\r\n", b"STORED\r\n");
    c.check(b"mg a\r\n", b"HD\r\n");
    c.check(b"mg a v\r\n", b"VA 3\r\nabc\r\n");
    let v = cas_of(&mut c, "a");
    c.check(b"mg a s v t f k Oxyz q\r\n", b"VA 3 s3 t-1 f5 ka Oxyz\r\nabc\r\n");
    c.check(b"mg a c\r\n", format!("HD c{v}\r\n").as_bytes());
    c.check(b"mg missing v k Oab\r\n", b"EN kmissing Oab\r\n");
    c.check(b"mg missing v q\r\nmn\r\n", b"MN\r\n");
    c.check(b"mg a h l\r\n", b"HD h0 l0\r\n");
    // T updates the TTL; a t before it reports the old one, after it the new one.
    c.check(b"set a 5 100 3\r\nabc\r\n", b"STORED\r\n");
    c.check(b"mg a t T30\r\n", b"HD t100\r\n");
    c.check(b"mg a T40 t\r\n", b"HD t40\r\n");
    // T keeps the item's version: the c before it and after it are the same, and a CAS
    // with it works.
    let before = cas_of(&mut c, "a");
    c.send(b"mg a T50 c\r\n");
    let l = String::from_utf8(read_until(&mut c, b"\r\n")).unwrap();
    let cas: u64 = l.trim_end().strip_prefix("HD c").unwrap().parse().unwrap();
    assert_eq!(cas, before);
    c.check(format!("ms a 1 C{cas}\r\nz\r\n").as_bytes(), b"HD\r\n");
    // C0 is no CAS check for ma and for ms in append/prepend mode (a CAS store otherwise).
    c.check(b"set c0 0 0 1\r\n5\r\nma c0 C0 v\r\n", b"STORED\r\nVA 1\r\n6\r\n");
    c.check(b"ms c0 1 MA C0\r\nx\r\nmg c0 v\r\n", b"HD\r\nVA 2\r\n6x\r\n");
    c.check(b"ms c0 1 MP C1\r\ny\r\n", b"EX\r\n");
    c.check(b"ms c0 1 C0\r\nz\r\n", b"EX\r\n");
    // An empty value is not a number, whatever the CAS says (memcached checks it first).
    c.check(
        b"set e0 0 0 0\r\n\r\nma e0 C1\r\n",
        b"STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    );
    c.check(b"set e0 0 0 1\r\nx\r\nma e0 C1\r\n", b"STORED\r\nEX\r\n");
    // Errors from the flag parser.
    c.check(b"mg\r\n", b"ERROR\r\n");
    c.check(b"mg a v v\r\n", b"CLIENT_ERROR duplicate flag\r\n");
    c.check(b"mg a t T30 t\r\n", b"CLIENT_ERROR duplicate flag\r\n");
    c.check(b"mg a !\r\n", b"CLIENT_ERROR invalid flag\r\n");
    c.check(b"mg a Tx\r\n", b"CLIENT_ERROR bad token in command line format\r\n");
    let opaque = "O".to_string() + &"o".repeat(40);
    c.check(format!("mg a {opaque}\r\n").as_bytes(), b"CLIENT_ERROR opaque token too long\r\n");
    c.check(b"mz\r\n", b"ERROR\r\n");
    // Base64 keys: the key is decoded, and echoed encoded with a b flag.
    c.check(b"ms YWJj 3 b k\r\nxyz\r\n", b"HD kYWJj b\r\n");
    c.check(b"mg abc v\r\n", b"VA 3\r\nxyz\r\n");
    c.check(b"mg YWJj b k v\r\n", b"VA 3 kYWJj b\r\nxyz\r\n");
    c.check(b"ms b 3 b\r\nxyz\r\nmn\r\n", b"CLIENT_ERROR error decoding key\r\nMN\r\n");
}

#[test]
fn meta_vivify_recache_and_stale() {
    let t = start();
    let mut c = Raw::connect(t.mc);
    // N: the first client to miss creates an empty item and wins (W); the next sees Z.
    c.check(b"mg v1 N30 v t s f\r\n", b"VA 0 t30 s0 f0 W\r\n\r\n");
    c.check(b"mg v1 N30 v t\r\n", b"VA 0 t30 Z\r\n\r\n");
    // The creator wins even when its N TTL has already expired the item (memcached 1.6.18).
    c.check(b"mg v0 N-1 s\r\n", b"HD s0 W\r\n");
    c.check(b"mg v0 N2592001 s\r\nmg v0\r\n", b"HD s0 W\r\nEN\r\n");
    // So does a reader under the R threshold whose T expires the item.
    c.check(b"set v0 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"mg v0 T-1 R30 s\r\nmg v0\r\n", b"HD s1 W\r\nEN\r\n");
    // Filling it clears the marks.
    c.check(b"ms v1 3 T60\r\nnew\r\n", b"HD\r\n");
    c.check(b"mg v1 v\r\n", b"VA 3\r\nnew\r\n");
    // R: a hit whose TTL is below the threshold wins once.
    c.check(b"set r 0 10 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"mg r R30 t\r\n", b"HD t10 W\r\n");
    c.check(b"mg r R30 t\r\n", b"HD t10 Z\r\n");
    c.check(b"mg r R5\r\n", b"HD Z\r\n");
    // memcached compares in whole seconds: a TTL of exactly R does not qualify.
    c.check(b"set r2 0 100 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"mg r2 R100 t\r\n", b"HD t100\r\n");
    c.check(b"mg r2 R101 t\r\n", b"HD t100 W\r\n");
    // An item the request's own T expired qualifies only under a threshold in the future.
    c.check(b"set r3 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"mg r3 T-1 R2592001 s\r\n", b"HD s1\r\n");
    // md I: the item stays, stale (X), with a new cas; the first reader wins.
    c.check(b"set s 0 100 3\r\nabc\r\n", b"STORED\r\n");
    let old = cas_of(&mut c, "s");
    c.check(b"md s I T30 k\r\n", b"HD ks\r\n");
    c.check(b"mg s t v\r\n", b"VA 3 t30 X W\r\nabc\r\n");
    c.check(b"mg s v\r\n", b"VA 3 Z X\r\nabc\r\n");
    // ms I with an older cas stores as stale, keeping the TTL and the token.
    c.check(format!("ms s 3 I C{old}\r\nold\r\n").as_bytes(), b"HD\r\n");
    c.check(b"mg s t v\r\n", b"VA 3 t30 Z X\r\nold\r\n");
    c.check(b"ms s 3 I C99999999\r\nnew\r\n", b"EX\r\n");
    c.check(b"ms s 3 I C0\r\nnew\r\n", b"EX\r\n");
    // A plain write makes it fresh again.
    c.check(b"ms s 3\r\nnew\r\n", b"HD\r\n");
    c.check(b"mg s t v\r\n", b"VA 3 t-1\r\nnew\r\n");
    // incr/decr/ma write a result that fits in place, and the item keeps its marks; a
    // longer result is a new item, fresh (memcached 1.6.18's do_add_delta).
    c.check(b"set st 0 0 2\r\n10\r\nmd st I\r\n", b"STORED\r\nHD\r\n");
    c.check(b"incr st 1\r\nmg st v\r\n", b"11\r\nVA 2 X W\r\n11\r\n");
    c.check(b"ma st MD v\r\nmg st v\r\n", b"VA 2\r\n10\r\nVA 2 Z X\r\n10\r\n");
    c.check(b"decr st 1\r\nmg st v\r\n", b"9\r\nVA 2 Z X\r\n9 \r\n");
    c.check(b"incr st 91\r\nmg st v\r\n", b"100\r\nVA 3\r\n100\r\n");
    c.check(b"md st I\r\nma st D900 v\r\nmg st v\r\n", b"HD\r\nVA 4\r\n1000\r\nVA 4\r\n1000\r\n");
}

#[test]
fn meta_set() {
    let t = start();
    let mut c = Raw::connect(t.mc);
    c.check(b"ms b 3\r\nxyz\r\n", b"HD\r\n");
    c.check(b"ms b 3 k Oq1 F7 T0\r\nxyz\r\n", b"HD kb Oq1\r\n");
    c.check(b"mg b v f t\r\n", b"VA 3 f7 t-1\r\nxyz\r\n");
    c.check(b"ms b 3 T100 F1\r\nabc\r\n", b"HD\r\n");
    c.check(b"mg b v f t\r\n", b"VA 3 f1 t100\r\nabc\r\n");
    // Modes: E add, A append, P prepend, R replace, S set.
    c.check(b"ms b 1 MA\r\nd\r\n", b"HD\r\n");
    c.check(b"ms b 1 MP\r\nz\r\n", b"HD\r\n");
    c.check(b"mg b v f\r\n", b"VA 5 f1\r\nzabcd\r\n");
    c.check(b"ms nb 3 MA c k Oq\r\nxyz\r\n", b"NS c0 knb Oq\r\n");
    c.check(b"ms nb 3 MP\r\nxyz\r\n", b"NS\r\n");
    c.check(b"ms nb 3 ME\r\nxyz\r\n", b"HD\r\n");
    c.check(b"ms nb 3 ME c\r\nxyz\r\n", b"NS c0\r\n");
    c.check(b"ms nb 3 MR\r\nabc\r\n", b"HD\r\n");
    c.check(b"ms nb3 3 MR\r\nxyz\r\n", b"NS\r\n");
    c.check(b"ms nb 3 MS\r\nxyz\r\n", b"HD\r\n");
    c.check(b"ms nb 3 MX\r\nxyz\r\nmn\r\n", b"CLIENT_ERROR invalid mode for ms M token\r\nMN\r\n");
    // C: compare and swap; a missing key is NF, a wrong cas EX.
    c.check(b"ms nb 3 C999999999 c\r\nxyz\r\n", b"EX c0\r\n");
    c.check(b"ms nb2 3 C999 c k\r\nxyz\r\n", b"NF c0 knb2\r\n");
    let v = cas_of(&mut c, "nb");
    c.send(format!("ms nb 3 C{v} c\r\nnew\r\n").as_bytes());
    let l = String::from_utf8(read_until(&mut c, b"\r\n")).unwrap();
    let nv: u64 = l.trim_end().strip_prefix("HD c").unwrap().parse().unwrap();
    assert_eq!(cas_of(&mut c, "nb"), nv);
    // Append with C: only onto that version.
    c.check(format!("ms nb 1 MA C{v}\r\n!\r\n").as_bytes(), b"EX\r\n");
    c.check(format!("ms nb 1 MA C{nv}\r\n!\r\n").as_bytes(), b"HD\r\n");
    c.check(b"mg nb v\r\n", b"VA 4\r\nnew!\r\n");
    // Append asked for its cas reports the item's new one.
    let l = line(&mut c, b"ms nb 1 MA c\r\n?\r\n");
    let av: u64 = l.trim_end().strip_prefix("HD c").unwrap().parse().unwrap();
    assert_eq!(cas_of(&mut c, "nb"), av);
    c.check(b"mg nb v\r\n", b"VA 5\r\nnew!?\r\n");
    // q hides HD only.
    c.check(b"ms nb 3 q\r\nxyz\r\nmn\r\n", b"MN\r\n");
    c.check(b"ms nb3 3 MR q\r\nxyz\r\nmn\r\n", b"NS\r\nMN\r\n");
    // Errors: the data block is swallowed.
    c.check(b"ms k\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.check(b"ms k 2 Z\r\nab\r\nmn\r\n", b"CLIENT_ERROR invalid flag\r\nMN\r\n");
    c.check(b"ms k 2 Fx\r\nab\r\nmn\r\n", b"CLIENT_ERROR bad command line format\r\nMN\r\n");
    c.check(b"ms k 2\r\nabc\r\n", b"CLIENT_ERROR bad data chunk\r\nERROR\r\n");
    // A negative TTL stores an already expired item, which still gets a cas (memcached
    // 1.6.18 answers `HD c<cas>`, not `c0`).
    c.check(b"ms k 2 T-1\r\nab\r\nmg k\r\n", b"HD\r\nEN\r\n");
    let l = line(&mut c, b"ms k 2 T-1 c\r\nab\r\n");
    let ev: u64 = l.trim_end().strip_prefix("HD c").unwrap().parse().unwrap();
    assert_ne!(ev, 0, "{l:?}");
}

/// memcached 1.6.18's `do_add_delta` writes a result that fits in place, padded with spaces
/// to the old length, and `get` returns the padding; a longer result gets a new item of just
/// its digits. The data is read back with `safe_strtoull`, so leading whitespace, a sign,
/// anything after whitespace or a NUL, and the padding itself still count as a number.
/// (Every reply here was checked against memcached 1.6.18.)
#[test]
fn counters_shrink_in_place_padded_with_spaces() {
    let t = start();
    let mut c = Raw::connect(t.mc);
    let mut r = Raw::connect(t.resp);
    c.check(b"set k 5 0 4\r\n1000\r\n", b"STORED\r\n");
    c.check(b"decr k 1\r\n", b"999\r\n");
    c.check(b"get k\r\n", b"VALUE k 5 4\r\n999 \r\nEND\r\n");
    // The padded number is still a number, and grows back into its room.
    c.check(b"incr k 1\r\n", b"1000\r\n");
    c.check(b"get k\r\n", b"VALUE k 5 4\r\n1000\r\nEND\r\n");
    c.check(b"decr k 995\r\ndecr k 1\r\n", b"5\r\n4\r\n");
    c.check(b"get k\r\n", b"VALUE k 5 4\r\n4   \r\nEND\r\n");
    // Longer than the old value: a new item of exactly the digits.
    c.check(b"set e 0 0 3\r\n99 \r\nincr e 1\r\nincr e 900\r\n", b"STORED\r\n100\r\n1000\r\n");
    c.check(b"get e\r\n", b"VALUE e 0 4\r\n1000\r\nEND\r\n");
    // What safe_strtoull accepts in item data.
    c.check(b"set a 0 0 6\r\n 5 abc\r\nincr a 1\r\n", b"STORED\r\n6\r\n");
    c.check(b"get a\r\n", b"VALUE a 0 6\r\n6     \r\nEND\r\n");
    c.check(b"set b 0 0 3\r\n+5\t\r\nincr b 10\r\n", b"STORED\r\n15\r\n");
    c.check(b"get b\r\n", b"VALUE b 0 3\r\n15 \r\nEND\r\n");
    c.check(b"set z 0 0 5\r\n5\0xyz\r\nincr z 1\r\n", b"STORED\r\n6\r\n");
    c.check(b"get z\r\n", b"VALUE z 0 5\r\n6    \r\nEND\r\n");
    c.check(b"set d 0 0 2\r\n-0\r\nincr d 1\r\n", b"STORED\r\n1\r\n");
    c.check(b"set w 0 0 21\r\n-18446744073709551615\r\nincr w 1\r\n", b"STORED\r\n2\r\n");
    c.check(b"set t 0 0 3\r\n\t\n7\r\nincr t 1\r\n", b"STORED\r\n8\r\n");
    let nan = b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";
    for v in [&b"12abc"[..], b" ", b"\x005", b"18446744073709551615 -"] {
        let mut req = format!("set x 0 0 {}\r\n", v.len()).into_bytes();
        req.extend_from_slice(v);
        req.extend_from_slice(b"\r\nincr x 0\r\n");
        let mut want = b"STORED\r\n".to_vec();
        want.extend_from_slice(nan);
        c.check(&req, &want);
    }
    // ma stores the same padded bytes but answers with the number alone.
    c.check(b"set m 5 0 4\r\n1000\r\nma m MD v\r\n", b"STORED\r\nVA 3\r\n999\r\n");
    c.check(b"get m\r\n", b"VALUE m 5 4\r\n999 \r\nEND\r\n");
    c.check(b"ma m v D5\r\n", b"VA 4\r\n1004\r\n");
    c.check(b"set m 0 0 6\r\n 5 abc\r\nma m v\r\n", b"STORED\r\nVA 1\r\n6\r\n");
    c.check(b"get m\r\n", b"VALUE m 0 6\r\n6     \r\nEND\r\n");
    // One keyspace: Redis sees the stored bytes, padding and all (and its INCR, like Redis's,
    // refuses them); memcached's incr still reads them.
    c.check(b"set n 0 0 2\r\n10\r\ndecr n 1\r\n", b"STORED\r\n9\r\n");
    r.check(&cmd(&[b"GET", b"n"]), b"$2\r\n9 \r\n");
    r.check(&cmd(&[b"INCR", b"n"]), b"-ERR value is not an integer or out of range\r\n");
    c.check(b"incr n 1\r\n", b"10\r\n");
    r.check(&cmd(&[b"GET", b"n"]), b"$2\r\n10\r\n");
    r.check(&cmd(&[b"INCR", b"n"]), b":11\r\n");
}

#[test]
fn meta_delete_arithmetic_debug() {
    let t = start();
    let mut c = Raw::connect(t.mc);
    c.check(b"set a 5 0 3\r\nabc\r\n", b"STORED\r\n");
    c.check(b"md a C99999999 k\r\n", b"EX ka\r\n");
    let v = cas_of(&mut c, "a");
    c.check(format!("md a C{v} Oo\r\n").as_bytes(), b"HD Oo\r\n");
    c.check(b"md a\r\n", b"NF\r\n");
    c.check(b"md a Oxx k\r\n", b"NF Oxx ka\r\n");
    c.check(b"md a q Oxx k\r\n", b"NF Oxx ka\r\n");
    c.check(b"set a 5 0 3\r\nabc\r\n", b"STORED\r\n");
    c.check(b"md a q\r\nmn\r\n", b"MN\r\n");
    c.check(b"mg a\r\n", b"EN\r\n");
    c.check(b"md a x\r\n", b"NF\r\n");
    // x: the key stays with an empty value and the given flags.
    c.check(b"set a 5 0 3\r\nabc\r\n", b"STORED\r\n");
    c.check(b"md a x F3\r\n", b"HD\r\n");
    c.check(b"mg a v f\r\n", b"VA 0 f3\r\n\r\n");
    c.check(b"md a !\r\n", b"CLIENT_ERROR invalid or duplicate flag\r\n");

    c.check(b"set n 3 0 2\r\n10\r\n", b"STORED\r\n");
    c.check(b"ma n\r\n", b"HD\r\n");
    c.check(b"ma n v\r\n", b"VA 2\r\n12\r\n");
    c.check(b"ma n v t k Oo q\r\n", b"");
    c.check(b"ma n MD D20 v\r\n", b"VA 1\r\n0\r\n");
    c.check(b"ma n M- v\r\n", b"VA 1\r\n0\r\n");
    c.check(b"ma n M+ D18446744073709551615 v\r\n", b"VA 20\r\n18446744073709551615\r\n");
    c.check(b"ma n MI D2 v\r\n", b"VA 1\r\n1\r\n");
    c.check(b"ma n q\r\nmn\r\n", b"MN\r\n");
    c.check(b"mg n v f\r\n", b"VA 20 f3\r\n2                   \r\n");
    c.check(b"ma missing\r\n", b"NF\r\n");
    c.check(b"ma missing k Oo q\r\n", b"NF kmissing Oo\r\n");
    c.check(b"ma missing N0 J13 v t\r\n", b"VA 2 t-1\r\n13\r\n");
    c.check(b"ma missing2 N30 J13 v t q\r\n", b"VA 2 t30\r\n13\r\n");
    c.check(b"ma a\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
    c.check(b"ma n C99999999 v\r\n", b"EX\r\n");
    let v = cas_of(&mut c, "n");
    c.send(format!("ma n C{v} c v\r\n").as_bytes());
    let reply = String::from_utf8(read_until(&mut c, b"\r\n3\r\n")).unwrap();
    let nv: u64 = reply.lines().next().unwrap().strip_prefix("VA 1 c").unwrap().parse().unwrap();
    assert_eq!(cas_of(&mut c, "n"), nv);
    c.check(b"ma n T30 t v\r\n", b"VA 1 t30\r\n4\r\n");
    c.check(b"ma n t T60 v\r\n", b"VA 1 t30\r\n5\r\n");
    c.check(b"mg n t\r\n", b"HD t60\r\n");
    c.check(b"ma n MX\r\n", b"CLIENT_ERROR invalid mode for ma M token\r\n");
    c.check(b"ma n Dx\r\n", b"CLIENT_ERROR invalid or duplicate flag\r\n");

    c.check(b"set a 5 0 3\r\nabc\r\n", b"STORED\r\n");
    let v = cas_of(&mut c, "a");
    c.check(b"me a\r\n", format!("ME a exp=-1 la=0 cas={v} fetch=no cls=1 size=67\r\n").as_bytes());
    c.check(b"set abcdefgh 0 100 10\r\n0123456789\r\n", b"STORED\r\n");
    let v = cas_of(&mut c, "abcdefgh");
    c.check(b"me abcdefgh\r\n", format!("ME abcdefgh exp=-100 la=0 cas={v} fetch=no cls=1 size=77\r\n").as_bytes());
    c.check(b"me nope\r\n", b"EN\r\n");
    c.check(b"me\r\n", b"CLIENT_ERROR bad command line format\r\n");
}

#[test]
fn stats() {
    let t = start();
    let mut c = Raw::connect(t.mc);
    c.check(b"set a 0 0 1\r\nx\r\nget a b\r\n", b"STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
    c.send(b"stats\r\n");
    let s = String::from_utf8(read_until(&mut c, b"END\r\n")).unwrap();
    assert!(s.starts_with("STAT pid "), "{s}");
    for want in [
        "STAT version 1.6.21\r\n",
        "STAT implementation larder/",
        "STAT cmd_get 2\r\n",
        "STAT cmd_set 1\r\n",
        "STAT get_hits 1\r\n",
        "STAT get_misses 1\r\n",
        "STAT curr_items 1\r\n",
        "STAT total_items 1\r\n",
        "STAT threads 2\r\n",
        "STAT curr_connections 1\r\n",
        "STAT limit_maxbytes ",
        "STAT bytes ",
        "STAT uptime ",
        "STAT time ",
    ] {
        assert!(s.contains(want), "{want:?} missing from {s}");
    }
    assert!(s.lines().all(|l| l == "END" || l.split(' ').count() == 3), "{s}");
    c.send(b"stats settings\r\n");
    let s = String::from_utf8(read_until(&mut c, b"END\r\n")).unwrap();
    assert!(s.contains("STAT item_size_max 1048576\r\n") && s.contains("STAT cas_enabled yes\r\n"), "{s}");
    c.send(b"stats items\r\n");
    let s = String::from_utf8(read_until(&mut c, b"END\r\n")).unwrap();
    assert!(s.starts_with("STAT items:1:number 1\r\n"), "{s}");
    c.send(b"stats slabs\r\n");
    let s = String::from_utf8(read_until(&mut c, b"END\r\n")).unwrap();
    assert!(s.contains("STAT active_slabs 1\r\n"), "{s}");
    c.send(b"stats conns\r\n");
    let s = String::from_utf8(read_until(&mut c, b"END\r\n")).unwrap();
    assert!(s.contains(":state conn_parse_cmd\r\n"), "{s}");
    c.check(b"stats cachedump 1 10\r\n", b"ITEM a [1 b; 0 s]\r\nEND\r\n");
    c.check(b"stats cachedump 2 10\r\n", b"END\r\n");
    c.check(b"stats sizes\r\n", b"STAT sizes_status disabled\r\nEND\r\n");
    c.check(b"stats foo\r\n", b"ERROR\r\n");
    c.check(b"stats detail\r\n", b"CLIENT_ERROR usage: stats detail on|off|dump\r\n");
    c.check(b"stats detail on\r\nstats detail dump\r\n", b"OK\r\nEND\r\n");
    c.check(b"stats reset\r\n", b"RESET\r\n");
    c.send(b"stats\r\n");
    let s = String::from_utf8(read_until(&mut c, b"END\r\n")).unwrap();
    assert!(s.contains("STAT cmd_get 0\r\n"), "{s}");
    // Counting goes on from the new zero.
    c.check(b"get a\r\nget nosuch\r\n", b"VALUE a 0 1\r\nx\r\nEND\r\nEND\r\n");
    c.send(b"stats\r\n");
    let s = String::from_utf8(read_until(&mut c, b"END\r\n")).unwrap();
    assert!(s.contains("STAT cmd_get 2\r\nSTAT cmd_set 0\r\n"), "{s}");
    assert!(s.contains("STAT get_hits 1\r\nSTAT get_misses 1\r\n"), "{s}");
    let mut empty = Raw::connect(t.mc);
    empty.check(b"flush_all\r\nstats items\r\n", b"OK\r\nEND\r\n");
    empty.send(b"stats slabs\r\n");
    let s = String::from_utf8(read_until(&mut empty, b"END\r\n")).unwrap();
    assert!(s.starts_with("STAT active_slabs 0\r\nSTAT total_malloced "), "{s}");
}

/// get and gets frame every value length (the VALUE line is written before the value is
/// copied), integer values included, and a large value sent in small pieces arrives whole.
#[test]
fn get_frames_values_of_every_length() {
    let t = start();
    let mut c = Raw::connect(t.mc);
    let lens = [0usize, 1, 9, 10, 99, 100, 16_383, 16_384, 16_385, 100_000, 262_145, 1_000_000];
    for &n in &lens {
        let v: Vec<u8> = (0..n).map(|i| b'a' + (i * 7 % 26) as u8).collect();
        let mut req = format!("set v{n} {n} 0 {n}\r\n").into_bytes();
        req.extend_from_slice(&v);
        req.extend_from_slice(b"\r\n");
        for piece in req.chunks(7_001) {
            c.send(piece);
        }
        assert_eq!(c.read_n(8), b"STORED\r\n", "set of {n} bytes");
    }
    for &n in &lens {
        let v: Vec<u8> = (0..n).map(|i| b'a' + (i * 7 % 26) as u8).collect();
        c.send(format!("get v{n}\r\n").as_bytes());
        let mut want = format!("VALUE v{n} {n} {n}\r\n").into_bytes();
        want.extend_from_slice(&v);
        want.extend_from_slice(b"\r\nEND\r\n");
        assert!(c.read_n(want.len()) == want, "get of {n} bytes");
    }
    // Several keys in one get, hits and misses mixed; gets adds the CAS value.
    let (c10, c0) = (cas_of(&mut c, "v10"), cas_of(&mut c, "v0"));
    c.send(b"gets v10 nope v0\r\n");
    let want = format!("VALUE v10 10 10 {c10}\r\nahovcjqxel\r\nVALUE v0 0 0 {c0}\r\n\r\nEND\r\n");
    assert_eq!(String::from_utf8(read_until(&mut c, b"END\r\n")).unwrap(), want);
    // An integer value (set through RESP, stored as a number) is rendered in decimal.
    let mut r = Raw::connect(t.resp);
    ck(&mut r, "SET n -12345", "+OK\r\n");
    ck(&mut r, "INCR n", ":-12344\r\n");
    c.check(b"get n\r\n", b"VALUE n 0 6\r\n-12344\r\nEND\r\n");
}

#[test]
fn md_invalidate_is_one_step_under_concurrent_writes() {
    // `md k I` used to read the item's expiry, give the key a new version with that
    // expiry, then read the version back to mark it stale: three steps. A write landing
    // between them lost its TTL to the expiry read before it, or had its own fresh version
    // marked stale (mg then answered X and handed out a win token for a value nobody
    // invalidated). A thread marks `k` stale over and over while this one writes it
    // (alternately with and without a TTL) and reads it back.
    use larder_engine::{now_ms, Expiry, SetOptions};
    use std::sync::atomic::Ordering;
    let t = start();
    let store = t.server.as_ref().unwrap().shared.store.clone();
    let mut h = store.handle().unwrap();
    h.set(0, b"k", b"x", &SetOptions::default()).unwrap();
    let port = t.mc;
    let invalidator = background(move |stop| {
        let mut c = Raw::connect(port);
        let batch = b"md k I\r\n".repeat(32);
        while !stop.load(Ordering::Relaxed) {
            c.send(&batch);
            let mut got = 0;
            while got < 32 {
                let r = read_until(&mut c, b"\r\n");
                if r.is_empty() {
                    return; // the server stopped: the reading thread failed
                }
                got += r.windows(2).filter(|w| w == b"\r\n").count();
            }
        }
    });
    let mut c = Raw::connect(t.mc);
    // (reads of the fresh version, reads after an md had already moved it on)
    let mut seen = [0u32; 2];
    for i in 0..20_000 {
        let ttl = i % 2 == 1;
        let expiry = if ttl { Expiry::At(now_ms() + 1_000_000) } else { Expiry::Clear };
        let v = h.set(0, b"k", b"x", &SetOptions { expiry, ..Default::default() }).unwrap().version;
        let r = line(&mut c, b"mg k c t\r\n");
        let flags: Vec<&str> = r.trim_end().split(' ').collect();
        assert_eq!(flags[0], "HD", "{r:?}");
        let cas: u64 = flags.iter().find_map(|f| f.strip_prefix('c')).unwrap().parse().unwrap();
        let ttl_left: i64 = flags.iter().find_map(|f| f.strip_prefix('t')).unwrap().parse().unwrap();
        // md without T leaves the TTL alone: whatever this thread's write set.
        assert_eq!(ttl_left == -1, !ttl, "write {i} (ttl {ttl}) read back {r:?}");
        if cas == v {
            assert!(!flags.contains(&"X") && !flags.contains(&"W"), "write {i}: a fresh version marked stale: {r:?}");
        }
        seen[(cas != v) as usize] += 1;
    }
    drop(invalidator);
    // Both orders came up, or the two never overlapped and this proved nothing.
    assert!(seen[0] > 0 && seen[1] > 0, "fresh {} times, invalidated first {} times", seen[0], seen[1]);
}

#[test]
fn cachedump_lists_strings_while_a_key_changes_type() {
    // `stats cachedump` looked each key up twice: its metadata, then its length. A key of
    // another Redis type (a list: memcached has no word for it) failed the second lookup
    // with WRONGTYPE, and the reply ended in SERVER_ERROR after half the ITEM lines, with
    // no END: the client waits for an END that never comes. Keep one list in database 0 and
    // turn `k` from a string into a list and back while dumping.
    use larder_engine::{Kind, SetOptions};
    use std::sync::atomic::Ordering;
    let t = start();
    let store = t.server.as_ref().unwrap().shared.store.clone();
    let mut h = store.handle().unwrap();
    h.set(0, b"s", b"abc", &SetOptions::default()).unwrap();
    h.coll_write(0, b"l", Kind::List, true, |c| c.insert_at(0, b"x")).unwrap();
    let flipper = {
        let store = store.clone();
        background(move |stop| {
            let mut h = store.handle().unwrap();
            while !stop.load(Ordering::Relaxed) {
                h.set(0, b"k", b"v", &SetOptions::default()).unwrap();
                h.del(0, &[b"k"]).unwrap();
                h.coll_write(0, b"k", Kind::List, true, |c| c.insert_at(0, b"x")).unwrap();
                h.del(0, &[b"k"]).unwrap();
            }
        })
    };
    let mut c = Raw::connect(t.mc);
    // (dumps without `k`, dumps with it)
    let mut seen = [0u32; 2];
    for _ in 0..3000 {
        c.send(b"stats cachedump 1 0\r\n");
        let r = String::from_utf8(read_until(&mut c, b"END\r\n")).unwrap();
        let lines: Vec<&str> = r.strip_suffix("END\r\n").unwrap_or_else(|| panic!("no END: {r:?}")).lines().collect();
        assert!(lines.iter().all(|l| l.starts_with("ITEM ")), "{r:?}");
        assert!(lines.contains(&"ITEM s [3 b; 0 s]"), "{r:?}");
        assert!(!lines.iter().any(|l| l.starts_with("ITEM l ")), "a list listed: {r:?}");
        match lines.iter().find(|l| l.starts_with("ITEM k ")) {
            Some(l) => {
                assert_eq!(*l, "ITEM k [1 b; 0 s]", "{r:?}");
                seen[1] += 1;
            }
            None => seen[0] += 1,
        }
    }
    drop(flipper);
    assert!(seen[0] > 0 && seen[1] > 0, "without k {} times, with it {} times", seen[0], seen[1]);
}

/// A thread that writes `k` over and over, alternately with no TTL and with a very long
/// one, pausing between writes (so that a check right after a request often still sees the
/// item the request saw). Stops when the returned guard drops.
fn flip_ttls(store: &larder_engine::Store) -> Background {
    use larder_engine::{Expiry, SetOptions};
    use std::sync::atomic::Ordering;
    let store = store.clone();
    background(move |stop| {
        let mut h = store.handle().unwrap();
        let far = SetOptions { expiry: Expiry::At(larder_engine::now_ms() + 10_000_000), ..Default::default() };
        let pause = || {
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(20) {
                std::hint::spin_loop();
            }
        };
        while !stop.load(Ordering::Relaxed) {
            h.set(0, b"k", b"a", &SetOptions::default()).unwrap();
            pause();
            h.set(0, b"k", b"b", &far).unwrap();
            pause();
        }
    })
}

/// Whether an expiry is the one a TTL of 1000 s set just now.
fn ttl_1000s(expire_at: u64) -> bool {
    let now = larder_engine::now_ms();
    expire_at > now + 990_000 && expire_at <= now + 1_001_000
}

#[test]
fn gat_touches_the_item_it_returns() {
    // gat touched the key, then read it: a SET in between was returned, version and all,
    // with its own TTL, as if the gat had come after it but not touched it. Now one step:
    // while the version gats returned is still the key's, its TTL is the one gats set.
    let t = start();
    let store = t.server.as_ref().unwrap().shared.store.clone();
    let h = store.handle().unwrap();
    let writer = flip_ttls(&store);
    let mut c = Raw::connect(t.mc);
    let (mut checked, mut replaced) = (0u32, 0u32);
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 0.. {
        // At least 20k requests; then on until both cases have come up often enough (rarely
        // "replaced" when the machine has one core to spare), or 30 s have gone by.
        if i >= 20_000 && ((checked >= 20 && replaced >= 20) || Instant::now() > deadline) {
            break;
        }
        c.send(b"gats 1000 k\r\n");
        let r = String::from_utf8(read_until(&mut c, b"END\r\n")).unwrap();
        let Some(line) = r.lines().next().filter(|l| l.starts_with("VALUE ")) else { continue };
        let cas: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        match h.meta(0, b"k").unwrap() {
            Some(m) if m.version == cas => {
                assert!(ttl_1000s(m.expire_at), "{line:?} came back, but without the TTL gats set");
                checked += 1;
            }
            _ => replaced += 1,
        }
    }
    drop(writer);
    assert!(checked > 10 && replaced > 10, "checked {checked}, replaced before the check {replaced}");
}

#[test]
fn touches_and_modifications_leave_a_key_of_another_type_alone() {
    // memcached sees a Redis list as no item: everything that reads or changes an existing
    // item misses it (the miss reply of each command) and leaves it and its TTL alone.
    // These used to answer SERVER_ERROR WRONGTYPE (append, prepend, ms MA, ma), a
    // non-numeric CLIENT_ERROR (incr, decr), EXISTS (cas), HD (an mg asking for no value),
    // and `md l x` replaced the list with an empty string. (Whole-value stores, set and ms, replace it as Redis's SET
    // does, and delete deletes it, as DEL.)
    let t = start();
    let mut r = Raw::connect(t.resp);
    r.check(&cmd(&[b"RPUSH", b"l", b"x"]), b":1\r\n");
    let mut c = Raw::connect(t.mc);
    c.check(b"gat 100 l\r\n", b"END\r\n");
    c.check(b"touch l 100\r\n", b"NOT_FOUND\r\n");
    c.check(b"md l I T100\r\n", b"NF\r\n");
    c.check(b"mg l T100 v\r\n", b"EN\r\n");
    c.check(b"mg l\r\n", b"EN\r\n");
    c.check(b"mg l k O1 c\r\n", b"EN kl O1\r\n");
    c.check(b"append l 0 0 1\r\nz\r\n", b"NOT_STORED\r\n");
    c.check(b"prepend l 0 0 1\r\nz\r\n", b"NOT_STORED\r\n");
    c.check(b"incr l 1\r\n", b"NOT_FOUND\r\n");
    c.check(b"decr l 1\r\n", b"NOT_FOUND\r\n");
    c.check(b"cas l 0 0 1 1\r\nz\r\n", b"NOT_FOUND\r\n");
    c.check(b"ms l 1 MA\r\nz\r\n", b"NS\r\n");
    c.check(b"ms l 1 C1\r\nz\r\n", b"NF\r\n");
    c.check(b"ma l\r\n", b"NF\r\n");
    c.check(b"ma l N0 J5\r\n", b"NF\r\n");
    c.check(b"md l x\r\n", b"NF\r\n");
    c.check(b"md l x C1\r\n", b"NF\r\n");
    r.check(&cmd(&[b"TTL", b"l"]), b":-1\r\n");
    r.check(&cmd(&[b"LRANGE", b"l", b"0", b"-1"]), b"*1\r\n$1\r\nx\r\n");
    // `md x` on a string still empties it; with a TTL in the past it deletes it (not a
    // tombstone left expired, which DBSIZE would count until something reaped it).
    c.check(b"set s 5 0 3\r\nabc\r\n", b"STORED\r\n");
    c.check(b"md s x\r\n", b"HD\r\n");
    c.check(b"get s\r\n", b"VALUE s 0 0\r\n\r\nEND\r\n");
    c.check(b"md s x T-1\r\n", b"HD\r\n");
    r.check(&cmd(&[b"DBSIZE"]), b":1\r\n");
}

#[test]
fn a_cas_value_matches_in_all_its_64_bits() {
    // Versions are 40 bits wide inside an item; a CAS value past them matches nothing, as
    // in memcached, which compares all 64 (it used to match its low 40 bits).
    let t = start();
    let mut c = Raw::connect(t.mc);
    c.check(b"set k 0 0 1\r\na\r\n", b"STORED\r\n");
    c.send(b"gets k\r\n");
    let r = String::from_utf8(read_until(&mut c, b"END\r\n")).unwrap();
    let cas: u64 = r.lines().next().unwrap().rsplit(' ').next().unwrap().parse().unwrap();
    let high = cas + (1 << 40);
    c.check(format!("cas k 0 0 1 {high}\r\nb\r\n").as_bytes(), b"EXISTS\r\n");
    c.check(format!("md k I C{high}\r\n").as_bytes(), b"EX\r\n");
    c.check(format!("cas k 0 0 1 {cas}\r\nb\r\n").as_bytes(), b"STORED\r\n");
}

#[test]
fn mg_touches_only_the_item_it_read() {
    // `mg k T<ttl>` read the item, then touched the key: a SET in between got the TTL
    // instead, an item this mg never returned. The writer sets no TTL or a very long one,
    // so an item with mg's TTL whose version mg did not return is that bug.
    let t = start();
    let store = t.server.as_ref().unwrap().shared.store.clone();
    let h = store.handle().unwrap();
    let writer = flip_ttls(&store);
    let mut c = Raw::connect(t.mc);
    // First without the writer in the way: mg's T sets the item's TTL.
    c.check(b"set a 0 0 1\r\nx\r\n", b"STORED\r\n");
    c.check(b"mg a T30\r\n", b"HD\r\n");
    c.check(b"mg a t\r\n", b"HD t30\r\n");
    let (mut touched, mut others) = (0u32, 0u32);
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 0.. {
        // As in gat_touches_the_item_it_returns.
        if i >= 20_000 && ((touched >= 20 && others >= 20) || Instant::now() > deadline) {
            break;
        }
        c.send(b"mg k T1000 c\r\n");
        let r = String::from_utf8(read_until(&mut c, b"\r\n")).unwrap();
        let Some(cas) = r.strip_prefix("HD c").map(|v| v.trim_end().parse::<u64>().unwrap()) else {
            assert_eq!(r, "EN\r\n");
            continue;
        };
        let m = h.meta(0, b"k").unwrap().unwrap();
        if m.version == cas {
            assert!(ttl_1000s(m.expire_at), "mg returned version {cas} but did not give it its TTL");
            touched += 1;
        } else {
            assert!(!ttl_1000s(m.expire_at), "mg returned version {cas}, but version {} got its TTL", m.version);
            others += 1;
        }
    }
    drop(writer);
    assert!(touched > 10 && others > 10, "still the item mg read {touched} times, replaced {others}");
}

#[test]
fn cachedump_limit_counts_only_strings() {
    // Keys of other types are left out of a dump; they must not use up its limit either.
    let t = start();
    let mut r = Raw::connect(t.resp);
    for i in 0..40 {
        r.check(&cmd(&[b"RPUSH", format!("list{i}").as_bytes(), b"x"]), b":1\r\n");
    }
    let mut c = Raw::connect(t.mc);
    for k in ["a", "b", "c"] {
        c.check(format!("set {k} 0 0 1\r\nx\r\n").as_bytes(), b"STORED\r\n");
    }
    c.send(b"stats cachedump 1 3\r\n");
    let dump = String::from_utf8(read_until(&mut c, b"END\r\n")).unwrap();
    let mut items: Vec<&str> = dump.lines().filter(|l| l.starts_with("ITEM ")).collect();
    items.sort();
    assert_eq!(items, ["ITEM a [1 b; 0 s]", "ITEM b [1 b; 0 s]", "ITEM c [1 b; 0 s]"], "{dump:?}");
}

#[test]
fn only_one_concurrent_reader_wins_the_recache_token() {
    // `mg k R30` hands the recache token (W) to the first reader of an item whose TTL is
    // under 30 s; everyone after it sees Z. Readers used to look the mark up, decide they
    // had won, and record the token afterwards: two reads on different workers at the same
    // moment could both get W, and both clients would recompute the value. Each round, a
    // fresh version of `k`, then four connections ask at once; at most one may win.
    use larder_engine::{now_ms, Expiry, SetOptions};
    use std::sync::{Arc, Barrier, Mutex};
    const READERS: usize = 4;
    const ROUNDS: usize = 8000;
    let t = start();
    let store = t.server.as_ref().unwrap().shared.store.clone();
    let mut h = store.handle().unwrap();
    let barrier = Arc::new(Barrier::new(READERS + 1));
    // (round, won) of every reply
    let wins = Arc::new(Mutex::new(vec![0u32; ROUNDS]));
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let (barrier, wins, port) = (barrier.clone(), wins.clone(), t.mc);
            std::thread::spawn(move || {
                let mut c = Raw::connect(port);
                for round in 0..ROUNDS {
                    barrier.wait();
                    let r = line(&mut c, b"mg k R30 c\r\n");
                    let flags: Vec<&str> = r.trim_end().split(' ').collect();
                    assert_eq!(flags[0], "HD", "{r:?}");
                    let won = flags.contains(&"W");
                    assert!(won != flags.contains(&"Z"), "either W or Z: {r:?}");
                    wins.lock().unwrap()[round] += won as u32;
                    barrier.wait();
                }
            })
        })
        .collect();
    for _ in 0..ROUNDS {
        let expiry = Expiry::At(now_ms() + 10_000);
        h.set(0, b"k", b"x", &SetOptions { expiry, ..Default::default() }).unwrap();
        barrier.wait();
        barrier.wait();
    }
    for r in readers {
        r.join().unwrap();
    }
    let wins = wins.lock().unwrap();
    for (round, &w) in wins.iter().enumerate() {
        assert_eq!(w, 1, "round {round}: {w} readers won the token");
    }
}

#[test]
fn a_pipeline_runs_in_order_across_parse_ahead_groups_errors_and_quit() {
    // The worker parses up to 16 buffered requests ahead (to prefetch their keys), then
    // runs them; what does not parse (an error, a too-large set, an unfinished request)
    // goes through the one-at-a-time path. Replies must come out exactly as if each
    // request had been sent alone, whatever the mix, and nothing after `quit` runs.
    let t = start_with(|a| a.item_size_max = Some(1024));
    let mut c = Raw::connect(t.mc);
    let mut req = Vec::new();
    let mut want = Vec::new();
    req.extend_from_slice(b"set n 0 0 1\r\n0\r\n");
    want.extend_from_slice(b"STORED\r\n");
    for i in 1..=40 {
        // Counts across groups: any reordering or repeat shows.
        req.extend_from_slice(b"incr n 1\r\n");
        want.extend_from_slice(format!("{i}\r\n").as_bytes());
        match i {
            7 => {
                req.extend_from_slice(b"bogus\r\n");
                want.extend_from_slice(b"ERROR\r\n");
            }
            15 => {
                // Too large: refused, its data swallowed, the old value dropped.
                req.extend_from_slice(format!("set big 0 0 2000\r\n{}\r\n", "x".repeat(2000)).as_bytes());
                want.extend_from_slice(b"SERVER_ERROR object too large for cache\r\n");
            }
            16 => {
                req.extend_from_slice(b"set k 0 0 2 noreply\r\nab\r\nmg k v\r\n");
                want.extend_from_slice(b"VA 2\r\nab\r\n");
            }
            30 => {
                req.extend_from_slice(b"get n k missing\r\n");
                want.extend_from_slice(b"VALUE n 0 2\r\n30\r\nVALUE k 0 2\r\nab\r\nEND\r\n");
            }
            _ => {}
        }
    }
    req.extend_from_slice(b"quit\r\nincr n 1\r\nincr n 1\r\n");
    c.send(&req);
    let got = c.read_n(want.len());
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
    assert!(c.closed(), "the connection outlived quit");
    // The two incrs after quit never ran.
    let mut c = Raw::connect(t.mc);
    c.check(b"get n\r\n", b"VALUE n 0 2\r\n40\r\nEND\r\n");
}

/// The memcached client's line of CLIENT LIST (the test's only memcached connection).
fn memcache_client_line(t: &TestServer) -> String {
    let mut r = Raw::connect(t.resp);
    r.send(b"CLIENT LIST\r\n");
    let list = String::from_utf8_lossy(&read_until(&mut r, b"\n\r\n")).into_owned();
    let laddr = format!("laddr=127.0.0.1:{} ", t.mc);
    let line = list.lines().find(|l| l.contains(&laddr)).unwrap_or_else(|| panic!("no memcached client in {list}"));
    line.to_string()
}

#[test]
fn a_client_that_does_not_read_has_no_more_of_its_requests_run() {
    // 300 gets and a 300-key multiget of a 100 kB value: 60 MB of replies for 3 kB of
    // requests. As memcached, the server runs them only as fast as the client reads: what it
    // holds for the client stays near the 1 MiB it lets wait (it held all 60 MB).
    let t = start();
    let mut c = Raw::connect(t.mc);
    let value = "v".repeat(100_000);
    c.check(format!("set big 0 0 100000\r\n{value}\r\n").as_bytes(), b"STORED\r\n");
    let mut req = b"get big\r\n".repeat(300);
    req.extend_from_slice(format!("get{}\r\n", " big".repeat(300)).as_bytes());
    c.send(&req);
    std::thread::sleep(Duration::from_millis(300));
    let line = memcache_client_line(&t);
    let field = |name: &str| -> u64 {
        let v = line.split(' ').find_map(|f| f.strip_prefix(name)).unwrap_or_else(|| panic!("{name} in {line}"));
        v.parse().unwrap()
    };
    assert!(field("obl=") < 2_200_000, "{line}");
    assert!(field("tot-mem=") < 8_000_000, "{line}");
    // Every reply still comes, whole and in order, as the client reads.
    let hit = format!("VALUE big 0 100000\r\n{value}\r\n");
    let mut want = format!("{hit}END\r\n").repeat(300);
    want.push_str(&hit.repeat(300));
    want.push_str("END\r\n");
    let got = c.read_n(want.len());
    assert!(got == want.as_bytes(), "{} of {} bytes, or different", got.len(), want.len());
}

#[test]
fn a_client_that_does_not_read_has_no_more_of_its_input_read() {
    // While its replies wait, what the client goes on sending stays in its socket, as in
    // memcached, instead of piling up in the server's read buffer (which would stop only
    // at client-query-buffer-limit, 1 GB). 20 MB of `get big` lines are sent, as far as
    // the socket takes them; the server holds little of them.
    let t = start();
    let mut c = Raw::connect(t.mc);
    let value = "v".repeat(100_000);
    c.check(format!("set big 0 0 100000\r\n{value}\r\n").as_bytes(), b"STORED\r\n");
    c.s.set_write_timeout(Some(Duration::from_millis(500))).unwrap();
    let chunk = b"get big\r\n".repeat(10_000);
    let mut sent = 0;
    for _ in 0..(20_000_000 / chunk.len()) {
        match std::io::Write::write(&mut c.s, &chunk) {
            Ok(n) => sent += n,
            Err(_) => break, // the socket is full: the server stopped reading
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let line = memcache_client_line(&t);
    let qbuf: u64 = line.split(' ').find_map(|f| f.strip_prefix("qbuf=")).unwrap().parse().unwrap();
    assert!(qbuf < 1_000_000, "sent {sent}, the server holds {qbuf} of it: {line}");
    assert!(sent < 20_000_000, "the server read everything sent ({sent} bytes)");
    // Reading the replies lets the rest run: the first ones arrive whole.
    let hit = format!("VALUE big 0 100000\r\n{value}\r\nEND\r\n");
    let want = hit.repeat(50);
    let got = c.read_n(want.len());
    assert!(got.len() >= want.len() && &got[..want.len()] == want.as_bytes(), "{} bytes, or different", got.len());
}
