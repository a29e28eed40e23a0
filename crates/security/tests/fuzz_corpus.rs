//! Replays every saved fuzz corpus file (`congestion/fuzz/corpus/<target>/`) through the same
//! entry point the cargo-fuzz target calls (`security::fuzz_entry`), on stable Rust.
//! A panic is a finding; the test names the target and file.

use security::fuzz_entry::TARGETS;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

fn corpus_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus")
}

#[test]
fn every_target_has_a_seed_corpus() {
    for (name, _) in TARGETS {
        let dir = corpus_root().join(name);
        let n = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .count();
        assert!(n > 0, "{} is empty", dir.display());
    }
}

#[test]
fn corpus_replays_without_panics() {
    let mut failures = Vec::new();
    let mut total = 0;
    let mut targets_replayed = 0;
    for (name, check) in TARGETS {
        let dir = corpus_root().join(name);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue; // reported by every_target_has_a_seed_corpus
        };
        let mut files: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        files.sort();
        if !files.is_empty() {
            targets_replayed += 1;
        }
        for f in files {
            let data = std::fs::read(&f).unwrap();
            total += 1;
            if catch_unwind(AssertUnwindSafe(|| check(&data))).is_err() {
                failures.push(format!("{name}: {}", f.display()));
            }
        }
    }
    // Passes only when every target has a corpus and nothing panicked (the same conditions
    // as this test's and every_target_has_a_seed_corpus's assertions).
    testkit::record(
        "issue9/fuzz-corpus",
        &format!(
            "{targets_replayed} of {} targets, {total} corpus inputs replayed, {} crashes",
            TARGETS.len(),
            failures.len()
        ),
        Some(total > 0 && targets_replayed == TARGETS.len() && failures.is_empty()),
        "cargo test --release -p layercast-congestion --test fuzz_corpus",
    );
    assert!(
        total > 0,
        "no corpus files found under {}",
        corpus_root().display()
    );
    assert!(failures.is_empty(), "panicked on:\n{}", failures.join("\n"));
}

#[test]
fn entry_points_accept_empty_input_and_an_all_zero_mask() {
    // For the XOR-mask targets both inputs leave the valid message unchanged, so this also
    // checks each fixture verifies (the "iff unchanged" half of their assertion).
    for (_, check) in TARGETS {
        check(&[]);
        check(&[0u8; 64]);
    }
}
