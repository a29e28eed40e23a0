//! Fuzz entry points of the server's own parsers: one `pub fn(&[u8])` per target, called by
//! the cargo-fuzz targets in `server/fuzz/fuzz_targets/` and, on stable, by
//! `tests/fuzz_corpus.rs`, which replays the committed corpus `server/fuzz/corpus/<target>/`.
//! Each function panics only on a finding: a parser that panics, or an accepted input that
//! breaks the property stated on the function.

use crate::config::{self, Cli, KEYS};
use crate::reports;
use crate::viewers::{Table, TableConfig, Telemetry};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

/// A target's entry point.
pub type Entry = fn(&[u8]);

/// Every target: its corpus directory name and its entry point.
pub const TARGETS: &[(&str, Entry)] = &[
    ("telemetry", telemetry),
    ("report", report),
    ("config_file", config_file),
];

/// Viewer telemetry as `POST /api/telemetry` and the UDP report channel carry it. Whatever
/// the bytes: no panic. What `validate` accepts survives a JSON round trip unchanged, and
/// enters the viewer table, which renders it as JSON that names the viewer, within the
/// table's per-viewer byte bound.
pub fn telemetry(data: &[u8]) {
    let Ok(t) = serde_json::from_slice::<Telemetry>(data) else {
        return;
    };
    if t.validate().is_err() {
        return;
    }
    let bytes = serde_json::to_vec(&t).expect("accepted telemetry serialises");
    let again: Telemetry = serde_json::from_slice(&bytes).expect("and parses again");
    assert_eq!(again, t, "accepted telemetry round-trips");
    let mut table = Table::new(TableConfig {
        viewer_timeout: Duration::from_secs(5),
        min_interval: Duration::ZERO,
        max_viewers: 4,
    });
    let id = t.viewer_id.clone();
    table
        .report(t, "192.0.2.1:9".into(), Instant::now(), 1.7e9)
        .expect("validated telemetry is accepted by the table");
    let out = crate::render::json::viewers(&table);
    let v: serde_json::Value = serde_json::from_slice(&out).expect("the table renders JSON");
    assert!(
        v.as_array()
            .is_some_and(|a| a.iter().any(|x| x["id"] == id.as_str())),
        "the viewer is listed"
    );
    let one = crate::render::json::viewer(&table, &id).expect("the viewer is found");
    assert!(one.len() < 64 * 1024, "one viewer renders in bounded bytes");
}

/// A UDP report datagram (`reports::parse`): no panic; what parses splits the datagram into
/// the signed part and a tag of `TAG_LEN` bytes, with a session id from inside it.
pub fn report(data: &[u8]) {
    let Some(r) = reports::parse(data) else {
        return;
    };
    assert_eq!(r.tag.len(), reports::TAG_LEN);
    assert_eq!(r.signed.len() + r.tag.len(), data.len());
    assert!(r.signed.starts_with(reports::MAGIC));
    assert!(r.session.len() <= 255 && r.json.len() < data.len());
}

/// A config file (TOML): no panic, whatever the text. What `load_file_text` accepts names
/// only known keys, and every session it holds resolves or is refused with an error naming
/// the session, never a panic; a resolved session's numbers are finite.
pub fn config_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let cfg = match config::load_file_text(text) {
        Ok(Cli::Run(c)) => c,
        Ok(Cli::Help(_)) => panic!("a file cannot ask for help"),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    assert!(KEYS.iter().any(|(k, _, _)| *k == "http_addr"));
    for (n, s) in cfg.sessions.iter().enumerate() {
        let ctx = format!("session[{n}]");
        match s.resolve(&ctx, "s0", Ipv4Addr::new(239, 255, 77, 0), 5004) {
            Ok(r) => {
                assert!(!r.rates_bps.is_empty(), "a session has layers");
                if let Some(v) = &r.video {
                    for x in [v.rate_headroom, v.key_headroom, v.pacer_peak] {
                        assert!(x.is_finite() && x > 0.0, "{x}");
                    }
                }
            }
            Err(e) => assert!(e.to_string().contains(&ctx), "{e}"),
        }
    }
}
