//! Measurements: computing each scenario measurement from a finished run, judging it against
//! its pass band, and the per-run summary written as JSON.

use crate::engine::Sim;
use crate::metrics::{jain, min_max_ratio, Monitor};
use crate::metrics_dlm::quantile;
use crate::scenario::{Available, Measurement, Scenario};
use crate::Error;
use serde::Serialize;

/// Metric names a measurement may use (definitions in `docs/scenarios.md`).
pub const METRICS: &[&str] = &[
    "throughput_kbps",
    "sum_throughput_kbps",
    "efficiency",
    "loss_ratio",
    "lost_packets",
    "max_interval_loss_ratio",
    "time_to_level",
    "convergence_time",
    "mean_layers",
    "mean_queue_packets",
    "min_level",
    "max_level",
    "time_at_level",
    "layer_changes",
    "layer_changes_per_min",
    "layer_changes_after_level",
    "jain",
    "fairness_i",
    "tcp_friendliness",
    "feedback_per_round",
    "min_interval_kbps",
    "max_interval_kbps",
    "max_rate_kbps",
    "time_to_clr",
    "clr_share",
    "mean_queue_ratio",
    "mean_queue_spread",
    "mean_queue_increasing",
    "spread_kbps",
    "cov_ratio",
    "time_to_recover",
    "retransmit_ratio",
    "acc_notifications",
    "queue_delay_median_ms",
    "queue_delay_p95_ms",
    "dlm_d1_ms",
    "dlm_d2_ms",
    "dlm_d3_ms",
    "dlm_queue_median_zone",
    "dlm_queue_p95_over_d3",
    "dlm_loss_zone3",
    "dlm_leaves_above_rtcp",
    "dlm_ss_interval_dev",
    "dlm_ss_deaf_dev",
    "dlm_ss_exit_epochs",
    "final_level_spread",
    "convergence_spread",
    "tfmcc_ss_exit_kbps",
    "tfmcc_time_to_rate",
    "tfmcc_halving_interval_rmax",
    "tfmcc_first_halving_interval_rmax",
    "tfmcc_halving_count",
    "tfmcc_min_rate_kbps",
    "tfmcc_max_increase",
    "tfmcc_rounds_to_rmax_above",
    "tfmcc_rounds_to_rmax_below",
    "tfmcc_mean_round_s",
    "tfmcc_round_in_packet_intervals",
    "tfmcc_time_to_rtt_count",
    "tfmcc_rounds_with_new_rtt",
    "tfmcc_rtt_measured",
    "tfmcc_clr_timeout_t",
    "tfmcc_time_to_clr_rise",
    "tfrc_p_cov",
    "tfrc_halving_rtts",
    "tfrc_halving_events",
    "tfrc_first_report_rtts",
    "tfrc_max_rise_pkts",
    "tfrc_max_slope",
    "pp_samples",
    "pp_max_rel_err",
    "pp_fraction_near",
    "pp_switch_fraction",
    "layer_events",
    "max_layer_step",
    "max_rel_dev_kbps",
    "time_to_level_spread",
    "an_share",
    "an_plr",
    "rate_share",
];

/// Metrics computed over the whole `of` list (the others are computed per monitor).
pub const AGGREGATE: &[&str] = &[
    "max_rel_dev_kbps",
    "time_to_level_spread",
    "sum_throughput_kbps",
    "jain",
    "fairness_i",
    "tcp_friendliness",
    "cov_ratio",
    "time_to_recover",
    "spread_kbps",
    "retransmit_ratio",
    "final_level_spread",
    "convergence_spread",
    "tfmcc_time_to_clr_rise",
    "an_share",
    "an_plr",
    "rate_share",
];

/// One measurement's outcome in one run.
#[derive(Clone, Debug, Serialize)]
pub struct MeasResult {
    pub id: String,
    pub metric: String,
    /// The headline value: the aggregate, or the mean over the monitors for per-monitor
    /// metrics.
    pub value: f64,
    /// Per-monitor values (per-monitor metrics only), in `of` order.
    pub values: Vec<(String, f64)>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Every value in the band (per-monitor metrics: each monitor must pass).
    pub pass: bool,
    pub published: String,
}

