//! The player's side of `docs/security.md`: how it trusts the server's HTTPS certificate,
//! which token it presents, and what it learns from the session description before it joins
//! anything (the SAM public key, the media key of an encrypted session, the SSM source).
//!
//! Trust model: the HTTPS connection is authenticated by a pinned certificate fingerprint
//! (`--tls-fingerprint`, what the server logs at start) or a CA file (`--ca-file`), else the
//! system's CAs. Everything learnt over it (the Ed25519 key that then authenticates every SAM
//! on the announcement group, the media key) is only as good as that pin; over plain
//! `http://` it is only as good as the network path, which is why the server never hands out
//! media keys without a token and why `--tls-fingerprint` is the recommended setup.

use crate::error::{Error, Result};
use crate::http_client;
use openssl::hash::MessageDigest;
use openssl::ssl::{SslConnector, SslMethod, SslStream, SslVerifyMode};
use security::auth::{GroupKey, MediaOpener, ReceiverKey, SamVerifier};
use serde_json::Value;
use std::net::{Ipv4Addr, TcpStream};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// How the HTTP client authenticates the server and itself.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// Bearer token sent with every request.
    pub token: Option<String>,
    /// SHA-256 of the server certificate's DER: the only certificate accepted.
    pub fingerprint: Option<[u8; 32]>,
    /// PEM file of CA certificates to verify the server against (with its host name).
    pub ca_file: Option<PathBuf>,
}

static OPTIONS: OnceLock<ClientOptions> = OnceLock::new();

/// Sets the options once, at start.
pub fn set_client_options(o: ClientOptions) {
    let _ = OPTIONS.set(o);
}

/// The options in force (defaults if never set).
pub fn client_options() -> &'static ClientOptions {
    OPTIONS.get_or_init(ClientOptions::default)
}

/// Refuses a bearer token over plain `http://` to a server that is not on this host (F5): the
/// token, and the media and report keys it fetches, would cross the network in clear. A
/// loopback server (a local TLS-terminating proxy, tests) is allowed; `--insecure` allows the
/// rest.
pub fn check_token_transport(url: &str, insecure: bool) -> Result<()> {
    let Some(rest) = url.strip_prefix("http://") else {
        return Ok(());
    };
    let host = rest.split(['/', '?']).next().unwrap_or("");
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback || insecure {
        return Ok(());
    }
    Err(Error::arg(
        "token",
        format!("a token over plain http:// to {host} would cross the network in clear: use https:// (or --insecure)"),
    ))
}

/// SAMs read from the announcement socket per loop turn at most (the rest wait in the socket
/// buffer, and the kernel drops what does not fit).
pub const SAMS_PER_TURN: usize = 64;

/// Parses `--tls-fingerprint`: 64 hex digits, colons and a `sha256:` prefix allowed.
pub fn parse_fingerprint(s: &str) -> Result<[u8; 32]> {
    let t: String = s
        .trim()
        .trim_start_matches("sha256:")
        .chars()
        .filter(|c| *c != ':')
        .collect();
    security::auth::parse_hex32(&t, "TLS fingerprint")
        .map_err(|e| Error::arg("tls-fingerprint", e.to_string()))
}

/// Opens TLS over `tcp` to `host`, verifying the server as the options say.
pub fn tls_connect(host: &str, tcp: TcpStream) -> Result<SslStream<TcpStream>> {
    tls_connect_with(client_options(), host, tcp)
}

/// [`tls_connect`] with explicit options.
pub fn tls_connect_with(
    o: &ClientOptions,
    host: &str,
    tcp: TcpStream,
) -> Result<SslStream<TcpStream>> {
    let e = |what: &str, x: openssl::error::ErrorStack| {
        Error::io(what.to_string(), std::io::Error::other(x.to_string()))
    };
    let mut b = SslConnector::builder(SslMethod::tls_client()).map_err(|x| e("TLS setup", x))?;
    if let Some(ca) = &o.ca_file {
        b.set_ca_file(ca).map_err(|x| e("reading --ca-file", x))?;
    }
    let pin = o.fingerprint;
    if let Some(fp) = pin {
        // Pinning: the leaf certificate must be this one; chain and name do not matter.
        b.set_verify_callback(SslVerifyMode::PEER, move |_, ctx| {
            if ctx.error_depth() != 0 {
                return true;
            }
            ctx.current_cert()
                .and_then(|c| c.digest(MessageDigest::sha256()).ok())
                .is_some_and(|d| d.as_ref() == fp)
        });
    }
    let mut cfg = b.build().configure().map_err(|x| e("TLS setup", x))?;
    if pin.is_some() {
        cfg.set_verify_hostname(false);
    }
    cfg.connect(host, tcp).map_err(|x| {
        Error::io(
            format!("TLS handshake with {host}"),
            std::io::Error::other(x.to_string()),
        )
    })
}

