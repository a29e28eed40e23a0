//! What the player reports: the per-second log line (`player.jsonl`), the telemetry body it
//! sends (behind [`Telemetry`]: UDP reports with a key, HTTP posts without), and
//! its Prometheus text.

use crate::http_client;
use crate::report::ReportSender;
use congestion::Decision;
use serde_json::{json, Value};
use session::subscriber::{Drops, SamStats, Snapshot};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Decisions kept for one per-second report (log line and telemetry post); more in one second
/// are dropped. Also the cap on decisions the telemetry poster merges from skipped reports.
pub const MAX_DECISIONS_PER_REPORT: usize = 64;

/// A decision as JSON. Repeated input names (ERA lists every packet-pair sample of an RAI as
/// `pp_sample`, hundreds per second at high rates) keep their last value, as a JSON object
/// must; the map is built by insertion so a repeated name costs no allocation (collecting all
/// pairs into a map first made one large temporary vector and a `String` per sample every
/// RAI: the allocator churn behind the player's slow RssAnon climb, docs/reliability.md
/// "Soak").
pub fn decision_json(d: &Decision) -> Value {
    let mut inputs = serde_json::Map::new();
    for (k, v) in d.inputs.iter().filter(|(_, v)| v.is_finite()) {
        match inputs.get_mut(*k) {
            Some(slot) => *slot = json!(v),
            None => {
                inputs.insert((*k).to_string(), json!(v));
            }
        }
    }
    json!({"at_s": d.at.as_secs_f64(), "from": d.from_layers, "to": d.to_layers,
           "reason": d.reason, "inputs": inputs})
}

/// Where telemetry goes: a poster thread that sends the newest body, merging the decisions
/// of skipped ones (only the newest state matters; decisions are a log). It goes over the UDP
/// report channel (`crate::report`) once the description brought a report key, when a report
/// is due there (a body that is not due is held, its decisions kept for the next), else over
/// HTTP.
pub struct Telemetry {
    tx: Sender<Value>,
    udp: Arc<Mutex<Option<ReportSender>>>,
}

impl Telemetry {
    /// Posts to `url` from a thread of its own.
    pub fn new(url: String) -> Telemetry {
        let (tx, rx) = mpsc::channel::<Value>();
        let udp: Arc<Mutex<Option<ReportSender>>> = Arc::default();
        let slot = udp.clone();
        std::thread::spawn(move || poster(url, rx, slot));
        Telemetry { tx, udp }
    }

    pub fn send(&self, body: Value) {
        let _ = self.tx.send(body);
    }

    /// The UDP report channel in force (`None`: HTTP only).
    pub fn set_udp(&self, r: Option<ReportSender>) {
        *self.udp.lock().unwrap_or_else(|p| p.into_inner()) = r;
    }
}

fn poster(url: String, rx: Receiver<Value>, udp: Arc<Mutex<Option<ReportSender>>>) {
    let mut held: Option<Value> = None;
    while let Ok(mut v) = rx.recv() {
        if let Some(h) = held.take() {
            v = merge_reports(h, v);
        }
        while let Ok(newer) = rx.try_recv() {
            v = merge_reports(v, newer);
        }
        if let Some(r) = udp.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            r.poll_acks();
            let now = Instant::now();
            if !r.due(now) {
                held = Some(v);
                continue;
            }
            if r.send(v.to_string().as_bytes(), now).is_ok() {
                continue;
            }
        }
        let _ = http_client::request(
            "POST",
            &url,
            Some(v.to_string().as_bytes()),
            Duration::from_millis(500),
        );
    }
}

/// The newer report with the decisions of both (bounded: a server away for long would
/// otherwise grow this without limit while posts time out).
fn merge_reports(mut older: Value, mut newer: Value) -> Value {
    let mut d = match older["decisions"].take() {
        Value::Array(a) => a,
        _ => Vec::new(),
    };
    if let Value::Array(n) = newer["decisions"].take() {
        d.extend(n);
    }
    if d.len() > MAX_DECISIONS_PER_REPORT {
        d.drain(..d.len() - MAX_DECISIONS_PER_REPORT);
    }
    newer["decisions"] = Value::Array(d);
    newer
}

/// The SAM verifier's counters as the player reports them.
pub fn sam_json(s: Option<&SamStats>) -> Value {
    match s {
        None => Value::Null,
        Some(s) => json!({"accepted": s.accepted, "malformed": s.malformed,
            "unsigned": s.unsigned, "bad_signature": s.bad_signature, "stale": s.stale,
            "replayed": s.replayed, "not_newer": s.not_newer, "over_budget": s.over_budget}),
    }
}

/// `layercast_player_dropped_total{reason}` lines.
fn drops_metrics(m: &mut String, viewer: &str, d: &Drops, sam: Option<&SamStats>) {
    m.push_str("# TYPE layercast_player_dropped_total counter\n");
    let s = sam.copied().unwrap_or_default();
    for (r, v) in [
        ("malformed_rtp", d.malformed_rtp),
        ("missing_cc", d.missing_cc),
        ("bad_cc", d.bad_cc),
        ("wrong_layer", d.wrong_layer),
        ("truncated", d.truncated),
        ("malformed_sam", d.malformed_sam),
        ("malformed_announcement", d.malformed_announcement),
        ("media_auth_failed", d.media_auth_failed),
        ("report_auth_failed", d.report_auth_failed),
        ("old_session", d.old_session),
        ("duplicate", d.duplicate),
        ("too_old", d.too_old),
        ("sam_unsigned", s.unsigned),
        ("sam_bad_signature", s.bad_signature),
        ("sam_stale", s.stale),
        ("sam_replayed", s.replayed),
        ("sam_malformed", s.malformed),
    ] {
        m.push_str(&format!(
            "layercast_player_dropped_total{{viewer=\"{viewer}\",reason=\"{r}\"}} {v}\n"
        ));
    }
}

