//! TCP-Reno throughput equations (Padhye et al., "PFTK").
//!
//! One general function, [`throughput`], covers every form the specs use; the named helpers
//! fix its parameters:
//!
//! | helper | form | used by |
//! |---|---|---|
//! | [`pftk_full`] | Eq. 5-5 / Eq. 2.2: `s / (R√(2bp/3) + t_RTO·min(1, 3√(3bp/8))·p·(1+32p²))`, optional `W_m·s/R` cap | reference |
//! | [`rfc5348`] | RFC 5348 §3.1 / TFRC Eq. 2.3: `t_RTO = 4R`, `b` given, **no** `min(1,·)` | cc-tfmcc (TFRC, TFMCC) |
//! | [`era_eq_5_6`] | ERA Eq. 5-6: `b = 1`, `t_RTO = 4R`, result in **bit/s** | ERA |
//!
//! All return `None` when the rate is not defined (`p <= 0`: no loss, no equation rate, as
//! the ERA trace prints "Rtcp: n/a"; or a non-positive/non-finite RTT or size).

/// Finite and strictly positive (NaN fails).
fn positive(x: f64) -> bool {
    x > 0.0 && x.is_finite()
}

/// Parameters of the general equation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcpModel {
    /// Packets acknowledged per ACK (`b`), 1 without delayed ACKs.
    pub b: f64,
    /// Retransmission timeout as a multiple of the RTT (`t_RTO = rto_factor · R`), 4 in
    /// TFRC/TFMCC/ERA.
    pub rto_factor: f64,
    /// Apply PFTK's `min(1, 3√(3bp/8))`. TFRC and ERA's Eq. 5-6 drop it; it only matters for
    /// `p > 8/27 ≈ 0.296` (with `b = 1`), where dropping it underestimates the timeout term's
    /// cap and so *under*-estimates the rate.
    pub clamp_min1: bool,
    /// Maximum window in packets (`W_m`), `None` for no cap.
    pub max_window: Option<f64>,
}

impl TcpModel {
    /// TFRC's control equation (RFC 5348 §3.1): `b = 1`, `t_RTO = 4R`, no `min(1,·)`.
    pub const RFC5348: TcpModel = TcpModel {
        b: 1.0,
        rto_factor: 4.0,
        clamp_min1: false,
        max_window: None,
    };
    /// PFTK's full form with `b = 1`, `t_RTO = 4R` and the `min(1,·)`.
    pub const PFTK_FULL: TcpModel = TcpModel {
        b: 1.0,
        rto_factor: 4.0,
        clamp_min1: true,
        max_window: None,
    };
}

/// The general PFTK equation: throughput in **bytes/s** for packet size `s` bytes, round-trip
/// time `rtt` seconds and loss (event) rate `p` in (0, 1].
pub fn throughput(model: &TcpModel, s: f64, rtt: f64, p: f64) -> Option<f64> {
    if !positive(p) || !positive(rtt) || !positive(s) {
        return None;
    }
    let p = p.min(1.0);
    let b = model.b;
    let t_rto = model.rto_factor * rtt;
    let mut rto_term = 3.0 * (3.0 * b * p / 8.0).sqrt();
    if model.clamp_min1 {
        rto_term = rto_term.min(1.0);
    }
    let denom = rtt * (2.0 * b * p / 3.0).sqrt() + t_rto * rto_term * p * (1.0 + 32.0 * p * p);
    let mut x = s / denom;
    if let Some(wm) = model.max_window {
        x = x.min(wm * s / rtt);
    }
    Some(x)
}

/// PFTK full form (Eq. 5-5 of the ERA thesis, Eq. 2.2 of the TFMCC spec), bytes/s.
pub fn pftk_full(
    s: f64,
    rtt: f64,
    p: f64,
    t_rto: f64,
    b: f64,
    max_window: Option<f64>,
) -> Option<f64> {
    if !positive(rtt) {
        return None;
    }
    throughput(
        &TcpModel {
            b,
            rto_factor: t_rto / rtt,
            clamp_min1: true,
            max_window,
        },
        s,
        rtt,
        p,
    )
}

/// RFC 5348 §3.1 (TFRC) equation, bytes/s, with `t_RTO = 4R` and the given `b`.
pub fn rfc5348(s: f64, rtt: f64, p: f64, b: f64) -> Option<f64> {
    throughput(
        &TcpModel {
            b,
            ..TcpModel::RFC5348
        },
        s,
        rtt,
        p,
    )
}

/// ERA's Eq. 5-6 (correct form, `era.md` §1.1.12), **bit/s**, packet size `m` bytes:
/// `8M / (t_RTT·(√(2l/3) + 12·√(3l/8)·l·(1+32l²)))`.
///
/// `clamp_min1 = true` applies PFTK's `min(1,·)`, which the thesis drops; that differs only
/// for `l > 8/27` (edge case E7), where the literal form gives a lower rate.
pub fn era_eq_5_6(m: f64, rtt: f64, l: f64, clamp_min1: bool) -> Option<f64> {
    throughput(
        &TcpModel {
            clamp_min1,
            ..TcpModel::RFC5348
        },
        m,
        rtt,
        l,
    )
    .map(|x| 8.0 * x)
}

