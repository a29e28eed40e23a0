//! Authentication and encryption for the wire structures: who may announce a session, who may
//! send media, who may steer a TFMCC sender, and how much any one of them can steer it.
//!
//! Four independent pieces, all sans-IO (no clock, no socket: the caller passes times in):
//!
//! - [`SamSigner`] / [`SamVerifier`]: Ed25519 signatures on the Session Announcement Message
//!   (`era.md` §1.1.18: "forged or corrupted SAMs could lure receivers to subscribe too high;
//!   remedy: source-authenticate SAMs"). The signature rides in the SAM's opaque trailer
//!   ([`sam::encode_signed`]); the verifier pins one public key learnt from the session
//!   description served over HTTPS and rejects unsigned, forged, wrong-key, stale and replayed
//!   announcements.
//! - [`GroupKey`], [`MediaSealer`], [`MediaOpener`]: ChaCha20-Poly1305 per RTP packet, the
//!   RTP header (with its extensions, so the congestion-control fields too) as associated data.
//!   The nonce is (SSRC, key epoch, extended sequence number); [`MediaSealer`] refuses any
//!   (SSRC, sequence) it has used before, which is what makes the nonce unique.
//! - [`ReportMac`] / [`ReceiverKey`]: HMAC-SHA256 truncated to 16 bytes on TFMCC receiver
//!   reports, one key per receiver id derived from a session secret (RFC 5869 HKDF-Expand),
//!   so one receiver cannot speak for another.
//! - [`InfluenceLimiter`]: what authentication cannot stop (an authenticated receiver that
//!   lies, many receiver ids, floods): a per-source-address token bucket, a per-receiver
//!   report-timestamp replay check, and a cap on how far one receiver id (and all of them
//!   together) can pull the TFMCC rate down within one window.
//!
//! Threat model, parameters and the integration plan: `docs/security.md`.

use proto::wire::sam;
use proto::wire::tfmcc::TfmccReport;
use proto::wire::tfrc::AuthBlock;
use proto::SessionInfo;
use proto::Time;
use proto::{Error, Result};
// The RNG trait as re-exported by `aead` (rand_core 0.6), so no direct rand dependency.
use chacha20poly1305::aead::rand_core::RngCore;
use chacha20poly1305::aead::{AeadInPlace, KeyInit, OsRng};
use chacha20poly1305::{ChaCha20Poly1305, Nonce, Tag};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

type HmacSha256 = Hmac<Sha256>;

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

fn hex_encode(b: &[u8]) -> String {
    const H: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        s.push(H[(x >> 4) as usize] as char);
        s.push(H[(x & 15) as usize] as char);
    }
    s
}

/// Parses exactly 32 bytes of hex (64 digits, either case); surrounding whitespace is ignored.
pub fn parse_hex32(s: &str, field: &'static str) -> Result<[u8; 32]> {
    let s = s.trim();
    let b = s.as_bytes();
    if b.len() != 64 {
        return Err(Error::Invalid {
            field,
            reason: format!("expected 64 hex digits, got {} characters", b.len()),
        });
    }
    let nib = |c: u8| -> Result<u8> {
        match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(Error::Invalid {
                field,
                reason: format!("{:?} is not a hex digit", c as char),
            }),
        }
    };
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = (nib(b[2 * i])? << 4) | nib(b[2 * i + 1])?;
    }
    Ok(out)
}

/// HKDF-Expand (RFC 5869 §2.3) for one 32-byte output block: `HMAC-SHA256(prk, info || 0x01)`.
/// The session secret is already uniformly random, so the Extract step is not needed.
pub fn hkdf_expand32(prk: &[u8], info: &[&[u8]]) -> [u8; 32] {
    let mut m = <HmacSha256 as Mac>::new_from_slice(prk).expect("HMAC accepts keys of any length");
    for part in info {
        m.update(part);
    }
    m.update(&[1]);
    m.finalize().into_bytes().into()
}

fn random32() -> [u8; 32] {
    let mut b = [0u8; 32];
    OsRng.fill_bytes(&mut b);
    b
}

mod influence;
mod media;
mod report;
mod sam_sign;

pub use influence::*;
pub use media::*;
pub use report::*;
pub use sam_sign::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_errors() {
        let k = [0xa5u8; 32];
        assert_eq!(parse_hex32(&hex_encode(&k), "k").unwrap(), k);
        assert_eq!(
            parse_hex32(&format!("  {}\n", hex_encode(&k).to_uppercase()), "k").unwrap(),
            k
        );
        assert!(parse_hex32("abc", "k").is_err());
        assert!(parse_hex32(&"g".repeat(64), "k").is_err());
        assert!(parse_hex32(&"é".repeat(32), "k").is_err());
    }

    #[test]
    fn rtp_header_len_cases() {
        let mut p = vec![0x80, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        assert_eq!(rtp_header_len(&p).unwrap(), 12);
        p[0] = 0x82; // two CSRCs, missing
        assert!(rtp_header_len(&p).is_err());
        p.extend_from_slice(&[0; 8]);
        assert_eq!(rtp_header_len(&p).unwrap(), 20);
        p[0] = 0x92; // plus extension header, missing
        assert!(rtp_header_len(&p).is_err());
        p.extend_from_slice(&[0xBE, 0xDE, 0, 1, 0, 0, 0, 0]);
        assert_eq!(rtp_header_len(&p).unwrap(), 28);
        p[0] = 0x40;
        assert!(rtp_header_len(&p).is_err());
    }
}
