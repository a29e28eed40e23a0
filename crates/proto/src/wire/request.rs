//! Media requests: what a receiver asks of the sender's encoder (a key picture when it joins
//! and has decoded nothing, a re-sync of an upper spatial layer it just joined), sent as one
//! small UDP datagram to the session's feedback port (the SAM's, by default the port after
//! layer 0's, where TFMCC reports go). RTCP would send a PLI or FIR here; a receiver of a
//! layered multicast session has no RTCP session, and the feedback port already exists.
//!
//! # Layout (big-endian)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 2 | magic `"LR"` |
//! | 2 | 1 | version = 1 |
//! | 3 | 1 | kind: 1 key picture, 2 spatial re-sync |
//! | 4 | 4 | session id (the SAM's) |
//! | 8 | 1 | spatial layer to re-sync (1..=7; 0 for a key picture) |
//! | 9 | 1 | reserved, 0 |
//! | 10 | 4 | receiver id (0: anonymous) |
//! | 14 | 4 | receiver timestamp, µs (low 32 bits; replay check per receiver id) |
//! | 18 | 1 | authentication: 0 none, 1 HMAC-SHA256/128 under the receiver's report key |
//! | 19 | 0 or 16 | tag (over bytes 0..19) |
//!
//! Decoding never panics and refuses trailing bytes, so every message has one encoding.

use crate::error::{Error, Result};

/// Magic at offset 0.
pub const MAGIC: [u8; 2] = *b"LR";
/// The version this code writes and reads.
pub const VERSION: u8 = 1;
/// Bytes before the tag (the MAC covers them).
pub const BODY_LEN: usize = 19;
/// Length of the tag when there is one.
pub const TAG_LEN: usize = 16;

/// What the receiver asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// A key picture (the receiver has decoded nothing yet).
    KeyPicture,
    /// Re-sync of spatial layer `n` (1..=7): the receiver just joined it.
    Resync(u8),
}

/// One media request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MediaRequest {
    pub kind: RequestKind,
    /// The SAM's session id: a request for another session (or a restarted one) is ignored.
    pub session_id: u32,
    /// Receiver id (TFMCC's `rid` when the receiver has one; 0 anonymous).
    pub rid: u32,
    /// Receiver timestamp, µs (low 32 bits).
    pub ts_us: u32,
    /// Authentication type (0 none, 1 HMAC-SHA256/128) and tag.
    pub auth: u8,
    pub tag: Vec<u8>,
}

impl MediaRequest {
    /// An unauthenticated request.
    pub fn new(kind: RequestKind, session_id: u32, rid: u32, ts_us: u32) -> MediaRequest {
        MediaRequest {
            kind,
            session_id,
            rid,
            ts_us,
            auth: 0,
            tag: Vec::new(),
        }
    }

    /// The bytes the tag covers (and, with no tag, the whole message but its auth byte).
    pub fn body(&self) -> [u8; BODY_LEN] {
        let mut b = [0u8; BODY_LEN];
        b[0..2].copy_from_slice(&MAGIC);
        b[2] = VERSION;
        let (kind, spatial) = match self.kind {
            RequestKind::KeyPicture => (1, 0),
            RequestKind::Resync(s) => (2, s),
        };
        b[3] = kind;
        b[4..8].copy_from_slice(&self.session_id.to_be_bytes());
        b[8] = spatial;
        b[10..14].copy_from_slice(&self.rid.to_be_bytes());
        b[14..18].copy_from_slice(&self.ts_us.to_be_bytes());
        b[18] = self.auth;
        b
    }

    /// The encoded message.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = self.body().to_vec();
        v.extend_from_slice(&self.tag);
        v
    }

    /// Parses one message (the tag is returned, not checked: `security` checks it).
    pub fn parse(buf: &[u8]) -> Result<MediaRequest> {
        const WHAT: &str = "media request";
        if buf.len() < BODY_LEN {
            return Err(Error::Truncated {
                what: WHAT,
                need: BODY_LEN,
                have: buf.len(),
            });
        }
        if buf[0..2] != MAGIC || buf[2] != VERSION {
            return Err(Error::Malformed {
                what: WHAT,
                detail: "magic or version".into(),
            });
        }
        let spatial = buf[8];
        let kind = match (buf[3], spatial) {
            (1, 0) => RequestKind::KeyPicture,
            (2, 1..=7) => RequestKind::Resync(spatial),
            (k, s) => {
                return Err(Error::Invalid {
                    field: "media request kind",
                    reason: format!("kind {k} with spatial layer {s}"),
                })
            }
        };
        if buf[9] != 0 {
            return Err(Error::Malformed {
                what: WHAT,
                detail: "reserved byte not 0".into(),
            });
        }
        let u32at = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let auth = buf[18];
        let want = match auth {
            0 => BODY_LEN,
            1 => BODY_LEN + TAG_LEN,
            a => {
                return Err(Error::Invalid {
                    field: "media request auth",
                    reason: format!("unknown type {a}"),
                })
            }
        };
        if buf.len() != want {
            return Err(Error::Malformed {
                what: WHAT,
                detail: format!("{} bytes, expected {want}", buf.len()),
            });
        }
        Ok(MediaRequest {
            kind,
            session_id: u32at(4),
            rid: u32at(10),
            ts_us: u32at(14),
            auth,
            tag: buf[BODY_LEN..].to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let r = MediaRequest::new(RequestKind::Resync(2), 0xdead_beef, 7, 123);
        let b = r.to_bytes();
        assert_eq!(b.len(), BODY_LEN);
        assert_eq!(MediaRequest::parse(&b).unwrap(), r);
        let k = MediaRequest::new(RequestKind::KeyPicture, 1, 0, 0);
        assert_eq!(MediaRequest::parse(&k.to_bytes()).unwrap(), k);
        // Truncated, trailing bytes, bad kind, bad spatial layer, unknown auth: errors.
        assert!(MediaRequest::parse(&b[..10]).is_err());
        let mut long = b.clone();
        long.push(0);
        assert!(MediaRequest::parse(&long).is_err());
        for (i, v) in [(3, 9u8), (8, 9), (18, 7), (0, b'X'), (9, 1)] {
            let mut x = b.clone();
            x[i] = v;
            assert!(MediaRequest::parse(&x).is_err(), "byte {i} = {v}");
        }
        // A key picture with a spatial layer is not a key picture.
        let mut x = k.to_bytes();
        x[8] = 1;
        assert!(MediaRequest::parse(&x).is_err());
        // Every prefix of every length: an error, never a panic.
        let mut sealed = b.clone();
        sealed[18] = 1;
        sealed.extend_from_slice(&[9; TAG_LEN]);
        assert_eq!(MediaRequest::parse(&sealed).unwrap().tag, vec![9; TAG_LEN]);
        for n in 0..sealed.len() {
            assert!(MediaRequest::parse(&sealed[..n]).is_err());
        }
    }
}
