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

// ---------------------------------------------------------------------------------------------
// 1. SAM signatures
// ---------------------------------------------------------------------------------------------

/// Signature algorithm byte in the SAM trailer: Ed25519 (RFC 8032, strict verification).
pub const SAM_ALG_ED25519: u8 = 1;
/// Length of a key id: the first 8 bytes of SHA-256 of the public key.
pub const KEY_ID_LEN: usize = 8;
/// Length of the SAM signature trailer: alg (1) + key id (8) + issued-at (8) + signature (64).
pub const SAM_TRAILER_LEN: usize = 1 + KEY_ID_LEN + 8 + 64;
/// Domain-separation prefix of every signed SAM, so a SAM signature can never be taken for a
/// signature on anything else made with the same key (and vice versa).
pub const SAM_SIGN_CONTEXT: &[u8] = b"layercast/sam/v1\0";
/// Prefix of the public key as published in the session description.
pub const PUBLISHED_KEY_PREFIX: &str = "ed25519:";

fn key_id_of(public: &[u8; 32]) -> [u8; KEY_ID_LEN] {
    let h = Sha256::digest(public);
    let mut id = [0u8; KEY_ID_LEN];
    id.copy_from_slice(&h[..KEY_ID_LEN]);
    id
}

/// The message an Ed25519 signature covers: context, the SAM body (everything the SAM codec
/// says the signature covers, flags byte included) and the trailer's own header fields.
fn sam_signed_message(body: &[u8], trailer_head: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(SAM_SIGN_CONTEXT.len() + body.len() + trailer_head.len());
    m.extend_from_slice(SAM_SIGN_CONTEXT);
    m.extend_from_slice(body);
    m.extend_from_slice(trailer_head);
    m
}

/// Signs Session Announcements (the server holds one).
///
/// The key is an Ed25519 secret seed of 32 bytes. On disk it is a text file holding those
/// 32 bytes as 64 hex digits (make one with `head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'`
/// or [`SamSigner::generate`] + [`SamSigner::seed_hex`]); the public half is published as
/// `ed25519:<64 hex digits>` ([`SamSigner::published_key`]).
pub struct SamSigner {
    key: SigningKey,
    key_id: [u8; KEY_ID_LEN],
}

impl fmt::Debug for SamSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the secret.
        f.debug_struct("SamSigner")
            .field("key_id", &hex_encode(&self.key_id))
            .finish()
    }
}

impl SamSigner {
    /// A signer from a 32-byte secret seed.
    pub fn from_seed(seed: &[u8; 32]) -> SamSigner {
        let key = SigningKey::from_bytes(seed);
        let key_id = key_id_of(key.verifying_key().as_bytes());
        SamSigner { key, key_id }
    }

    /// A fresh random key from the operating system's RNG.
    pub fn generate() -> SamSigner {
        SamSigner::from_seed(&random32())
    }

    /// A signer from the key file's text: 64 hex digits, surrounding whitespace ignored.
    pub fn from_hex(text: &str) -> Result<SamSigner> {
        Ok(SamSigner::from_seed(&parse_hex32(text, "SAM signing key")?))
    }

    /// Reads a hex key file (see the type's documentation).
    pub fn from_hex_file(path: &std::path::Path) -> Result<SamSigner> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Invalid {
            field: "SAM signing key file",
            reason: format!("{}: {e}", path.display()),
        })?;
        SamSigner::from_hex(&text)
    }

    /// The seed as 64 hex digits, the key file's content.
    pub fn seed_hex(&self) -> String {
        hex_encode(self.key.as_bytes())
    }

    /// The public key.
    pub fn public_key(&self) -> [u8; 32] {
        self.key.verifying_key().to_bytes()
    }

    /// The public key as published in the session description: `ed25519:<hex>`.
    pub fn published_key(&self) -> String {
        format!("{PUBLISHED_KEY_PREFIX}{}", hex_encode(&self.public_key()))
    }

    /// The key id carried in every trailer.
    pub fn key_id(&self) -> [u8; KEY_ID_LEN] {
        self.key_id
    }

    /// Appends the signed SAM for `info` to `out`. `issued_at_unix_ms` is the sender's wall
    /// clock (Unix time, ms); receivers reject announcements outside their freshness window.
    pub fn sign(
        &self,
        info: &SessionInfo,
        issued_at_unix_ms: u64,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        sam::encode_signed(info, out, |body| {
            let mut trailer = Vec::with_capacity(SAM_TRAILER_LEN);
            trailer.push(SAM_ALG_ED25519);
            trailer.extend_from_slice(&self.key_id);
            trailer.extend_from_slice(&issued_at_unix_ms.to_be_bytes());
            let sig: Signature = self.key.sign(&sam_signed_message(body, &trailer));
            trailer.extend_from_slice(&sig.to_bytes());
            trailer
        })
    }

    /// The signed SAM as a new vector.
    pub fn to_signed_bytes(&self, info: &SessionInfo, issued_at_unix_ms: u64) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        self.sign(info, issued_at_unix_ms, &mut v)?;
        Ok(v)
    }
}

/// Knobs of [`SamVerifier`].
#[derive(Clone, Debug, PartialEq)]
pub struct SamVerifierConfig {
    /// Oldest `issued_at` accepted, relative to the receiver's clock. `None` turns the check
    /// off (only for hosts without a synchronised clock: a captured SAM then stays usable
    /// against a fresh verifier until the sender moves to a new session id). Default 30 s.
    pub max_age: Option<Duration>,
    /// How far in the future `issued_at` may lie (clock skew). Default 5 s.
    pub max_future: Duration,
    /// Sessions whose newest sequence number is remembered; the least recently updated one
    /// is forgotten beyond this. Default 16.
    pub max_sessions: usize,
}