/// Where this viewer's UDP reports go and the key they carry (`crate::report`).
#[derive(Clone)]
pub struct ReportChannel {
    /// The key API's `report_host` (the SAM's sender), if it names one.
    pub host: Option<std::net::IpAddr>,
    /// The session's feedback port.
    pub port: u16,
    pub key: ReceiverKey,
}

/// What the session description says about security.
pub struct SessionSecurity {
    /// Verifies SAMs on the announcement group.
    pub sam: Option<SamVerifier>,
    /// Opens the packets of an encrypted session.
    pub opener: Option<MediaOpener>,
    /// Join (S,G) with this source (IGMPv3 source-specific).
    pub ssm: Option<Ipv4Addr>,
    /// This receiver's TFMCC report key (sessions with `auth_reports`, TFMCC players only).
    pub report_key: Option<ReceiverKey>,
    /// The UDP report channel: the session's feedback port and this viewer's key
    /// (`crate::report`), when the server offers it and this player holds a token.
    pub telemetry: Option<ReportChannel>,
    /// How often to fetch the media keys again (the key API's `key_refresh_ms`): the next
    /// epoch's key is served ahead of a rotation (docs/security.md §9.3).
    pub key_refresh: Option<Duration>,
}

/// The opener of a key API answer: every key in `keys` (oldest first), else the one
/// `epoch`/`media_key` of a server that does not rotate.
pub fn opener_of(k: &Value) -> Result<MediaOpener> {
    let one = |v: &Value| -> Result<GroupKey> {
        let hex = v["media_key"]
            .as_str()
            .ok_or_else(|| Error::Protocol("key API: no media_key".into()))?;
        let epoch = v["epoch"]
            .as_u64()
            .and_then(|e| u16::try_from(e).ok())
            .ok_or_else(|| Error::Protocol("key API: bad epoch".into()))?;
        Ok(GroupKey::from_hex(hex, epoch)?)
    };
    let keys = match k["keys"].as_array() {
        Some(a) if !a.is_empty() => a.iter().map(one).collect::<Result<Vec<_>>>()?,
        _ => vec![one(k)?],
    };
    let mut o = MediaOpener::new(keys[0].clone());
    for g in &keys[1..] {
        o.add_key(g.clone());
    }
    Ok(o)
}

/// The key API's `key_refresh_ms`, at least a second.
fn key_refresh_of(k: &Value) -> Option<Duration> {
    k["key_refresh_ms"]
        .as_u64()
        .map(|ms| Duration::from_millis(ms.max(1000)))
}

/// Fetches the media keys again (`GET .../keys`, no receiver id: the media part only), for a
/// key refresh ahead of a rotation; the opener and the next refresh interval.
pub fn fetch_media_keys(
    description_url: &str,
    timeout: Duration,
) -> Result<(MediaOpener, Option<Duration>)> {
    let url = format!("{description_url}/keys");
    match http_client::request("GET", &url, None, timeout)? {
        (200, b) => {
            let k: Value =
                serde_json::from_slice(&b).map_err(|e| Error::Protocol(format!("{url}: {e}")))?;
            Ok((opener_of(&k)?, key_refresh_of(&k)))
        }
        (c, b) => Err(Error::Protocol(format!(
            "{url}: HTTP {c} {}",
            String::from_utf8_lossy(&b)
        ))),
    }
}

/// The session description URL of an announcement URL
/// (`.../api/sessions/ID/announcement` → `.../api/sessions/ID`).
pub fn description_url(announcement_url: &str) -> Option<String> {
    let base = announcement_url.split('?').next()?;
    let d = base.strip_suffix("/announcement")?;
    d.contains("/api/sessions/").then(|| d.to_string())
}

