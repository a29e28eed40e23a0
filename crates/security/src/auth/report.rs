//! Report MACs: HMAC-SHA256/128 on TFMCC receiver reports, one derived key per receiver id.

use super::*;

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
