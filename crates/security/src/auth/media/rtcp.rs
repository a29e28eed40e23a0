//! Sender reports of an encrypted session, authenticated under the session's media key.
//!
//! A receiver puts audio and video on one clock from the RTCP sender reports' NTP ↔ RTP
//! mappings (docs/protocols/audio.md). In the clear, anyone who can send to the groups can
//! move that clock and skew every player's lip sync; in an encrypted session nobody but the
//! key holders can play the media, so nothing is lost by authenticating the reports too.
//!
//! Layout, after the RTCP compound packet as sent in the clear: key epoch (u16), report index
//! (u32, per SSRC, counting from 0 under each key), and a ChaCha20-Poly1305 tag over all of it
//! with an empty plaintext: the reports stay readable (they carry only timing and counts, as
//! SRTCP's unencrypted mode), and only a key holder can make one. The AEAD key is derived from
//! the media key (HMAC-SHA256 with a fixed label) because the media's nonces already use every
//! (SSRC, epoch, sequence) value: under one key a report's nonce could equal a packet's.

use super::*;

/// Bytes sealing adds to a sender report: epoch, index, tag.
pub const RTCP_TRAILER_LEN: usize = 2 + 4 + MEDIA_TAG_LEN;

const WHAT: &str = "sealed sender report";

/// The report key of media key `key`.
pub(super) fn derive_rtcp_key(key: &[u8; 32]) -> [u8; 32] {
    let mut mac = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(b"layercast sender report key v1");
    mac.finalize().into_bytes().into()
}

/// The SSRC of the first RTCP packet of `compound`, after checking version and length.
fn first_ssrc(compound: &[u8]) -> Result<u32> {
    if compound.len() < 8 {
        return Err(Error::Truncated {
            what: WHAT,
            need: 8,
            have: compound.len(),
        });
    }
    if compound[0] >> 6 != 2 {
        return Err(Error::Malformed {
            what: "RTCP version",
            detail: format!("{}, must be 2", compound[0] >> 6),
        });
    }
    Ok(u32::from_be_bytes([
        compound[4],
        compound[5],
        compound[6],
        compound[7],
    ]))
}

fn rtcp_nonce(ssrc: u32, epoch: u16, index: u32) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[..4].copy_from_slice(&ssrc.to_be_bytes());
    n[4..6].copy_from_slice(&epoch.to_be_bytes());
    n[8..].copy_from_slice(&index.to_be_bytes());
    n
}

/// An opened sender report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenedReport {
    /// The RTCP compound packet, as the sender made it.
    pub compound: Vec<u8>,
    /// SSRC of its first packet.
    pub ssrc: u32,
    /// The sender's report index (authenticated).
    pub index: u32,
    /// The key epoch it was sealed under.
    pub epoch: u16,
}

impl GroupKey {
    /// Seals the RTCP `compound` as report `index` of its first packet's SSRC: returns the
    /// compound ‖ epoch ‖ index ‖ tag. The caller never passes the same (SSRC, index) twice
    /// under one key ([`MediaSealer::seal_rtcp`] does that).
    pub fn seal_rtcp(&self, compound: &[u8], index: u32) -> Result<Vec<u8>> {
        let ssrc = first_ssrc(compound)?;
        let mut out = Vec::with_capacity(compound.len() + RTCP_TRAILER_LEN);
        out.extend_from_slice(compound);
        out.extend_from_slice(&self.epoch.to_be_bytes());
        out.extend_from_slice(&index.to_be_bytes());
        let nonce = rtcp_nonce(ssrc, self.epoch, index);
        let tag = self
            .rtcp
            .encrypt_in_place_detached(Nonce::from_slice(&nonce), &out, &mut [])
            .map_err(|_| Error::Invalid {
                field: "sender report",
                reason: "too long to seal".into(),
            })?;
        out.extend_from_slice(&tag);
        Ok(out)
    }

    /// The key epoch a sealed report names, without authenticating it.
    pub fn sealed_rtcp_epoch(sealed: &[u8]) -> Result<u16> {
        if sealed.len() < 8 + RTCP_TRAILER_LEN {
            return Err(Error::Truncated {
                what: WHAT,
                need: 8 + RTCP_TRAILER_LEN,
                have: sealed.len(),
            });
        }
        let e = sealed.len() - RTCP_TRAILER_LEN;
        Ok(u16::from_be_bytes([sealed[e], sealed[e + 1]]))
    }

