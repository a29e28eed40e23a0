//! The test server every security test runs (a `layercast-server` in its own loopback
//! namespace, its state in a temporary directory) and the raw HTTP and HTTPS requests they send.

use crate::common::{loopback_ns, root_or_skip, server_in};
use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use testkit::netns::{in_ns, Net};

pub(crate) const API: &str = "control-token-0123456789abcdef";
pub(crate) const PLAYER: &str = "player-token-0123456789abcdef";
pub(crate) const DASH: &str = "dashboard-token-0123456789abcdef";

/// A test's namespace, the servers it started there (killed and reaped on drop) and its
/// scratch directory (removed on drop unless the test failed, for the server log).
pub(crate) struct Ns {
    pub(crate) name: String,
    children: Vec<Child>,
    pub(crate) dir: std::path::PathBuf,
    /// Owns the namespace; dropped (namespace deleted) after `Drop` has reaped the children.
    _net: Net,
}

impl Ns {
    pub(crate) fn new(tag: &str) -> Option<Ns> {
        if !root_or_skip() {
            return None;
        }
        let (net, name) = loopback_ns(tag);
        let dir = std::env::temp_dir().join(&name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Some(Ns {
            name,
            children: Vec::new(),
            dir,
            _net: net,
        })
    }

    /// Starts the server with `args`; its stderr goes to `server.log`.
    pub(crate) fn server(&mut self, args: &[&str]) {
        let log = std::fs::File::create(self.dir.join("server.log")).unwrap();
        self.children.push(
            server_in(&self.name)
                .arg("--state-dir")
                .arg(self.dir.join("state"))
                .args(args)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    pub(crate) fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        in_ns(&self.name, f)
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Sends raw bytes, returns the status code (0: no HTTP answer) and the whole response.
pub(crate) fn raw(port: u16, bytes: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let _ = s.write_all(bytes);
    read_response(&mut s)
}

pub(crate) fn read_response(s: &mut impl Read) -> (u16, String) {
    testkit::http::read_response(s)
}

pub(crate) fn req(method: &str, path: &str, token: Option<&str>, body: &str) -> Vec<u8> {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

pub(crate) fn body(resp: &str) -> Value {
    serde_json::from_str(resp.split("\r\n\r\n").nth(1).unwrap_or("")).unwrap_or(Value::Null)
}

pub(crate) fn wait_port(port: u16) {
    crate::common::wait_port(port, Duration::from_secs(15));
}

/// One HTTPS request to `127.0.0.1:port` (certificate not checked: the pin is the test above's
/// subject); the status and the JSON body.
pub(crate) fn https(
    port: u16,
    method: &str,
    path: &str,
    token: Option<&str>,
    body_text: &str,
) -> (u16, Value) {
    let (code, text) = https_text(port, method, path, token, body_text);
    (code, body(&text))
}

/// [`https`] with the whole response as text.
pub(crate) fn https_text(
    port: u16,
    method: &str,
    path: &str,
    token: Option<&str>,
    body_text: &str,
) -> (u16, String) {
    let mut b = SslConnector::builder(SslMethod::tls_client()).unwrap();
    b.set_verify(SslVerifyMode::NONE);
    let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut s = b.build().connect("localhost", tcp).unwrap();
    s.write_all(&req(method, path, token, body_text)).unwrap();
    read_response(&mut s)
}

/// The control token a first start generated in `state`, once the server has written it.
pub(crate) fn generated_api_token(ns: &Ns, state: &std::path::Path) -> String {
    let t0 = Instant::now();
    loop {
        if let Ok(t) = std::fs::read_to_string(state.join("api.token")) {
            return t.trim().to_string();
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "{}", ns.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}
