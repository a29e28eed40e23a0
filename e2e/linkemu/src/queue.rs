//! Queue disciplines come from the shared `qdisc` crate (drop-tail, RED, REM, DRR fair queue),
//! so a scenario's `queue:` means the same in the simulator and here. This module only adds the
//! emulator's default when no queue is named.

use crate::Error;
use qdisc::{QdiscConfig, QueueDiscipline};

/// The default byte limit: 2 × rate × RTT with RTT taken as twice this link's one-way delay
/// (DESIGN.md: "Default queue: drop-tail, 2 x bandwidth-delay product"), and never less than
/// 8 full-size frames so that a zero-delay link still absorbs a burst.
pub fn default_limit_bytes(rate_bps: u64, delay_ns: u64) -> u64 {
    let bdp = (rate_bps as u128 * 2 * delay_ns as u128 / 8 / 1_000_000_000) as u64;
    (2 * bdp).max(8 * 1514)
}

/// The queue in force: the named one, or drop-tail of [`default_limit_bytes`].
pub fn effective(spec: Option<&QdiscConfig>, rate_bps: u64, delay_ns: u64) -> QdiscConfig {
    spec.cloned().unwrap_or(QdiscConfig::Droptail {
        limit_packets: None,
        limit_bytes: Some(default_limit_bytes(rate_bps, delay_ns)),
        limit_ms: None,
    })
}

/// Builds the discipline for a link of `rate_bps` and `delay_ns`; random early drops draw from
/// `seed`. (`limit_ms` is converted at the link rate; an unlimited link counts as 10 Gbit/s.)
pub fn build<P: Send + 'static>(
    spec: Option<&QdiscConfig>,
    rate_bps: u64,
    delay_ns: u64,
    seed: u64,
) -> Result<Box<dyn QueueDiscipline<P>>, Error> {
    let rate = if rate_bps == 0 {
        10_000_000_000
    } else {
        rate_bps
    };
    qdisc::build_seeded(&effective(spec, rate_bps, delay_ns), rate, seed)
        .map_err(|e| Error::Config(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use congestion::Time;
    use qdisc::Queued;

    #[test]
    fn default_limit_is_two_bdp() {
        // 1 Mbit/s, 20 ms one way: RTT 40 ms, BDP 5000 B, 2 BDP 10000 B -> floor 12112.
        assert_eq!(default_limit_bytes(1_000_000, 20_000_000), 8 * 1514);
        // 10 Mbit/s, 20 ms: BDP 50000 B.
        assert_eq!(default_limit_bytes(10_000_000, 20_000_000), 100_000);
    }

    #[test]
    fn shared_configs_build() {
        // 100 ms at 1 Mbit/s = 12500 B: 25 packets of 500 B.
        let ms: QdiscConfig =
            serde_json::from_str(r#"{"kind":"droptail","limit_ms":100}"#).unwrap();
        let mut q = build::<()>(Some(&ms), 1_000_000, 0, 1).unwrap();
        let mut dropped = 0;
        for _ in 0..30 {
            dropped += q.enqueue(Time::ZERO, Queued::new((), 500, 0)).len();
        }
        assert_eq!(dropped, 5);
        for s in [
            r#"{"kind":"fq","per_flow_packets":20}"#,
            r#"{"kind":"red","min_th":5,"max_th":15,"limit_packets":30}"#,
            r#"{"kind":"rem","limit_packets":25}"#,
        ] {
            let c: QdiscConfig = serde_json::from_str(s).unwrap();
            assert!(build::<()>(Some(&c), 1_000_000, 0, 1).is_ok(), "{s}");
        }
        let bad: QdiscConfig = serde_json::from_str(r#"{"kind":"droptail"}"#).unwrap();
        assert!(build::<()>(Some(&bad), 1_000_000, 0, 1).is_err());
        assert!(build::<()>(None, 1_000_000, 0, 1).is_ok());
    }
}
