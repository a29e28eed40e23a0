//! The per-packet path of the video streams, in kernel-time order: dropped for the reasons
//! that need no layer state (old session, stale, left layer) or held in a join quarantine, then
//! fed: SSRC change (restart hold), sequence extension, replay window, loss tally, bunch
//! spacing, the controller, and the media output.

use super::*;

impl Subscriber {
    /// Drops a queued packet for the reasons that need no layer state, then quarantines or
    /// feeds it.
    pub(super) fn admit(&mut self, p: Pkt) {
        if self.retired.contains(&p.ssrc) {
            self.drops.old_session += 1;
            return;
        }
        // A retransmission carries its first send time: late by design, not stale.
        if !p.rtx && self.stale.is_stale(p.recv_time, p.offset_us()) {
            self.drops.stale += 1;
            return;
        }
        // A packet queued before an announcement that changed the layout may name a group no
        // longer held.
        let Some(i) = self.stream_index(p.group, p.port) else {
            self.drops.wrong_layer += 1;
            return;
        };
        let s = &mut self.streams[i];
        if s.quarantine && p.rtx {
            self.rtx.useless += 1;
            return;
        }
        if s.quarantine {
            s.first_held.get_or_insert(p.recv_time);
            s.held.push(p);
            return;
        }
        self.feed(i, p);
    }

    pub(super) fn stream_index(&self, group: Ipv4Addr, port: u16) -> Option<usize> {
        self.streams
            .iter()
            .position(|s| s.group == group && s.port == port)
    }

    pub(super) fn release_quarantines(&mut self, now: Time) {
        for i in 0..self.streams.len() {
            let due = self.streams[i].quarantine_due();
            if due.is_none_or(|d| now < d) {
                continue;
            }
            let mut held = std::mem::take(&mut self.streams[i].held);
            let before = held.len();
            held.retain(|p| !self.retired.contains(&p.ssrc));
            self.drops.old_session += (before - held.len()) as u64;
            let m = held.iter().map(Pkt::offset_us).min().unwrap_or(0);
            let m = self.stale.min_offset().map_or(m, |g| g.min(m));
            for p in held {
                if p.offset_us() > m + HELD_SLACK_US {
                    self.drops.stale += 1;
                } else {
                    self.feed(i, p);
                }
            }
            let s = &mut self.streams[i];
            s.quarantine = false;
            s.first_held = None;
        }
    }