/// A fresh secret (32 hex digits, OS RNG) that binds this run's receiver id to this client at
/// the server: the key API issues an id's report key only to the client that first asked for
/// it with its binding (docs/security.md §9.7). Kept for the run, so the player can ask
/// again (a refresh) and get the same key; never sent anywhere else.
pub fn new_binding() -> Result<String> {
    let mut b = [0u8; 16];
    openssl::rand::rand_bytes(&mut b).map_err(|e| {
        Error::io(
            "random binding secret".to_string(),
            std::io::Error::other(e.to_string()),
        )
    })?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// The key API query for receiver `rid` with this client's `binding`.
pub fn keys_query(rid: Option<u32>, binding: &str) -> String {
    rid.map_or(String::new(), |r| format!("?rid={r}&binding={binding}"))
}

/// Fetches the session description (and, for an encrypted session, its media key; for a
/// TFMCC session with `auth_reports` and a player that reports as receiver `rid`, that
/// receiver's report key: `GET .../keys?rid=N&binding=B`, derived by the server from the
/// session's report secret, which never leaves it, and issued only to the holder of `B`).
pub fn fetch_security(
    description_url: &str,
    timeout: Duration,
    rid: Option<u32>,
    binding: &str,
) -> Result<SessionSecurity> {
    let get = |url: &str| -> Result<Value> {
        match http_client::request("GET", url, None, timeout)? {
            (200, b) => {
                serde_json::from_slice(&b).map_err(|e| Error::Protocol(format!("{url}: {e}")))
            }
            (c, b) => Err(Error::Protocol(format!(
                "{url}: HTTP {c} {}",
                String::from_utf8_lossy(&b)
            ))),
        }
    };
    let d = get(description_url)?;
    let sam = match d["sam_key"].as_str() {
        Some(k) => Some(SamVerifier::from_published(k)?),
        None => None,
    };
    let ssm = match d["ssm_source"].as_str() {
        Some(s) => Some(
            s.parse()
                .map_err(|e| Error::Protocol(format!("ssm_source {s:?}: {e}")))?,
        ),
        None => None,
    };
    let encrypted = d["encrypted"].as_bool() == Some(true);
    let report_rid = rid.filter(|_| d["auth_reports"].as_bool() == Some(true));
    // A player with a token also asks for its UDP report key; without one (an open server)
    // or if the server refuses, telemetry stays on HTTP.
    let udp_rid = rid.filter(|_| client_options().token.is_some());
    let keys = if encrypted || report_rid.is_some() {
        let q = keys_query(report_rid, binding);
        Some(get(&format!("{description_url}/keys{q}"))?)
    } else {
        None
    };
    // Asked apart from the media key, so that a refusal (a full binding table) never costs
    // the player its media key; with `auth_reports` the same id was asked for already.
    let udp_keys = match (udp_rid, report_rid) {
        (Some(_), Some(_)) => keys.clone(),
        (Some(r), None) => {
            let q = keys_query(Some(r), binding);
            get(&format!("{description_url}/keys{q}")).ok()
        }
        _ => None,
    };
    let telemetry = match (udp_rid, &udp_keys) {
        (Some(rid), Some(k)) => k["telemetry_key"]
            .as_str()
            .zip(k["report_port"].as_u64())
            .and_then(|(hex, port)| {
                Some(ReportChannel {
                    host: k["report_host"].as_str().and_then(|h| h.parse().ok()),
                    port: u16::try_from(port).ok()?,
                    key: ReceiverKey::from_hex(rid, hex).ok()?,
                })
            }),
        _ => None,
    };
    let report_key = match (report_rid, &keys) {
        (Some(rid), Some(k)) => {
            let hex = k["report_key"]
                .as_str()
                .ok_or_else(|| Error::Protocol("key API: no report_key".into()))?;
            Some(ReceiverKey::from_hex(rid, hex)?)
        }
        _ => None,
    };
    let opener = match (encrypted, &keys) {
        (true, Some(k)) => Some(opener_of(k)?),
        _ => None,
    };
    let key_refresh = keys.as_ref().filter(|_| encrypted).and_then(key_refresh_of);
    Ok(SessionSecurity {
        sam,
        opener,
        ssm,
        report_key,
        telemetry,
        key_refresh,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// F5: a token goes over plain HTTP only to loopback, or with `--insecure`.
    #[test]
    fn tokens_do_not_cross_the_network_in_clear() {
        let u = "http://10.0.0.1:8080/api/sessions/a/announcement";
        assert!(check_token_transport(u, false).is_err());
        assert!(check_token_transport(u, true).is_ok());
        assert!(check_token_transport("https://10.0.0.1:8080/x", false).is_ok());
        assert!(check_token_transport("http://127.0.0.1:8080/x", false).is_ok());
        assert!(check_token_transport("http://localhost/x", false).is_ok());
        assert!(check_token_transport("http://[::1]:80/x", false).is_ok());
        assert!(check_token_transport("http://[fe80::1]:80/x", false).is_err());
    }
    use openssl::asn1::Asn1Time;
    use openssl::ec::{EcGroup, EcKey};
    use openssl::nid::Nid;
    use openssl::pkey::PKey;
    use openssl::ssl::{SslAcceptor, SslFiletype};
    use openssl::x509::extension::SubjectAlternativeName;
    use openssl::x509::{X509Name, X509};
    use std::io::{Read, Write};

    /// A self-signed certificate for `localhost` (PEM cert, PEM key, SHA-256).
    fn cert() -> (Vec<u8>, Vec<u8>, [u8; 32]) {
        let g = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
        let k = PKey::from_ec_key(EcKey::generate(&g).unwrap()).unwrap();
        let mut n = X509Name::builder().unwrap();
        n.append_entry_by_nid(Nid::COMMONNAME, "localhost").unwrap();
        let n = n.build();
        let mut b = X509::builder().unwrap();
        b.set_version(2).unwrap();
        b.set_subject_name(&n).unwrap();
        b.set_issuer_name(&n).unwrap();
        b.set_pubkey(&k).unwrap();
        let (f, t) = (
            Asn1Time::days_from_now(0).unwrap(),
            Asn1Time::days_from_now(1).unwrap(),
        );
        b.set_not_before(&f).unwrap();
        b.set_not_after(&t).unwrap();
        let san = SubjectAlternativeName::new()
            .dns("localhost")
            .build(&b.x509v3_context(None, None))
            .unwrap();
        b.append_extension(san).unwrap();
        b.sign(&k, MessageDigest::sha256()).unwrap();
        let c = b.build();
        let mut fp = [0u8; 32];
        fp.copy_from_slice(&c.digest(MessageDigest::sha256()).unwrap());
        (
            c.to_pem().unwrap(),
            k.private_key_to_pem_pkcs8().unwrap(),
            fp,
        )
    }

    /// The client accepts the server by CA file or by pin, and refuses a wrong pin and an
    /// unknown self-signed certificate (system CAs).
    #[test]
    fn tls_client_trusts_ca_file_or_pin_only() {
        let (c, k, fp) = cert();
        let dir = std::env::temp_dir().join(format!("lc-ptls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cp, kp) = (dir.join("c.pem"), dir.join("k.pem"));
        std::fs::write(&cp, &c).unwrap();
        std::fs::write(&kp, &k).unwrap();
        let mut a = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).unwrap();
        a.set_certificate_file(&cp, SslFiletype::PEM).unwrap();
        a.set_private_key_file(&kp, SslFiletype::PEM).unwrap();
        let a = a.build();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let srv = std::thread::spawn(move || {
            for _ in 0..4 {
                let (s, _) = l.accept().unwrap();
                s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
                if let Ok(mut t) = a.accept(s) {
                    let _ = t.write_all(b"ok");
                    let _ = t.shutdown();
                }
            }
        });
        let try_with = |o: ClientOptions| -> bool {
            let tcp = TcpStream::connect(addr).unwrap();
            tcp.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            match tls_connect_with(&o, "localhost", tcp) {
                Ok(mut s) => {
                    let mut b = Vec::new();
                    let _ = s.read_to_end(&mut b);
                    b == b"ok"
                }
                Err(_) => false,
            }
        };
        assert!(try_with(ClientOptions {
            ca_file: Some(cp.clone()),
            ..Default::default()
        }));
        assert!(try_with(ClientOptions {
            fingerprint: Some(fp),
            ..Default::default()
        }));
        let mut wrong = fp;
        wrong[0] ^= 1;
        assert!(!try_with(ClientOptions {
            fingerprint: Some(wrong),
            ..Default::default()
        }));
        assert!(!try_with(ClientOptions::default()));
        srv.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn fingerprints_and_urls() {
        let hex = "ab".repeat(32);
        let colons = vec!["AB"; 32].join(":");
        assert_eq!(parse_fingerprint(&hex).unwrap(), [0xab; 32]);
        assert_eq!(
            parse_fingerprint(&format!("sha256:{colons}")).unwrap(),
            [0xab; 32]
        );
        assert!(parse_fingerprint("abcd").is_err());
        assert_eq!(
            description_url("https://h:1/api/sessions/one/announcement?x=1").as_deref(),
            Some("https://h:1/api/sessions/one")
        );
        assert_eq!(description_url("http://h/other"), None);
        let b = new_binding().unwrap();
        assert_eq!(b.len(), 32);
        assert!(b.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(b, new_binding().unwrap(), "a fresh secret per call");
        assert_eq!(keys_query(Some(7), &b), format!("?rid=7&binding={b}"));
        assert_eq!(keys_query(None, &b), "");
    }
}
