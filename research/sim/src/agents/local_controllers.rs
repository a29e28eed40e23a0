//! `flid-rttN` (FLID-DL with an N-ms simulated RTT), and two trivial controllers the simulator's own tests use, so the engine can be checked without
//! depending on the protocol crate's controllers:
//!
//! * `sim-fixed-N`: joins layers 0..N at the first announcement and holds them.
//! * `sim-aimd`: every adaptation interval, leaves the top layer if a sequence gap was seen in
//!   the interval, else joins one more (a crude loss-driven probe, not a protocol from the
//!   specs).

use congestion::controller::TimerReason;
use congestion::{Action, Decision, LayeredController, PacketArrival, SessionInfo, Stats, Time};
use std::collections::VecDeque;

/// Builds a local controller by name, if it is one.
pub fn local_controller(name: &str) -> Option<Box<dyn LayeredController>> {
    if let Some(c) = super::alma::controller(name) {
        return Some(c);
    }
    // RLC with an N-ms deaf period (default 2 s, `docs/protocols/rlc.md`): `rlc-deaf1100` is
    // the 1.1 s of the RLC the PLM paper compared against (plm.md §7.9, plm/S11).
    if let Some(ms) = name.strip_prefix("rlc-deaf") {
        let ms: u64 = ms.parse().ok().filter(|ms| (1..=60_000).contains(ms))?;
        return Some(Box::new(baselines::rlc::Rlc::new(baselines::rlc::Config {
            deaf_period: std::time::Duration::from_millis(ms),
            ..baselines::rlc::Config::default()
        })));
    }
    if name == "sim-aimd" {
        return Some(Box::new(Aimd::default()));
    }
    // DLM with a per-epoch log for the delay/DS3, DS5, DS6 checks (`agents::dlm_trace`).
    if name == "delay-trace" {
        return Some(Box::new(super::dlm_trace::DlmTrace::new(
            baselines::delay::Dlm::default(),
        )));
    }
    // ERA with another RTT input for Eq. 5-6 (the default is the thesis' fixed 50 ms):
    // `era-rtt-join` = join-to-first-packet (Luby, era.md E8), `era-rttN` = fixed N ms. Used
    // to test why ERA takes ~2.3x TCP's share on drop-tail (era/AC-4, AC-6).
    if name == "era-rtt-join" {
        return Some(Box::new(congestion::era::Era::new(
            congestion::era::EraConfig {
                rtt: congestion::era::RttMode::JoinLatency {
                    initial: 0.05,
                    window: 32,
                },
                ..congestion::era::EraConfig::default()
            },
        )));
    }
    // ERA with an N-RAI PLR observation window (default 8; era/AC-12 investigation).
    if let Some(n) = name.strip_prefix("era-plr") {
        let n: usize = n.parse().ok().filter(|n| (1..=100).contains(n))?;
        return Some(Box::new(congestion::era::Era::new(
            congestion::era::EraConfig {
                plr_window_rais: n,
                ..congestion::era::EraConfig::default()
            },
        )));
    }
    if let Some(ms) = name.strip_prefix("era-rtt") {
        let ms: u64 = ms.parse().ok().filter(|m| (1..=10_000).contains(m))?;
        return Some(Box::new(congestion::era::Era::new(
            congestion::era::EraConfig {
                rtt: congestion::era::RttMode::Fixed(ms as f64 / 1000.0),
                ..congestion::era::EraConfig::default()
            },
        )));
    }
    // FLID-DL with the thesis' per-scenario simulated RTT (`flid-rtt60` = 60 ms): the
    // increase probabilities depend on it (docs/protocols/flid-dl.md).
    if let Some(ms) = name.strip_prefix("flid-rtt") {
        let ms: u64 = ms.parse().ok().filter(|m| (1..=10_000).contains(m))?;
        return Some(Box::new(baselines::flid::Flid::new(
            baselines::flid::Config {
                sim_rtt: std::time::Duration::from_millis(ms),
                ..baselines::flid::Config::default()
            },
        )));
    }
    // Holds N layers and logs every bunch sample as a decision (plm.md S0/S0b: the PLM
    // estimator's input, checked without PLM's join/drop rules moving the subscription).
    if let Some(n) = name.strip_prefix("sim-pp-probe-") {
        let n: u8 = n.parse().ok()?;
        return Some(Box::new(PpProbe {
            target: n,
            ..PpProbe::default()
        }));
    }
    let n: u8 = name.strip_prefix("sim-fixed-")?.parse().ok()?;
    Some(Box::new(Fixed {
        target: n,
        ..Fixed::default()
    }))
}

#[derive(Default)]
struct Fixed {
    target: u8,
    layers: u8,
    actions: VecDeque<Action>,
    received: u64,
}

impl LayeredController for Fixed {
    fn name(&self) -> &'static str {
        "sim-fixed"
    }
    fn handle_announcement(&mut self, _now: Time, info: &SessionInfo) {
        let top = self.target.min(info.layer_count() as u8);
        while self.layers < top {
            self.actions.push_back(Action::Join(self.layers));
            self.layers += 1;
        }
    }
    fn handle_packet(&mut self, _now: Time, _pkt: &PacketArrival) {
        self.received += 1;
    }
    fn handle_timeout(&mut self, _now: Time) {}
    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }
    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        None
    }
    fn poll_decision(&mut self) -> Option<Decision> {
        None
    }
    fn stats(&self) -> Stats {
        Stats {
            protocol: "sim-fixed",
            layers: self.layers,
            packets_received: self.received,
            ..Stats::default()
        }
    }
    fn layers(&self) -> u8 {
        self.layers
    }
}

