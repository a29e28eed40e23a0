//! Replays the committed fuzz corpus of the offer path (`fuzz/corpus/offer/`) through the
//! cargo-fuzz target's body, on stable Rust. A panic is a finding; the test names the file.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

#[test]
fn offer_corpus_replays_without_panics() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/offer");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    files.sort();
    let mut failures = Vec::new();
    for f in &files {
        let data = std::fs::read(f).unwrap();
        if catch_unwind(AssertUnwindSafe(|| edge::whep::fuzz_offer(&data))).is_err() {
            failures.push(f.display().to_string());
        }
    }
    testkit::record(
        "issue22/fuzz-offer-corpus",
        &format!(
            "{} offer corpus inputs replayed, {} crashes",
            files.len(),
            failures.len()
        ),
        Some(!files.is_empty() && failures.is_empty()),
        "cargo test --release -p layercast-edge-core --test fuzz_corpus",
    );
    assert!(!files.is_empty(), "{} is empty", dir.display());
    assert!(failures.is_empty(), "panics on: {failures:?}");
}
