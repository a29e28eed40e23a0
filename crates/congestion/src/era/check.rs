//! `era.md` AC-15: an ERA decision log checked against the decision rules.

use super::layers::cumulative;
use crate::controller::Decision;
use crate::session::SessionInfo;

/// What [`check_decision_log`] checked, by kind of decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecisionLogCheck {
    /// RAI decisions that changed or kept the level on a target (`rai`).
    pub rai: usize,
    /// RAI decisions that held for lack of evidence (`rai-hold`, E1).
    pub holds: usize,
    /// Immediate step-1 drops (`pp-drop`).
    pub pp_drops: usize,
    /// RAI decisions that left the session (`rai-exit`, E3).
    pub exits: usize,
    /// Empty-RAI steps down (`rai-empty`, E2) and base joins (`join-base`).
    pub other: usize,
}

impl DecisionLogCheck {
    /// All decisions checked.
    pub fn total(&self) -> usize {
        self.rai + self.holds + self.pp_drops + self.exits + self.other
    }
}

/// `era.md` AC-15: checks an ERA receiver's decision log against the decision rules, for
/// the session `info` and at least `min_pp` pair samples per R_pp (Table 6-1: 3).
///
/// Per RAI record: `R_pp = min(list)` (or the E13 substitute when a lone outlier was set
/// aside, which must lie between the list's minimum and second-lowest sample), or −1 when
/// the list has fewer than `min_pp` entries; `R_TARGET` follows the §1.1.13 table
/// (`min(R_TCP, R_pp)` with loss, `R_pp` without, `R_TCP` alone when `R_pp = −1`, hold when
/// neither); after the decision `R_i ≤ R_TARGET + tol` (unless at the base layer) and
/// `R_{i+1} ≥ R_TARGET` (unless at the top), with the E5 tolerance `tol` = the logged
/// fraction × the layer's own rate (with an E17 `climb_cap` below the target, the cap instead of
/// the target in the second rule); a hold keeps the level; an exit happens only when the
/// target is below the base layer. Step-1 drops must carry the sample that triggered them
/// and end at or below their step-1 target (plus tolerance). Returns the counts, or the
/// first violation.
pub fn check_decision_log(
    decisions: &[Decision],
    info: &SessionInfo,
    min_pp: usize,
) -> Result<DecisionLogCheck, String> {
    let cum = cumulative(info);
    let top = cum.len();
    let rate = |n: usize| {
        if n == 0 {
            0.0
        } else {
            cum[(n - 1).min(top - 1)]
        }
    };
    let own = |n: usize| rate(n) - rate(n.saturating_sub(1));
    let get = |d: &Decision, key: &str| -> Result<f64, String> {
        d.inputs
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
            .ok_or_else(|| format!("no {key} in {d:?}"))
    };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
    let mut c = DecisionLogCheck::default();
    for d in decisions {
        match d.reason {
            "rai" | "rai-hold" | "rai-exit" => {
                let list: Vec<f64> = d
                    .inputs
                    .iter()
                    .filter(|(k, _)| *k == "pp_sample")
                    .map(|(_, v)| *v)
                    .collect();
                let r_pp = get(d, "r_pp")?;
                if list.len() < min_pp {
                    if r_pp != -1.0 {
                        return Err(format!("R_pp {r_pp} with {} samples: {d:?}", list.len()));
                    }
                } else {
                    let mut sorted = list.clone();
                    sorted.sort_by(f64::total_cmp);
                    let outlier = get(d, "pp_outlier").unwrap_or(-1.0);
                    let ok = if outlier >= 0.0 {
                        outlier == sorted[0] && r_pp >= sorted[0] && r_pp <= sorted[1]
                    } else {
                        r_pp == sorted[0]
                    };
                    if !ok {
                        return Err(format!("R_pp {r_pp} != min {}: {d:?}", sorted[0]));
                    }
                }
                let plr = get(d, "plr")?;
                let r_tcp = get(d, "r_tcp")?;
                let target = get(d, "r_target")?;
                let want = match (plr > 0.0, r_pp >= 0.0, r_tcp >= 0.0) {
                    (true, true, true) => r_tcp.min(r_pp),
                    (true, false, true) => r_tcp,
                    (true, true, false) => r_pp,
                    (false, true, _) => r_pp,
                    _ => -1.0,
                };
                if !close(target, want) {
                    return Err(format!("R_TARGET {target} != {want}: {d:?}"));
                }
                let n = d.to_layers as usize;
                if d.reason == "rai-hold" {
                    if want >= 0.0 || d.from_layers != d.to_layers {
                        return Err(format!("hold with a target or a level change: {d:?}"));
                    }
                    c.holds += 1;
                    continue;
                }
                if target < 0.0 {
                    return Err(format!("decision without a target: {d:?}"));
                }
                let tol_frac = get(d, "tolerance")?;
                if d.reason == "rai-exit" {
                    if n != 0 || top == 0 || target + tol_frac * own(1) >= rate(1) {
                        return Err(format!("exit with the base layer affordable: {d:?}"));
                    }
                    c.exits += 1;
                    continue;
                }
                if n == 0 || n > top {
                    return Err(format!("level {n} out of range: {d:?}"));
                }
                if n > 1 && rate(n) > target + tol_frac * own(n) {
                    return Err(format!("R_i {} > R_TARGET {target}: {d:?}", rate(n)));
                }
                // E17: a climb capped after loss stops at the highest level within the cap
                // (at least one layer above where it was).
                let cap = d
                    .inputs
                    .iter()
                    .find(|(k, _)| *k == "climb_cap")
                    .map_or(-1.0, |&(_, v)| v);
                let capped = cap >= 0.0 && cap < target;
                if capped && (n <= d.from_layers as usize || rate(n) > cap + tol_frac * own(n)) {
                    return Err(format!("climb past its cap {cap}: {d:?}"));
                }
                let reach = if capped { cap } else { target };
                if n < top && rate(n + 1) < reach {
                    return Err(format!("R_i+1 {} < R_TARGET {reach}: {d:?}", rate(n + 1)));
                }
                c.rai += 1;
            }
            "pp-drop" => {
                let sample = get(d, "pp_sample")?;
                let t1 = get(d, "step1_target")?;
                if d.to_layers >= d.from_layers || d.to_layers == 0 {
                    return Err(format!("step-1 drop that does not drop: {d:?}"));
                }
                if !sample.is_finite() || sample < 0.0 {
                    return Err(format!("step-1 drop without its sample: {d:?}"));
                }
                let n = d.to_layers as usize;
                if n > 1 && rate(n) > t1 + 0.01 * own(n) {
                    return Err(format!("step-1 drop ends above its target: {d:?}"));
                }
                if rate(d.from_layers as usize) <= t1 {
                    return Err(format!("step-1 drop although R_i <= its target: {d:?}"));
                }
                c.pp_drops += 1;
            }
            "join-base" | "rai-empty" => c.other += 1,
            other => return Err(format!("unknown decision reason {other}: {d:?}")),
        }
    }
    Ok(c)
}
