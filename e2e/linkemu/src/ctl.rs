//! The control protocol: one JSON object per line on a Unix stream socket, one JSON reply per
//! line.
//!
//! Requests:
//! - `{"cmd":"set","dir":"ab"|"ba"|"both", <LinkUpdate fields>}` → `{"ok":true}`
//! - `{"cmd":"get"}` → `{"ok":true,"time_ns":<wall clock>,"ab":{...},"ba":{...}}`
//! - `{"cmd":"stop"}` → `{"ok":true}` and the emulator exits.
//!
//! Errors come back as `{"ok":false,"error":"..."}`; the connection stays open.

use crate::config::LinkUpdate;
use crate::Error;
use serde_json::{Map, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Which directions a `set` applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// Interface a to interface b.
    Ab,
    /// Interface b to interface a.
    Ba,
    /// Both.
    Both,
}

/// A parsed request.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// Change parameters.
    Set(Which, Box<LinkUpdate>),
    /// Read counters.
    Get,
    /// Exit.
    Stop,
}

/// Parses one request line.
pub fn parse(line: &str) -> Result<Request, Error> {
    let v: Value = serde_json::from_str(line)?;
    let Value::Object(mut m) = v else {
        return Err(Error::Config("request must be a JSON object".into()));
    };
    let cmd = m
        .remove("cmd")
        .and_then(|c| c.as_str().map(str::to_owned))
        .ok_or_else(|| Error::Config("missing \"cmd\"".into()))?;
    match cmd.as_str() {
        "get" => Ok(Request::Get),
        "stop" => Ok(Request::Stop),
        "set" => {
            let which = match m.remove("dir").as_ref().and_then(Value::as_str) {
                None | Some("both") => Which::Both,
                Some("ab") => Which::Ab,
                Some("ba") => Which::Ba,
                Some(o) => return Err(Error::Config(format!("unknown dir {o:?}"))),
            };
            let u: LinkUpdate = serde_json::from_value(Value::Object(Map::from_iter(m)))?;
            Ok(Request::Set(which, Box::new(u)))
        }
        o => Err(Error::Config(format!("unknown cmd {o:?}"))),
    }
}

/// Client side: sends one request and returns the reply line.
pub fn request(path: &Path, req: &str) -> Result<String, Error> {
    let io = |what: &str, e: std::io::Error| Error::Sys {
        what: format!("{what} {}", path.display()),
        source: e,
    };
    let mut s = UnixStream::connect(path).map_err(|e| io("connect", e))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| io("timeout", e))?;
    s.write_all(req.trim().as_bytes())
        .and_then(|_| s.write_all(b"\n"))
        .map_err(|e| io("write", e))?;
    let mut line = String::new();
    BufReader::new(s)
        .read_line(&mut line)
        .map_err(|e| io("read", e))?;
    Ok(line.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse() {
        assert_eq!(parse(r#"{"cmd":"get"}"#).unwrap(), Request::Get);
        assert_eq!(parse(r#"{"cmd":"stop"}"#).unwrap(), Request::Stop);
        match parse(r#"{"cmd":"set","dir":"ab","rate_bps":500000,"delay_ms":5}"#).unwrap() {
            Request::Set(Which::Ab, u) => {
                assert_eq!(u.rate_bps, Some(500_000));
                assert_eq!(u.delay_ms, Some(5.0));
            }
            o => panic!("{o:?}"),
        }
        assert!(matches!(
            parse(r#"{"cmd":"set","loss":0.1}"#).unwrap(),
            Request::Set(Which::Both, _)
        ));
        for bad in [
            "[]",
            "{}",
            r#"{"cmd":"jump"}"#,
            r#"{"cmd":"set","dir":"up"}"#,
            r#"{"cmd":"set","speed":1}"#,
            "{",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
