//! Access control, hostile HTTP, signed announcements and TLS of a running server
//! (`docs/security.md`), on loopback inside a private network namespace (root; else skipped).
//! `cargo test --release -p layercast-server --test security`
//!
//! One test target, one module per topic; `support` holds the test server and the HTTP(S)
//! requests they all make.

#[path = "../common/mod.rs"]
mod common;
mod support;

mod hostile_http;
mod key_rotation;
mod reports;
mod stalled_source;
mod tls;
