//! PLM's parameters: the paper's, ns-2's where the paper is silent, and the options.

use std::time::Duration;

/// PLM's parameters (`plm.md` §4).
#[derive(Clone, Debug, PartialEq)]
pub struct PlmConfig {
    /// Check period C; `None` = the SAM's adaptation interval (default 1 s in the SAM).
    pub check_period: Option<Duration>,
    /// Minimum samples in W before an add decision (ns-2: 3).
    pub min_pp: usize,
    /// Permissive comparisons (`<=` in the drop and add loops) instead of strict `<`.
    pub permissive: bool,
    /// Relative tolerance of the two comparison loops of §3.3 (ours; 0.005, 0 = the paper's
    /// exact comparisons). A PP sample at a share equal to a cumulative rate is exact in the
    /// simulator but scatters by ±0.01-0.1 % on the testbed (receive timestamps of a 40 ms gap),
    /// so the strict rule decided on noise: with a 100 kbit/s share and 20 kbit/s layers it
    /// added the 5th layer on a window minimum of 100.01 kbit/s and dropped it on the next
    /// 99.95 kbit/s sample, and a drop loop stopped at 10 layers (200 kbit/s) on a 200.67 kbit/s
    /// sample with the share at 200 kbit/s, holding exactly the share and losing packets
    /// (plm/E4). Strict: `B < x` reads `B < x·(1 − tol)`; permissive: `B <= x` reads
    /// `B <= x·(1 + tol)`. The drop trigger (`x < B[n]`) is unchanged.
    pub tolerance: f64,
    /// Loss-rate threshold of the no-PP fallback (10%).
    pub loss_threshold: f64,
    /// How sure the loss rule must be that the cycle's loss rate exceeds `loss_threshold`:
    /// it drops when the lower Wilson bound at this many standard deviations does (2.0, ours;
    /// 0 = the plain ns-2 point estimate). Why: a cycle opens at a loss and is judged from 10
    /// packets on, so at 5 % random loss two losses in the first dozen packets (a 1-in-3
    /// event per cycle) read 17 % and dropped a layer every ~2 s on the testbed (plm/E10).
    /// With z = 2 the rule still drops after the same 10 packets at 50-60 % loss (no-PP case).
    pub loss_confidence_z: f64,
    /// Skip an add decision while the current loss cycle is above `loss_threshold` (by the
    /// same confidence rule as the loss-drop). Ours, not in the paper or ns-2 (default on):
    /// when PLM overloads its own fair-queue buffer, the pairs that survive whole are the ones
    /// served back to back, every one reads the link rate, and each add undid the loss rule's
    /// drop for the rest of the run (simulator plm/S8, k = 1; `docs/protocols/plm.md` §6).
    pub no_add_while_lossy: bool,
    /// After a check that added nothing, keep checking at every sample on the minimum of the
    /// last C of samples instead of waiting for the next check (ours; default off = the
    /// paper's and ns-2's rule, where every check restarts W and T_c). W restarts at every
    /// check, so when the share rises just after a check, the next check's minimum still
    /// holds a sample of the old share and the add waits one more C: the add comes between C
    /// and 2C after the last low sample (plm/S3 2.2-2.6 s and plm/E4 1.93-2.01 s after the
    /// CBR left the bottleneck, bands 2 s and C + T_leave + 0.5 s). With this rule it comes C
    /// after the last low sample (S3 1.60-1.84 s); an add still needs every sample of a full
    /// C above the next cumulative rate, and adds stay at least C apart. Why it is off: it
    /// also adds during every lull of a competing flow that lasts C, e.g. a Reno flow sitting
    /// out a retransmission timeout after TCP2 starts in S4 (PLM 4 -> 7 -> 4 three times in
    /// 60-70 s, band 4 +- 1), which the check phase of the paper's rule mostly filters.
    /// `docs/protocols/plm.md` §9.
    pub sliding_check: bool,
    /// Hold PP samples below `B[n]` for this long before believing them (ours; `None` = the
    /// paper's drop on a single sample, what the simulator runs; [`PlmConfig::confirming`] uses
    /// 200 ms). A run of low samples that a sample above `B[n]` (by the comparisons'
    /// tolerance) ends within this time is set aside (decision `pp-set-aside`); one that
    /// lasts it drops, on the largest low sample of the run, and so does a loss during the
    /// run. Only from C after the last add (a low sample right after an add is the add
    /// overshooting) and not within C after a set-aside run (lows that recur are a real
    /// change of the share): there a low sample drops at once, as in the paper. Why: on the testbed the link emulator's
    /// wire thread is now and then descheduled by the hypervisor (release error p99 0.1-1.2
    /// ms, p99.9 0.4-4 ms, max 1.9-13 ms), which stretches a pair's gap, now and then two in
    /// a row; with B[25] = 250 kbit/s 2.4 % under R1's 256 kbit/s share, a second packet
    /// 0.4 ms late dropped 25 -> 24 and the next check re-added it (plm/E2: 2.7-5.3
    /// changes/min, band <= 2). A real fall of the share reads low in every following pair,
    /// so the cost is this much more reaction time (E4's CBR start -> 4 layers: band 1.7 s).
    pub confirm_drop: Option<Duration>,
    /// After a drop, an add reaches at most this multiple of the rate held, and at least one
    /// layer (ours; `None` = the paper's add to the highest layer below the estimate, what
    /// the simulator runs; [`PlmConfig::live`] 2), for [`PlmConfig::climb_memory`] after the
    /// drop. Why: behind a drop-tail FIFO the pairs read the link's capacity whenever the
    /// competing flow leaves a gap, not the share it leaves; after each drop the next check
    /// added every layer at once into the queue a TCP flow keeps full (quality suite behind 4
    /// Mbit/s with one CUBIC download: 5 -> 9 layers, 1.1 -> 3.3 Mbit/s, and 28-74 packets
    /// lost in the next second, base layer included). Climbing a doubling at a time meets the
    /// queue with a smaller overshoot, the rule ERA's E17 applies (`docs/protocols/plm.md`
    /// §10). Under fair queueing the pairs read the share and the cap only makes a climb
    /// after a drop take a check or two more.
    pub climb_after_drop: Option<f64>,
    /// How long after a drop [`PlmConfig::climb_after_drop`] caps adds (8 s: the testbed's
    /// drops behind a CUBIC flow come 1-10 s apart, so a shorter memory left most of the
    /// jumps uncapped).
    pub climb_memory: Duration,
    /// A pair sample never drops the base layer (ours; the paper's drop loop runs down to
    /// no layer, then re-joins after [`PlmConfig::t_rejoin`]). Why: on a path that has been
    /// carrying the base layer a pair below its rate is a pair stretched at the sender or the
    /// receiver far more often than a path that lost it, and leaving it is 30 s of black: in
    /// the quality suite a sender stall read 246 kbit/s against the base's 317 on three
    /// viewers at once and each saw nothing from 29 to 59 s (`docs/protocols/plm.md` §11).
    /// A path that really cannot carry the base still empties by the loss rule or silence.
    pub pp_keeps_base: bool,
    /// Blind period after a loss-triggered drop (500 ms).
    pub blind: Duration,
    /// Packets received in a loss cycle before its rate is evaluated (ns-2: 10).
    pub loss_min_pkts: u64,
    /// Maximum age of a loss cycle (ns-2: 5 s).
    pub loss_cycle_max: Duration,
    /// No packet at all this long after joining the base layer: give up (5 s, ours).
    pub t_start: Duration,
    /// Silence timeout; `None` = max(1 s, 4 × base-layer mean burst interval).
    pub t_nopkt: Option<Duration>,
    /// Re-join the base layer this long after holding nothing (ns-2: 30 s).
    pub t_rejoin: Duration,
    /// Exit the session instead of re-joining (the paper's wording).
    pub exit_on_empty: bool,
    /// Sequence jumps larger than this start a new baseline instead of counting as loss.
    pub max_seq_gap: u64,
    /// A missing number counts as lost once a number this much higher arrived
    /// (`estimators::loss::REORDER_THRESHOLD`, docs/protocols/lcc.md §2.1). Default 1 (the paper: a gap at once); `confirming()` 3.
    pub reorder_threshold: u64,
    /// Decision-log entries kept when the host does not poll them.
    pub max_pending_decisions: usize,
}

