//! A latency histogram with fixed bounds, rendered as a Prometheus histogram (cumulative
//! `_bucket{le=...}`, `_sum`, `_count`), so that Grafana's `histogram_quantile` and the e2e
//! reports read the same figures. Bounds are fine where the latency targets are (tens of ms)
//! and coarse beyond a second.

use std::fmt::Write;

/// Upper bounds of the buckets, seconds (a last `+Inf` bucket holds the rest).
pub const BOUNDS_S: [f64; 14] = [
    0.002, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0,
];

/// See the module documentation.
#[derive(Debug, Default, Clone)]
pub struct LatencyHistogram {
    /// Per bucket (not cumulative), the last one `+Inf`.
    counts: [u64; BOUNDS_S.len() + 1],
    sum_s: f64,
}

impl LatencyHistogram {
    /// Records one latency.
    pub fn record(&mut self, seconds: f64) {
        let s = seconds.max(0.0);
        let i = BOUNDS_S.partition_point(|&b| b < s);
        self.counts[i] += 1;
        self.sum_s += s;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Appends the histogram `name` with the label set `labels` (`key="value"` pairs, already
    /// escaped) to `m`; the caller writes `# HELP` / `# TYPE` once per name.
    pub fn render(&self, m: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut acc = 0;
        for (i, b) in BOUNDS_S.iter().enumerate() {
            acc += self.counts[i];
            let _ = writeln!(m, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {acc}");
        }
        acc += self.counts[BOUNDS_S.len()];
        let _ = writeln!(m, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {acc}");
        let _ = writeln!(m, "{name}_sum{{{labels}}} {}", self.sum_s);
        let _ = writeln!(m, "{name}_count{{{labels}}} {acc}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_bounds_inclusive() {
        let mut h = LatencyHistogram::default();
        for s in [0.001, 0.002, 0.025, 0.9, 3.0] {
            h.record(s);
        }
        let mut m = String::new();
        h.render(&mut m, "x_seconds", "session=\"a\"");
        assert!(
            m.contains("x_seconds_bucket{session=\"a\",le=\"0.002\"} 2\n"),
            "{m}"
        );
        assert!(
            m.contains("x_seconds_bucket{session=\"a\",le=\"0.02\"} 2\n"),
            "{m}"
        );
        assert!(
            m.contains("x_seconds_bucket{session=\"a\",le=\"0.03\"} 3\n"),
            "{m}"
        );
        assert!(
            m.contains("x_seconds_bucket{session=\"a\",le=\"1\"} 4\n"),
            "{m}"
        );
        assert!(
            m.contains("x_seconds_bucket{session=\"a\",le=\"+Inf\"} 5\n"),
            "{m}"
        );
        assert!(m.contains("x_seconds_count{session=\"a\"} 5\n"), "{m}");
        assert_eq!(h.count(), 5);
    }
}
