//! `delay-trace`: the protocol crate's DLM receiver (`baselines::delay::Dlm`, default
//! configuration) unchanged, plus one `epoch` entry in the decision log per completed epoch,
//! so the catalogue can check what DLM concluded epoch by epoch (`delay-based.md` §10.A DS3,
//! DS5, DS6): the zone, the loss it saw, its queueing-delay estimate `daowd` and thresholds,
//! and whether it was in slow start when the epoch closed.
//!
//! Why a wrapper: the controller's own log records only level changes (with the last epoch's
//! inputs); the acceptance checks need every epoch, and the protocol crate is not ours to
//! change for a measurement. The wrapper only reads `Dlm::last_epoch()` and
//! `Dlm::in_slow_start()` after each timeout, so the controller behaves exactly as `delay`
//! (same actions, same timers; `tests/dlm_trace.rs` checks the level traces are identical).
//!
//! An epoch is detected when `last_epoch()` changes across a `handle_timeout`. Two
//! consecutive epochs with bit-identical reports (same daowd, X_calc, R_TCP, ...) would be
//! logged once; with real delay samples that does not happen in practice.

use baselines::delay::{Dlm, EpochReport, Trend};
use congestion::controller::TimerReason;
use congestion::{Action, Decision, LayeredController, PacketArrival, SessionInfo, Stats, Time};
use std::collections::VecDeque;

/// Reason string of the per-epoch log entries.
pub const EPOCH: &str = "epoch";

/// DLM with a per-epoch log.
pub struct DlmTrace {
    inner: Dlm,
    log: VecDeque<Decision>,
}

impl DlmTrace {
    /// Wraps a DLM receiver.
    pub fn new(inner: Dlm) -> Self {
        DlmTrace {
            inner,
            log: VecDeque::new(),
        }
    }
}

fn trend_code(t: Trend) -> f64 {
    match t {
        Trend::Increasing => 1.0,
        Trend::NonIncreasing => -1.0,
        Trend::NoTrend => 0.0,
        Trend::Unknown => f64::NAN,
    }
}

fn epoch_inputs(r: &EpochReport, slow_start_before: bool) -> Vec<(&'static str, f64)> {
    vec![
        ("daowd", r.daowd),
        ("d1", r.thresholds[0]),
        ("d2", r.thresholds[1]),
        ("d3", r.thresholds[2]),
        ("zone", f64::from(r.zone)),
        ("loss", r.loss as f64),
        ("trend_d", trend_code(r.trend_d)),
        ("trend_s", trend_code(r.trend_s)),
        ("x_calc", r.x_calc),
        ("r_tcp", r.r_tcp),
        ("r_target", r.r_target),
        ("slow_start", if slow_start_before { 1.0 } else { 0.0 }),
    ]
}

impl LayeredController for DlmTrace {
    fn name(&self) -> &'static str {
        "delay"
    }
    fn handle_announcement(&mut self, now: Time, info: &SessionInfo) {
        self.inner.handle_announcement(now, info);
    }
    fn handle_packet(&mut self, now: Time, pkt: &PacketArrival) {
        self.inner.handle_packet(now, pkt);
    }
    fn handle_timeout(&mut self, now: Time) {
        let before = self.inner.last_epoch();
        let ss = self.inner.in_slow_start();
        let level = self.inner.layers();
        self.inner.handle_timeout(now);
        if let Some(r) = self.inner.last_epoch() {
            if before != Some(r) {
                self.log.push_back(Decision {
                    at: now,
                    from_layers: level,
                    to_layers: level,
                    reason: EPOCH,
                    inputs: epoch_inputs(&r, ss),
                });
            }
        }
    }
    fn poll_action(&mut self) -> Option<Action> {
        self.inner.poll_action()
    }
    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        self.inner.poll_timeout()
    }
    fn poll_decision(&mut self) -> Option<Decision> {
        self.log.pop_front().or_else(|| self.inner.poll_decision())
    }
    fn stats(&self) -> Stats {
        self.inner.stats()
    }
    fn layers(&self) -> u8 {
        self.inner.layers()
    }
}
