//! LCC's parameters; `docs/protocols/lcc.md` §4 argues each default.

use std::time::Duration;

/// LCC's parameters (`docs/protocols/lcc.md` §4 argues each default).
#[derive(Clone, Debug, PartialEq)]
pub struct LccConfig {
    /// Decision period.
    pub tick: Duration,
    /// A standing queue above this is congestion we must relieve, s.
    pub q_high: f64,
    /// Probing only with the queue below this, s.
    pub q_low: f64,
    /// A receiver holding a fraction `x` of the capacity tolerates `q_yield × (1 − x)` more
    /// than `q_high`, plus a draw from `[0, q_yield_jitter)` made afresh whenever the queue
    /// empties, s: behind one FIFO the largest subscriber yields first, and the others see
    /// the queue drain and hold.
    pub q_yield: f64,
    pub q_yield_jitter: f64,
    /// A receiver that joined its top layer less than `join_recent` ago tolerates `q_recent`
    /// less (s): its join is the likeliest cause, and undoing it spares the others.
    pub q_recent: f64,
    pub join_recent: Duration,
    /// A queue rising faster than this (s/s) less than `join_steep` after our join: the join
    /// was bigger than the room there was: the yield threshold is then `q_low`, so the
    /// decrease comes before the queue reaches the other receivers' thresholds.
    pub steep_trend: f64,
    pub join_steep: Duration,
    /// A congestion episode this receiver did not start holds down its next layer if that
    /// layer's step is more than this fraction of the capacity.
    pub big_step: f64,
    /// A change of the queueing delay that counts (a queue draining after a decrease), s.
    pub q_step: f64,
    /// Decrease to this fraction of the received rate (GCC's 0.85).
    pub decrease_factor: f64,
    /// Fraction of the dispersion median the subscription may reach.
    pub cap_margin: f64,
    /// Additive increase: this fraction of the capacity estimate per second (the estimate
    /// taken as at least `ai_min_bps`), and `ai_idle_fraction` while the queue stayed near
    /// empty for `idle_span`.
    pub ai_fraction: f64,
    pub ai_idle_fraction: f64,
    pub idle_span: Duration,
    /// The idle pace only this long after the last decrease or loss.
    pub calm_span: Duration,
    pub ai_min_bps: f64,
    /// Least wait between two joins.
    pub probe_hold: Duration,
    /// Longest wait before a join.
    pub probe_hold_max: Duration,
    /// Least time between two decreases, and the longest wait for the queue to drain after
    /// one before the delay rule acts again.
    pub drain_hold: Duration,
    pub drain_max: Duration,
    /// No probing this soon after a loss event.
    pub loss_quiet: Duration,
    /// A loss event whose packets saw a queue under this (s), at a loss-event rate at which a
    /// Linux TCP flow would still carry the level held, is the path's random loss (radio, a
    /// bad line), not an overflow: it neither lowers the level nor stops the climb, and the
    /// loss rate's TCP rate bounds the climb instead (docs/protocols/lcc.md §3.6). A
    /// drop-tail queue only drops when full and CoDel only past its 5-ms sojourn target, so
    /// their losses come with more queue than this.
    pub q_random: f64,
    /// After leaving level `m` less than `join_recent` after joining it (a failed join), or for
    /// a loss, `m` is not joined again for `hold_down`, doubled for each earlier such decrease
    /// from `m` within `hold_memory` of the one before, at most `hold_down_max`; a capacity
    /// estimate `hold_release` times the larger of the ones at the join and at the decrease
    /// lifts it.
    pub hold_down: Duration,
    pub hold_down_max: Duration,
    pub hold_memory: Duration,
    pub hold_release: f64,
    /// A receiver holding less than this share of the capacity estimate while a level is held
    /// down doubles its hold-down only up to `hold_down_max` times its share over this (at
    /// least `hold_down`): a latecomer's small failed joins are retried sooner.
    pub hold_full_share: f64,
    /// Propagation RTT assumed for a competing TCP (added to the measured queueing delay), s.
    pub base_rtt: f64,
    /// Segment size of the competing TCP, bytes (for the loss floor).
    pub tcp_mss: f64,
    /// The loss floor scaled by this bounds the share floor.
    pub loss_floor_gain: f64,
    /// The loss floor holds while the last event is at most this many mean spacings old (and
    /// at least `floor_min_valid`).
    pub floor_valid_spacings: f64,
    pub floor_min_valid: Duration,
    /// A queue whose `foreign_quantile` over this span is above `q_high` is foreign if we hold
    /// at most `foreign_max_share` of the capacity; then `share` of the capacity is a floor.
    pub foreign_span: Duration,
    pub foreign_quantile: f64,
    pub foreign_max_share: f64,
    pub share: f64,
    /// Two loss events within `foreign_span` while we held at most this share of the capacity
    /// also make the queue foreign.
    pub foreign_loss_share: f64,
    /// Dispersion samples: the span the median covers, and the least count for it.
    pub dispersion_span: Duration,
    pub dispersion_min: usize,
    /// The level must have held this long before its received rate rescales the ladder.
    pub scale_settle: Duration,
    /// With no packet for this long, fall back to the base layer.
    pub silence: Duration,
    /// Sequence jumps larger than this start a new baseline instead of counting as loss.
    pub max_seq_gap: u64,
    /// A missing number counts as lost once a number this much higher arrived
    /// (`estimators::loss::REORDER_THRESHOLD`, docs/protocols/lcc.md §2.1). Default 3.
    pub reorder_threshold: u64,
    /// Decision-log entries kept when the host does not poll them.
    pub max_pending_decisions: usize,
}

impl Default for LccConfig {
    fn default() -> Self {
        LccConfig {
            tick: Duration::from_millis(100),
            q_high: 0.050,
            q_low: 0.020,
            q_yield: 0.03,
            q_yield_jitter: 0.010,
            q_recent: 0.020,
            join_recent: Duration::from_secs(5),
            steep_trend: 0.1,
            join_steep: Duration::from_millis(1500),
            big_step: 0.2,
            q_step: 0.015,
            decrease_factor: 0.85,
            cap_margin: 0.95,
            ai_fraction: 0.05,
            ai_idle_fraction: 0.2,
            idle_span: Duration::from_secs(2),
            calm_span: Duration::from_secs(20),
            ai_min_bps: 1_000_000.0,
            probe_hold: Duration::from_millis(500),
            probe_hold_max: Duration::from_secs(30),
            drain_hold: Duration::from_millis(500),
            drain_max: Duration::from_secs(2),
            loss_quiet: Duration::from_secs(2),
            q_random: 0.003,
            hold_down: Duration::from_secs(4),
            hold_down_max: Duration::from_secs(32),
            hold_memory: Duration::from_secs(64),
            hold_release: 1.2,
            hold_full_share: 0.25,
            base_rtt: 0.05,
            tcp_mss: 1448.0,
            loss_floor_gain: 2.5,
            floor_valid_spacings: 3.0,
            floor_min_valid: Duration::from_secs(20),
            foreign_span: Duration::from_secs(10),
            foreign_quantile: 0.5,
            foreign_max_share: 0.6,
            share: 0.5,
            foreign_loss_share: 0.25,
            dispersion_span: Duration::from_secs(2),
            dispersion_min: 4,
            scale_settle: Duration::from_secs(3),
            silence: Duration::from_secs(2),
            max_seq_gap: 3000,
            reorder_threshold: crate::estimators::loss::REORDER_THRESHOLD,
            max_pending_decisions: 4096,
        }
    }
}
