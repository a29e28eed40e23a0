//! Test support shared by the crates: acceptance records, network namespaces ([`netns`]) and
//! test media ([`media`]).
//!
//! [`record`] writes one acceptance-check measurement where `scripts/acceptance.mjs` picks it
//! up to regenerate `docs/acceptance.md`. Tests call it with what they measured, so the table
//! is only ever written by a measurement.

pub mod fuzz;
pub mod http;
pub mod media;
pub mod netns;

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where measurements go: `$LAYERCAST_ACCEPTANCE_DIR`, else `<workspace>/target/acceptance`.
pub fn results_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("LAYERCAST_ACCEPTANCE_DIR") {
        return PathBuf::from(d);
    }
    // CARGO_MANIFEST_DIR of this crate is <workspace>/crates/testkit.
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join("target")
        .join("acceptance")
}

/// Records the measurement of acceptance check `id` (e.g. `era/AC-0`, `issue6/pp-accuracy-1M`).
///
/// `pass` is `None` for checks that only report a figure. `command` is the command that
/// reproduces the measurement. Errors writing the file are printed, never fatal: a test's
/// verdict comes from its assertions, not from this record.
pub fn record(id: &str, value: &str, pass: Option<bool>, command: &str) {
    let dir = results_dir();
    let at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let body = serde_json::json!({
        "id": id,
        "value": value,
        "pass": pass,
        "command": command,
        "at": iso8601(at),
    });
    let file = dir.join(format!("{}.json", id.replace('/', "__")));
    let res = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&file, body.to_string()));
    if let Err(e) = res {
        eprintln!("testkit: could not record {id} in {}: {e}", file.display());
    }
}

/// UTC date-time for a Unix time, without a date library.
fn iso8601(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm, public domain description).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_known_dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601(1_795_301_999), "2026-11-21T22:59:59Z");
    }

    #[test]
    fn record_writes_a_readable_file() {
        let dir = std::env::temp_dir().join(format!("lc-testkit-{}", std::process::id()));
        std::env::set_var("LAYERCAST_ACCEPTANCE_DIR", &dir);
        record(
            "test/dummy",
            "42 widgets",
            Some(true),
            "cargo test -p layercast-testkit",
        );
        let text = std::fs::read_to_string(dir.join("test__dummy.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["value"], "42 widgets");
        assert_eq!(v["pass"], true);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
