//! What a loss event says about the path (`docs/protocols/lcc.md` §3.6): the rate a Linux TCP
//! flow would get at the loss events' spacing, which bounds the floor behind a foreign queue
//! and the climb under random loss, and whether the event that just began is the path's random
//! loss (no queue, and a rate a TCP flow would bear) rather than congestion.

use super::signals::tcp_rate_for_spacing;
use super::Lcc;
use crate::time::Time;
use std::time::Duration;

impl Lcc {
    /// A Linux TCP flow's rate (bit/s) at the loss events' mean `spacing`, while the loss
    /// event at `last` is recent: valid while events keep coming at about their usual spacing.
    pub(super) fn loss_tcp_bps(
        &self,
        now: Time,
        spacing: Option<f64>,
        rtt: f64,
        last: Option<Time>,
    ) -> Option<f64> {
        let (t, closed, last) = (spacing?, self.floor.closed_spacing()?, last?);
        let valid =
            (self.cfg.floor_valid_spacings * closed).max(self.cfg.floor_min_valid.as_secs_f64());
        (now.saturating_since(last).as_secs_f64() <= valid).then(|| self.tcp_bps(t, rtt))
    }

    /// A Linux TCP flow's rate (bit/s) with a loss event every `spacing` s.
    pub(super) fn tcp_bps(&self, spacing: f64, rtt: f64) -> f64 {
        tcp_rate_for_spacing(spacing, rtt) * self.cfg.tcp_mss * 8.0
    }

    /// Whether the loss event that just began is the path's random loss: the packets around
    /// it saw no queue (under `q_random` through the last two ticks and the one under way),
    /// and a Linux TCP flow at the loss events' spacing would still carry the level held (the
    /// first event's seeded spacing never does).
    pub(super) fn random_loss(&self, now: Time, rtt: f64) -> bool {
        let low = |q: Option<f64>| q.is_none_or(|q| q < self.cfg.q_random);
        let queueless = self.qd.now_s().is_some()
            && low(self.qd.now_s())
            && low(self.qd.tick_so_far_s())
            && low(self.qd.ago_s(Duration::from_millis(100)));
        let tcp = self.floor.mean_spacing(now).map(|t| self.tcp_bps(t, rtt));
        queueless && tcp.is_some_and(|x| x >= self.rate_of(self.held))
    }
}
