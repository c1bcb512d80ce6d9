#![no_main]

use larder_resp::{parse_command, parse_command_into, Args, Limits, Progress};
use libfuzzer_sys::fuzz_target;

// Small limits reach the "too big" and "invalid length" paths with small inputs.
const SMALL: Limits = Limits { proto_max_bulk_len: 64, max_inline: 32, max_multibulk: 16 };

fuzz_target!(|data: &[u8]| {
    for limits in [Limits::default(), SMALL] {
        let mut args = Args::new();
        let mut pos = 0;
        while let Ok(Some(n)) = parse_command_into(&data[pos..], &limits, &mut args) {
            assert!(n > 0 && n <= data.len() - pos);
            let rest = &data[pos..];
            let (cmd, m) = parse_command(rest, &limits).unwrap().unwrap();
            assert_eq!(m, n);
            assert_eq!(cmd, args.to_command(rest));
            // Whatever follows cannot change a complete request.
            if !args.is_empty() {
                let mut longer = rest[..n].to_vec();
                longer.extend_from_slice(b"PING\r\n");
                assert_eq!(parse_command(&longer, &limits).unwrap().unwrap().1, n);
            }
            pos += n;
        }
        // The first request arriving a few bytes a read, as a connection checks it: the
        // progress may hold a parse back only while the parser too finds it incomplete.
        let mut progress = Progress::default();
        for end in (0..=data.len()).step_by(1 + data.len() % 5) {
            let buf = &data[..end];
            if progress.started() && !progress.ready(buf, &limits) {
                assert_eq!(parse_command(buf, &limits), Ok(None), "held back at {end}");
                continue;
            }
            match parse_command(buf, &limits) {
                Ok(None) => {
                    progress.ready(buf, &limits);
                }
                _ => break,
            }
        }
        // A truncated request is incomplete or an error, never more.
        if let Ok(None) = parse_command(&data[pos..], &limits) {
            for cut in (0..data.len() - pos).step_by(7) {
                assert!(!matches!(parse_command(&data[pos..pos + cut], &limits), Ok(Some((c, _))) if !c.is_empty()));
            }
        }
    }
});
