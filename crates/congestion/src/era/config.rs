//! ERA's parameters: the thesis' defaults, the choices where it is silent, and the live
//! player's set.

/// How the RTT for Eq. 5-6 is obtained (`era.md` §1.1.11, E8).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RttMode {
    /// A configured constant, seconds (the thesis' simulations: 0.05 s).
    Fixed(f64),
    /// Join-to-first-packet (Luby), over the last `window` joins; `initial` seconds until
    /// the first sample. The first packet after a graft also waits for the layer's next
    /// bunch, up to one bunch interval `I_k = b·8M/L_k` (0.41 s for 20 kbit/s pairs), so a
    /// sample `s` only says `s − I_k ≤ RTT ≤ s`. The estimate is the middle of the
    /// intersection of those intervals, `(max(s − I) + min(s)) / 2`, or `min(s)` when they
    /// do not intersect (the RTT changed). The window counts samples, not join decisions: one
    /// RAI that joins 19 layers yields 19 samples whose late arrivals are the long waits, so
    /// keep it well above the number of layers one decision adds (32 is a good value).
    JoinLatency { initial: f64, window: usize },
}

/// Where a step-1 (immediate) drop goes (E4).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step1Target {
    /// Down to the triggering sample (the thesis).
    Sample,
    /// Down to the `k`-th lowest of the last `of_last` samples; no drop while fewer than `k`
    /// samples exist. Softens one-off samples squeezed by cross traffic.
    KthLowest { k: usize, of_last: usize },
    /// No immediate drops (RAI decisions only).
    Off,
}

/// ERA's parameters. Defaults: the thesis' (Table 6-1) and the choices of the [module
/// doc](crate::era).
#[derive(Clone, Debug, PartialEq)]
pub struct EraConfig {
    /// Minimum pair samples for `R_pp` (Table 6-1: 3).
    pub min_pp: usize,
    /// RAIs over which samples may be carried when `l = 0` and too few arrived (E1). 1 = no
    /// carry (the literal thesis plus "hold"). Default 3.
    pub pp_carry_rais: usize,
    /// PLR observation window, in RAIs (the thesis: "a certain observation period"; its trace
    /// implies several seconds). Default 8.
    pub plr_window_rais: usize,
    /// RTT source. Default fixed 50 ms (the Appendix C trace).
    pub rtt: RttMode,
    /// Leave the session when the target is below the base layer's rate (E3). Default false.
    pub exit_below_base: bool,
    /// Step-1 drop target (E4). Default [`Step1Target::Sample`].
    pub step1: Step1Target,
    /// E13: an RAI's lowest pair sample is set aside as a lone outlier when it is below this
    /// fraction of both the RAI's second-lowest sample and the previous RAI's `R_pp`; `R_pp` is
    /// then the smaller of those two. 0 = off (the thesis' minimum, default); the live player
    /// uses 0.9 ([`EraConfig::live`]).
    pub pp_outlier_ratio: f64,
    /// E14: timing precision of a pair sample, as a fraction of its rate. Every sample is
    /// taken as the highest rate it is consistent with, `sample × (1 + pp_precision)`, before
    /// step 1 and the RAI's `R_pp` use it. 0 = exact timestamps (the thesis, the simulator;
    /// default); the live player uses 0.01 ([`EraConfig::live`]).
    pub pp_precision: f64,
    /// E15: a loss in this RAI or the previous one confirms the pair samples, so E13's
    /// protections stand down: step 1 cuts to the lone sample (the thesis) and the RAI keeps
    /// its minimum. Only matters with E13 on. Default false; the live player uses true.
    pub loss_confirms_samples: bool,
    /// E16: stall horizon, seconds. A pair sample below the reference (the lowest `R_pp` of
    /// the last [`STALL_REF_RAIS`] RAIs) is *low*; consecutive low samples form an episode,
    /// which spans from its first low sample. An episode is believed (its samples go to step 1
    /// and the RAI's list) once it has spanned this long; one that ends sooner (a sample at
    /// the reference arrives) is a stall of the host or of the emulated link, and its samples
    /// are set aside. A loss confirms at once (E15). 0 = off (the thesis, default); the live player uses 0.2 s
    /// ([`EraConfig::live`]).
    pub pp_stall_horizon: f64,
    /// Boundary tolerance as a fraction of the layer's own rate (E5). Default 0.001.
    pub tolerance: f64,
    /// Apply PFTK's `min(1,·)` in Eq. 5-6 (only matters for `l > 8/27`, E7). Default true.
    pub tcp_min1: bool,
    /// Sequence jumps larger than this start a new baseline instead of counting as loss.
    pub max_seq_gap: u64,
    /// A missing number counts as lost once a number this much higher arrived
    /// (`estimators::loss::REORDER_THRESHOLD`, docs/protocols/lcc.md §2.1). Default 1 (the paper: a gap at once); `live()` 3.
    pub reorder_threshold: u64,
    /// Decision-log entries kept when the host does not poll them.
    pub max_pending_decisions: usize,
    /// E17: for `2 × plr_window_rais` RAIs after one with loss, a climb at most multiplies the
    /// held rate by this per RAI (at least one layer). `None`: one step to the target (the
    /// thesis); `live()`: 2.
    pub climb_after_loss: Option<f64>,
}

