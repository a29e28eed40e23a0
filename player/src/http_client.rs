//! A minimal blocking HTTP/1.1 client (GET and POST with a JSON body), enough to fetch the
//! announcement and post telemetry to our own server. `http://` and `https://` URLs; TLS,
//! the bearer token and how the server's certificate is trusted come from
//! [`crate::auth::client_options`] (`docs/security.md` §9).

use crate::error::{Error, Result};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// `host:port` and path of an `http://` or `https://` URL.
pub fn split_url(url: &str) -> Result<(String, String)> {
    let (rest, default_port) = match url.strip_prefix("https://") {
        Some(r) => (r, 443),
        None => (
            url.strip_prefix("http://").ok_or_else(|| {
                Error::arg("session-url", format!("{url:?}: http:// or https:// URLs"))
            })?,
            80,
        ),
    };
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if host.is_empty() {
        return Err(Error::arg("session-url", format!("{url:?}: no host")));
    }
    let host = if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:{default_port}")
    };
    Ok((host, path.to_string()))
}

/// Sends one request and returns (status, body). Bodies over 1 MiB are an error.
pub fn request(
    method: &str,
    url: &str,
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<(u16, Vec<u8>)> {
    let (host, path) = split_url(url)?;
    let io = |e| Error::io(format!("{method} {url}"), e);
    let addr = host
        .to_socket_addrs()
        .map_err(io)?
        .next()
        .ok_or_else(|| Error::Protocol(format!("{host}: no address")))?;
    let tcp = TcpStream::connect_timeout(&addr, timeout).map_err(io)?;
    tcp.set_read_timeout(Some(timeout)).map_err(io)?;
    tcp.set_write_timeout(Some(timeout)).map_err(io)?;
    let mut s: Box<dyn ReadWrite> = if url.starts_with("https://") {
        let name = host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h);
        Box::new(crate::auth::tls_connect(name, tcp)?)
    } else {
        Box::new(tcp)
    };
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    if let Some(t) = &crate::auth::client_options().token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    let mut out = req.into_bytes();
    if let Some(b) = body {
        out.extend_from_slice(b);
    }
    s.write_all(&out).map_err(io)?;
    // Read the head, then exactly Content-Length bytes (or chunks up to the last one): a
    // server may keep the connection open despite `Connection: close`, so EOF is not relied on.
    let mut resp = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = resp.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if resp.len() > 64 * 1024 {
            return Err(Error::Protocol(format!("{url}: HTTP header too long")));
        }
        let n = s.read(&mut chunk).map_err(io)?;
        if n == 0 {
            return Err(Error::Protocol(format!(
                "{url}: connection closed in header"
            )));
        }
        resp.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&resp[..head_end]).to_ascii_lowercase();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::Protocol(format!("{url}: bad status line")))?;
    let content_length: Option<usize> = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok());
    let chunked = head.contains("transfer-encoding: chunked");
    let mut body = resp[head_end + 4..].to_vec();
    const MAX: usize = 1 << 20;
    loop {
        let done = match content_length {
            Some(n) => body.len() >= n,
            None if chunked => dechunk(&body).is_some(),
            None => false,
        };
        if done || body.len() > MAX {
            break;
        }
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
            Err(e) if content_length.is_none() && !chunked => {
                let _ = e;
                break;
            }
            Err(e) => return Err(io(e)),
        }
    }
    if let Some(n) = content_length {
        if body.len() < n {
            return Err(Error::Protocol(format!(
                "{url}: body shorter than Content-Length"
            )));
        }
        body.truncate(n);
    } else if chunked {
        body = dechunk(&body).ok_or_else(|| Error::Protocol(format!("{url}: bad chunking")))?;
    }
    Ok((status, body))
}

/// A plain or TLS stream.
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let size_str = std::str::from_utf8(&b[..eol]).ok()?;
        let size = usize::from_str_radix(size_str.split(';').next()?.trim(), 16).ok()?;
        b = &b[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        // `size + 2` overflows for a hostile size such as `ffffffffffffffff` (F14).
        if b.len() < size.checked_add(2)? {
            return None;
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_split_and_dechunk() {
        assert_eq!(
            split_url("http://10.1.2.3:8080/api/x").unwrap(),
            ("10.1.2.3:8080".into(), "/api/x".into())
        );
        assert_eq!(split_url("http://h").unwrap(), ("h:80".into(), "/".into()));
        assert_eq!(
            split_url("https://h/").unwrap(),
            ("h:443".into(), "/".into())
        );
        assert!(split_url("ftp://h/").is_err());
        assert_eq!(
            dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").unwrap(),
            b"abcde"
        );
        assert!(dechunk(b"ff\r\nabc").is_none());
        // F14: an overflowing chunk size is bad chunking, not a panic.
        assert_eq!(dechunk(b"ffffffffffffffff\r\nX"), None);
        assert_eq!(dechunk(b"fffffffffffffffe\r\nX"), None);
    }
}
