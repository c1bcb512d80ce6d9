//! Feeds arbitrary bytes to `larder_memcache::parse` as a connection would,
//! checking that it never panics and never claims bytes it was not given,
//! that a request which parses is merely incomplete when cut short, and that a long
//! multiget line without its end stays incomplete (the worker waits for its `\n`).
//!
//! Run from fuzz/memcache:
//! `cargo +nightly fuzz run parse corpus/parse ../../crates/memcache/tests/corpus`
#![no_main]

use larder_memcache::{is_long_multiget, item_size, parse, parse_window, Error, Limits, Request};
use libfuzzer_sys::fuzz_target;

fn drive(buf: &[u8], limits: &Limits) {
    let mut off = 0;
    while off < buf.len() {
        let rest = &buf[off..];
        if is_long_multiget(rest, limits) {
            // Such a line stays incomplete until its `\n`: a connection need not look again.
            let mut window = limits.read_buffer_size;
            assert!(matches!(parse_window(rest, &mut window, limits), Ok(None)));
            assert!(matches!(parse(rest, limits), Ok(None)));
        }
        match parse(rest, limits) {
            Ok(None) | Err(Error::Close) => return,
            Ok(Some((req, used))) => {
                assert!(used > 0 && used <= rest.len());
                // Cut short, a valid request is just incomplete; only a cut
                // command line longer than the unterminated-line limit may
                // instead close the connection.
                let cut = used - 1 - (rest[0] as usize % used);
                match parse(&rest[..cut], limits) {
                    Ok(None) => {}
                    Err(Error::Close) if cut > limits.max_unterminated_line => {}
                    other => panic!("cut {cut} of {used}: {other:?}"),
                }
                if let Request::Get { keys, .. } = req {
                    assert_eq!(keys.len(), keys.count());
                }
                off += used;
            }
            Err(e) => {
                assert!(e.consumed() > 0 && e.consumed() <= rest.len());
                off += (e.consumed() + e.skip()).min(rest.len());
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    drive(data, &Limits::default());
    drive(
        data,
        &Limits {
            // Room for 16 bytes of value under the longest key (the limit counts the item).
            item_size_max: item_size(8, 0, 16),
            max_key_len: 8,
            max_unterminated_line: 64,
            read_buffer_size: 256,
        },
    );
});
