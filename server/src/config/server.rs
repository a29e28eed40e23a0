//! The server-level keys (file, environment, flags) and the configuration they resolve to.

use super::SessionConfig;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// Default announcement group. 239.255.0.0/16 is the IPv4 organisation-local scope (RFC 2365);
/// ".76" is "L" for Layercast. Port 5000 is below the layers' default range.
pub const DEFAULT_ANNOUNCE: &str = "239.255.76.1:5000";

/// Server-level keys, their defaults and a one-line description (also printed by `--help`).
pub const KEYS: &[(&str, &str, &str)] = &[
    ("config", "", "path of a TOML config file"),
    (
        "http_addr",
        "127.0.0.1:8080",
        "HTTP API / WebSocket / metrics listen address",
    ),
    (
        "announce",
        DEFAULT_ANNOUNCE,
        "announcement group:port (SAM), empty to disable",
    ),
    (
        "announce_interval_ms",
        "1000",
        "period of the multicast session announcement",
    ),
    (
        "interface",
        "0.0.0.0",
        "IPv4 address of the interface multicast goes out of",
    ),
    ("ttl", "8", "multicast TTL"),
    (
        "loop",
        "true",
        "IP_MULTICAST_LOOP (deliver to listeners on this host)",
    ),
    (
        "ssm_source",
        "",
        "source address announced for SSM receivers (default: interface)",
    ),
    (
        "group_base",
        "239.255.77.0",
        "first multicast group handed to new sessions",
    ),
    (
        "port_base",
        "5004",
        "first UDP port handed to new sessions (layer k: +2k)",
    ),
    (
        "dashboard_dir",
        "server/dashboard/dist",
        "directory of the built dashboard",
    ),
    (
        "telemetry_min_interval_ms",
        "500",
        "minimum spacing of telemetry posts per viewer",
    ),
    (
        "max_viewer_labels",
        "200",
        "cap on viewers exported with per-viewer metric labels",
    ),
    (
        "viewer_timeout_s",
        "5",
        "a viewer silent this long is marked gone",
    ),
    (
        "pacer_spin_us",
        "50",
        "the pacer sleeps until this long before a bunch, then spins",
    ),
    (
        "pacer_realtime",
        "true",
        "run pacer threads at SCHED_FIFO priority 10 if permitted",
    ),
    (
        "api_token",
        "",
        "bearer token for the control API (empty: generated at the first start; with dev, API open)",
    ),
    (
        "player_token",
        "",
        "bearer token for players: telemetry and media keys",
    ),
    (
        "dashboard_token",
        "",
        "read-only bearer token (GET, /metrics, WebSocket)",
    ),
    (
        "sam_key",
        "",
        "Ed25519 SAM signing key, 64 hex digits (overrides sam_key_file)",
    ),
    (
        "token_secret_file",
        "",
        "HS256 key (hex) of signed, scoped, expiring tokens (JWT); created (0600) if absent",
    ),
    (
        "sam_key_file",
        "",
        "file of the SAM signing key; made at first start (empty: a key per run)",
    ),
    (
        "dev",
        "false",
        "development mode: tokens optional (none: API open), plain HTTP, keys per run; loopback or a lab only",
    ),
    (
        "state_dir",
        "",
        "where the first start writes tokens, keys and the certificate, 0600 (default $XDG_STATE_HOME/layercast, else ~/.local/state/layercast)",
    ),
    (
        "tls",
        "",
        "serve the API over HTTPS (default true; with dev, false)",
    ),
    (
        "tls_cert",
        "",
        "PEM certificate; with tls_key, made self-signed there if both are absent",
    ),
    ("tls_key", "", "PEM private key of tls_cert"),
    (
        "http_io_timeout_ms",
        "10000",
        "an API connection silent this long (TLS handshake, request) is dropped",
    ),
    (
        "telemetry_per_addr_per_sec",
        "20",
        "telemetry posts per second accepted from one source address",
    ),
    (
        "udp_reports",
        "true",
        "accept viewer reports on each session's feedback port (false: HTTP telemetry only)",
    ),
    (
        "report_budget_bps",
        "2000000",
        "bit/s all viewers' UDP reports may take together (players space reports to fit)",
    ),
    (
        "http_idle_timeout_ms",
        "60000",
        "an API connection with nothing arriving this long is closed (keep-alive, WebSocket)",
    ),
    (
        "http_max_connections",
        "4096",
        "API connections open at once; more are closed at accept",
    ),
    (
        "http_listen_backlog",
        "4096",
        "connections the kernel holds complete but not yet accepted (capped by net.core.somaxconn)",
    ),
    (
        "http_max_websockets",
        "256",
        "live (/api/live) WebSocket clients at once",
    ),
    // Key rotation (crate::media_keys).
    (
        "media_key_refresh_ms",
        "10000",
        "how often players of encrypted sessions fetch the media keys again (a rotation's lead should be at least twice this)",
    ),
];

/// Resolved server-level configuration.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub http_addr: SocketAddr,
    pub announce: Option<(Ipv4Addr, u16)>,
    pub announce_interval: Duration,
    pub interface: Ipv4Addr,
    pub ttl: u32,
    pub multicast_loop: bool,
    pub ssm_source: Option<Ipv4Addr>,
    pub group_base: Ipv4Addr,
    pub port_base: u16,
    pub dashboard_dir: PathBuf,
    pub telemetry_min_interval: Duration,
    pub max_viewer_labels: usize,
    pub viewer_timeout: Duration,
    pub pacer_spin: Duration,
    pub pacer_realtime: bool,
    pub sessions: Vec<SessionConfig>,
    /// Bearer tokens (`crate::auth`); the signing key of signed tokens is added from
    /// `token_secret_file` by `crate::provision`, so that loading a configuration writes no
    /// file.
    pub tokens: crate::auth::Tokens,
    pub token_secret_file: Option<PathBuf>,
    /// SAM signing key as hex, if given directly.
    pub sam_key: Option<String>,
    /// SAM signing key file.
    pub sam_key_file: Option<PathBuf>,
    /// Development mode (`--dev`): no tokens needed, plain HTTP by default, keys per run.
    pub dev: bool,
    /// Where the first start writes what it generates (`crate::provision`).
    pub state_dir: PathBuf,
    /// HTTPS instead of HTTP.
    pub tls: bool,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Deadline of an API connection's TLS handshake and request head, and of each write.
    pub http_io_timeout: Duration,
    /// Token-bucket refill of telemetry posts per source address (burst: twice this).
    pub telemetry_per_addr_per_sec: f64,
    /// Idle (read) timeout of an API connection.
    pub http_idle_timeout: Duration,
    pub http_max_connections: usize,
    /// `listen(2)` backlog of the API socket: a burst of connections larger than it loses
    /// SYNs, which clients retry only after 1, 3, 7 s.
    pub http_listen_backlog: u32,
    pub http_max_websockets: usize,
    /// Viewer reports (`crate::reports`) on each session's feedback port.
    pub udp_reports: bool,
    pub report_budget_bps: u32,
    /// Key rotation: how often players fetch media keys again (`crate::media_keys`).
    pub media_key_refresh: Duration,
}
