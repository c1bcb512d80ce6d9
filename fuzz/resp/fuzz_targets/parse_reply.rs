#![no_main]

use larder_resp::{parse_reply, parse_reply_with_depth, reply_len};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut pos = 0;
    while let Ok(Some((_, n))) = parse_reply(&data[pos..]) {
        assert!(n > 0 && n <= data.len() - pos);
        assert_eq!(reply_len(&data[pos..]), Ok(Some(n)));
        pos += n;
    }
    let _ = parse_reply_with_depth(data, 3);
});
