//! Media requests: what a receiver asks of the sender (a key picture when it joins or its
//! base layer broke, a re-sync of an upper spatial layer it just joined, the retransmission of
//! packets it lost), sent as one small UDP datagram to the session's feedback port (the SAM's,
//! by default the port after layer 0's, where TFMCC reports go). RTCP would send a PLI, FIR or
//! generic NACK here; a receiver of a layered multicast session has no RTCP session, and the
//! feedback port already exists.
//!
//! # Layout (big-endian)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 2 | magic `"LR"` |
//! | 2 | 1 | version = 1 |
//! | 3 | 1 | kind: 1 key picture, 2 spatial re-sync, 3 retransmission |
//! | 4 | 4 | session id (the SAM's) |
//! | 8 | 1 | spatial layer to re-sync (1..=7; 0 otherwise) |
//! | 9 | 1 | retransmission: number n of lost-packet entries (1..=16); 0 otherwise |
//! | 10 | 4 | receiver id (0: anonymous) |
//! | 14 | 4 | receiver timestamp, µs (low 32 bits; replay check per receiver id) |
//! | 18 | 1 | authentication: 0 none, 1 HMAC-SHA256/128 under the receiver's report key |
//! | 19 | 4 + 4n | retransmission only: the stream's SSRC, then n entries of RFC 4585's generic NACK (PID u16, BLP u16) |
//! | 19 or 23 + 4n | 0 or 16 | tag (over every byte before it) |
//!
//! Decoding never panics and refuses trailing bytes, so every message has one encoding (an
//! entry's PID and BLP as RFC 4585 §6.2.1 defines them; the encoder writes the lowest missing
//! number as PID and the next 16 as bits).

use crate::error::{Error, Result};

/// Magic at offset 0.
pub const MAGIC: [u8; 2] = *b"LR";
/// The version this code writes and reads.
pub const VERSION: u8 = 1;
/// Bytes before the tag (the MAC covers them) of a key-picture or re-sync request; a
/// retransmission request has its lost-packet list after them ([`MediaRequest::body_len`]).
pub const BODY_LEN: usize = 19;
/// Lost-packet entries (PID + BLP, up to 17 sequence numbers each) in one request at most.
pub const MAX_NACK_ENTRIES: usize = 16;
/// Length of the tag when there is one.
pub const TAG_LEN: usize = 16;

/// What the receiver asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// A key picture (the receiver has decoded nothing yet).
    KeyPicture,
    /// Re-sync of spatial layer `n` (1..=7): the receiver just joined it.
    Resync(u8),
    /// Send again the packets of [`MediaRequest::nack`] (to the requester only).
    Retransmit,
}

/// The packets a retransmission request names: one stream's sequence numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Nack {
    pub ssrc: u32,
    /// Sequence numbers, in the order the entries give them (PID, then its BLP bits).
    pub seqs: Vec<u16>,
}