impl Default for PlmConfig {
    fn default() -> Self {
        PlmConfig {
            check_period: None,
            min_pp: 3,
            permissive: false,
            tolerance: 0.005,
            loss_threshold: 0.10,
            loss_confidence_z: 2.0,
            no_add_while_lossy: true,
            sliding_check: false,
            confirm_drop: None,
            climb_after_drop: None,
            climb_memory: Duration::from_secs(8),
            pp_keeps_base: false,
            blind: Duration::from_millis(500),
            loss_min_pkts: 10,
            loss_cycle_max: Duration::from_secs(5),
            t_start: Duration::from_secs(5),
            t_nopkt: None,
            t_rejoin: Duration::from_secs(30),
            exit_on_empty: false,
            max_seq_gap: 3000,
            reorder_threshold: 1,
            max_pending_decisions: 4096,
        }
    }
}

impl PlmConfig {
    /// The player's `plm`: the paper's rules plus [`PlmConfig::climb_after_drop`] = 2, for
    /// the drop-tail links the paper's fair-queueing assumption does not hold on, and
    /// [`PlmConfig::pp_keeps_base`] (the paper's rules alone are `plm-paper`).
    pub fn live() -> PlmConfig {
        PlmConfig {
            climb_after_drop: Some(2.0),
            pp_keeps_base: true,
            ..PlmConfig::default()
        }
    }

    /// The defaults plus [`PlmConfig::confirm_drop`] = 200 ms (a pair stretched by a
    /// descheduled vCPU does not drop layers). Opt-in (`layercast-player --controller
    /// plm-confirm`): on the testbed it cut the stall drops but not all of them (plm/E2), and
    /// in the one E9 run with it PLM's rate under the bursty background fell from 0.46 to
    /// 0.37 x TCP_b (`docs/protocols/plm.md` §9), so the player's `plm` is the paper's rule.
    pub fn confirming() -> PlmConfig {
        PlmConfig {
            confirm_drop: Some(Duration::from_millis(200)),
            reorder_threshold: crate::estimators::loss::REORDER_THRESHOLD,
            ..PlmConfig::default()
        }
    }
}
