//! Replays the seed corpus (and any cargo-fuzz corpus or crash artifacts
//! that exist locally) through every parser, so fuzz findings stay fixed
//! under plain `cargo test`.

use std::fs;
use std::path::{Path, PathBuf};

use larder_resp::{parse_command, parse_command_into, parse_reply, reply_len, Args, Limits};

fn files_in(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_in(&p, out);
        } else if p.is_file() {
            out.push(p);
        }
    }
}

/// Parses requests then replies off the front of `buf` until they stop,
/// checking the consumed counts.
fn replay(name: &Path, buf: &[u8]) {
    let limits = Limits::default();
    let mut args = Args::new();
    let mut pos = 0;
    while let Ok(Some(n)) = parse_command_into(&buf[pos..], &limits, &mut args) {
        assert!(n > 0 && n <= buf.len() - pos, "{}: consumed {n} at {pos}", name.display());
        assert_eq!(args.iter(&buf[pos..]).count(), args.len());
        let other = parse_command(&buf[pos..], &limits).unwrap().unwrap();
        assert_eq!(other.1, n, "{}", name.display());
        assert_eq!(other.0, args.to_command(&buf[pos..]), "{}", name.display());
        pos += n;
    }
    let mut pos = 0;
    while let Ok(Some((_, n))) = parse_reply(&buf[pos..]) {
        assert!(n > 0 && n <= buf.len() - pos, "{}: consumed {n} at {pos}", name.display());
        assert_eq!(reply_len(&buf[pos..]), Ok(Some(n)), "{}", name.display());
        pos += n;
    }
    // Every prefix of a corpus file is a truncated input too.
    for cut in 0..buf.len().min(512) {
        let _ = parse_command(&buf[..cut], &limits);
        let _ = parse_reply(&buf[..cut]);
    }
}

#[test]
fn corpus_replays_cleanly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    files_in(&root.join("tests/corpus"), &mut files);
    let seeds = files.len();
    assert!(seeds >= 20, "seed corpus missing: {seeds} files");
    for extra in ["../../fuzz/resp/corpus", "../../fuzz/resp/artifacts"] {
        files_in(&root.join(extra), &mut files);
    }
    for f in &files {
        let buf = fs::read(f).unwrap();
        replay(f, &buf);
    }
}

#[test]
fn seed_expectations() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let read = |n: &str| fs::read(root.join(n)).unwrap();
    let limits = Limits::default();
    let err = |n: &str| parse_command(&read(n), &limits).unwrap_err().to_string();
    assert_eq!(err("req_bad_count.bin"), "Protocol error: invalid multibulk length");
    assert_eq!(err("req_bad_bulk_len.bin"), "Protocol error: invalid bulk length");
    assert_eq!(err("req_negative_bulk.bin"), "Protocol error: invalid bulk length");
    assert_eq!(err("req_expected_dollar.bin"), "Protocol error: expected '$', got ':'");
    assert_eq!(err("inline_unbalanced.bin"), "Protocol error: unbalanced quotes in request");
    assert_eq!(err("inline_quote_glued.bin"), "Protocol error: unbalanced quotes in request");
    for n in [
        "req_truncated_payload.bin",
        "req_truncated_header.bin",
        "req_huge_count.bin",
        "req_huge_bulk.bin",
        "inline_no_newline.bin",
    ] {
        assert_eq!(parse_command(&read(n), &limits), Ok(None), "{n}");
    }
    assert_eq!(parse_reply(&read("reply_truncated.bin")), Ok(None));
    assert!(parse_reply(&read("reply_deep.bin")).is_err());
}