impl Default for SamVerifierConfig {
    fn default() -> Self {
        SamVerifierConfig {
            max_age: Some(Duration::from_secs(30)),
            max_future: Duration::from_secs(5),
            max_sessions: 16,
        }
    }
}

/// Outcome counters of a [`SamVerifier`], for `/metrics` ("counted drops").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SamVerifyStats {
    /// Announcements accepted.
    pub accepted: u64,
    /// Did not decode as a SAM.
    pub malformed: u64,
    /// No signature trailer.
    pub unsigned: u64,
    /// Wrong algorithm, trailer shape or key id, or a signature that does not verify.
    pub bad_signature: u64,
    /// `issued_at` outside the freshness window.
    pub stale: u64,
    /// Sequence number not above the newest accepted for its session.
    pub replayed: u64,
}

/// A SAM that passed every check.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifiedSam {
    /// The session description.
    pub info: SessionInfo,
    /// The sender's signing time, Unix ms.
    pub issued_at_unix_ms: u64,
}

#[derive(Clone, Copy, Debug)]
struct SessionSeq {
    session_id: u32,
    highest: u32,
    touched: u64,
}

/// Verifies signed SAMs against one pinned public key (the player holds one).
///
/// The key is learnt from the session description served over HTTPS, never from the SAM
/// itself: a key carried inside the message it authenticates proves nothing.
#[derive(Clone, Debug)]
pub struct SamVerifier {
    key: VerifyingKey,
    key_id: [u8; KEY_ID_LEN],
    cfg: SamVerifierConfig,
    sessions: Vec<SessionSeq>,
    clock: u64,
    stats: SamVerifyStats,
}

impl SamVerifier {
    /// A verifier pinned to `public_key`. Errors if the bytes are not a valid Ed25519 point.
    pub fn new(public_key: &[u8; 32]) -> Result<SamVerifier> {
        let key = VerifyingKey::from_bytes(public_key).map_err(|_| Error::Invalid {
            field: "SAM public key",
            reason: "not a valid Ed25519 public key".into(),
        })?;
        if key.is_weak() {
            return Err(Error::Invalid {
                field: "SAM public key",
                reason: "a small-order (weak) key".into(),
            });
        }
        Ok(SamVerifier {
            key,
            key_id: key_id_of(public_key),
            cfg: SamVerifierConfig::default(),
            sessions: Vec::new(),
            clock: 0,
            stats: SamVerifyStats::default(),
        })
    }

    /// A verifier from the published form `ed25519:<64 hex digits>`.
    pub fn from_published(s: &str) -> Result<SamVerifier> {
        let hex = s
            .trim()
            .strip_prefix(PUBLISHED_KEY_PREFIX)
            .ok_or_else(|| Error::Invalid {
                field: "SAM public key",
                reason: format!("must start with {PUBLISHED_KEY_PREFIX:?}"),
            })?;
        SamVerifier::new(&parse_hex32(hex, "SAM public key")?)
    }

    /// Replaces the configuration.
    pub fn with_config(mut self, cfg: SamVerifierConfig) -> SamVerifier {
        self.cfg = cfg;
        self
    }

    /// The pinned key's id.
    pub fn key_id(&self) -> [u8; KEY_ID_LEN] {
        self.key_id
    }

    /// Outcome counters.
    pub fn stats(&self) -> SamVerifyStats {
        self.stats
    }

    /// The newest accepted sequence number of `session_id`, if remembered.
    pub fn highest_seq(&self, session_id: u32) -> Option<u32> {
        self.sessions
            .iter()
            .find(|s| s.session_id == session_id)
            .map(|s| s.highest)
    }

    /// Checks `buf` (one whole SAM) at receiver time `now_unix_ms`; on success remembers its
    /// sequence number, so the same or an older announcement of that session is refused next
    /// time. Every failure is counted in [`SamVerifier::stats`].
    pub fn verify(&mut self, buf: &[u8], now_unix_ms: u64) -> Result<VerifiedSam> {
        let r = self.check(buf, now_unix_ms);
        match &r {
            Ok(v) => {
                self.stats.accepted += 1;
                self.remember(v.info.session_id, v.info.announce_seq);
            }
            Err(Error::Unauthenticated { .. }) => self.stats.unsigned += 1,
            Err(Error::AuthFailed { .. }) => self.stats.bad_signature += 1,
            Err(Error::Stale { .. }) => self.stats.stale += 1,
            Err(Error::Replayed { .. }) => self.stats.replayed += 1,
            Err(_) => self.stats.malformed += 1,
        }
        r
    }