/// Per-monitor summary.
#[derive(Clone, Debug, Serialize)]
pub struct MonSummary {
    pub name: String,
    pub kind: crate::metrics::MonKind,
    pub start_s: Option<f64>,
    pub throughput_kbps: f64,
    pub loss_ratio: f64,
    pub received: u64,
    pub lost: u64,
    pub final_layers: u8,
    pub layer_events: u64,
    pub change_events: u64,
}

/// Per-link summary.
#[derive(Clone, Debug, Serialize)]
pub struct LinkSummary {
    pub name: String,
    pub sent_packets: u64,
    pub utilisation: f64,
    pub drops_overflow: u64,
    pub drops_early: u64,
    pub drops_wire: u64,
}

/// Everything one run produced, as written to `summary.json`.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    pub scenario: String,
    pub seed: u64,
    pub duration_s: f64,
    pub events: u64,
    pub measurements: Vec<MeasResult>,
    pub monitors: Vec<MonSummary>,
    pub links: Vec<LinkSummary>,
}

/// Packet size of the TFMCC flow `flow` (NaN if there is none).
fn tfmcc_packet_size(sc: &Scenario, flow: &str) -> f64 {
    sc.flows
        .iter()
        .find_map(|f| match f {
            crate::scenario::Flow::Tfmcc {
                name, packet_size, ..
            } if name == flow => Some(f64::from(*packet_size)),
            _ => None,
        })
        .unwrap_or(f64::NAN)
}

fn find<'a>(sim: &'a Sim, name: &str) -> Result<&'a Monitor, Error> {
    sim.net
        .monitors
        .list
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| Error::Scenario(format!("no monitor {name:?}")))
}

fn in_band(v: f64, min: Option<f64>, max: Option<f64>) -> bool {
    !v.is_nan() && min.is_none_or(|m| v >= m) && max.is_none_or(|m| v <= m)
}

fn available_mean(a: &Available, t0: f64, t1: f64) -> f64 {
    match a {
        Available::Constant(c) => *c,
        Available::Pieces(p) => {
            let mut s = 0.0;
            let mut w = 0.0;
            for [a, b, r] in p {
                let o = (b.min(t1) - a.max(t0)).max(0.0);
                s += o * r;
                w += o;
            }
            if w > 0.0 {
                s / w
            } else {
                f64::NAN
            }
        }
    }
}

/// max − min (NaN if empty; infinite if one value is infinite and another finite).
fn spread(v: &[f64]) -> f64 {
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    if v.is_empty() {
        f64::NAN
    } else if hi == lo {
        0.0
    } else {
        hi - lo
    }
}

