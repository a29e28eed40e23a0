//! The once-a-second summary.

use super::*;

impl Subscriber {
    pub(super) fn snapshot(&mut self, now: Time) {
        let dt = self
            .last_stats
            .map_or(1.0, |l| now.saturating_since(l).as_secs_f64())
            .max(1e-3);
        self.last_stats = Some(now);
        let mut next = self.next_stats.unwrap_or(now) + STATS_INTERVAL;
        if next <= now {
            next = now + STATS_INTERVAL;
        }
        self.next_stats = Some(next);
        let held = self.layers_held() as u32;
        let stats = self.driver.ctl_ref().map(|c| c.stats());
        let layers = stats.as_ref().map_or(held, |s| s.layers as u32);
        let info = self.info.as_ref();
        let sec = std::mem::take(&mut self.tally.sec);
        let sec_loss = if sec.packets + sec.lost > 0 {
            sec.lost as f64 / (sec.packets + sec.lost) as f64
        } else {
            0.0
        };
        let mut g = std::mem::take(&mut self.tally.gaps_ns);
        g.sort_unstable();
        let gap_med = g.get(g.len() / 2).copied();
        let sam = self.sam.as_ref().map(|v| {
            let s = v.stats();
            SamStats {
                accepted: s.accepted,
                malformed: s.malformed,
                unsigned: s.unsigned,
                bad_signature: s.bad_signature,
                stale: s.stale,
                replayed: s.replayed,
                not_newer: self.sam_gate.skipped_old,
                over_budget: self.sam_gate.over_budget,
            }
        });
        let snap = Snapshot {
            at: now,
            interval_s: dt,
            session_id: info.map(|i| i.session_id),
            layers,
            max_layers: info.map_or(0, |i| i.layers.len() as u32),
            subscribed_bps: match (info, layers) {
                (Some(i), l) if l > 0 => i.cumulative_rate(l as usize - 1),
                _ => 0.0,
            },
            rate_bps: sec.bytes as f64 * 8.0 / dt,
            estimate_bps: stats.as_ref().and_then(|s| s.estimate_bps),
            loss_ratio: stats.as_ref().map_or(sec_loss, |s| s.loss_ratio),
            loss_ratio_1s: sec_loss,
            rtt_s: stats.as_ref().and_then(|s| s.rtt_s),
            packets_received: self.tally.total.packets,
            bytes_received: self.tally.total.bytes,
            packets_lost: self.tally.total.lost,
            packets_1s: sec.packets,
            lost_1s: sec.lost,
            pp_samples: g.len(),
            pp_gap_us_median: gap_med.map(|x| x as f64 / 1e3),
            pp_bps_median_payload: gap_med
                .and_then(|x| info.map(|i| 8.0 * i.packet_size as f64 / (x as f64 / 1e9))),
            join_to_first_packet_ms: match (self.first_join, self.tally.first_packet) {
                (Some(j), Some(f)) => Some(f.saturating_since(j).as_secs_f64() * 1e3),
                _ => None,
            },
            max_gap_ms: std::mem::take(&mut self.tally.max_gap_ns) as f64 / 1e6,
            stale_resets: self.stale.resets,
            restart: self.limbo.stats,
            drops: self.drops.clone(),
            sam,
            encrypted: self.opener.is_some(),
            ssm_source: self.ssm,
            opened: self.opener.as_ref().map_or(0, |o| o.stats().opened),
            feedback_no_address: self.feedback_no_address,
            feedback_seal_errors: self.feedback_seal_errors,
            tfmcc: self.tfmcc(),
            fec: self.repair.stats(),
            rtx: self.rtx,
            audio: self.audio_stats(),
        };
        self.out
            .push_back(Output::Event(Event::Stats(Box::new(snap))));
    }
}