    /// Every check of [`SamVerifier::verify`], without updating any state.
    pub fn check(&self, buf: &[u8], now_unix_ms: u64) -> Result<VerifiedSam> {
        const WHAT: &str = "session announcement";
        let d = sam::decode(buf)?;
        let t = d
            .signature
            .as_ref()
            .ok_or(Error::Unauthenticated { what: WHAT })?;
        let fail = |reason| Error::AuthFailed { what: WHAT, reason };
        if t.signature.len() != SAM_TRAILER_LEN {
            return Err(fail("signature trailer has the wrong length"));
        }
        let (head, sig) = t.signature.split_at(SAM_TRAILER_LEN - 64);
        if head[0] != SAM_ALG_ED25519 {
            return Err(fail("unsupported signature algorithm"));
        }
        if head[1..1 + KEY_ID_LEN] != self.key_id {
            return Err(fail("signed with a key other than the pinned one"));
        }
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&head[1 + KEY_ID_LEN..]);
        let issued = u64::from_be_bytes(ts);
        let mut sb = [0u8; 64];
        sb.copy_from_slice(sig);
        let sig = Signature::from_bytes(&sb);
        let body = buf
            .get(t.signed_range.clone())
            .ok_or(fail("signed range"))?;
        // Strict verification: rejects small-order keys/R and non-canonical S (no malleability).
        self.key
            .verify_strict(&sam_signed_message(body, head), &sig)
            .map_err(|_| fail("signature does not verify"))?;
        // Freshness, only once the signature says `issued` is the sender's.
        if let Some(max_age) = self.cfg.max_age {
            let age = now_unix_ms.saturating_sub(issued);
            if age > max_age.as_millis() as u64 {
                return Err(Error::Stale {
                    what: WHAT,
                    detail: format!("issued {age} ms ago, limit {} ms", max_age.as_millis()),
                });
            }
            let ahead = issued.saturating_sub(now_unix_ms);
            if ahead > self.cfg.max_future.as_millis() as u64 {
                return Err(Error::Stale {
                    what: WHAT,
                    detail: format!("issued {ahead} ms in the future"),
                });
            }
        }
        if let Some(h) = self.highest_seq(d.info.session_id) {
            if d.info.announce_seq <= h {
                return Err(Error::Replayed {
                    what: WHAT,
                    detail: format!(
                        "session {:#010x} seq {} not above {}",
                        d.info.session_id, d.info.announce_seq, h
                    ),
                });
            }
        }
        Ok(VerifiedSam {
            info: d.info,
            issued_at_unix_ms: issued,
        })
    }

    fn remember(&mut self, session_id: u32, seq: u32) {
        self.clock += 1;
        let clock = self.clock;
        if let Some(s) = self
            .sessions
            .iter_mut()
            .find(|s| s.session_id == session_id)
        {
            s.highest = seq;
            s.touched = clock;
            return;
        }
        if self.sessions.len() >= self.cfg.max_sessions.max(1) {
            if let Some(i) = (0..self.sessions.len()).min_by_key(|&i| self.sessions[i].touched) {
                self.sessions.swap_remove(i);
            }
        }
        self.sessions.push(SessionSeq {
            session_id,
            highest: seq,
            touched: clock,
        });
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Media encryption
// ---------------------------------------------------------------------------------------------

/// Bytes the sealed packet carries between the RTP header and the ciphertext: key epoch (u16)
/// and the roll-over counter (u32, the extended sequence number's bits 16..48).
pub const MEDIA_PREFIX_LEN: usize = 6;
/// Poly1305 tag length.
pub const MEDIA_TAG_LEN: usize = 16;
/// Bytes sealing adds to a packet (the pacer's packet size must leave room for them).
pub const MEDIA_OVERHEAD: usize = MEDIA_PREFIX_LEN + MEDIA_TAG_LEN;
/// Extended sequence numbers must stay below 2^48 (they fill 48 bits of the nonce). At 100 000
/// packets per second per layer that is 89 years.
pub const MAX_EXT_SEQ: u64 = (1 << 48) - 1;

/// Length of the RTP header of `packet` (fixed part, CSRCs and the header extension), after
/// checking that it is version 2 and that every declared length fits.
pub fn rtp_header_len(packet: &[u8]) -> Result<usize> {
    const WHAT: &str = "RTP header";
    if packet.len() < 12 {
        return Err(Error::Truncated {
            what: WHAT,
            need: 12,
            have: packet.len(),
        });
    }
    if packet[0] >> 6 != 2 {
        return Err(Error::Malformed {
            what: "RTP version",
            detail: format!("{}, must be 2", packet[0] >> 6),
        });
    }
    let mut len = 12 + 4 * (packet[0] & 0x0f) as usize;
    if packet[0] & 0x10 != 0 {
        if packet.len() < len + 4 {
            return Err(Error::Truncated {
                what: WHAT,
                need: len + 4,
                have: packet.len(),
            });
        }
        let words = u16::from_be_bytes([packet[len + 2], packet[len + 3]]) as usize;
        len += 4 + 4 * words;
    }
    if packet.len() < len {
        return Err(Error::Truncated {
            what: WHAT,
            need: len,
            have: packet.len(),
        });
    }
    Ok(len)
}

/// One media key: 32 bytes for ChaCha20-Poly1305 and the epoch it belongs to.
///
/// Stateless: [`GroupKey::seal`] trusts its caller never to pass the same (SSRC, extended
/// sequence) twice. Senders use [`MediaSealer`], which enforces that.
#[derive(Clone)]
pub struct GroupKey {
    cipher: ChaCha20Poly1305,
    key: [u8; 32],
    epoch: u16,
}

impl fmt::Debug for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupKey")
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

/// An opened packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenedPacket {
    /// The plain RTP packet: the header as received, then the decrypted payload.
    pub packet: Vec<u8>,
    /// SSRC from the header.
    pub ssrc: u32,
    /// The sender's extended sequence number (authenticated through the nonce).
    pub ext_seq: u64,
}

impl GroupKey {
    /// A key from its bytes and epoch.
    pub fn new(key: [u8; 32], epoch: u16) -> GroupKey {
        GroupKey {
            cipher: ChaCha20Poly1305::new(&key.into()),
            key,
            epoch,
        }
    }

    /// A fresh random key (operating-system RNG) for `epoch`.
    pub fn generate(epoch: u16) -> GroupKey {
        GroupKey::new(random32(), epoch)
    }

    /// The key from the hex text the key API hands out.
    pub fn from_hex(text: &str, epoch: u16) -> Result<GroupKey> {
        Ok(GroupKey::new(parse_hex32(text, "media key")?, epoch))
    }

    /// The key as 64 hex digits (what the key API hands to an authenticated player).
    pub fn key_hex(&self) -> String {
        hex_encode(&self.key)
    }