/// The player's Prometheus text.
pub fn metrics(viewer: &str, s: &Snapshot, tfmcc: Option<&Value>) -> String {
    let mut m = String::new();
    let lab = format!("{{viewer=\"{viewer}\"}}");
    let mut gauge = |name: &str, kind: &str, v: f64| {
        m.push_str(&format!("# TYPE {name} {kind}\n{name}{lab} {v}\n"));
    };
    gauge("layercast_player_layers", "gauge", s.layers as f64);
    gauge("layercast_player_rate_bps", "gauge", s.rate_bps);
    gauge(
        "layercast_player_estimate_bps",
        "gauge",
        s.estimate_bps.unwrap_or(f64::NAN),
    );
    gauge(
        "layercast_player_packets_received_total",
        "counter",
        s.packets_received as f64,
    );
    gauge(
        "layercast_player_bytes_received_total",
        "counter",
        s.bytes_received as f64,
    );
    gauge(
        "layercast_player_packets_lost_total",
        "counter",
        s.packets_lost as f64,
    );
    // FEC (docs/protocols/fec.md): repair packets taken in, media rebuilt, and sequence
    // numbers of protected streams still missing after repair.
    gauge(
        "layercast_player_fec_repairs_total",
        "counter",
        s.fec.repairs as f64,
    );
    gauge(
        "layercast_player_fec_recovered_total",
        "counter",
        s.fec.recovered as f64,
    );
    gauge(
        "layercast_player_fec_unrepaired_total",
        "counter",
        s.fec.unrepaired as f64,
    );
    // Retransmission (docs/protocols/retransmission.md): packets asked for again, and the
    // retransmissions that filled a gap.
    gauge(
        "layercast_player_rtx_asked_total",
        "counter",
        s.rtx.asked as f64,
    );
    gauge(
        "layercast_player_rtx_received_total",
        "counter",
        s.rtx.received as f64,
    );
    if let Some(t) = tfmcc {
        let f = |k: &str| t[k].as_f64().unwrap_or(0.0);
        gauge("layercast_player_tfmcc_rate_bps", "gauge", f("rate_bps"));
        gauge("layercast_player_tfmcc_rtt_seconds", "gauge", f("rtt_s"));
        gauge(
            "layercast_player_tfmcc_loss_event_rate",
            "gauge",
            f("loss_event_rate"),
        );
        gauge(
            "layercast_player_tfmcc_is_clr",
            "gauge",
            f64::from(u8::from(t["is_clr"].as_bool().unwrap_or(false))),
        );
        gauge(
            "layercast_player_tfmcc_reports_sent_total",
            "counter",
            f("feedback_sent"),
        );
        gauge(
            "layercast_player_tfmcc_report_errors_total",
            "counter",
            f("feedback_errors"),
        );
    }
    drops_metrics(&mut m, viewer, &s.drops, s.sam.as_ref());
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    /// Counts this thread's allocations (tests run in parallel threads; each counts its own).
    struct Counting;
    thread_local! {
        static ALLOCS: Cell<usize> = const { Cell::new(0) };
    }
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
            unsafe { System.alloc(l) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            unsafe { System.dealloc(p, l) }
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
            let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
            unsafe { System.realloc(p, l, n) }
        }
    }
    #[global_allocator]
    static A: Counting = Counting;

    fn allocs_during(f: impl FnOnce()) -> usize {
        let before = ALLOCS.with(Cell::get);
        f();
        ALLOCS.with(Cell::get) - before
    }

    /// An ERA RAI decision as it looks at 10 Mbit/s: a few named inputs and every pair sample.
    fn rai_decision(samples: usize) -> Decision {
        let mut inputs = vec![("r_pp", 9.5e6), ("plr", 0.0), ("r_before", 1e7)];
        inputs.extend((0..samples).map(|i| ("pp_sample", 9e6 + i as f64)));
        inputs.push(("r_after", 1e7));
        inputs.push(("rtt", f64::NAN));
        Decision {
            at: congestion::Time(1_000_000_000),
            from_layers: 10,
            to_layers: 10,
            reason: "rai",
            inputs,
        }
    }

    #[test]
    fn decision_json_keeps_the_last_of_repeated_inputs_and_drops_non_finite() {
        let j = decision_json(&rai_decision(600));
        let inputs = j["inputs"].as_object().unwrap();
        assert_eq!(inputs.len(), 5, "{inputs:?}");
        assert_eq!(inputs["pp_sample"].as_f64(), Some(9e6 + 599.0));
        assert_eq!(inputs["r_after"].as_f64(), Some(1e7));
        assert!(!inputs.contains_key("rtt"));
        assert_eq!(j["reason"], "rai");
        assert_eq!(j["to"], 10);
    }

    /// The player's per-RAI churn: turning a decision into JSON must not cost an allocation
    /// per repeated input. It cost about 2 per sample (a `String` key and a pair in one large
    /// temporary vector), which fragmented the heap and made RssAnon climb (issue 9's soak).
    #[test]
    fn decision_json_allocations_do_not_grow_with_repeated_inputs() {
        let (small, large) = (rai_decision(10), rai_decision(1000));
        let a_small = allocs_during(|| drop(decision_json(&small)));
        let a_large = allocs_during(|| drop(decision_json(&large)));
        assert!(a_small > 0, "the counter counts nothing");
        assert_eq!(
            a_large, a_small,
            "1000 samples cost {a_large} allocations, 10 cost {a_small}"
        );
    }
}
