//! Replay of a committed fuzz corpus on stable Rust: every file of a directory through the
//! body of a cargo-fuzz target, a panic being a finding.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// What one corpus replay found.
#[derive(Debug, Default)]
pub struct Replay {
    /// Files replayed.
    pub files: usize,
    /// Files on which `check` panicked.
    pub failures: Vec<PathBuf>,
}

/// Runs `check` over every file of `dir`, in name order. A missing directory is a panic (a
/// target without a committed corpus is a mistake, not an empty pass).
pub fn replay_dir(dir: &Path, check: impl Fn(&[u8])) -> Replay {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let mut r = Replay {
        files: files.len(),
        failures: Vec::new(),
    };
    for f in files {
        let data = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if catch_unwind(AssertUnwindSafe(|| check(&data))).is_err() {
            r.failures.push(f);
        }
    }
    r
}
