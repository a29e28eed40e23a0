//! Test (a): the player's packet-pair dispersion matches the bottleneck rate (era.md AC-1 [R]:
//! within 5% at 1 and 10 Mbit/s). Run as root: `cargo test -p layercast-player --test netns_pair`.

mod common;
use common::*;

fn check_rate(id: &str, rate_bps: u64, layer_rate: u64, packet: u64) {
    if !prerequisites() {
        return;
    }
    // One rate at a time: a second testbed delays pair arrivals by tens of microseconds, 5 %
    // of the 822-us gap at 10 Mbit/s (a fresh clone's `make test` read -6.3 % with both).
    let _serial = one_testbed_at_a_time();
    // Queue: 50 ms at the bottleneck rate, at least a few packets.
    let mut tb = Testbed::new(
        rate_bps,
        (rate_bps / 8 / 20).max(6000),
        packet + WIRE_OVERHEAD,
    );
    tb.start_server(&format!(
        r#"{{"name":"pp","layers":4,"layer_rate_bps":{layer_rate},"packet_size":{packet},"bunch_len":2}}"#
    ));
    std::thread::sleep(std::time::Duration::from_millis(500));
    let lines = tb.run_player(
        "player",
        6.0,
        &["--session-url", &tb.url("pp"), "--fixed-layers", "4"],
    );
    let gap_us = median(&lines, "pp_gap_us_median", 1).expect("no packet-pair samples");
    let est = 8.0 * (packet + WIRE_OVERHEAD) as f64 / (gap_us / 1e6);
    let err = est / rate_bps as f64 - 1.0;
    eprintln!(
        "bottleneck {rate_bps} bit/s: median gap {gap_us:.1} us -> {est:.0} bit/s ({:+.2}%)",
        err * 100.0
    );
    let samples: u64 = lines.iter().filter_map(|l| l["pp_samples"].as_u64()).sum();
    assert!(samples > 20, "only {samples} pair samples");
    let pass = err.abs() < 0.05;
    let value = format!("{est:.0} bit/s ({:+.2}%, {samples} pairs)", err * 100.0);
    let cmd = "cargo test -p layercast-player --test netns_pair";
    testkit::record(id, &value, Some(pass), cmd);
    if rate_bps == 1_000_000 {
        testkit::record(
            "era/AC-1",
            &format!("1 Mbit/s: {value} [10 Mbit/s: see issue6/pp-accuracy-10M]"),
            Some(pass),
            cmd,
        );
    }
    assert!(
        err.abs() < 0.05,
        "estimate {est} vs {rate_bps}: {:+.2}%",
        err * 100.0
    );
}

#[test]
fn packet_pair_matches_1mbit() {
    check_rate("issue6/pp-accuracy-1M", 1_000_000, 100_000, 1000);
}

#[test]
fn packet_pair_matches_10mbit() {
    check_rate("issue6/pp-accuracy-10M", 10_000_000, 1_000_000, 1000);
}