    /// Opens a sealed report. A report in the clear, one sealed under another key or epoch,
    /// or any changed byte is [`Error::AuthFailed`].
    pub fn open_rtcp(&self, sealed: &[u8]) -> Result<OpenedReport> {
        let epoch = GroupKey::sealed_rtcp_epoch(sealed)?;
        let body = sealed.len() - RTCP_TRAILER_LEN;
        let ssrc = first_ssrc(&sealed[..body])?;
        if epoch != self.epoch {
            return Err(Error::AuthFailed {
                what: WHAT,
                reason: "sealed under a key epoch this key is not",
            });
        }
        let i = body + 2;
        let index = u32::from_be_bytes([sealed[i], sealed[i + 1], sealed[i + 2], sealed[i + 3]]);
        let tag_start = sealed.len() - MEDIA_TAG_LEN;
        self.rtcp
            .decrypt_in_place_detached(
                Nonce::from_slice(&rtcp_nonce(ssrc, epoch, index)),
                &sealed[..tag_start],
                &mut [],
                Tag::from_slice(&sealed[tag_start..]),
            )
            .map_err(|_| Error::AuthFailed {
                what: WHAT,
                reason: "AEAD tag does not verify",
            })?;
        Ok(OpenedReport {
            compound: sealed[..body].to_vec(),
            ssrc,
            index,
            epoch,
        })
    }
}

impl MediaSealer {
    /// Seals a sender report (see [`GroupKey::seal_rtcp`]) with the next index of its SSRC
    /// under the current key; errors rather than reuse an index (after 2^32 reports of one
    /// SSRC under one key, 136 years at one a second) or track more than
    /// [`MAX_SEALER_SSRCS`] SSRCs.
    pub fn seal_rtcp(&mut self, compound: &[u8]) -> Result<Vec<u8>> {
        self.take_next();
        let ssrc = first_ssrc(compound)?;
        let index = match self.rtcp_next.get(&ssrc) {
            Some(&n) => n,
            None if self.rtcp_next.len() >= MAX_SEALER_SSRCS => {
                return Err(Error::Invalid {
                    field: "SSRC",
                    reason: format!("more than {MAX_SEALER_SSRCS} reporting SSRCs under one key"),
                })
            }
            None => 0,
        };
        let next = index.checked_add(1).ok_or_else(|| Error::Invalid {
            field: "sender report index",
            reason: format!("every index of SSRC {ssrc:#x} used under this key"),
        })?;
        let out = self.key.seal_rtcp(compound, index)?;
        self.rtcp_next.insert(ssrc, next);
        Ok(out)
    }
}