impl Nack {
    /// RFC 4585 entries for `seqs` (each entry: the first number not yet covered, and a bit
    /// for each of the 16 after it that is also asked for), at most [`MAX_NACK_ENTRIES`]:
    /// numbers past what fits are left out.
    pub fn entries(&self) -> Vec<(u16, u16)> {
        let mut out: Vec<(u16, u16)> = Vec::new();
        for &s in &self.seqs {
            if let Some((pid, blp)) = out.last_mut() {
                let d = s.wrapping_sub(*pid);
                if d == 0 {
                    continue;
                }
                if (1..=16).contains(&d) {
                    *blp |= 1 << (d - 1);
                    continue;
                }
            }
            if out.len() == MAX_NACK_ENTRIES {
                break;
            }
            out.push((s, 0));
        }
        out
    }
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
    /// The lost packets of a [`RequestKind::Retransmit`] request (empty otherwise).
    pub nack: Nack,
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
            nack: Nack::default(),
        }
    }

    /// An unauthenticated retransmission request for `nack`'s packets.
    pub fn retransmit(nack: Nack, session_id: u32, rid: u32, ts_us: u32) -> MediaRequest {
        MediaRequest {
            nack,
            ..MediaRequest::new(RequestKind::Retransmit, session_id, rid, ts_us)
        }
    }

    /// The bytes the tag covers: the whole message but its tag.
    pub fn body(&self) -> Vec<u8> {
        let mut b = vec![0u8; BODY_LEN];
        b[0..2].copy_from_slice(&MAGIC);
        b[2] = VERSION;
        let entries = match self.kind {
            RequestKind::Retransmit => self.nack.entries(),
            _ => Vec::new(),
        };
        let (kind, spatial) = match self.kind {
            RequestKind::KeyPicture => (1, 0),
            RequestKind::Resync(s) => (2, s),
            RequestKind::Retransmit => (3, 0),
        };
        b[3] = kind;
        b[4..8].copy_from_slice(&self.session_id.to_be_bytes());
        b[8] = spatial;
        b[9] = entries.len() as u8;
        b[10..14].copy_from_slice(&self.rid.to_be_bytes());
        b[14..18].copy_from_slice(&self.ts_us.to_be_bytes());
        b[18] = self.auth;
        if self.kind == RequestKind::Retransmit {
            b.extend_from_slice(&self.nack.ssrc.to_be_bytes());
            for (pid, blp) in entries {
                b.extend_from_slice(&pid.to_be_bytes());
                b.extend_from_slice(&blp.to_be_bytes());
            }
        }
        b
    }

    /// The encoded message.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = self.body();
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
        let entries = buf[9] as usize;
        let kind = match (buf[3], spatial, entries) {
            (1, 0, 0) => RequestKind::KeyPicture,
            (2, 1..=7, 0) => RequestKind::Resync(spatial),
            (3, 0, 1..=MAX_NACK_ENTRIES) => RequestKind::Retransmit,
            (k, s, n) => {
                return Err(Error::Invalid {
                    field: "media request kind",
                    reason: format!("kind {k} with spatial layer {s} and {n} entries"),
                })
            }
        };
        let u32at = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let body_len = match kind {
            RequestKind::Retransmit => BODY_LEN + 4 + 4 * entries,
            _ => BODY_LEN,
        };
        let auth = buf[18];
        let want = match auth {
            0 => body_len,
            1 => body_len + TAG_LEN,
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
        let mut nack = Nack::default();
        if kind == RequestKind::Retransmit {
            nack.ssrc = u32at(BODY_LEN);
            let mut wire = Vec::with_capacity(entries);
            for e in buf[BODY_LEN + 4..body_len].chunks_exact(4) {
                let pid = u16::from_be_bytes([e[0], e[1]]);
                let blp = u16::from_be_bytes([e[2], e[3]]);
                wire.push((pid, blp));
                nack.seqs.push(pid);
                nack.seqs.extend(
                    (0..16u16)
                        .filter(|b| blp & (1 << b) != 0)
                        .map(|b| pid.wrapping_add(b + 1)),
                );
            }
            // One encoding per message: the entries this code would write for these numbers.
            if nack.entries() != wire {
                return Err(Error::Malformed {
                    what: WHAT,
                    detail: "lost-packet entries not in their one encoding".into(),
                });
            }
        }
        Ok(MediaRequest {
            kind,
            session_id: u32at(4),
            rid: u32at(10),
            ts_us: u32at(14),
            auth,
            tag: buf[body_len..].to_vec(),
            nack,
        })
    }

    /// Length of the bytes the tag covers (what precedes the tag on the wire).
    pub fn body_len(&self) -> usize {
        match self.kind {
            RequestKind::Retransmit => BODY_LEN + 4 + 4 * self.nack.entries().len(),
            _ => BODY_LEN,
        }
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
        for (i, v) in [(3, 9u8), (8, 9), (18, 7), (0, b'X'), (9, 1), (3, 3)] {
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

    #[test]
    fn retransmission_requests_carry_rfc4585_entries() {
        let seqs = vec![65534, 65535, 0, 3, 15, 40, 41];
        let nack = Nack {
            ssrc: 0x1234_5678,
            seqs: seqs.clone(),
        };
        // 65534 covers 65535, 0 and 3 (offsets 1, 2 and 5); 15 is 17 past it and starts an
        // entry of its own, as does 40, which covers 41.
        assert_eq!(nack.entries(), vec![(65534, 0b1_0011), (15, 0), (40, 1)]);
        let r = MediaRequest::retransmit(nack, 9, 3, 77);
        let b = r.to_bytes();
        assert_eq!(b.len(), BODY_LEN + 4 + 12);
        assert_eq!(r.body_len(), b.len());
        let got = MediaRequest::parse(&b).unwrap();
        assert_eq!(got.kind, RequestKind::Retransmit);
        assert_eq!(got.nack.ssrc, 0x1234_5678);
        assert_eq!(got.nack.seqs, seqs);
        // Entries past the 16th are left out, never written as a 17th.
        let many = Nack {
            ssrc: 1,
            seqs: (0..40).map(|i| i * 100).collect(),
        };
        assert_eq!(many.entries().len(), MAX_NACK_ENTRIES);
        let b = MediaRequest::retransmit(many, 1, 0, 0).to_bytes();
        assert_eq!(
            MediaRequest::parse(&b).unwrap().nack.seqs.len(),
            MAX_NACK_ENTRIES
        );
        // A count that does not match the length, 0 or 17 entries, truncations: errors.
        let one = MediaRequest::retransmit(
            Nack {
                ssrc: 1,
                seqs: vec![5],
            },
            1,
            0,
            0,
        )
        .to_bytes();
        for n in [0u8, 2, 17] {
            let mut x = one.clone();
            x[9] = n;
            assert!(MediaRequest::parse(&x).is_err(), "{n} entries");
        }
        for n in 0..one.len() {
            assert!(MediaRequest::parse(&one[..n]).is_err());
        }
        // Two entries the encoder would have merged into one: refused.
        let two = Nack {
            ssrc: 1,
            seqs: vec![5, 30],
        };
        let mut x = MediaRequest::retransmit(two, 1, 0, 0).to_bytes();
        x[BODY_LEN + 8..BODY_LEN + 10].copy_from_slice(&6u16.to_be_bytes());
        assert!(MediaRequest::parse(&x).is_err());
    }
}