    /// The key epoch.
    pub fn epoch(&self) -> u16 {
        self.epoch
    }

    /// The 96-bit nonce: SSRC (32) ‖ epoch (16) ‖ extended sequence number (48), big-endian.
    /// Injective on `ssrc × epoch × 0..2^48`.
    pub fn nonce(ssrc: u32, epoch: u16, ext_seq: u64) -> [u8; 12] {
        let mut n = [0u8; 12];
        n[..4].copy_from_slice(&ssrc.to_be_bytes());
        n[4..6].copy_from_slice(&epoch.to_be_bytes());
        n[6..].copy_from_slice(&ext_seq.to_be_bytes()[2..]);
        n
    }

    /// Seals the plain RTP `packet` sent as extended sequence number `ext_seq`: returns
    /// header ‖ epoch ‖ roll-over counter ‖ ChaCha20-Poly1305(payload) ‖ tag, with everything
    /// before the ciphertext as associated data. `ext_seq` must agree with the header's 16-bit
    /// sequence number and stay below 2^48.
    pub fn seal(&self, packet: &[u8], ext_seq: u64) -> Result<Vec<u8>> {
        let hl = rtp_header_len(packet)?;
        let seq = u16::from_be_bytes([packet[2], packet[3]]);
        if ext_seq > MAX_EXT_SEQ || ext_seq as u16 != seq {
            return Err(Error::Invalid {
                field: "extended sequence number",
                reason: format!("{ext_seq} does not extend {seq} below 2^48"),
            });
        }
        let ssrc = u32::from_be_bytes([packet[8], packet[9], packet[10], packet[11]]);
        let mut out = Vec::with_capacity(packet.len() + MEDIA_OVERHEAD);
        out.extend_from_slice(&packet[..hl]);
        out.extend_from_slice(&self.epoch.to_be_bytes());
        out.extend_from_slice(&((ext_seq >> 16) as u32).to_be_bytes());
        let ct_start = out.len();
        out.extend_from_slice(&packet[hl..]);
        let nonce = GroupKey::nonce(ssrc, self.epoch, ext_seq);
        let (aad, body) = out.split_at_mut(ct_start);
        let tag = self
            .cipher
            .encrypt_in_place_detached(Nonce::from_slice(&nonce), aad, body)
            .map_err(|_| Error::Invalid {
                field: "media payload",
                reason: "too long to seal".into(),
            })?;
        out.extend_from_slice(&tag);
        Ok(out)
    }

    /// The key epoch a sealed packet names (to pick the key), without authenticating it.
    pub fn sealed_epoch(sealed: &[u8]) -> Result<u16> {
        let hl = rtp_header_len(sealed)?;
        match sealed.get(hl..hl + 2) {
            Some(e) => Ok(u16::from_be_bytes([e[0], e[1]])),
            None => Err(Error::Truncated {
                what: "sealed media packet",
                need: hl + 2,
                have: sealed.len(),
            }),
        }
    }

    /// Opens a sealed packet. Any change to header, extension, prefix, ciphertext or tag, or
    /// a packet sealed under another key or epoch, is [`Error::AuthFailed`].
    pub fn open(&self, sealed: &[u8]) -> Result<OpenedPacket> {
        const WHAT: &str = "sealed media packet";
        let hl = rtp_header_len(sealed)?;
        let need = hl + MEDIA_OVERHEAD;
        if sealed.len() < need {
            return Err(Error::Truncated {
                what: WHAT,
                need,
                have: sealed.len(),
            });
        }
        let epoch = u16::from_be_bytes([sealed[hl], sealed[hl + 1]]);
        if epoch != self.epoch {
            return Err(Error::AuthFailed {
                what: WHAT,
                reason: "sealed under a key epoch this key is not",
            });
        }
        let roc = u32::from_be_bytes([
            sealed[hl + 2],
            sealed[hl + 3],
            sealed[hl + 4],
            sealed[hl + 5],
        ]);
        let seq = u16::from_be_bytes([sealed[2], sealed[3]]);
        let ext_seq = ((roc as u64) << 16) | seq as u64;
        let ssrc = u32::from_be_bytes([sealed[8], sealed[9], sealed[10], sealed[11]]);
        let ct_start = hl + MEDIA_PREFIX_LEN;
        let tag_start = sealed.len() - MEDIA_TAG_LEN;
        let mut out = Vec::with_capacity(tag_start - MEDIA_PREFIX_LEN);
        out.extend_from_slice(&sealed[..hl]);
        out.extend_from_slice(&sealed[ct_start..tag_start]);
        let nonce = GroupKey::nonce(ssrc, epoch, ext_seq);
        self.cipher
            .decrypt_in_place_detached(
                Nonce::from_slice(&nonce),
                &sealed[..ct_start],
                &mut out[hl..],
                Tag::from_slice(&sealed[tag_start..]),
            )
            .map_err(|_| Error::AuthFailed {
                what: WHAT,
                reason: "AEAD tag does not verify",
            })?;
        Ok(OpenedPacket {
            packet: out,
            ssrc,
            ext_seq,
        })
    }
}

/// Most SSRCs one [`MediaSealer`] tracks (one per layer; a session has at most 256 layers).
pub const MAX_SEALER_SSRCS: usize = 1024;

/// The sender's sealing state: a [`GroupKey`] plus the newest extended sequence number sealed
/// per SSRC. Refuses to seal an (SSRC, sequence) that is not above the newest one, so no nonce
/// is ever used twice under one key (see `docs/security.md` for why that suffices).
///
/// A sealer made by [`MediaSealer::rotatable`] also takes the next epoch's key from the control
/// plane over a lock-free single-producer queue ([`NextKeys`]): the real-time thread that owns
/// the sealer never waits for the control plane, and the switch happens at the first packet
/// sealed after the key was handed over.
pub struct MediaSealer {
    key: GroupKey,
    newest: HashMap<u32, u64>,
    next: Option<rtrb::Consumer<GroupKey>>,
    rotations: u64,
}

