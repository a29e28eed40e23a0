//! The inputs: announcements (SAM, JSON, in hand), the description's keys, and datagrams,
//! checked and parsed before they are queued for the next `poll_output`.

use super::*;

impl Subscriber {
    /// An announcement arrived.
    pub fn handle_announcement(&mut self, now: Time, ann: Announcement<'_>) {
        self.advance(now);
        match ann {
            Announcement::Info(info) => self.queue_description(info),
            Announcement::Json(body) => match serde_json::from_slice::<SessionInfo>(body) {
                Ok(info) => self.queue_description(info),
                Err(_) => self.drops.malformed_announcement += 1,
            },
            Announcement::Sam(buf) => {
                if !self.security_ready {
                    self.drops.sam_before_description += 1;
                    return;
                }
                // With a verifier only verified SAMs count (it counts the rest by reason);
                // without one, any well-formed SAM.
                match self.sam.as_mut() {
                    Some(_) if !self.sam_gate.admit(buf, now) => {}
                    Some(v) => match v.verify(buf, now.as_nanos() / 1_000_000) {
                        Ok(ok) => {
                            self.sam_gate.verified(&ok.info, now);
                            self.pending_anns.push(ok.info)
                        }
                        Err(
                            proto::Error::Truncated { .. }
                            | proto::Error::Malformed { .. }
                            | proto::Error::Invalid { .. },
                        ) => self.drops.malformed_sam += 1,
                        Err(_) => {}
                    },
                    None => match proto::wire::sam::decode(buf) {
                        Ok(d) => self.pending_anns.push(d.info),
                        Err(_) => self.drops.malformed_sam += 1,
                    },
                }
            }
        }
    }

    pub(super) fn queue_description(&mut self, info: SessionInfo) {
        match proto::wire::sam::validate(&info) {
            Ok(()) => self.pending_anns.push(info),
            Err(_) => self.drops.malformed_announcement += 1,
        }
    }

    /// The session description's keys and source arrived (again).
    pub fn handle_security(&mut self, now: Time, sec: Security) {
        self.advance(now);
        self.security_ready = true;
        // A key from the description replaces the one in use when it differs (the sender
        // restarted with a new key); a pinned key never changes, and the same key keeps its
        // verifier (and so its replay window).
        if !self.sam_pinned {
            if let Some(new) = sec.sam {
                if self.sam.as_ref().map(|v| v.key_id()) != Some(new.key_id()) {
                    self.sam = Some(new);
                }
            }
        }
        if self.cfg.ssm.is_none() && !self.cfg.ssm_any {
            self.ssm = sec.ssm;
        }
        self.opener = sec.opener;
        self.report_key = sec.report_key;
    }

    /// The media keys were fetched again (ahead of a key rotation): the opener in use takes
    /// them, keeping its counters. Without an opener (not encrypted, or no description yet)
    /// they are ignored.
    pub fn handle_media_keys(&mut self, now: Time, fresh: MediaOpener) {
        self.advance(now);
        if let Some(o) = self.opener.as_mut() {
            o.merge(fresh);
        }
    }

