//! Replays the committed fuzz corpus of the `repair_packet` target (`codec/fuzz/corpus/`)
//! through the same function the cargo-fuzz target calls, on stable Rust. A panic is a
//! finding; the test names the file. Refresh the corpus with `scripts/fuzz.sh 60 repair_packet`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

#[test]
fn repair_packet_corpus_replays_without_panics() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/repair_packet");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    assert!(
        files.len() >= 8,
        "{} holds {} inputs",
        dir.display(),
        files.len()
    );
    let failures: Vec<String> = files
        .iter()
        .filter(|f| {
            let data = std::fs::read(f).unwrap();
            catch_unwind(AssertUnwindSafe(|| codec::fec::fuzz_repair_packet(&data))).is_err()
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(failures.is_empty(), "panicked on:\n{}", failures.join("\n"));
}