#[derive(Default)]
struct Aimd {
    info: Option<SessionInfo>,
    layers: u8,
    next: Option<Time>,
    expected: Vec<Option<u64>>,
    lost_in_interval: u64,
    actions: VecDeque<Action>,
    decisions: VecDeque<Decision>,
}

impl LayeredController for Aimd {
    fn name(&self) -> &'static str {
        "sim-aimd"
    }
    fn handle_announcement(&mut self, now: Time, info: &SessionInfo) {
        if self.info.is_none() {
            self.expected = vec![None; info.layer_count()];
            self.actions.push_back(Action::Join(0));
            self.layers = 1;
            self.next = Some(now + info.adapt_interval);
        }
        self.info = Some(info.clone());
    }
    fn handle_packet(&mut self, _now: Time, pkt: &PacketArrival) {
        let Some(e) = self.expected.get_mut(pkt.layer as usize) else {
            return;
        };
        if let Some(x) = *e {
            if pkt.seq > x {
                self.lost_in_interval += pkt.seq - x;
            }
        }
        if e.is_none_or(|x| pkt.seq >= x) {
            *e = Some(pkt.seq + 1);
        }
    }
    fn handle_timeout(&mut self, now: Time) {
        let (Some(info), Some(next)) = (&self.info, self.next) else {
            return;
        };
        if now < next {
            return;
        }
        let from = self.layers;
        if self.lost_in_interval > 0 && self.layers > 1 {
            self.layers -= 1;
            self.actions.push_back(Action::Leave(self.layers));
            self.expected[self.layers as usize] = None;
        } else if self.lost_in_interval == 0 && (self.layers as usize) < info.layer_count() {
            self.expected[self.layers as usize] = None;
            self.actions.push_back(Action::Join(self.layers));
            self.layers += 1;
        }
        if from != self.layers {
            self.decisions.push_back(Decision {
                at: now,
                from_layers: from,
                to_layers: self.layers,
                reason: if from > self.layers { "loss" } else { "probe" },
                inputs: vec![("lost", self.lost_in_interval as f64)],
            });
        }
        self.lost_in_interval = 0;
        self.next = Some(now + info.adapt_interval);
    }
    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }
    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        self.next.map(|t| (t, TimerReason::Adapt))
    }
    fn poll_decision(&mut self) -> Option<Decision> {
        self.decisions.pop_front()
    }
    fn stats(&self) -> Stats {
        Stats {
            protocol: "sim-aimd",
            layers: self.layers,
            ..Stats::default()
        }
    }
    fn layers(&self) -> u8 {
        self.layers
    }
}

/// `sim-pp-probe-N`: joins layers 0..N at the first announcement, holds them, and logs each
/// completed bunch sample (`congestion::estimators::bunch::BunchSampler`, the estimator PLM
/// and ERA use) as a `pp-sample` decision with input `rate_bps` (`metrics_plm`).
#[derive(Default)]
struct PpProbe {
    target: u8,
    layers: u8,
    sampler: congestion::estimators::bunch::BunchSampler,
    actions: VecDeque<Action>,
    decisions: VecDeque<Decision>,
    received: u64,
}

impl LayeredController for PpProbe {
    fn name(&self) -> &'static str {
        "sim-pp-probe"
    }
    fn handle_announcement(&mut self, _now: Time, info: &SessionInfo) {
        let top = self.target.min(info.layer_count() as u8);
        while self.layers < top {
            self.actions.push_back(Action::Join(self.layers));
            self.layers += 1;
        }
    }
    fn handle_packet(&mut self, now: Time, pkt: &PacketArrival) {
        self.received += 1;
        if let Some(s) = self.sampler.on_packet(pkt) {
            self.decisions.push_back(Decision {
                at: now,
                from_layers: self.layers,
                to_layers: self.layers,
                reason: crate::metrics_plm::PP_SAMPLE,
                inputs: vec![("rate_bps", s.rate_bps), ("layer", f64::from(s.layer))],
            });
        }
    }
    fn handle_timeout(&mut self, _now: Time) {}
    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }
    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        None
    }
    fn poll_decision(&mut self) -> Option<Decision> {
        self.decisions.pop_front()
    }
    fn stats(&self) -> Stats {
        Stats {
            protocol: "sim-pp-probe",
            layers: self.layers,
            packets_received: self.received,
            ..Stats::default()
        }
    }
    fn layers(&self) -> u8 {
        self.layers
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::layered::Layering;

    #[test]
    fn rlc_deaf_variant_parses_and_keeps_the_rlc_sender() {
        // plm/S11 runs RLC with the PLM paper's 1.1-s deaf period.
        let c = local_controller("rlc-deaf1100").expect("rlc-deaf1100");
        assert_eq!(c.name(), "rlc");
        for bad in ["rlc-deaf", "rlc-deaf0", "rlc-deafx", "rlc-deaf60001"] {
            assert!(local_controller(bad).is_none(), "{bad}");
        }
        let info = congestion::SessionInfo::equal_layers(
            4,
            20_000,
            std::net::Ipv4Addr::new(239, 9, 0, 0),
            5000,
        );
        assert!(matches!(
            Layering::for_protocol("rlc-deaf1100", &info),
            Layering::Rlc(_)
        ));
    }
}
