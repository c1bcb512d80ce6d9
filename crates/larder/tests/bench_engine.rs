//! `larder bench-engine` end to end, at toy sizes: the second process attaches and runs its
//! gets and sets, the growth reader finds every key inserted before it started (the command
//! fails if one is missing), and every figure the README quotes is in the JSON it writes.

use std::process::Command;

/// The number after `"name":` in the JSON file (flat figures, one per name).
fn figure(json: &str, name: &str) -> f64 {
    let key = format!("\"{name}\":");
    let at = json.find(&key).unwrap_or_else(|| panic!("no figure {name}")) + key.len();
    let rest = json[at..].trim_start();
    let end = rest.find([',', '}']).unwrap();
    rest[..end].trim().parse().unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn bench_engine_runs_every_phase_and_writes_its_figures() {
    let json = std::env::temp_dir().join(format!("larder-bench-engine-{}.json", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_larder"))
        .args(["bench-engine", "--only", "get,set,remote,grow,memory", "--keys", "1000,3000", "--ops", "20000"])
        .args(["--grow-keys", "150000", "--memory-keys", "20000", "--no-pin", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let j = std::fs::read_to_string(&json).unwrap();
    let _ = std::fs::remove_file(&json);
    for keys in [1000, 3000] {
        for op in ["local.get", "local.set", "local.get_grouped", "local.set_grouped", "remote.get", "remote.set"] {
            assert!(figure(&j, &format!("keys{keys}.{op}.ops_per_sec")) > 0.0, "{op} at {keys} keys");
        }
        // The floor the get and set figures are read against (a timing: only its presence
        // is checked, as any comparison would be at the mercy of the machine's load).
        let read = figure(&j, &format!("keys{keys}.random_read_ns"));
        assert!(read > 0.0 && read.is_finite());
        assert!(figure(&j, &format!("keys{keys}.segment_resident_bytes")) > keys as f64 * 43.0);
        assert!(stdout.contains(&format!("get local median < 100 ns ({}k keys)", keys / 1000)), "{stdout}");
    }
    assert_eq!(figure(&j, "grow.reader.lost"), 0.0);
    assert!(figure(&j, "grow.reader.hits") > 0.0);
    assert!(figure(&j, "grow.windows") > 0.0);
    // 150k keys less the reader's 100k preloaded ones, each moving ~1.44 keys through splits.
    let moved = figure(&j, "grow.moved_per_insert_median");
    assert!(moved > 0.5 && moved < 3.0, "keys moved by splits per insert: {moved}");
    assert_eq!(figure(&j, "memory.keys"), 20000.0);
    assert!(figure(&j, "memory.bytes_per_key") >= 43.0);
}