impl Default for EraConfig {
    fn default() -> Self {
        EraConfig {
            min_pp: 3,
            pp_carry_rais: 3,
            plr_window_rais: 8,
            rtt: RttMode::Fixed(0.05),
            exit_below_base: false,
            step1: Step1Target::Sample,
            pp_outlier_ratio: 0.0,
            pp_precision: 0.0,
            loss_confirms_samples: false,
            pp_stall_horizon: 0.0,
            tolerance: 0.001,
            tcp_min1: true,
            max_seq_gap: 3000,
            reorder_threshold: 1,
            max_pending_decisions: 4096,
            climb_after_loss: None,
        }
    }
}

impl EraConfig {
    /// The live player's ERA (E13): the thesis' parameters, except that neither decision
    /// acts on one lone pair sample. Step 1 cuts to the 2nd lowest of the last 3 samples (two
    /// of them must be below the subscribed rate), and an RAI sets its lowest sample aside when
    /// it is a lone outlier (below 0.9 × both the RAI's 2nd lowest and the previous `R_pp`).
    /// Why: on real hosts one pair now and then arrives stretched by something other than the
    /// bottleneck (a timer or softirq run late on a loaded machine, interrupt coalescing); with
    /// the thesis' minimum every such pair is a drop. Seen in CI: two players behind separate
    /// 560 kbit/s links got the same stretched samples (434 and 325 kbit/s against a level of
    /// 500) and shed with no loss at all (docs/protocols/era.md, E13). Not simply the RAI's 2nd
    /// lowest sample: behind a token bucket most pairs cross at the burst rate and only a few
    /// show the shaped rate, so the 2nd lowest overshoots (measured: climbs to 7 layers on a
    /// 5-layer link). A real capacity drop spreads every pair that crosses the bottleneck, so
    /// it shows in the next samples (at 5 layers about 30 pairs per second).
    ///
    /// E15: except when packets were lost in this RAI or the previous one. A stall loses
    /// nothing; congestion does, and then the lone low sample is believed as the thesis does.
    /// Without this, on a drop-tail FIFO where only a few pairs catch a cross-traffic packet
    /// between them (ERA Exp. II: a 500 kbit/s CBR on the 1 Mbit/s link), the live ERA waited
    /// 2 s for a second low sample while the queue overflowed (18% loss in one second).
    ///
    /// E14: samples are taken 1% higher (`pp_precision` 0.01). A real receiver timestamps a
    /// pair with tens of microseconds of noise (the link emulator's release jitter, kernel
    /// scheduling), 0.4% of a 13.7 ms gap at 300 kbit/s, and the minimum of an RAI's 30-60
    /// samples sits 0.5-1% below the true rate. Where the link is an exact multiple of the
    /// layer rate (era.md AC-2 300 kbit/s = 15 layers, AC-10 400 = 20, AC-8 600 = 2 × 15) the
    /// top layer then never fits, and single low samples cut it (docs/protocols/era.md, E14).
    /// Cost: a link up to 1% below a layer boundary admits that layer (≤ 1% overload; its
    /// loss then lowers Eq. 5-6's target).
    ///
    /// E16: low samples must persist 0.2 s (`pp_stall_horizon`) to be believed without a
    /// loss. On the testbed's 2-vCPU VM the hypervisor takes a vCPU away for 0.3-16 ms at a
    /// time (steal up to 20% of a vCPU, measured), and a tbf or emulator release timer on that
    /// vCPU fires that much late: pairs behind an idle 5.5 Mbit/s path came out stretched in
    /// episodes of up to 13 consecutive pairs, the longest 82 ms from the last normal sample
    /// to the next, about one episode a second; E13 sets aside one sample, step 1's 2 of 3
    /// does not help within an episode (docs/protocols/era.md, E16). A receiver in a cloud VM
    /// timestamps through the same stalls. Cost: a capacity drop without loss is followed
    /// 0.2 s later.
    ///
    /// E17: after loss the climb back at most doubles the rate per RAI. On a drop-tail FIFO
    /// shared with a TCP flow the pairs measure the link's capacity, not the share left
    /// (docs/protocols/era.md "pairs on a drop-tail FIFO measure the capacity"), so when the
    /// loss of the last drop leaves the 8-RAI window the target is the whole link and the
    /// thesis' one step jumped from the base layer to every layer into a full queue: 18-24 %
    /// loss in that RAI, the base layer's frames with it, a 0.5-1 s freeze, and Eq. 5-6 back
    /// to the base layer for 8 RAIs (quality suite, behind 4 Mbit/s with one CUBIC download:
    /// 1 → 9 → 1 layers every ~9 s). A clean start, with no loss seen, still climbs in one step.
    pub fn live() -> EraConfig {
        EraConfig {
            step1: Step1Target::KthLowest { k: 2, of_last: 3 },
            pp_outlier_ratio: 0.9,
            pp_precision: 0.01,
            loss_confirms_samples: true,
            pp_stall_horizon: 0.2,
            reorder_threshold: crate::estimators::loss::REORDER_THRESHOLD,
            climb_after_loss: Some(2.0),
            ..EraConfig::default()
        }
    }
}