impl fmt::Debug for MediaSealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MediaSealer")
            .field("epoch", &self.key.epoch)
            .field("ssrcs", &self.newest.len())
            .field("rotations", &self.rotations)
            .finish_non_exhaustive()
    }
}

/// The control plane's end of a rotatable [`MediaSealer`]: hands it the next epoch's key.
pub struct NextKeys {
    tx: rtrb::Producer<GroupKey>,
}

impl fmt::Debug for NextKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NextKeys").finish_non_exhaustive()
    }
}

impl NextKeys {
    /// Hands `key` to the sealer, which seals with it from its next packet on. Refused
    /// (`Invalid`) when the queue still holds keys the sealer has not taken (the sealer's thread
    /// has stopped, or rotations come faster than packets).
    pub fn hand_over(&mut self, key: GroupKey) -> Result<()> {
        self.tx.push(key).map_err(|_| Error::Invalid {
            field: "media key rotation",
            reason: "the sealer has not taken the previous key yet".into(),
        })
    }
}

/// Keys a [`NextKeys`] queue holds at most.
const NEXT_KEYS_DEPTH: usize = 2;

impl MediaSealer {
    /// A sealer for a key that has never sealed anything (a freshly generated one).
    pub fn new(key: GroupKey) -> MediaSealer {
        MediaSealer {
            key,
            newest: HashMap::new(),
            next: None,
            rotations: 0,
        }
    }

    /// A sealer whose key the control plane can replace through the returned [`NextKeys`].
    /// A handed-over key is taken only if its epoch is the current epoch + 1 (mod 2^16), so
    /// an epoch, and with it a nonce prefix, is never used with two keys by one sealer.
    pub fn rotatable(key: GroupKey) -> (MediaSealer, NextKeys) {
        let (tx, rx) = rtrb::RingBuffer::new(NEXT_KEYS_DEPTH);
        let mut s = MediaSealer::new(key);
        s.next = Some(rx);
        (s, NextKeys { tx })
    }

    /// The key in use.
    pub fn key(&self) -> &GroupKey {
        &self.key
    }

    /// Keys switched to since the start.
    pub fn rotations(&self) -> u64 {
        self.rotations
    }

    /// Takes a handed-over key, if any. The new key has sealed nothing, so the per-SSRC
    /// sequence record starts afresh; a key for any other epoch than the next is dropped.
    fn take_next(&mut self) {
        let Some(rx) = self.next.as_mut() else { return };
        while let Ok(k) = rx.pop() {
            if k.epoch == self.key.epoch.wrapping_add(1) {
                self.key = k;
                self.newest.clear();
                self.rotations += 1;
            }
        }
    }

    /// Seals `packet` as `ext_seq` (see [`GroupKey::seal`]); errors if `ext_seq` is not above
    /// every sequence number already sealed for this SSRC under the current key.
    pub fn seal(&mut self, packet: &[u8], ext_seq: u64) -> Result<Vec<u8>> {
        self.take_next();
        rtp_header_len(packet)?;
        let ssrc = u32::from_be_bytes([packet[8], packet[9], packet[10], packet[11]]);
        match self.newest.get(&ssrc) {
            Some(&n) if ext_seq <= n => {
                return Err(Error::Invalid {
                    field: "extended sequence number",
                    reason: format!("{ext_seq} not above {n} already sealed for SSRC {ssrc:#x}"),
                })
            }
            None if self.newest.len() >= MAX_SEALER_SSRCS => {
                // Forgetting an SSRC would allow its nonces again: refuse instead.
                return Err(Error::Invalid {
                    field: "SSRC",
                    reason: format!("more than {MAX_SEALER_SSRCS} SSRCs under one key"),
                });
            }
            _ => {}
        }
        let out = self.key.seal(packet, ext_seq)?;
        self.newest.insert(ssrc, ext_seq);
        Ok(out)
    }
}

/// Counters of a [`MediaOpener`]: every packet that does not open is a counted drop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MediaOpenStats {
    /// Packets opened.
    pub opened: u64,
    /// Tag did not verify (tampered, forged, or another key).
    pub auth_failed: u64,
    /// Named a key epoch the opener does not hold.
    pub unknown_epoch: u64,
    /// Not an RTP packet, or too short to be a sealed one.
    pub malformed: u64,
}

/// The receiver's opening state: the keys of the current and the previous epoch (so packets
/// in flight across a rotation still open) and drop counters.
#[derive(Clone, Debug)]
pub struct MediaOpener {
    keys: Vec<GroupKey>,
    stats: MediaOpenStats,
}

impl MediaOpener {
    /// An opener holding one key.
    pub fn new(key: GroupKey) -> MediaOpener {
        MediaOpener {
            keys: vec![key],
            stats: MediaOpenStats::default(),
        }
    }

    /// Adds the key of a new epoch; keeps it and the most recently added other one.
    pub fn add_key(&mut self, key: GroupKey) {
        self.keys.retain(|k| k.epoch != key.epoch);
        self.keys.push(key);
        while self.keys.len() > 2 {
            self.keys.remove(0);
        }
    }

    /// Counters.
    pub fn stats(&self) -> MediaOpenStats {
        self.stats
    }

    /// The epochs held, oldest first.
    pub fn epochs(&self) -> Vec<u16> {
        self.keys.iter().map(|k| k.epoch).collect()
    }