/// Inverts the equation: the loss rate `p` at which `throughput(model, s, rtt, p)` equals
/// `target` bytes/s (bisection in log space, relative accuracy about 1e-9). Used to seed a
/// loss history from a rate (RFC 5348 §6.3.1). `None` if the target is out of reach
/// (above the rate at `p = 1e-12` or below the rate at `p = 1`).
pub fn invert_for_p(model: &TcpModel, s: f64, rtt: f64, target: f64) -> Option<f64> {
    let f = |p: f64| throughput(model, s, rtt, p);
    let (mut lo, mut hi) = (1e-12f64, 1.0f64);
    if !positive(target) || target > f(lo)? || target < f(hi)? {
        return None;
    }
    // The rate falls monotonically in p.
    for _ in 0..200 {
        let mid = (lo.ln() * 0.5 + hi.ln() * 0.5).exp();
        if f(mid)? > target {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi / lo < 1.0 + 1e-12 {
            break;
        }
    }
    Some((lo * hi).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn era_ac0_vectors() {
        // era.md AC-0 and the Appendix C trace value 1386939.5073044538.
        let r = era_eq_5_6(512.0, 0.05, 4.0 / 832.0, false).unwrap();
        assert!((r - 1_386_939.5073044538).abs() < 1e-3, "{r}");
        let r = era_eq_5_6(512.0, 0.05, 0.1, false).unwrap();
        assert!((r - 145_006.8).abs() < 1.0, "{r}");
        assert_eq!(era_eq_5_6(512.0, 0.05, 0.0, false), None);
    }

    #[test]
    fn era_reference_table() {
        // era.md §1.1.12 reference values, M = 512 bytes.
        let table: &[(f64, [f64; 3])] = &[
            (0.001, [3_144_447.0, 1_572_224.0, 786_112.0]),
            (0.005, [1_357_748.0, 678_874.0, 339_437.0]),
            (0.01, [920_226.0, 460_113.0, 230_056.0]),
            (0.02, [600_055.0, 300_028.0, 150_014.0]),
            (0.05, [301_948.0, 150_974.0, 75_487.0]),
            (0.1, [145_007.0, 72_503.0, 36_252.0]),
            (0.2, [43_955.0, 21_978.0, 10_989.0]),
            (0.3, [15_962.0, 7_981.0, 3_990.0]),
        ];
        for (l, row) in table {
            for (rtt, want) in [0.05, 0.1, 0.2].iter().zip(row) {
                let got = era_eq_5_6(512.0, *rtt, *l, false).unwrap();
                // The table is rounded to whole bit/s.
                assert!(
                    (got - want).abs() <= 1.0,
                    "l={l} rtt={rtt}: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn tfrc_vectors_and_min1() {
        // tfrc-tfmcc-pcc.md §1.2 table (s = 1000 B).
        for (r, p, want) in [
            (0.05, 0.10, 35_402.0),
            (0.10, 0.01, 112_332.0),
            (0.10, 0.001, 383_844.0),
            (0.06, 0.001, 639_739.0),
            (0.06, 0.125, 21_483.0),
            (0.20, 0.05, 18_429.0),
        ] {
            let x = rfc5348(1000.0, r, p, 1.0).unwrap();
            assert!((x - want).abs() <= 1.0, "R={r} p={p}: {x}");
        }
        // Below 8/27 the min(1,.) is inactive, above it the full form gives more.
        let a = throughput(&TcpModel::PFTK_FULL, 512.0, 0.1, 0.2).unwrap();
        let b = rfc5348(512.0, 0.1, 0.2, 1.0).unwrap();
        assert!((a - b).abs() < 1e-9);
        let a = throughput(&TcpModel::PFTK_FULL, 512.0, 0.1, 0.5).unwrap();
        let b = rfc5348(512.0, 0.1, 0.5, 1.0).unwrap();
        assert!(a > b * 1.01);
        // W_m cap.
        let capped = pftk_full(1000.0, 0.1, 1e-6, 0.4, 1.0, Some(10.0)).unwrap();
        assert!((capped - 100_000.0).abs() < 1e-6);
    }

    #[test]
    fn inverse_round_trips() {
        let m = TcpModel::RFC5348;
        let p = invert_for_p(&m, 1000.0, 0.1, 112_332.2).unwrap();
        assert!((p - 0.01).abs() < 1e-5, "{p}");
        assert_eq!(invert_for_p(&m, 1000.0, 0.1, 1e30), None);
    }

    proptest! {
        #[test]
        fn rate_is_inverse_in_rtt_and_decreasing_in_p(p in 1e-6f64..1.0, r in 1e-3f64..5.0) {
            let m = TcpModel::RFC5348;
            let x1 = throughput(&m, 1000.0, r, p).unwrap();
            let x2 = throughput(&m, 1000.0, 2.0 * r, p).unwrap();
            prop_assert!((x1 / x2 - 2.0).abs() < 1e-9);
            let x3 = throughput(&m, 1000.0, r, (p * 1.01).min(1.0)).unwrap();
            prop_assert!(x3 <= x1);
        }
    }
}
