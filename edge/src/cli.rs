//! Command line and the validated configuration.

use crate::error::{Error, Result};
use clap::Parser;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// Serve a Layercast session to browsers over WebRTC (WHEP).
#[derive(Debug, Parser)]
#[command(name = "layercast-edge", version)]
pub struct Args {
    /// The Layercast server's HTTP API (session descriptions, key requests, telemetry).
    #[arg(
        long,
        env = "LAYERCAST_SERVER",
        default_value = "http://127.0.0.1:8080"
    )]
    pub server: String,
    /// Bearer token for the server (a player token: announcements, key requests, telemetry).
    #[arg(long, env = "LAYERCAST_SERVER_TOKEN", default_value = "")]
    pub server_token: String,
    /// PEM certificate to trust for an https server (its self-signed certificate).
    #[arg(long)]
    pub server_ca: Option<PathBuf>,
    /// HTTP listen address: WHEP, the watch page, stats, /metrics.
    #[arg(long, default_value = "127.0.0.1:8090")]
    pub http: SocketAddr,
    /// UDP address of the one WebRTC socket every browser talks to.
    #[arg(long, default_value = "0.0.0.0:8443")]
    pub webrtc_bind: SocketAddr,
    /// Address browsers reach the WebRTC socket at (the ICE candidate in every answer);
    /// default: the bind address, which must then not be 0.0.0.0.
    #[arg(long)]
    pub public_ip: Option<IpAddr>,
    /// Interface address to join the session's multicast groups on.
    #[arg(long, default_value = "0.0.0.0")]
    pub interface: Ipv4Addr,
    /// Name of this edge (telemetry viewer ids, metric labels).
    #[arg(long, default_value = "edge")]
    pub name: String,
    /// Most browsers served at once; beyond it WHEP answers 503 with Retry-After.
    #[arg(long, default_value_t = 500)]
    pub max_peers: usize,
    /// Sessions to subscribe to at start (others are subscribed on the first viewer).
    #[arg(long = "session")]
    pub sessions: Vec<String>,
    /// Token with every right on this edge's API (empty: the API is open).
    #[arg(long, env = "LAYERCAST_EDGE_API_TOKEN", default_value = "")]
    pub api_token: String,
    /// Token for viewers: WHEP and the viewer's stats.
    #[arg(long, env = "LAYERCAST_EDGE_VIEWER_TOKEN", default_value = "")]
    pub viewer_token: String,
    /// Read-only token: /metrics and the edge's viewer list.
    #[arg(long, env = "LAYERCAST_EDGE_METRICS_TOKEN", default_value = "")]
    pub metrics_token: String,
    /// Bandwidth estimate a browser starts from, kbit/s.
    #[arg(long, default_value_t = 600)]
    pub initial_estimate_kbps: u64,
    /// Report each browser to the server's telemetry API.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub telemetry: bool,
    /// Telemetry posts per second at most (the server accepts 20 per address by default).
    #[arg(long, default_value_t = 15.0)]
    pub telemetry_rate: f64,
    /// A session without viewers is left after this many seconds.
    #[arg(long, default_value_t = 60)]
    pub idle_leave_s: u64,
    /// Per-viewer metric labels for at most this many viewers.
    #[arg(long, default_value_t = 200)]
    pub max_viewer_labels: usize,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub server: String,
    pub server_token: String,
    pub server_ca: Option<PathBuf>,
    pub http: SocketAddr,
    pub webrtc_bind: SocketAddr,
    pub candidate: SocketAddr,
    pub interface: Ipv4Addr,
    pub name: String,
    pub max_peers: usize,
    pub sessions: Vec<String>,
    pub tokens: crate::auth::Tokens,
    pub initial_estimate_bps: u64,
    pub telemetry: bool,
    pub telemetry_rate: f64,
    pub idle_leave: Duration,
    pub max_viewer_labels: usize,
}

impl Args {
    pub fn validate(self) -> Result<Config> {
        let server = self.server.trim_end_matches('/').to_string();
        if !(server.starts_with("http://") || server.starts_with("https://")) {
            return Err(Error::arg("server", "an http:// or https:// URL"));
        }
        let ip = match self.public_ip {
            Some(ip) => ip,
            None if !self.webrtc_bind.ip().is_unspecified() => self.webrtc_bind.ip(),
            None => {
                return Err(Error::arg(
                    "public-ip",
                    "needed when --webrtc-bind is a wildcard address (browsers must be told where to send)",
                ))
            }
        };
        if ip.is_unspecified() {
            return Err(Error::arg("public-ip", "must be a reachable address"));
        }
        if self.max_peers == 0 {
            return Err(Error::arg("max-peers", "at least 1"));
        }
        if !(self.telemetry_rate > 0.0 && self.telemetry_rate <= 10_000.0) {
            return Err(Error::arg("telemetry-rate", "in (0, 10000]"));
        }
        if self.name.is_empty()
            || self.name.len() > 32
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(Error::arg("name", "1-32 characters of [A-Za-z0-9_-]"));
        }
        for s in &self.sessions {
            if !crate::http::valid_id(s) {
                return Err(Error::arg("session", format!("{s:?} is not a session id")));
            }
        }
        if !(50..=100_000).contains(&self.initial_estimate_kbps) {
            return Err(Error::arg("initial-estimate-kbps", "in 50..=100000"));
        }
        Ok(Config {
            server,
            server_token: self.server_token,
            server_ca: self.server_ca,
            http: self.http,
            webrtc_bind: self.webrtc_bind,
            candidate: SocketAddr::new(ip, self.webrtc_bind.port()),
            interface: self.interface,
            name: self.name,
            max_peers: self.max_peers,
            sessions: self.sessions,
            tokens: crate::auth::Tokens {
                api: self.api_token,
                viewer: self.viewer_token,
                metrics: self.metrics_token,
            },
            initial_estimate_bps: self.initial_estimate_kbps * 1000,
            telemetry: self.telemetry,
            telemetry_rate: self.telemetry_rate,
            idle_leave: Duration::from_secs(self.idle_leave_s),
            max_viewer_labels: self.max_viewer_labels,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(a: &[&str]) -> Result<Config> {
        Args::try_parse_from(std::iter::once("layercast-edge").chain(a.iter().copied()))
            .map_err(|e| Error::arg("cli", e.to_string()))?
            .validate()
    }

    #[test]
    fn wildcard_bind_needs_a_public_ip() {
        let e = parse(&["--webrtc-bind", "0.0.0.0:9000"]).unwrap_err();
        assert!(e.to_string().contains("public-ip"), "{e}");
        let c = parse(&["--webrtc-bind", "0.0.0.0:9000", "--public-ip", "10.1.2.3"]).unwrap();
        assert_eq!(c.candidate, "10.1.2.3:9000".parse().unwrap());
        let c = parse(&["--webrtc-bind", "10.0.0.5:9001"]).unwrap();
        assert_eq!(c.candidate, "10.0.0.5:9001".parse().unwrap());
    }

    #[test]
    fn bad_values_are_named() {
        for (args, what) in [
            (
                vec!["--server", "ftp://x", "--public-ip", "1.2.3.4"],
                "server",
            ),
            (
                vec!["--max-peers", "0", "--public-ip", "1.2.3.4"],
                "max-peers",
            ),
            (vec!["--name", "a b", "--public-ip", "1.2.3.4"], "name"),
            (
                vec!["--session", "../x", "--public-ip", "1.2.3.4"],
                "session",
            ),
        ] {
            let e = parse(&args).unwrap_err();
            assert!(e.to_string().contains(what), "{args:?}: {e}");
        }
    }
}
