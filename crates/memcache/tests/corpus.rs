//! Replays the seed corpus (tests/corpus/) and, when present, the fuzzer's
//! corpora (fuzz/memcache/corpus/*/) through the parser, at every split
//! point for small inputs. Checks the same invariants as the fuzz target.

use larder_memcache::{item_size, parse, Error, Limits};
use std::path::{Path, PathBuf};

/// Parses `buf` like a connection would; panics on a broken invariant.
fn drive(buf: &[u8], limits: &Limits) {
    let mut off = 0;
    while off < buf.len() {
        let rest = &buf[off..];
        match parse(rest, limits) {
            Ok(None) | Err(Error::Close) => return,
            Ok(Some((_, used))) => {
                assert!(used > 0 && used <= rest.len());
                off += used;
            }
            Err(e) => {
                assert!(e.consumed() > 0 && e.consumed() <= rest.len(), "{e:?}");
                off += (e.consumed() + e.skip()).min(rest.len());
            }
        }
    }
}

fn files_in(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_file() {
                out.push(p);
            }
        }
    }
}

#[test]
fn replay_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    files_in(&root.join("tests/corpus"), &mut files);
    assert!(files.len() >= 20, "seed corpus missing: {}", files.len());
    let fuzz = root.join("../../fuzz/memcache/corpus");
    if let Ok(rd) = std::fs::read_dir(&fuzz) {
        for d in rd.flatten() {
            files_in(&d.path(), &mut files);
        }
    }
    let limits = [
        Limits::default(),
        Limits {
            // Room for 8 bytes of value under the longest key (the limit counts the item).
            item_size_max: item_size(4, 0, 8),
            max_key_len: 4,
            max_unterminated_line: 16,
            read_buffer_size: 64,
        },
    ];
    for f in &files {
        let buf = std::fs::read(f).unwrap();
        for l in &limits {
            drive(&buf, l);
            // Every split point for small inputs; a spread of them otherwise,
            // so a large fuzzer corpus stays quick in debug builds.
            let step = (buf.len() / 64).max(1);
            for cut in (0..buf.len()).step_by(step) {
                drive(&buf[..cut], l);
            }
        }
    }
}
