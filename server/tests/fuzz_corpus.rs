//! Replays every committed fuzz corpus file (`server/fuzz/corpus/<target>/`) through the
//! entry point its cargo-fuzz target calls (`layercast_server::fuzz_entry`), on stable Rust.
//! A panic is a finding; the test names the target and the file.

use layercast_server::fuzz_entry::TARGETS;
use std::path::PathBuf;

#[test]
fn server_corpora_replay_without_findings() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let (mut total, mut failures) = (0, Vec::new());
    for (name, check) in TARGETS {
        let r = testkit::fuzz::replay_dir(&root.join(name), check);
        assert!(r.files > 0, "{name}: empty corpus");
        total += r.files;
        failures.extend(
            r.failures
                .iter()
                .map(|f| format!("{name}: {}", f.display())),
        );
    }
    testkit::record(
        "issue23/fuzz-server-corpus",
        &format!(
            "{} targets, {total} corpus inputs replayed, {} findings",
            TARGETS.len(),
            failures.len()
        ),
        Some(failures.is_empty()),
        "cargo test --release -p layercast-server --test fuzz_corpus",
    );
    assert!(failures.is_empty(), "{failures:#?}");
}