    /// Hands one packet to the controller and the media output, and keeps the tallies.
    pub(super) fn feed(&mut self, i: usize, mut p: Pkt) {
        let ts = p.recv_time;
        let deliver =
            self.cfg.deliver_media && self.info.as_ref().is_some_and(|i| !i.tracks.is_empty());
        let nacking = self.retransmission_on();
        let s = &mut self.streams[i];
        if p.rtx {
            // Only the stream's current sender instance; no controller, no loss tally.
            if s.ssrc != Some(p.ssrc) {
                self.rtx.useless += 1;
                return;
            }
            let e = s.ext.extend(p.seq);
            if s.replay.check(e) != Verdict::Fresh {
                self.rtx.useless += 1;
                return;
            }
            s.missing.arrived(e, ts, true, &mut self.rtx);
            self.rtx.received += 1;
            if deliver && !p.padding {
                let layer = s.layer;
                self.hand_out(layer, &mut p);
            }
            return;
        }
        if s.ssrc != Some(p.ssrc) {
            if s.ssrc.is_some() {
                // A stream already received changed SSRC: a new sender instance whose
                // announcement is not accepted yet. Hold its media until it is.
                if deliver {
                    self.limbo.begin(ts);
                }
                if self.new_ssrcs.len() < MAX_NEW_SSRCS && !self.new_ssrcs.contains(&p.ssrc) {
                    self.new_ssrcs.push(p.ssrc);
                }
                s.prev_ssrc = s.ssrc;
            }
            // New sender instance (restart): new sequence space, not a loss burst.
            s.ext.reset();
            s.loss.reset();
            s.bunch_start = None;
            s.replay = replay::ReplayWindow::default();
            s.missing.reset();
            s.ssrc = Some(p.ssrc);
        }
        let e = s.ext.extend(p.seq);
        match s.replay.check(e) {
            Verdict::Fresh => {}
            Verdict::Duplicate => {
                self.drops.duplicate += 1;
                return;
            }
            Verdict::TooOld => {
                self.drops.too_old += 1;
                return;
            }
        }
        if nacking {
            let queued_us = self.stale.min_offset().map_or(0, |m| p.offset_us() - m);
            // Layer 0 is asked for even then: every picture predicts from it, so one lost
            // base packet freezes the picture until the next key (~1 s), where a lost upper
            // packet costs a frame or the upper resolution, and it is the smallest layer.
            let ask = s.layer == 0 || queued_us < nack::CONGESTED_QUEUE.as_micros() as i64;
            s.missing.arrived(e, ts, ask, &mut self.rtx);
        }
        let t = &mut self.tally;
        // A gap is lost only once three later numbers arrived (reordering is not loss).
        match s.loss.on_seq(e) {
            SeqEvent::Advance { lost } if lost > 0 => {
                t.total.lost += lost;
                t.sec.lost += lost;
                self.repair.note_lost(p.ssrc, lost);
            }
            SeqEvent::Recovered => {
                t.total.lost = t.total.lost.saturating_sub(1);
                t.sec.lost = t.sec.lost.saturating_sub(1);
            }
            _ => {}
        }
        // Bunch spacing (diagnostics; the controller keeps its own).
        let cc = p.cc;
        if cc.bunch_pos == 0 {
            s.bunch_start = Some((e, ts));
        } else if let Some((s0, t0)) = s.bunch_start {
            if cc.bunch_pos + 1 == cc.bunch_len && e == s0 + cc.bunch_pos as u64 && ts > t0 {
                t.gaps_ns
                    .push(ts.saturating_since(t0).as_nanos() as u64 / cc.bunch_pos as u64);
                s.bunch_start = None;
            }
        }
        let layer = s.layer;
        if let Some(prev) = t.last_pkt {
            t.max_gap_ns = t
                .max_gap_ns
                .max(ts.saturating_since(prev).as_nanos() as u64);
        }
        t.last_pkt = Some(t.last_pkt.map_or(ts, |x| x.max(ts)));
        t.first_packet.get_or_insert(ts);
        t.total.packets += 1;
        t.total.bytes += p.size as u64;
        t.sec.packets += 1;
        t.sec.bytes += p.size as u64;
        self.stale.note(ts, p.offset_us());
        // Held packets are fed late: keep `now` monotonic for the controller, while the
        // arrival itself carries its true kernel timestamp.
        self.ctl_now = self.ctl_now.max(ts);
        let ctl_now = self.ctl_now;
        if let Some(c) = self.driver.ctl() {
            let arr = PacketArrival {
                layer: cc.layer,
                seq: e,
                bunch_pos: cc.bunch_pos,
                bunch_len: cc.bunch_len,
                size: p.size,
                send_time_us: cc.send_time_us,
                recv_time: ts,
            };
            if c.handle_packet_extended(ctl_now, &arr, &p.ext).is_err() {
                self.bad_extension += 1;
            }
        }
        if !deliver || p.padding {
            return;
        }
        self.hand_out(layer, &mut p);
    }

    /// The packet's media to the host, or into the restart hold while one is active.
    fn hand_out(&mut self, layer: u8, p: &mut Pkt) {
        let held = Held {
            layer,
            ssrc: p.ssrc,
            recv_time: p.recv_time,
            packet: std::mem::take(&mut p.data),
        };
        if self.limbo.active() {
            self.limbo.push(held);
        } else {
            self.deliver_held(vec![held]);
        }
    }
}