/// Computes one measurement.
pub fn measure(sc: &Scenario, sim: &Sim, m: &Measurement) -> Result<MeasResult, Error> {
    let end = sc.duration_s;
    let iv = sc.interval_s;
    let names = sc.expand(&m.of)?;
    let mons: Vec<&Monitor> = names
        .iter()
        .map(|n| find(sim, n))
        .collect::<Result<_, _>>()?;
    let window = |mon: &Monitor| -> (f64, f64) {
        m.window
            .map(|w| (w[0], w[1].min(end)))
            .unwrap_or((mon.start.unwrap_or(0.0), end))
    };
    let after = |mon: &Monitor| m.after_s.unwrap_or(mon.start.unwrap_or(0.0));
    let per = |f: &dyn Fn(&Monitor) -> f64| -> Vec<(String, f64)> {
        mons.iter().map(|mon| (mon.name.clone(), f(mon))).collect()
    };
    let thr = |mon: &Monitor| {
        let (a, b) = window(mon);
        mon.throughput_kbps(iv, a, b)
    };
    let values: Vec<(String, f64)> = match m.metric.as_str() {
        "throughput_kbps" => per(&thr),
        "efficiency" => per(&|mon| {
            let (a, b) = window(mon);
            let avail = m
                .available_kbps
                .as_ref()
                .map_or(f64::NAN, |x| available_mean(x, a, b));
            thr(mon) / avail
        }),
        "loss_ratio" => per(&|mon| {
            let (a, b) = window(mon);
            let (l, r) = mon.loss_counts(iv, a, b);
            if l + r > 0.0 {
                l / (l + r)
            } else {
                0.0
            }
        }),
        "lost_packets" => per(&|mon| {
            let (a, b) = window(mon);
            mon.loss_counts(iv, a, b).0
        }),
        "max_interval_loss_ratio" => per(&|mon| {
            let (a, b) = window(mon);
            mon.max_interval_loss(iv, a, b)
        }),
        "time_to_level" => per(&|mon| {
            mon.time_until(after(mon), end, |k, r| {
                m.min_layers.is_none_or(|x| k >= x)
                    && m.max_layers.is_none_or(|x| k <= x)
                    && m.min_kbps.is_none_or(|x| r >= x)
                    && m.max_kbps.is_none_or(|x| r <= x)
            })
        }),
        "convergence_time" => {
            per(&|mon| mon.convergence_time(after(mon), end, m.hold_s.unwrap_or(5.0)))
        }
        "mean_queue_packets" => per(&|mon| {
            let (a, b) = window(mon);
            mon.mean_queue(iv, a, b)
        }),
        "mean_queue_ratio" | "mean_queue_spread" | "mean_queue_increasing" => per(&|mon| {
            let q: Vec<f64> = m
                .windows
                .iter()
                .map(|w| mon.mean_queue(iv, w[0], w[1].min(end)))
                .collect();
            let (first, last) = (q[0], q[q.len() - 1]);
            match m.metric.as_str() {
                "mean_queue_ratio" => last / first,
                "mean_queue_spread" => {
                    q.iter().copied().fold(f64::MIN, f64::max)
                        - q.iter().copied().fold(f64::MAX, f64::min)
                }
                _ => f64::from(u8::from(q.windows(2).all(|p| p[1] > p[0]))),
            }
        }),
        "acc_notifications" => per(&|mon| {
            // Of a link probe `queue:FROM-TO`: notifications its ACC router sent (whole run).
            let link = mon.name.strip_prefix("queue:").unwrap_or(&mon.name);
            sim.net
                .links
                .iter()
                .position(|l| l.name == link)
                .and_then(|i| sim.net.acc.get(i).and_then(Option::as_ref))
                .map_or(0.0, |r| r.notifications as f64)
        }),
        "mean_layers" => per(&|mon| {
            let (a, b) = window(mon);
            mon.mean_layers(a, b)
        }),
        "time_at_level" => per(&|mon| {
            let (a, b) = window(mon);
            mon.time_at_level(a, b, m.min_layers.unwrap_or(1))
        }),
        "min_level" => per(&|mon| {
            let (a, b) = window(mon);
            f64::from(mon.level_range(a, b).0)
        }),
        "max_level" => per(&|mon| {
            let (a, b) = window(mon);
            f64::from(mon.level_range(a, b).1)
        }),
        "layer_changes" => per(&|mon| {
            let (a, b) = window(mon);
            mon.changes_in(a, b) as f64
        }),
        // Change events after the receiver first holds a level in [min_layers, max_layers]
        // (from `after_s`, as `time_to_level`), up to the window's end; infinite if it never
        // gets there. plm.md S1's "0 layer changes afterwards" is about the time after
        // convergence: a fixed window from 7 s counted the converging add itself whenever
        // convergence came after 7 s, repeating the time rows' verdict.
        "layer_changes_after_level" => per(&|mon| {
            let from = after(mon);
            let reached = mon.time_until(from, end, |k, _| {
                m.min_layers.is_none_or(|x| k >= x) && m.max_layers.is_none_or(|x| k <= x)
            });
            if reached.is_finite() {
                let (a, b) = window(mon);
                mon.changes_in((from + reached).max(a), b) as f64
            } else {
                f64::INFINITY
            }
        }),
        "layer_changes_per_min" => per(&|mon| {
            let (a, b) = window(mon);
            mon.changes_in(a, b) as f64 * 60.0 / (b - a)
        }),
        "min_interval_kbps" => per(&|mon| {
            let (a, b) = window(mon);
            mon.min_interval_kbps(iv, a, b)
        }),
        "max_interval_kbps" => per(&|mon| {
            let (a, b) = window(mon);
            mon.max_interval_kbps(iv, a, b)
        }),
        "max_rate_kbps" => per(&|mon| {
            let (a, b) = window(mon);
            mon.max_rate_kbps(a, b)
        }),
        "feedback_per_round" => per(&|mon| {
            let (a, b) = window(mon);
            mon.feedback_per_round(a, b)
        }),
        "time_to_clr" | "clr_share" => {
            let mut v = Vec::new();
            for mon in &mons {
                let snd = find(sim, &format!("{}/sender", mon.flow))?;
                let rid = mon.rid.ok_or_else(|| {
                    Error::Scenario(format!("{}: {} needs TFMCC receivers", m.id, m.metric))
                })?;
                let x = if m.metric == "time_to_clr" {
                    snd.time_to_clr(rid, after(mon), end)
                } else {
                    let (a, b) = window(mon);
                    snd.clr_share(rid, a, b)
                };
                v.push((mon.name.clone(), x));
            }
            v
        }
        "queue_delay_median_ms" | "queue_delay_p95_ms" => per(&|mon| {
            let (a, b) = window(mon);
            let q = if m.metric.contains("median") {
                0.5
            } else {
                0.95
            };
            quantile(mon.queue_delays_ms(a, b), q)
        }),
        "dlm_d1_ms" | "dlm_d2_ms" | "dlm_d3_ms" => per(&|mon| {
            let (a, b) = window(mon);
            let k = if m.metric == "dlm_d1_ms" {
                0
            } else if m.metric == "dlm_d2_ms" {
                1
            } else {
                2
            };
            mon.dlm_threshold_ms(k, a, b)
        }),
        "dlm_queue_median_zone" | "dlm_queue_p95_over_d3" => {
            // The bottleneck's queueing delay (a link probe in `versus`) against each DLM
            // receiver's own thresholds (time-mean over its epochs in the window).
            let vs = sc.expand(&m.versus)?;
            let probe = find(sim, vs.first().map_or("", String::as_str))?;
            let mut v = Vec::new();
            for mon in &mons {
                let (a, b) = window(mon);
                let x = if m.metric == "dlm_queue_median_zone" {
                    let med = quantile(probe.queue_delays_ms(a, b), 0.5);
                    let d1 = mon.dlm_threshold_ms(0, a, b);
                    let d2 = mon.dlm_threshold_ms(1, a, b);
                    (med - d1) / (d2 - d1)
                } else {
                    quantile(probe.queue_delays_ms(a, b), 0.95) / mon.dlm_threshold_ms(2, a, b)
                };
                v.push((mon.name.clone(), x));
            }
            v
        }
        "dlm_loss_zone3" => per(&|mon| {
            let (a, b) = window(mon);
            mon.dlm_loss_zone3(a, b)
        }),
        "dlm_leaves_above_rtcp" => per(&|mon| {
            let (a, b) = window(mon);
            mon.dlm_leaves_above_rtcp(a, b)
        }),
        "dlm_ss_interval_dev" | "dlm_ss_deaf_dev" | "dlm_ss_exit_epochs" => {
            let i_s = baselines::delay::Config::default()
                .slow_start_interval
                .as_secs_f64();
            per(&|mon| match m.metric.as_str() {
                "dlm_ss_interval_dev" => mon.dlm_ss_interval_dev(i_s),
                "dlm_ss_deaf_dev" => mon.dlm_ss_deaf_dev(i_s),
                _ => mon.dlm_ss_exit_epochs(i_s),
            })
        }
        "tfmcc_ss_exit_kbps" => per(&|mon| mon.tfmcc_ss_exit_kbps()),
        "tfmcc_time_to_rate" => {
            per(&|mon| mon.tfmcc_time_to_rate(after(mon), m.min_kbps.unwrap_or(f64::INFINITY)))
        }
        "tfmcc_halving_interval_rmax" => per(&|mon| {
            let (a, b) = window(mon);
            mon.tfmcc_halving_interval_rmax(a, b)
        }),
        "tfmcc_first_halving_interval_rmax" => per(&|mon| {
            let (a, b) = window(mon);
            mon.tfmcc_first_halving_interval_rmax(a, b)
        }),
        "tfmcc_halving_count" => per(&|mon| {
            let (a, b) = window(mon);
            mon.tfmcc_halving_count(a, b)
        }),
        "tfmcc_min_rate_kbps" => per(&|mon| {
            let (a, b) = window(mon);
            mon.tfmcc_min_rate_kbps(a, b)
        }),
        "tfmcc_max_increase" | "tfmcc_round_in_packet_intervals" => per(&|mon| {
            let (a, b) = window(mon);
            let size = sc
                .flows
                .iter()
                .find_map(|f| match f {
                    crate::scenario::Flow::Tfmcc {
                        name, packet_size, ..
                    } if *name == mon.flow => Some(f64::from(*packet_size)),
                    _ => None,
                })
                .unwrap_or(f64::NAN);
            if m.metric == "tfmcc_max_increase" {
                mon.tfmcc_max_increase(a, b, size)
            } else {
                mon.tfmcc_round_in_packet_intervals(a, b, size)
            }
        }),
        "tfmcc_rounds_to_rmax_above" | "tfmcc_rounds_to_rmax_below" => {
            // Of the sender: from `after_s`. Of a receiver: from that receiver's first report
            // at the sender (S29), on the sender's rounds and R_max.
            let mut v = Vec::new();
            for mon in &mons {
                let (snd, from) = match mon.rid {
                    Some(rid) => {
                        let snd = find(sim, &format!("{}/sender", mon.flow))?;
                        let t = snd.first_report.get(&rid).copied().unwrap_or(f64::NAN);
                        (snd, t)
                    }
                    None => (*mon, after(mon)),
                };
                let x = if from.is_nan() {
                    f64::INFINITY
                } else {
                    snd.tfmcc_rounds_until_rmax(
                        from,
                        m.threshold.unwrap_or(f64::NAN),
                        m.metric.ends_with("above"),
                    )
                };
                v.push((mon.name.clone(), x));
            }
            v
        }
        "tfmcc_time_to_rtt_count" | "tfmcc_rounds_with_new_rtt" | "tfmcc_rtt_measured" => {
            // Of the sender: its receivers' first RTT measurements (receiver side).
            let mut v = Vec::new();
            for mon in &mons {
                let rx: Vec<&Monitor> = sim
                    .net
                    .monitors
                    .list
                    .iter()
                    .filter(|x| x.flow == mon.flow && x.rid.is_some())
                    .collect();
                let mut times: Vec<f64> = rx.iter().filter_map(|x| x.first_rtt_at).collect();
                times.sort_by(f64::total_cmp);
                let (a, b) = window(mon);
                let x = match m.metric.as_str() {
                    "tfmcc_time_to_rtt_count" => {
                        let k = m.threshold.unwrap_or(f64::NAN);
                        if k.is_finite() && k >= 1.0 {
                            crate::metrics_tfmcc::time_to_rtt_count(&times, after(mon), k as usize)
                        } else {
                            f64::NAN
                        }
                    }
                    "tfmcc_rtt_measured" => times.iter().filter(|&&t| t <= b).count() as f64,
                    _ => mon.tfmcc_rounds_with_new_rtt(a, b, &times, rx.len()),
                };
                v.push((mon.name.clone(), x));
            }
            v
        }
        // plm.md §9.A (metrics_plm): pair samples of `sim-pp-probe-N`, threshold in kbit/s.
        "pp_samples" | "pp_max_rel_err" | "pp_fraction_near" | "pp_switch_fraction" => {
            per(&|mon| {
                let (a, b) = window(mon);
                let s = crate::metrics_plm::pp_samples_kbps(mon, a, b);
                let th = m.threshold.unwrap_or(f64::NAN);
                match m.metric.as_str() {
                    "pp_samples" => s.len() as f64,
                    "pp_max_rel_err" => crate::metrics_plm::max_rel_err(&s, th),
                    "pp_fraction_near" => crate::metrics_plm::fraction_near(&s, th),
                    _ => crate::metrics_plm::switch_fraction(&s),
                }
            })
        }
        "layer_events" => per(&|mon| {
            let (a, b) = window(mon);
            crate::metrics_plm::layer_events_in(mon, a, b) as f64
        }),
        "max_layer_step" => per(&|mon| {
            let (a, b) = window(mon);
            crate::metrics_plm::max_layer_step(mon, a, b) as f64
        }),
        "tfmcc_mean_round_s" => per(&|mon| {
            let (a, b) = window(mon);
            mon.tfmcc_mean_round_s(a, b)
        }),
        "tfrc_p_cov" => per(&|mon| {
            let (a, b) = window(mon);
            mon.tfrc_p_cov(a, b)
        }),
        "tfrc_halving_rtts" => per(&|mon| mon.tfrc_halving_rtts(after(mon))),
        "tfrc_halving_events" => per(&|mon| mon.tfrc_halving_events(after(mon))),
        "tfrc_first_report_rtts" => per(&|mon| mon.tfrc_first_report_rtts(after(mon))),
        "tfrc_max_rise_pkts" | "tfrc_max_slope" => per(&|mon| {
            let (a, b) = window(mon);
            let size = sc
                .flows
                .iter()
                .find_map(|f| match f {
                    crate::scenario::Flow::Tfrc {
                        name, packet_size, ..
                    } if *name == mon.flow => Some(f64::from(*packet_size)),
                    _ => None,
                })
                .unwrap_or(f64::NAN);
            if m.metric == "tfrc_max_slope" {
                mon.tfrc_max_slope(a, b, size)
            } else {
                mon.tfrc_max_rise_pkts(a, b, size)
            }
        }),
        "tfmcc_clr_timeout_t" => {
            // Of receivers (S18): from the receiver's last report before `after_s` (its crash)
            // to the sender dropping it as CLR, in feedback rounds T at that report.
            let mut v = Vec::new();
            for mon in &mons {
                let snd = find(sim, &format!("{}/sender", mon.flow))?;
                let rid = mon.rid.ok_or_else(|| {
                    Error::Scenario(format!("{}: {} needs TFMCC receivers", m.id, m.metric))
                })?;
                let size = tfmcc_packet_size(sc, &mon.flow);
                v.push((
                    mon.name.clone(),
                    snd.tfmcc_clr_timeout_t(rid, after(mon), size),
                ));
            }
            v
        }
        _ => Vec::new(),
    };
    let (value, pass) = if !AGGREGATE.contains(&m.metric.as_str()) {
        let v = values.iter().map(|x| x.1).sum::<f64>() / values.len().max(1) as f64;
        let pass = !values.is_empty() && values.iter().all(|x| in_band(x.1, m.min, m.max));
        (v, pass)
    } else {
        let x: Vec<f64> = mons.iter().map(|mon| thr(mon)).collect();
        let v = match m.metric.as_str() {
            "sum_throughput_kbps" => x.iter().sum(),
            "retransmit_ratio" => {
                // Whole run: retransmitted / transmitted segments over the TCP flows of `of`.
                let (mut sent, mut retx) = (0u64, 0u64);
                for mon in &mons {
                    if let Some(i) = sc.flows.iter().position(|f| f.name() == mon.flow) {
                        sent += sim.net.flow_sent.get(i).copied().unwrap_or(0);
                        retx += sim.net.flow_retx.get(i).copied().unwrap_or(0);
                    }
                }
                if sent > 0 {
                    retx as f64 / sent as f64
                } else {
                    f64::NAN
                }
            }
            "spread_kbps" => {
                x.iter().copied().fold(f64::MIN, f64::max)
                    - x.iter().copied().fold(f64::MAX, f64::min)
            }
            "jain" => jain(&x),
            // Active-network single-rate metrics (agents::aer, active-networks.md §2.1).
            "an_share" | "an_plr" => {
                let mut flows: Vec<usize> = mons
                    .iter()
                    .filter_map(|mon| sc.flows.iter().position(|f| f.name() == mon.flow))
                    .collect();
                flows.dedup();
                if m.metric == "an_plr" {
                    crate::agents::aer::an_plr(&sim.net, &flows)
                } else {
                    // `versus: [queue:A-B]` names the link; both directions count.
                    let mut links = Vec::new();
                    for v in &m.versus {
                        let ab = v.trim_start_matches("queue:");
                        let ba: String = ab.rsplit('-').collect::<Vec<_>>().join("-");
                        for (i, l) in sim.net.links.iter().enumerate() {
                            if l.name == ab || l.name == ba {
                                links.push(i);
                            }
                        }
                    }
                    crate::agents::aer::an_share(&sim.net, &links, &flows)
                }
            }
            "rate_share" => {
                // Σ throughput of `of` over Σ of `of` and `versus` (S1-a's byte share).
                let vs = sc.expand(&m.versus)?;
                let b: f64 = vs
                    .iter()
                    .map(|n| find(sim, n).map(thr))
                    .collect::<Result<Vec<_>, _>>()?
                    .iter()
                    .sum();
                let a: f64 = x.iter().sum();
                a / (a + b)
            }
            "max_rel_dev_kbps" => crate::metrics_plm::max_rel_dev_from_mean(&x),
            "time_to_level_spread" => {
                let c: Vec<f64> = mons
                    .iter()
                    .map(|mon| {
                        mon.time_until(after(mon), end, |k, r| {
                            m.min_layers.is_none_or(|x| k >= x)
                                && m.max_layers.is_none_or(|x| k <= x)
                                && m.min_kbps.is_none_or(|x| r >= x)
                                && m.max_kbps.is_none_or(|x| r <= x)
                        })
                    })
                    .collect();
                spread(&c)
            }
            "fairness_i" => min_max_ratio(&x),
            "final_level_spread" => {
                let l: Vec<f64> = mons
                    .iter()
                    .map(|mon| f64::from(mon.level_at(window(mon).1)))
                    .collect();
                spread(&l)
            }
            "convergence_spread" => {
                let c: Vec<f64> = mons
                    .iter()
                    .map(|mon| mon.convergence_time(after(mon), end, m.hold_s.unwrap_or(5.0)))
                    .collect();
                spread(&c)
            }
            "time_to_recover" => {
                // PCC S14: seconds from `after_s` until the summed rate of `of`, averaged over
                // `hold_s` (5 s), is back to `threshold` (0.9) of its mean over `windows[0]`
                // (the reference level); infinite if never.
                let w = m.windows.first().copied().ok_or_else(|| {
                    Error::Scenario("time_to_recover needs windows: [reference]".into())
                })?;
                let frac = m.threshold.unwrap_or(0.9);
                let span = ((m.hold_s.unwrap_or(5.0) / iv).round() as usize).max(1);
                let bins = mons.iter().map(|mon| mon.bytes.len()).max().unwrap_or(0);
                let sum_kbps = |i: usize| {
                    mons.iter()
                        .map(|mon| mon.bytes.get(i).copied().unwrap_or(0) as f64)
                        .sum::<f64>()
                        * 8.0
                        / iv
                        / 1000.0
                };
                let (r0, r1) = ((w[0] / iv).ceil() as usize, (w[1] / iv).floor() as usize);
                let reference =
                    (r0..r1).map(sum_kbps).sum::<f64>() / (r1.saturating_sub(r0)).max(1) as f64;
                let after = m.after_s.unwrap_or(0.0);
                let first = (after / iv).ceil() as usize;
                let last = ((end / iv).floor() as usize).min(bins);
                (first..last.saturating_sub(span - 1))
                    .find(|&i| {
                        (i..i + span).map(sum_kbps).sum::<f64>() / span as f64 >= frac * reference
                    })
                    .map_or(f64::INFINITY, |i| i as f64 * iv - after)
            }
            "cov_ratio" => {
                // Mean per-flow coefficient of variation of the per-interval rate over the
                // window, `of` over `versus` (TFRC S10: TFRC's CoV(1 s) below TCP's).
                let cov = |mon: &Monitor| {
                    let (a, b) = window(mon);
                    let r: Vec<f64> = ((a / iv).ceil() as usize..(b / iv).floor() as usize)
                        .map(|i| mon.bytes.get(i).copied().unwrap_or(0) as f64)
                        .collect();
                    let n = r.len() as f64;
                    let mean = r.iter().sum::<f64>() / n;
                    let var = r.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
                    var.sqrt() / mean
                };
                // A flow that delivered nothing in the window has no CoV (0/0): it is left out
                // of its side's mean. At 1.5 Mbit/s with 32 + 32 flows (0.2 packets/RTT each)
                // a TCP flow can sit out a whole minute in exponential RTO backoff; leaving it
                // out lowers TCP's mean CoV, i.e. works against the `< 1` band.
                let defined =
                    |v: Vec<f64>| -> Vec<f64> { v.into_iter().filter(|c| c.is_finite()).collect() };
                let vs = sc.expand(&m.versus)?;
                let a = defined(mons.iter().map(|mon| cov(mon)).collect());
                let b = defined(
                    vs.iter()
                        .map(|n| find(sim, n).map(cov))
                        .collect::<Result<_, _>>()?,
                );
                let ma = a.iter().sum::<f64>() / a.len() as f64;
                let mb = b.iter().sum::<f64>() / b.len() as f64;
                ma / mb
            }
            "tfmcc_time_to_clr_rise" => {
                // S20: receiver i of `of` has its RTT step at windows[i][0]; its time to become
                // CLR (until windows[i][1]) must not grow from one step to the next: the
                // largest increase between consecutive steps (negative when they all fall).
                let mut times = Vec::new();
                for (mon, w) in mons.iter().zip(&m.windows) {
                    let snd = find(sim, &format!("{}/sender", mon.flow))?;
                    let rid = mon.rid.ok_or_else(|| {
                        Error::Scenario(format!("{}: {} needs TFMCC receivers", m.id, m.metric))
                    })?;
                    times.push(snd.time_to_clr(rid, w[0], w[1]));
                }
                times
                    .windows(2)
                    .map(|p| p[1] - p[0])
                    .fold(f64::NEG_INFINITY, f64::max)
            }
            "tcp_friendliness" => {
                let vs = sc.expand(&m.versus)?;
                let t: Vec<f64> = vs
                    .iter()
                    .map(|n| find(sim, n).map(thr))
                    .collect::<Result<_, _>>()?;
                let tm = x.iter().sum::<f64>() / x.len() as f64;
                let tt = t.iter().sum::<f64>() / t.len() as f64;
                // A starved or exited protocol has F = 0 (a real outcome, e.g. DLM leaving
                // the session against TCP); only a starved reference leaves F undefined.
                if tm >= 0.0 && tt > 0.0 {
                    tm / tt
                } else {
                    f64::NAN
                }
            }
            other => return Err(Error::Scenario(format!("unknown metric {other}"))),
        };
        (v, in_band(v, m.min, m.max))
    };
    Ok(MeasResult {
        id: m.id.clone(),
        metric: m.metric.clone(),
        value,
        values,
        min: m.min,
        max: m.max,
        pass,
        published: m.published.clone(),
    })
}

