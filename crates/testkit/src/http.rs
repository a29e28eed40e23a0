//! A minimal HTTP/1.1 response reader for tests that speak raw HTTP to the server (malformed
//! requests, token checks) where a client library would hide what is on the wire.

use std::io::Read;

/// Reads one response from `s`: until the headers and `Content-Length` bytes of body have
/// arrived (the server need not close), or the stream ends or errs. Returns the status code
/// (0 when the answer is not HTTP/1.x) and the whole response text.
pub fn read_response(s: &mut impl Read) -> (u16, String) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse::<usize>().unwrap_or(0));
            if buf.len() >= i + 4 + len {
                break;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let out = String::from_utf8_lossy(&buf).to_string();
    let code = if out.starts_with("HTTP/1.") {
        out.split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    } else {
        0
    };
    (code, out)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::read_response;

    #[test]
    fn reads_status_and_body_by_content_length() {
        let raw = b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 5\r\n\r\nnope!trailing";
        let (code, text) = read_response(&mut &raw[..]);
        assert_eq!(code, 401);
        assert!(text.contains("\r\n\r\nnope!"), "{text}");
        let (code, _) = read_response(&mut &b"garbage"[..]);
        assert_eq!(code, 0);
    }
}
