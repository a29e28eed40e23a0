//! The layer rule of §1.1.13 step 6 (with E5's tolerance) and the rates it works on.

use crate::session::SessionInfo;

/// The `k`-th lowest of `v` (1-based, clamped to `1..=v.len()`); `v` must not be empty.
pub(super) fn kth_lowest(v: &[f64], k: usize) -> f64 {
    let k = k.clamp(1, v.len());
    if k == 1 {
        return v.iter().copied().fold(f64::INFINITY, f64::min);
    }
    let mut s = v.to_vec();
    let (_, kth, _) = s.select_nth_unstable_by(k - 1, |a, b| a.total_cmp(b));
    *kth
}

/// Cumulative rates `R_0..R_{N-1}` (prefix sums of the SAM's per-layer rates).
pub(super) fn cumulative(info: &SessionInfo) -> Vec<f64> {
    let mut acc = 0.0;
    info.layers
        .iter()
        .map(|l| {
            acc += l.rate_bps as f64;
            acc
        })
        .collect()
}

/// The §1.1.13 step-6 rule with the E5 tolerance, as a pure function on layer *counts*:
/// `cum[j]` is the cumulative rate of `j + 1` layers, `held` the number held now (≥ 1).
/// Returns the number of layers to hold (≥ 1 unless `allow_zero`, in which case 0 means
/// "below the base layer"). Tolerance for layer `j` is `tol_frac × L_j`.
pub fn choose_layers(
    cum: &[f64],
    held: usize,
    target: f64,
    tol_frac: f64,
    allow_zero: bool,
) -> usize {
    let n = cum.len();
    if n == 0 {
        return 0;
    }
    let layer_rate = |j: usize| if j == 0 { cum[0] } else { cum[j] - cum[j - 1] };
    let tol = |j: usize| tol_frac * layer_rate(j);
    let mut k = held.clamp(1, n);
    if cum[k - 1] > target + tol(k - 1) {
        while k > 1 && cum[k - 1] > target + tol(k - 1) {
            k -= 1;
        }
        if k == 1 && allow_zero && cum[0] > target + tol(0) {
            k = 0;
        }
    } else {
        while k < n && cum[k] <= target + tol(k) {
            k += 1;
        }
    }
    k
}