    /// An RTCP datagram arrived on a stream's RTCP port (its RTP port + 1): the sender
    /// reports to read, or `None` when it is refused (counted in
    /// [`crate::Drops::report_auth_failed`]). In an encrypted session only a report sealed
    /// under a held media key passes, stripped of its seal: a clear one could come from anyone
    /// on the path and would move the player's audio/video clock. In a clear session the
    /// datagram is what there is.
    pub fn handle_sender_report<'a>(
        &mut self,
        bytes: &'a [u8],
    ) -> Option<std::borrow::Cow<'a, [u8]>> {
        match self.opener.as_mut() {
            None => Some(bytes.into()),
            Some(o) => match o.open_rtcp(bytes) {
                Ok(r) => Some(r.compound.into()),
                Err(_) => {
                    self.drops.report_auth_failed += 1;
                    None
                }
            },
        }
    }

    /// A datagram too large for the host's buffer arrived on a data socket.
    pub fn handle_truncated(&mut self) {
        self.drops.truncated += 1;
    }

    /// A SAM too large for the host's buffer arrived on the announcement socket.
    pub fn handle_truncated_sam(&mut self) {
        self.drops.malformed_sam += 1;
    }

    /// A datagram arrived on the socket of `group:port` at kernel time `recv_time`.
    pub fn handle_datagram(
        &mut self,
        now: Time,
        group: Ipv4Addr,
        port: u16,
        recv_time: Time,
        bytes: &[u8],
    ) {
        self.advance(now);
        if self.audio_datagram(group, port, recv_time, bytes) {
            return;
        }
        let Some(layer) = self
            .streams
            .iter()
            .find(|s| s.group == group && s.port == port)
            .map(|s| s.layer)
        else {
            self.drops.wrong_layer += 1;
            return;
        };
        // Encrypted session: authenticate and decrypt first; the wire size still counts for
        // rates, the kernel time for timing.
        let Some(p) = self.open_data(bytes, recv_time, group, port) else {
            return;
        };
        if p.cc.layer != layer {
            self.drops.wrong_layer += 1;
            return;
        }
        self.batch.push(p);
    }

    /// A retransmitted packet arrived (on the socket the requests leave by) at kernel time
    /// `recv_time`: the sender's packet as first sent, for the stream its SSRC names.
    pub fn handle_retransmission(&mut self, now: Time, recv_time: Time, bytes: &[u8]) {
        self.advance(now);
        let Some(mut p) = self.open_data(bytes, recv_time, Ipv4Addr::UNSPECIFIED, 0) else {
            return;
        };
        let Some(s) = self
            .streams
            .iter()
            .find(|s| s.ssrc == Some(p.ssrc) && s.layer == p.cc.layer)
        else {
            self.rtx.useless += 1;
            return;
        };
        (p.group, p.port, p.rtx) = (s.group, s.port, true);
        p.ext.clear();
        self.batch.push(p);
    }

    /// Opens and parses a data packet (counting what fails) into a [`Pkt`] of `group:port`.
    fn open_data(
        &mut self,
        bytes: &[u8],
        recv_time: Time,
        group: Ipv4Addr,
        port: u16,
    ) -> Option<Pkt> {
        let Some(data) = open_media(self.opener.as_mut(), bytes) else {
            self.drops.media_auth_failed += 1;
            return None;
        };
        let data: &[u8] = &data;
        let Ok(p) = RtpPacket::parse(data) else {
            self.drops.malformed_rtp += 1;
            return None;
        };
        let Some(ext) = p.extension(cc_ext::DEFAULT_ID) else {
            self.drops.missing_cc += 1;
            return None;
        };
        let Ok(cc) = CcFields::parse(ext) else {
            self.drops.bad_cc += 1;
            return None;
        };
        let tfmcc = matches!(self.driver, Driver::Tfmcc(_));
        Some(Pkt {
            recv_time,
            group,
            port,
            cc,
            seq: p.sequence_number(),
            ssrc: p.ssrc(),
            size: bytes.len() as u32,
            padding: p.payload().is_empty(),
            data: if self.cfg.deliver_media {
                data.to_vec()
            } else {
                Vec::new()
            },
            ext: if tfmcc {
                tfmcc::extension_block(data)
                    .map(<[u8]>::to_vec)
                    .unwrap_or_default()
            } else {
                Vec::new()
            },
            rtx: false,
        })
    }
}

/// `bytes` opened with `opener` (an encrypted session) or as they are (one in the clear);
/// `None` when they do not open (the caller counts it).
pub(super) fn open_media<'a>(
    opener: Option<&mut MediaOpener>,
    bytes: &'a [u8],
) -> Option<std::borrow::Cow<'a, [u8]>> {
    match opener {
        Some(o) => o.open(bytes).ok().map(|p| p.packet.into()),
        None => Some(bytes.into()),
    }
}
