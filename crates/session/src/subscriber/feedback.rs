//! Where the Subscriber's reports and media requests go, and when it asks for key pictures.

use super::*;

impl Subscriber {
    /// Where reports and requests go: the override, else the announced sender (or the
    /// fallback host when it announces 0.0.0.0) on the announced feedback port (layer 0's
    /// port + 1 when the SAM names none).
    pub(super) fn feedback_dest(&self) -> Option<SocketAddrV4> {
        if let Some(a) = self.cfg.feedback_override {
            return Some(a);
        }
        let info = self.info.as_ref()?;
        let port = info.feedback_port_or_default()?;
        let host = if info.sender.is_unspecified() {
            self.cfg.feedback_fallback_host?
        } else {
            info.sender
        };
        Some(SocketAddrV4::new(host, port))
    }

    pub(super) fn send_report(&mut self, bytes: Vec<u8>) {
        let Some(to) = self.feedback_dest() else {
            self.feedback_no_address += 1;
            return;
        };
        let payload = match &self.report_key {
            Some(k) => match congestion::wire::tfmcc::TfmccReport::parse(&bytes)
                .and_then(|r| k.seal_tfmcc(&r))
            {
                Ok(b) => b,
                Err(_) => {
                    self.feedback_seal_errors += 1;
                    return;
                }
            },
            None => bytes,
        };
        self.out.push_back(Output::Transmit(Transmit {
            to,
            payload,
            kind: TransmitKind::Report,
        }));
    }

    pub(super) fn send_request(&mut self, kind: RequestKind, tk: TransmitKind) {
        self.send_media_request(|sid, rid, ts| MediaRequest::new(kind, sid, rid, ts), tk);
    }

    fn send_media_request(
        &mut self,
        build: impl FnOnce(u32, u32, u32) -> MediaRequest,
        tk: TransmitKind,
    ) {
        if !self.cfg.media_requests {
            return;
        }
        let (Some(to), Some(info)) = (self.feedback_dest(), self.info.as_ref()) else {
            self.feedback_no_address += 1;
            return;
        };
        let rid = match &self.driver {
            Driver::Tfmcc(r) => r.rid(),
            _ => 0,
        };
        let req = build(
            info.session_id,
            rid,
            (self.now.as_micros() & 0xffff_ffff) as u32,
        );
        let payload = match &self.report_key {
            Some(k) => k.seal_request(&req),
            None => req.to_bytes(),
        };
        self.out.push_back(Output::Transmit(Transmit {
            to,
            payload,
            kind: tk,
        }));
    }

    /// Whether gaps are asked for: the host wants it, delivers media, sends requests, and the
    /// sender offers it.
    pub(super) fn retransmission_on(&self) -> bool {
        self.cfg.retransmission
            && self.cfg.media_requests
            && self.cfg.deliver_media
            && self.info.as_ref().is_some_and(|i| i.retransmission)
    }

    /// The retransmission requests due: per stream, its missing packets due, in as many
    /// requests as their entries need.
    pub(super) fn retransmit_requests(&mut self, now: Time) {
        if !self.retransmission_on() {
            return;
        }
        for i in 0..self.streams.len() {
            let Some(ssrc) = self.streams[i].ssrc else {
                continue;
            };
            let mut left: Vec<u16> = self.streams[i]
                .missing
                .due(now, &mut self.rtx)
                .into_iter()
                .map(|e| e as u16)
                .collect();
            while !left.is_empty() {
                let nack = Nack {
                    ssrc,
                    seqs: left.clone(),
                };
                let entries = nack.entries();
                let covered = |s: u16| {
                    entries.iter().any(|&(pid, blp)| match s.wrapping_sub(pid) {
                        0 => true,
                        d @ 1..=16 => blp & (1 << (d - 1)) != 0,
                        _ => false,
                    })
                };
                let (sent, rest): (Vec<u16>, Vec<u16>) =
                    left.into_iter().partition(|&s| covered(s));
                self.rtx.requests += 1;
                self.rtx.asked += sent.len() as u64;
                let nack = Nack { ssrc, seqs: sent };
                self.send_media_request(
                    |sid, rid, ts| MediaRequest::retransmit(nack, sid, rid, ts),
                    TransmitKind::Retransmit,
                );
                left = rest;
            }
        }
    }

    pub(super) fn key_requests_due(&self) -> bool {
        self.cfg.media_requests
            && self.awaiting_key
            && self.held.first() == Some(&true)
            && self.info.as_ref().is_some_and(|i| !i.tracks.is_empty())
    }

    /// Join-time key picture: while layer 0 is held and the host has decoded nothing, ask the
    /// sender for a key picture (again every [`KEY_REQUEST_RETRY`]), so a joining receiver
    /// does not wait up to a whole periodic key interval.
    pub(super) fn key_requests(&mut self, now: Time) {
        if self.held.first() != Some(&true) {
            self.last_key_request = None;
            return;
        }
        if !self.key_requests_due() {
            return;
        }
        if self
            .last_key_request
            .is_none_or(|t| now.saturating_since(t) >= KEY_REQUEST_RETRY)
        {
            self.last_key_request = Some(now);
            self.send_request(RequestKind::KeyPicture, TransmitKind::KeyRequest);
        }
    }
}
