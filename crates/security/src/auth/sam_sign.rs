//! SAM signatures: Ed25519 on the Session Announcement Message (signer, pinned-key verifier).

use super::*;

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