impl MediaOpener {
    /// Opens a sealed sender report with the key its epoch names and refuses a replay (an
    /// index not above the newest accepted for its SSRC and epoch); counts every outcome in
    /// [`MediaOpenStats::reports_opened`] / [`MediaOpenStats::reports_refused`].
    pub fn open_rtcp(&mut self, sealed: &[u8]) -> Result<OpenedReport> {
        let r = GroupKey::sealed_rtcp_epoch(sealed)
            .and_then(|e| match self.keys.iter().find(|k| k.epoch == e) {
                Some(k) => k.open_rtcp(sealed),
                None => Err(Error::AuthFailed {
                    what: WHAT,
                    reason: "key epoch not held",
                }),
            })
            .and_then(|o| match self.rtcp_newest.get(&(o.ssrc, o.epoch)) {
                Some(&n) if o.index <= n => Err(Error::AuthFailed {
                    what: WHAT,
                    reason: "replayed: index not above the newest accepted",
                }),
                _ => Ok(o),
            });
        match &r {
            Ok(o) => {
                // Only authentic reports make entries: at most the session's streams per
                // held epoch (add_key forgets the others).
                self.rtcp_newest.insert((o.ssrc, o.epoch), o.index);
                self.stats.reports_opened += 1;
            }
            Err(_) => self.stats.reports_refused += 1,
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An SR + SDES compound as the Publisher makes it (only the layout matters here).
    fn sr(ssrc: u32, ntp: u64) -> Vec<u8> {
        let mut b = vec![0x80, 200, 0, 6];
        b.extend_from_slice(&ssrc.to_be_bytes());
        b.extend_from_slice(&ntp.to_be_bytes());
        b.extend_from_slice(&[0u8; 12]);
        b.extend_from_slice(&[0x81, 202, 0, 2]);
        b.extend_from_slice(&ssrc.to_be_bytes());
        b.extend_from_slice(&[1, 2, b'a', b'b']);
        b
    }

    #[test]
    fn a_sealed_report_opens_once_and_reads_as_sent() {
        let key = GroupKey::generate(3);
        let mut sealer = MediaSealer::new(key.clone());
        let mut opener = MediaOpener::new(key);
        let a = sealer.seal_rtcp(&sr(7, 1)).unwrap();
        let b = sealer.seal_rtcp(&sr(7, 2)).unwrap();
        assert_eq!(a.len(), sr(7, 1).len() + RTCP_TRAILER_LEN);
        let oa = opener.open_rtcp(&a).unwrap();
        assert_eq!(
            (oa.compound, oa.ssrc, oa.index, oa.epoch),
            (sr(7, 1), 7, 0, 3)
        );
        assert_eq!(opener.open_rtcp(&b).unwrap().index, 1);
        // The same report again, or an older one, is a replay.
        assert!(opener.open_rtcp(&b).is_err());
        assert!(opener.open_rtcp(&a).is_err());
        let st = opener.stats();
        assert_eq!((st.reports_opened, st.reports_refused), (2, 2));
        // Media counters are untouched.
        assert_eq!(st.opened + st.auth_failed + st.malformed, 0);
    }

    #[test]
    fn clear_forged_or_altered_reports_are_refused() {
        let key = GroupKey::generate(0);
        let mut sealer = MediaSealer::new(key.clone());
        let mut opener = MediaOpener::new(key);
        let good = sealer.seal_rtcp(&sr(9, 5)).unwrap();
        // In the clear (what a stock sender or an attacker without the key sends).
        assert!(opener.open_rtcp(&sr(9, 5)).is_err());
        // Sealed under another key of the same epoch.
        let other = MediaSealer::new(GroupKey::generate(0))
            .seal_rtcp(&sr(9, 5))
            .unwrap();
        assert!(opener.open_rtcp(&other).is_err());
        // Any single changed byte.
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x20;
            assert!(opener.open_rtcp(&bad).is_err(), "byte {i}");
        }
        // Too short, empty.
        assert!(opener.open_rtcp(&good[..10]).is_err());
        assert!(opener.open_rtcp(&[]).is_err());
        assert_eq!(opener.stats().reports_opened, 0);
        assert!(opener.open_rtcp(&good).is_ok());
    }

    #[test]
    fn any_bytes_are_an_error_never_a_panic() {
        let mut opener = MediaOpener::new(GroupKey::generate(0));
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for len in 0..200 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            assert!(opener.open_rtcp(&bytes).is_err());
        }
        assert_eq!(opener.stats().reports_refused, 200);
    }

    #[test]
    fn report_and_media_keys_differ_so_their_nonces_cannot_meet() {
        let key = GroupKey::generate(1);
        assert_ne!(derive_rtcp_key(&key.key), key.key);
        // A media opener refuses a sealed report and the report opener a media packet.
        let mut sealer = MediaSealer::new(key.clone());
        let rep = sealer.seal_rtcp(&sr(1, 1)).unwrap();
        assert!(key.open(&rep).is_err());
        let mut rtp = vec![0x80, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        rtp.extend_from_slice(&[0u8; 40]);
        let media = sealer.seal(&rtp, 1).unwrap();
        assert!(key.open_rtcp(&media).is_err());
    }

    #[test]
    fn indices_restart_under_a_new_key_and_the_opener_follows_it() {
        let k0 = GroupKey::generate(0);
        let k1 = GroupKey::generate(1);
        let (mut sealer, mut next) = MediaSealer::rotatable(k0.clone());
        let mut opener = MediaOpener::new(k0);
        assert!(opener
            .open_rtcp(&sealer.seal_rtcp(&sr(4, 1)).unwrap())
            .is_ok());
        assert!(opener
            .open_rtcp(&sealer.seal_rtcp(&sr(4, 2)).unwrap())
            .is_ok());
        next.hand_over(k1.clone()).unwrap();
        let after = sealer.seal_rtcp(&sr(4, 3)).unwrap();
        // Not held yet: refused; once the opener has the key, index 0 of epoch 1 opens.
        assert!(opener.open_rtcp(&after).is_err());
        opener.add_key(k1);
        let o = opener.open_rtcp(&after).unwrap();
        assert_eq!((o.epoch, o.index), (1, 0));
    }
}
