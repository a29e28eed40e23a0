//! The Layercast server's HTTP API as the edge uses it: session descriptions, key-picture
//! requests, telemetry. The bearer token is the server's player token.

use crate::cli::Config;
use crate::error::{Error, Result};
use proto::SessionInfo;
use std::net::Ipv4Addr;
use std::time::Duration;

/// The parts of a session's description the edge's upstream needs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Description {
    pub encrypted: bool,
    /// Join every group source-specifically to this sender (IGMPv3 INCLUDE {S}): in an SSM
    /// range a router ignores any-source joins.
    pub ssm_source: Option<Ipv4Addr>,
}

pub struct Server {
    base: String,
    token: String,
    client: reqwest::Client,
}

impl Server {
    pub fn new(c: &Config) -> Result<Server> {
        let mut b = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(3));
        if let Some(p) = &c.server_ca {
            let pem = std::fs::read(p)
                .map_err(|e| Error::io(format!("--server-ca {}", p.display()), e))?;
            let cert = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| Error::arg("server-ca", e.to_string()))?;
            b = b.add_root_certificate(cert);
        }
        Ok(Server {
            base: c.server.clone(),
            token: c.server_token.clone(),
            client: b.build().map_err(|e| Error::Server(e.to_string()))?,
        })
    }

    fn req(&self, m: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.client.request(m, format!("{}{path}", self.base));
        if self.token.is_empty() {
            r
        } else {
            r.bearer_auth(&self.token)
        }
    }

    /// The session description (`GET /api/sessions/{id}/announcement`).
    pub async fn announcement(&self, id: &str) -> Result<SessionInfo> {
        let r = self
            .req(
                reqwest::Method::GET,
                &format!("/api/sessions/{id}/announcement"),
            )
            .send()
            .await
            .map_err(|e| Error::Server(e.to_string()))?;
        match r.status().as_u16() {
            200 => {}
            404 => return Err(Error::NoSession(id.to_string())),
            s => return Err(Error::Server(format!("announcement of {id}: HTTP {s}"))),
        }
        let body = r.bytes().await.map_err(|e| Error::Server(e.to_string()))?;
        if body.len() > 1 << 20 {
            return Err(Error::Server("announcement over 1 MiB".into()));
        }
        serde_json::from_slice(&body)
            .map_err(|e| Error::Server(format!("announcement of {id}: {e}")))
    }

    /// What the session's description (`/api/sessions/{id}`) says beyond the announcement:
    /// whether its media is encrypted, and the SSM source receivers join (S,G) to. A
    /// description the edge cannot read counts as unencrypted and any-source, as before.
    pub async fn description(&self, id: &str) -> Result<Description> {
        let r = self
            .req(reqwest::Method::GET, &format!("/api/sessions/{id}"))
            .send()
            .await
            .map_err(|e| Error::Server(e.to_string()))?;
        if !r.status().is_success() {
            return Ok(Description::default());
        }
        let body = r.bytes().await.map_err(|e| Error::Server(e.to_string()))?;
        let v: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| Error::Server(e.to_string()))?;
        let ssm_source = match v.get("ssm_source").and_then(|s| s.as_str()) {
            Some(s) => Some(
                s.parse()
                    .map_err(|e| Error::Server(format!("session {id}: ssm_source {s:?}: {e}")))?,
            ),
            None => None,
        };
        Ok(Description {
            encrypted: v
                .get("encrypted")
                .and_then(|e| e.as_bool())
                .unwrap_or(false),
            ssm_source,
        })
    }

    /// Asks the sender for a key picture (`POST /api/sessions/{id}/keyframe`).
    pub async fn keyframe(&self, id: &str) -> Result<u16> {
        let r = self
            .req(
                reqwest::Method::POST,
                &format!("/api/sessions/{id}/keyframe"),
            )
            .send()
            .await
            .map_err(|e| Error::Server(e.to_string()))?;
        Ok(r.status().as_u16())
    }

    /// Posts one telemetry report (`POST /api/telemetry`): the status and, when refused, the
    /// server's reason (its first 200 bytes).
    pub async fn telemetry(&self, body: Vec<u8>) -> Result<(u16, String)> {
        let r = self
            .req(reqwest::Method::POST, "/api/telemetry")
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| Error::Server(e.to_string()))?;
        let status = r.status().as_u16();
        if r.status().is_success() {
            return Ok((status, String::new()));
        }
        let text = r.text().await.unwrap_or_default();
        let end = text.floor_char_boundary(200);
        Ok((status, text[..end].trim().to_string()))
    }
}
