//! RESTORE's payload parser on arbitrary bytes: it must never panic nor allocate far
//! beyond its input, and what it accepts must encode back to a payload that decodes to the
//! same value. The body is fuzzed with a valid footer appended, so the checksum does not
//! stop every input at the door.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let _ = larder_dump::decode(body);
    if let Ok(v) = larder_dump::decode_body(body) {
        assert_eq!(larder_dump::decode(&larder_dump::encode(&v)), Ok(v));
    }
});