/// Summarises a finished run.
pub fn summarise(sc: &Scenario, sim: &Sim) -> Result<RunSummary, Error> {
    let end = sc.duration_s;
    let iv = sc.interval_s;
    let measurements = sc
        .measurements
        .iter()
        .map(|m| measure(sc, sim, m))
        .collect::<Result<_, _>>()?;
    let monitors = sim
        .net
        .monitors
        .list
        .iter()
        .map(|m| {
            let t0 = m.start.unwrap_or(0.0);
            let (l, r) = m.loss_counts(iv, 0.0, end);
            MonSummary {
                name: m.name.clone(),
                kind: m.kind,
                start_s: m.start,
                throughput_kbps: m.throughput_kbps(iv, t0, end),
                loss_ratio: if l + r > 0.0 { l / (l + r) } else { 0.0 },
                received: r as u64,
                lost: l as u64,
                final_layers: m.level_at(end),
                layer_events: m.layer_events,
                change_events: m.change_events,
            }
        })
        .collect();
    let links = sim
        .net
        .links
        .iter()
        .map(|l| LinkSummary {
            name: l.name.clone(),
            sent_packets: l.sent_packets,
            utilisation: l.sent_bytes as f64 * 8.0 / (l.rate_bps as f64 * end),
            drops_overflow: l.drops_overflow,
            drops_early: l.drops_early,
            drops_wire: l.drops_wire,
        })
        .collect();
    Ok(RunSummary {
        scenario: sc.name.clone(),
        seed: sim.seed(),
        duration_s: end,
        events: sim.net.events,
        measurements,
        monitors,
        links,
    })
}
