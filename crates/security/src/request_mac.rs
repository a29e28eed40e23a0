//! Authentication of media requests (`proto::wire::request`: key pictures and re-syncs asked
//! of the sender) with the receiver's TFMCC report key, where the session hands such keys out
//! (`auth_reports`). Same HMAC-SHA256/128 and the same per-receiver key as reports, under a
//! context string of its own, so a report tag never verifies as a request or the reverse.
//!
//! Sessions without report keys take unauthenticated requests: the worst a forger can do is
//! ask for key pictures, which the sender grants at most twice a second whoever asks
//! (`session::publisher`, "Media requests"), or for retransmissions, which each address gets
//! within a small budget (`session::publisher::rtx`).

use crate::auth::{context_tag, ReceiverKey, ReportMac, REPORT_TAG_LEN};
use hmac::Mac;
#[cfg(test)]
use proto::wire::request::BODY_LEN;
use proto::wire::request::{MediaRequest, TAG_LEN};
use proto::{Error, Result};

/// Domain separation from report MACs.
pub const REQUEST_MAC_CONTEXT: &[u8] = b"layercast/media-request/v1\0";

const _: () = assert!(TAG_LEN == REPORT_TAG_LEN);

impl ReceiverKey {
    /// `req` encoded with its tag (its `rid` becomes this key's).
    pub fn seal_request(&self, req: &MediaRequest) -> Vec<u8> {
        let mut r = req.clone();
        r.rid = self.rid();
        r.auth = 1;
        let body = r.body();
        let full = context_tag(&self.key, REQUEST_MAC_CONTEXT, &body)
            .finalize()
            .into_bytes();
        let mut v = body;
        v.extend_from_slice(&full[..TAG_LEN]);
        v
    }
}

impl ReportMac {
    /// Parses a media request and checks its tag under the key of the receiver id it names.
    pub fn verify_request(&self, buf: &[u8]) -> Result<MediaRequest> {
        const WHAT: &str = "media request";
        let req = MediaRequest::parse(buf)?;
        if req.auth == 0 {
            return Err(Error::Unauthenticated { what: WHAT });
        }
        let k = self.receiver_key(req.rid);
        context_tag(&k.key, REQUEST_MAC_CONTEXT, &buf[..req.body_len()])
            .verify_truncated_left(&req.tag)
            .map_err(|_| Error::AuthFailed {
                what: WHAT,
                reason: "MAC does not verify",
            })?;
        Ok(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::wire::request::RequestKind;

    #[test]
    fn sealed_requests_verify_only_under_their_receivers_key() {
        let mac = ReportMac::new([7; 32]);
        let k = mac.receiver_key(42);
        let req = MediaRequest::new(RequestKind::Resync(1), 99, 0, 5);
        let b = k.seal_request(&req);
        let got = mac.verify_request(&b).unwrap();
        assert_eq!(
            (got.rid, got.kind, got.session_id),
            (42, RequestKind::Resync(1), 99)
        );
        // Another receiver's id in the body, a flipped bit, another session secret, no tag.
        let mut other = b.clone();
        other[13] ^= 1;
        assert!(matches!(
            mac.verify_request(&other),
            Err(Error::AuthFailed { .. })
        ));
        let mut flip = b.clone();
        flip[20] ^= 1;
        assert!(mac.verify_request(&flip).is_err());
        assert!(ReportMac::new([8; 32]).verify_request(&b).is_err());
        assert!(matches!(
            mac.verify_request(&req.to_bytes()),
            Err(Error::Unauthenticated { .. })
        ));
        // A report tag over the same bytes does not verify as a request.
        let t = k.tag(&b[..BODY_LEN]);
        let mut forged = b[..BODY_LEN].to_vec();
        forged.extend_from_slice(&t);
        assert!(mac.verify_request(&forged).is_err());
    }
}