    /// Takes the keys of `fresh` (a newer answer of the key API) in its order, keeping this
    /// opener's counters: a key refresh does not reset what has been counted.
    pub fn merge(&mut self, fresh: MediaOpener) {
        for k in fresh.keys {
            self.add_key(k);
        }
    }

    /// Opens a sealed packet with the key its epoch names; counts every failure.
    pub fn open(&mut self, sealed: &[u8]) -> Result<OpenedPacket> {
        let r = GroupKey::sealed_epoch(sealed).and_then(|e| {
            match self.keys.iter().find(|k| k.epoch == e) {
                Some(k) => k.open(sealed),
                None => Err(Error::AuthFailed {
                    what: "sealed media packet",
                    reason: "key epoch not held",
                }),
            }
        });
        match &r {
            Ok(_) => self.stats.opened += 1,
            Err(Error::AuthFailed {
                reason: "key epoch not held",
                ..
            }) => self.stats.unknown_epoch += 1,
            Err(Error::AuthFailed { .. }) => self.stats.auth_failed += 1,
            Err(_) => self.stats.malformed += 1,
        }
        r
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Report MACs
// ---------------------------------------------------------------------------------------------

/// `auth_type` of the report authentication block: HMAC-SHA256 truncated to 128 bits.
pub const AUTH_HMAC_SHA256_128: u8 = 1;
/// Tag length in bytes.
pub const REPORT_TAG_LEN: usize = 16;
/// HKDF info label for per-receiver report keys.
pub const REPORT_KEY_LABEL: &[u8] = b"layercast/report-key/v1";
/// Domain-separation prefix fed to the MAC before the report bytes.
pub const REPORT_MAC_CONTEXT: &[u8] = b"layercast/tfmcc-report/v1\0";

/// The TFMCC sender's side of report authentication: holds the session secret and derives
/// any receiver's key on demand (no per-receiver key table).
///
/// `K_rid = HKDF-Expand(session_secret, "layercast/report-key/v1" ‖ rid (u32 BE), 32)`. A
/// player is given only its own `K_rid` (over the authenticated API), so it cannot make a
/// report that verifies under another receiver id.
#[derive(Clone)]
pub struct ReportMac {
    secret: [u8; 32],
}

impl fmt::Debug for ReportMac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReportMac { .. }")
    }
}

/// One receiver's report key (the player holds its own).
#[derive(Clone)]
pub struct ReceiverKey {
    rid: u32,
    pub(crate) key: [u8; 32],
}

impl fmt::Debug for ReceiverKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReceiverKey")
            .field("rid", &self.rid)
            .finish_non_exhaustive()
    }
}

fn report_tag(key: &[u8; 32], msg: &[u8]) -> HmacSha256 {
    context_tag(key, REPORT_MAC_CONTEXT, msg)
}

/// HMAC-SHA256 of `context ‖ msg` under `key` (one key, several message kinds kept apart by
/// their context strings).
pub(crate) fn context_tag(key: &[u8; 32], context: &[u8], msg: &[u8]) -> HmacSha256 {
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC accepts keys of any length");
    m.update(context);
    m.update(msg);
    m
}

impl ReportMac {
    /// From the session secret (32 random bytes, made once per session).
    pub fn new(session_secret: [u8; 32]) -> ReportMac {
        ReportMac {
            secret: session_secret,
        }
    }

    /// A fresh random session secret.
    pub fn generate() -> ReportMac {
        ReportMac::new(random32())
    }

    /// The key of receiver `rid`.
    pub fn receiver_key(&self, rid: u32) -> ReceiverKey {
        ReceiverKey {
            rid,
            key: hkdf_expand32(&self.secret, &[REPORT_KEY_LABEL, &rid.to_be_bytes()]),
        }
    }

    /// Parses a TFMCC report and checks its MAC under the key of the receiver id it names.
    pub fn verify_tfmcc(&self, buf: &[u8]) -> Result<TfmccReport> {
        const WHAT: &str = "tfmcc report";
        let rep = TfmccReport::parse(buf)?;
        match rep.auth.kind {
            0 => return Err(Error::Unauthenticated { what: WHAT }),
            AUTH_HMAC_SHA256_128 => {}
            _ => {
                return Err(Error::AuthFailed {
                    what: WHAT,
                    reason: "unknown authentication type",
                })
            }
        }
        // An explicit length check: a shorter tag would be checked on fewer bits.
        if rep.auth.tag.len() != REPORT_TAG_LEN {
            return Err(Error::AuthFailed {
                what: WHAT,
                reason: "MAC has the wrong length",
            });
        }
        let k = self.receiver_key(rep.rid);
        report_tag(&k.key, &buf[..buf.len() - REPORT_TAG_LEN])
            .verify_truncated_left(&rep.auth.tag)
            .map_err(|_| Error::AuthFailed {
                what: WHAT,
                reason: "MAC does not verify",
            })?;
        Ok(rep)
    }
}

impl ReceiverKey {
    /// A key handed over by the API: receiver id and 64 hex digits.
    pub fn from_hex(rid: u32, text: &str) -> Result<ReceiverKey> {
        Ok(ReceiverKey {
            rid,
            key: parse_hex32(text, "report key")?,
        })
    }

    /// The receiver id this key belongs to.
    pub fn rid(&self) -> u32 {
        self.rid
    }

    /// The key as 64 hex digits (for the API response).
    pub fn key_hex(&self) -> String {
        hex_encode(&self.key)
    }

    /// The 16-byte tag of `msg` (the report's bytes up to, not including, the tag).
    pub fn tag(&self, msg: &[u8]) -> [u8; REPORT_TAG_LEN] {
        let full = report_tag(&self.key, msg).finalize().into_bytes();
        let mut t = [0u8; REPORT_TAG_LEN];
        t.copy_from_slice(&full[..REPORT_TAG_LEN]);
        t
    }

    /// Encodes `report` with its authentication block filled in (whatever `report.auth` held
    /// is replaced). Errors if the report names another receiver id.
    pub fn seal_tfmcc(&self, report: &TfmccReport) -> Result<Vec<u8>> {
        if report.rid != self.rid {
            return Err(Error::Invalid {
                field: "rid",
                reason: format!(
                    "report for {} sealed with the key of {}",
                    report.rid, self.rid
                ),
            });
        }
        let mut r = report.clone();
        r.auth = AuthBlock {
            kind: AUTH_HMAC_SHA256_128,
            tag: vec![0; REPORT_TAG_LEN],
        };
        let mut bytes = r.to_bytes();
        let n = bytes.len() - REPORT_TAG_LEN;
        let t = self.tag(&bytes[..n]);
        bytes[n..].copy_from_slice(&t);
        Ok(bytes)
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Bounded influence of one receiver on the TFMCC rate
// ---------------------------------------------------------------------------------------------

/// Knobs of [`InfluenceLimiter`] (defaults in `docs/security.md`).
#[derive(Clone, Debug, PartialEq)]
pub struct InfluenceConfig {
    /// Within one window, one receiver id can lower the rate to no less than this fraction of
    /// the rate when its window opened. Default 0.5 (TCP's one halving per RTT).
    pub rid_floor: f64,
    /// Within one window, all receivers together can lower the rate to no less than this
    /// fraction of the rate when the session's window opened (bounds many ids). Default 0.25.
    pub global_floor: f64,
    /// Absolute floor, bytes/s: no report lowers the rate below it. Default 0.
    pub min_rate: f64,
    /// Reports per second one source address may send (token refill). Default 20.
    pub reports_per_sec: f64,
    /// Token bucket depth per source address. Default 40.
    pub burst: f64,
    /// Most source addresses / receiver ids tracked at once. Default 4096 each.
    pub max_entries: usize,
    /// An entry idle this long may be forgotten to make room. Default 60 s.
    pub idle: Duration,
    /// Shortest limiter window, whatever window the caller passes (F8): the TFMCC sender
    /// passes its feedback round or `R_max`, which on a LAN is a few milliseconds and grows
    /// only as the rate falls, so one liar could halve the rate hundreds of times a second.
    /// Default 1 s: one receiver id lowers the rate by at most half per second, all ids
    /// together by at most three quarters.
    pub min_window: Duration,
}

impl Default for InfluenceConfig {
    fn default() -> Self {
        InfluenceConfig {
            rid_floor: 0.5,
            global_floor: 0.25,
            min_rate: 0.0,
            reports_per_sec: 20.0,
            burst: 40.0,
            max_entries: 4096,
            idle: Duration::from_secs(60),
            min_window: Duration::from_secs(1),
        }
    }
}

/// Counters of an [`InfluenceLimiter`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InfluenceStats {
    /// Reports admitted by the per-source bucket.
    pub admitted: u64,
    /// Reports dropped by the per-source bucket or a full table.
    pub rate_limited: u64,
    /// Reports whose timestamp was not newer than that receiver's last one.
    pub replayed: u64,
    /// Rate requests raised to a floor.
    pub clamped: u64,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    last: Time,
}

#[derive(Clone, Copy, Debug)]
struct Window {
    opened: Time,
    start_rate: f64,
}

#[derive(Clone, Copy, Debug, Default)]
struct RidState {
    last_ts: Option<u32>,
    /// When `last_ts` was accepted.
    last_fresh: Time,
    window: Option<Window>,
    last_seen: Time,
}

/// How long a receiver's last report timestamp is trusted for the replay check. Its clock is
/// 32-bit microseconds, so serial-number arithmetic reads "newer" only within 2^31 µs
/// (35.8 min); after a longer silence an honest report would look old (F9). After this much
/// silence the next authentic report starts a new sequence instead. What that admits: one
/// report captured more than this long ago and replayed while its receiver is silent, whose
/// effect on the rate the influence limiter bounds like any other report's.
pub const FRESHNESS_MEMORY: Duration = Duration::from_secs(600);

/// Sans-IO helper for the TFMCC sender: per-source rate limit, per-receiver replay check and
/// the cap on how fast any receiver id can pull the sending rate down.
///
/// Order of use per report: [`admit`](Self::admit) (before any crypto, so a flood costs a
/// hash lookup), then [`ReportMac::verify_tfmcc`], then [`check_fresh`](Self::check_fresh),
/// then feed [`clamp`](Self::clamp)'s result to the TFMCC sender instead of the raw `x_rate`.
#[derive(Clone, Debug)]
pub struct InfluenceLimiter {
    cfg: InfluenceConfig,
    sources: HashMap<IpAddr, Bucket>,
    rids: HashMap<u32, RidState>,
    global: Option<Window>,
    sources_purged: Option<Time>,
    rids_purged: Option<Time>,
    stats: InfluenceStats,
}

impl InfluenceLimiter {
    /// A limiter with `cfg` (fractions are clamped to 0..=1).
    pub fn new(mut cfg: InfluenceConfig) -> InfluenceLimiter {
        let unit = |x: f64| if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
        cfg.rid_floor = unit(cfg.rid_floor);
        cfg.global_floor = unit(cfg.global_floor);
        if cfg.min_rate.is_nan() || cfg.min_rate < 0.0 {
            cfg.min_rate = 0.0;
        }
        InfluenceLimiter {
            cfg,
            sources: HashMap::new(),
            rids: HashMap::new(),
            global: None,
            sources_purged: None,
            rids_purged: None,
            stats: InfluenceStats::default(),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &InfluenceConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> InfluenceStats {
        self.stats
    }

    /// Room for one more entry in `map`? When full, drops entries idle for `idle`, but scans
    /// at most once per second (`last_purge`), so a flood of new (e.g. spoofed) keys against a
    /// full table costs a lookup each, not a scan each.
    fn make_room<K: Copy + Eq + std::hash::Hash, V>(
        map: &mut HashMap<K, V>,
        last_purge: &mut Option<Time>,
        max: usize,
        now: Time,
        idle: Duration,
        last: impl Fn(&V) -> Time,
    ) -> bool {
        if map.len() < max.max(1) {
            return true;
        }
        let due = match *last_purge {
            Some(p) => now.saturating_since(p) >= Duration::from_secs(1),
            None => true,
        };
        if due {
            *last_purge = Some(now);
            map.retain(|_, v| now.saturating_since(last(v)) < idle);
        }
        map.len() < max.max(1)
    }

    /// Takes a token from `src`'s bucket; `Err(RateLimited)` if it is empty or the source
    /// table is full of active sources.
    pub fn admit(&mut self, now: Time, src: IpAddr) -> Result<()> {
        let cfg = &self.cfg;
        if !self.sources.contains_key(&src)
            && !Self::make_room(
                &mut self.sources,
                &mut self.sources_purged,
                cfg.max_entries,
                now,
                cfg.idle,
                |b| b.last,
            )
        {
            self.stats.rate_limited += 1;
            return Err(Error::RateLimited {
                what: "tfmcc report",
                detail: "source table full".into(),
            });
        }
        let b = self.sources.entry(src).or_insert(Bucket {
            tokens: cfg.burst,
            last: now,
        });
        let dt = now.saturating_since(b.last).as_secs_f64();
        b.tokens = (b.tokens + dt * cfg.reports_per_sec).min(cfg.burst);
        b.last = b.last.max(now);
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            self.stats.admitted += 1;
            Ok(())
        } else {
            self.stats.rate_limited += 1;
            Err(Error::RateLimited {
                what: "tfmcc report",
                detail: format!("source {src} over {} reports/s", cfg.reports_per_sec),
            })
        }
    }

    fn rid_entry(&mut self, now: Time, rid: u32) -> Option<&mut RidState> {
        let cfg = &self.cfg;
        if !self.rids.contains_key(&rid)
            && !Self::make_room(
                &mut self.rids,
                &mut self.rids_purged,
                cfg.max_entries,
                now,
                cfg.idle,
                |s| s.last_seen,
            )
        {
            return None;
        }
        let s = self.rids.entry(rid).or_default();
        s.last_seen = s.last_seen.max(now);
        Some(s)
    }

    /// Checks that an authenticated report's timestamp (`ts_us`, the receiver's 32-bit
    /// microsecond clock) is newer than the last accepted one of `rid` (serial-number
    /// arithmetic: newer means 1..2^31 µs ahead), and remembers it.
    pub fn check_fresh(&mut self, now: Time, rid: u32, ts_us: u32) -> Result<()> {
        let Some(s) = self.rid_entry(now, rid) else {
            self.stats.rate_limited += 1;
            return Err(Error::RateLimited {
                what: "tfmcc report",
                detail: "receiver table full".into(),
            });
        };
        let recent = now.saturating_since(s.last_fresh) <= FRESHNESS_MEMORY;
        if let Some(last) = s.last_ts.filter(|_| recent) {
            let ahead = ts_us.wrapping_sub(last) as i32;
            if ahead <= 0 {
                self.stats.replayed += 1;
                return Err(Error::Replayed {
                    what: "tfmcc report",
                    detail: format!("rid {rid} ts {ts_us} not after {last}"),
                });
            }
        }
        s.last_ts = Some(ts_us);
        s.last_fresh = now;
        Ok(())
    }

    /// The rate (bytes/s) the sender may act on when receiver `rid` asks for `requested`
    /// while it sends at `current`. Requests at or above `current` pass unchanged; lower
    /// ones are raised to the highest of: `rid_floor ×` the rate when `rid`'s window opened,
    /// `global_floor ×` the rate when the session's window opened, and `min_rate` — but never
    /// above `current`. A window opens at the first decrease after the previous one is
    /// `window` old; the TFMCC sender passes its feedback round duration (or `R_max`).
    pub fn clamp(
        &mut self,
        now: Time,
        rid: u32,
        current: f64,
        requested: f64,
        window: Duration,
    ) -> f64 {
        let sane = |x: f64| if x.is_nan() { 0.0 } else { x.max(0.0) };
        let (current, requested) = (sane(current), sane(requested));
        if requested >= current {
            return requested;
        }
        let window = window.max(self.cfg.min_window);
        let open = |w: &mut Option<Window>| {
            let expired = match w {
                Some(w) => now.saturating_since(w.opened) >= window,
                None => true,
            };
            if expired {
                *w = Some(Window {
                    opened: now,
                    start_rate: current,
                });
            }
            w.map(|w| w.start_rate).unwrap_or(current)
        };
        let g_start = open(&mut self.global);
        let (rid_floor, global_floor, min_rate) =
            (self.cfg.rid_floor, self.cfg.global_floor, self.cfg.min_rate);
        // A full receiver table: treat the unknown id as if its window opened now.
        let r_start = match self.rid_entry(now, rid) {
            Some(s) => open(&mut s.window),
            None => current,
        };
        let floor = (r_start * rid_floor)
            .max(g_start * global_floor)
            .max(min_rate)
            .min(current);
        if requested < floor {
            self.stats.clamped += 1;
            floor
        } else {
            requested
        }
    }
}

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
