//! The viewer table and its one owner, a task that every telemetry report (HTTP or UDP) and
//! every read goes through (`docs/api.md` "Viewers").
//!
//! Why an actor: with thousands of viewers the table is the control plane's hot state. One
//! owner needs no lock, keeps the per-session aggregates exact as reports arrive (no scan per
//! request), and serialises the live snapshot once per tick for every dashboard client
//! (`crate::api::live` broadcasts the bytes). Eviction of the longest-silent viewer and the
//! live → gone transitions are ordered-set operations, O(log n) each.

use crate::error::{Error, Result};
use crate::tfmcc::ViewerTfmcc;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc, oneshot};

/// One decision entry as the API shows it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DecisionJson {
    pub at_s: f64,
    pub from: u32,
    pub to: u32,
    pub reason: String,
    #[serde(default)]
    pub inputs: BTreeMap<String, f64>,
}

impl DecisionJson {
    /// Approximate resident bytes (strings, map nodes), for the per-viewer byte bound.
    fn bytes(&self) -> usize {
        64 + self.reason.len() + self.inputs.keys().map(|k| k.len() + 40).sum::<usize>()
    }
}

/// A telemetry report as players send it (`POST /api/telemetry`, or the UDP report channel).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Telemetry {
    pub viewer_id: String,
    pub session_id: String,
    pub protocol: String,
    pub layers: u32,
    pub max_layers: u32,
    pub rate_bps: f64,
    pub estimate_bps: Option<f64>,
    pub loss_ratio: f64,
    #[serde(default)]
    pub packets_received: u64,
    #[serde(default)]
    pub packets_lost: u64,
    #[serde(default)]
    pub width: u32,
    #[serde(default)]
    pub height: u32,
    #[serde(default)]
    pub fps: f64,
    #[serde(default)]
    pub frames: u64,
    #[serde(default)]
    pub freezes: u64,
    #[serde(default)]
    pub rtt_s: Option<f64>,
    #[serde(default)]
    pub decisions: Vec<DecisionJson>,
    /// TFMCC receivers only: their receiver id, calculated rate, RTT, loss event rate, CLR.
    #[serde(default)]
    pub tfmcc: Option<ViewerTfmcc>,
    /// The audio track (issue 21): packets received, lost and 20-ms frames concealed (totals).
    #[serde(default)]
    pub audio_packets: u64,
    #[serde(default)]
    pub audio_lost: u64,
    #[serde(default)]
    pub audio_concealed: u64,
}

/// Longest decision-input name (a controller's own short names are under 16 bytes).
pub const MAX_INPUT_NAME: usize = 32;
/// Most bytes of decisions kept per viewer ([`DecisionJson::bytes`]): with the viewer cap this
/// bounds the table at about `MAX_VIEWERS × (DECISION_BYTES_KEPT + 1 KiB)`.
pub const DECISION_BYTES_KEPT: usize = 8 * 1024;
/// Cap on decisions kept per viewer.
pub const DECISIONS_KEPT: usize = 50;
/// Most viewers kept; a new one beyond it replaces the longest-silent one.
pub const MAX_VIEWERS: usize = 10_000;

impl Telemetry {
    /// Range checks beyond what the types enforce (network input).
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::BadRequest(m));
        if self.viewer_id.is_empty() || self.viewer_id.len() > 64 {
            return bad("viewer_id must be 1..=64 bytes".into());
        }
        if self.session_id.is_empty() || self.session_id.len() > 64 {
            return bad("session_id must be 1..=64 bytes".into());
        }
        if self.protocol.len() > 32 {
            return bad("protocol longer than 32 bytes".into());
        }
        if self.layers > 256
            || self.max_layers > 256
            || (self.max_layers != 0 && self.layers > self.max_layers)
        {
            return bad(format!(
                "layers {} / max_layers {} out of range",
                self.layers, self.max_layers
            ));
        }
        let nums = [
            ("rate_bps", Some(self.rate_bps)),
            ("estimate_bps", self.estimate_bps),
            ("fps", Some(self.fps)),
            ("rtt_s", self.rtt_s),
        ];
        for (k, v) in nums {
            if let Some(v) = v {
                if !v.is_finite() || v < 0.0 {
                    return bad(format!("{k} must be a finite non-negative number"));
                }
            }
        }
        if !(0.0..=1.0).contains(&self.loss_ratio) {
            return bad("loss_ratio must be within 0..=1".into());
        }
        if let Some(t) = &self.tfmcc {
            t.validate()?;
        }
        if self.decisions.len() > 100 {
            return bad("more than 100 decisions in one report".into());
        }
        for d in &self.decisions {
            if !d.at_s.is_finite()
                || d.reason.len() > 64
                || d.inputs.len() > 32
                || d.inputs.keys().any(|k| k.len() > MAX_INPUT_NAME)
            {
                return bad(format!(
                    "malformed decision entry (reason ≤ 64 bytes, ≤ 32 inputs, names ≤ {MAX_INPUT_NAME} bytes)"
                ));
            }
        }
        Ok(())
    }
}

/// What the table keeps per viewer.
#[derive(Clone, Debug)]
pub struct Viewer {
    /// The last report, its decisions moved to `decisions`.
    pub last: Telemetry,
    pub addr: String,
    pub decisions: VecDeque<DecisionJson>,
    decision_bytes: usize,
    /// Decisions received since the last published tick (the tail of `decisions`).
    fresh_decisions: usize,
    /// Unix seconds of the last report (published).
    pub last_seen: f64,
    /// Monotonic time of the last report (ordering, timeouts, rate limit).
    seen: Instant,
    pub gone: bool,
}

/// The limits of the table.
#[derive(Clone, Debug)]
pub struct TableConfig {
    pub viewer_timeout: Duration,
    pub min_interval: Duration,
    pub max_viewers: usize,
}

/// The viewer table with its aggregates. Only the actor task touches it.
pub struct Table {
    cfg: TableConfig,
    map: HashMap<String, Viewer>,
    /// Every viewer by last report (eviction of the longest-silent).
    all_order: BTreeSet<(Instant, String)>,
    /// Live viewers by last report (the next to go is first).
    live_order: BTreeSet<(Instant, String)>,
    /// Live viewers per (session, layers held).
    live_by_layers: BTreeMap<(String, u32), u64>,
    /// (session, TFMCC receiver id) → viewer id.
    by_rid: HashMap<(String, u32), String>,
    changed: HashSet<String>,
    removed: Vec<String>,
    /// Reports refused by the per-viewer minimum interval.
    pub rate_limited: u64,
    pub evicted: u64,
}

/// One viewer as the API publishes it (the contract's `Viewer`).
#[derive(Serialize)]
pub struct ViewerView<'a> {
    addr: &'a str,
    decisions: DecisionsView<'a>,
    estimate_bps: Option<f64>,
    fps: f64,
    frames: u64,
    freezes: u64,
    gone: bool,
    height: u32,
    id: &'a str,
    last_seen_s: f64,
    layers: u32,
    loss_ratio: f64,
    max_layers: u32,
    protocol: &'a str,
    rate_bps: f64,
    rtt_s: Option<f64>,
    session_id: &'a str,
    tfmcc: &'a Option<ViewerTfmcc>,
    width: u32,
    audio_packets: u64,
    audio_lost: u64,
    audio_concealed: u64,
}

/// The last `n` decisions of a viewer, serialised as an array without copying.
pub struct DecisionsView<'a>(&'a VecDeque<DecisionJson>, usize);

impl Serialize for DecisionsView<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let skip = self.0.len().saturating_sub(self.1);
        s.collect_seq(self.0.iter().skip(skip))
    }
}

/// The published view of one viewer, with its last `decisions` decisions.
pub fn viewer_view<'a>(id: &'a str, v: &'a Viewer, decisions: usize) -> ViewerView<'a> {
    let t = &v.last;
    ViewerView {
        addr: &v.addr,
        decisions: DecisionsView(&v.decisions, decisions),
        estimate_bps: t.estimate_bps,
        fps: t.fps,
        frames: t.frames,
        freezes: t.freezes,
        gone: v.gone,
        height: t.height,
        id,
        last_seen_s: v.last_seen,
        layers: t.layers,
        loss_ratio: t.loss_ratio,
        max_layers: t.max_layers,
        protocol: &t.protocol,
        rate_bps: t.rate_bps,
        rtt_s: t.rtt_s,
        session_id: &t.session_id,
        tfmcc: &t.tfmcc,
        width: t.width,
        audio_packets: t.audio_packets,
        audio_lost: t.audio_lost,
        audio_concealed: t.audio_concealed,
    }
}

impl Table {
    pub fn new(cfg: TableConfig) -> Table {
        Table {
            cfg,
            map: HashMap::new(),
            all_order: BTreeSet::new(),
            live_order: BTreeSet::new(),
            live_by_layers: BTreeMap::new(),
            by_rid: HashMap::new(),
            changed: HashSet::new(),
            removed: Vec::new(),
            rate_limited: 0,
            evicted: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn unlive(&mut self, id: &str) {
        let Some(v) = self.map.get_mut(id) else {
            return;
        };
        if v.gone {
            return;
        }
        v.gone = true;
        self.live_order.remove(&(v.seen, id.to_string()));
        let k = (v.last.session_id.clone(), v.last.layers);
        if let Some(n) = self.live_by_layers.get_mut(&k) {
            *n -= 1;
            if *n == 0 {
                self.live_by_layers.remove(&k);
            }
        }
    }

    fn remove(&mut self, id: &str) {
        self.unlive(id);
        if let Some(v) = self.map.remove(id) {
            self.all_order.remove(&(v.seen, id.to_string()));
            if let Some(t) = &v.last.tfmcc {
                let k = (v.last.session_id.clone(), t.rid);
                if self.by_rid.get(&k).is_some_and(|x| x == id) {
                    self.by_rid.remove(&k);
                }
            }
            self.changed.remove(id);
            self.removed.push(id.to_string());
        }
    }

    /// Marks viewers silent for longer than the timeout as gone.
    pub fn expire(&mut self, now: Instant) {
        while let Some((seen, id)) = self.live_order.first().cloned() {
            if now.saturating_duration_since(seen) <= self.cfg.viewer_timeout {
                break;
            }
            self.unlive(&id);
            self.changed.insert(id);
        }
    }

    /// Accepts one validated report for a known session.
    pub fn report(
        &mut self,
        mut t: Telemetry,
        addr: String,
        now: Instant,
        unix: f64,
    ) -> Result<()> {
        if let Some(old) = self.map.get(&t.viewer_id) {
            if now.saturating_duration_since(old.seen) < self.cfg.min_interval {
                self.rate_limited += 1;
                return Err(Error::RateLimited(
                    "one report per viewer per interval".into(),
                ));
            }
        }
        let id = t.viewer_id.clone();
        let mut decisions = VecDeque::new();
        let mut decision_bytes = 0;
        let mut fresh = 0;
        if let Some(old) = self.map.get_mut(&id) {
            decisions = std::mem::take(&mut old.decisions);
            decision_bytes = old.decision_bytes;
            fresh = old.fresh_decisions;
        }
        // Take the old entry out of every index; the new one goes back in below.
        self.unlive(&id);
        if let Some(v) = self.map.remove(&id) {
            self.all_order.remove(&(v.seen, id.clone()));
        } else {
            while self.map.len() >= self.cfg.max_viewers {
                let Some((_, oldest)) = self.all_order.first().cloned() else {
                    break;
                };
                self.remove(&oldest);
                self.evicted += 1;
            }
        }
        for d in std::mem::take(&mut t.decisions) {
            decision_bytes += d.bytes();
            decisions.push_back(d);
            fresh += 1;
        }
        while decisions.len() > DECISIONS_KEPT || decision_bytes > DECISION_BYTES_KEPT {
            match decisions.pop_front() {
                Some(d) => decision_bytes -= d.bytes(),
                None => break,
            }
        }
        if let Some(x) = &t.tfmcc {
            self.by_rid
                .insert((t.session_id.clone(), x.rid), id.clone());
        }
        *self
            .live_by_layers
            .entry((t.session_id.clone(), t.layers))
            .or_default() += 1;
        self.all_order.insert((now, id.clone()));
        self.live_order.insert((now, id.clone()));
        self.removed.retain(|r| r != &id);
        self.changed.insert(id.clone());
        let fresh_decisions = fresh.min(decisions.len());
        self.map.insert(
            id,
            Viewer {
                last: t,
                addr,
                decisions,
                decision_bytes,
                fresh_decisions,
                last_seen: unix,
                seen: now,
                gone: false,
            },
        );
        Ok(())
    }

    /// Live viewers of `session` by layers held (index k: k+1 layers), over `n` layers.
    pub fn by_layer(&self, session: &str, n: usize) -> Vec<u64> {
        let mut out = vec![0u64; n];
        let lo = (session.to_string(), 1u32);
        for ((s, l), c) in self.live_by_layers.range(lo..) {
            if s != session {
                break;
            }
            if let Some(x) = (*l as usize).checked_sub(1).and_then(|i| out.get_mut(i)) {
                *x += c;
            }
        }
        out
    }

    /// Live viewers per (session, layers held).
    pub fn live_counts(&self) -> &BTreeMap<(String, u32), u64> {
        &self.live_by_layers
    }

    /// The viewer id that reported TFMCC receiver id `rid` in `session`.
    pub fn viewer_of_rid(&self, session: &str, rid: u32) -> Option<&str> {
        self.by_rid
            .get(&(session.to_string(), rid))
            .map(String::as_str)
    }

    #[cfg(test)]
    pub fn get(&self, id: &str) -> Option<&Viewer> {
        self.map.get(id)
    }

    /// A viewer with its id as the table holds it.
    pub fn entry(&self, id: &str) -> Option<(&str, &Viewer)> {
        self.map.get_key_value(id).map(|(k, v)| (k.as_str(), v))
    }

    /// Every viewer, sorted by id (the API's order).
    pub fn sorted(&self) -> Vec<(&str, &Viewer)> {
        let mut v: Vec<_> = self.map.iter().map(|(k, v)| (k.as_str(), v)).collect();
        v.sort_unstable_by(|a, b| a.0.cmp(b.0));
        v
    }

    /// Live viewers, sorted by id, at most `n`.
    pub fn live(&self, n: usize) -> Vec<(&str, &Viewer)> {
        let mut v: Vec<_> = self
            .map
            .iter()
            .filter(|(_, v)| !v.gone)
            .map(|(k, v)| (k.as_str(), v))
            .collect();
        v.sort_unstable_by(|a, b| a.0.cmp(b.0));
        v.truncate(n);
        v
    }

    /// The viewers changed since the last call (with their decisions received since then)
    /// and the ids removed since then; resets both.
    pub fn take_delta(&mut self) -> (Vec<ViewerView<'_>>, Vec<String>) {
        let changed: Vec<String> = self.changed.drain().collect();
        let removed = std::mem::take(&mut self.removed);
        let mut fresh = Vec::with_capacity(changed.len());
        for id in &changed {
            if let Some(v) = self.map.get_mut(id) {
                fresh.push((id.clone(), std::mem::take(&mut v.fresh_decisions)));
            }
        }
        let mut views: Vec<ViewerView<'_>> = Vec::with_capacity(fresh.len());
        for (id, n) in fresh {
            if let Some((k, v)) = self.map.get_key_value(&id) {
                views.push(viewer_view(k, v, n));
            }
        }
        views.sort_unstable_by(|a, b| a.id.cmp(b.id));
        (views, removed)
    }
}

/// A read or change of the table, run on the actor.
type Query = Box<dyn FnOnce(&mut Table) + Send>;

enum Cmd {
    Report {
        t: Box<Telemetry>,
        addr: String,
        reply: Option<oneshot::Sender<Result<()>>>,
    },
    Query(Query),
}

/// What the actor publishes once per tick.
pub trait Publisher: Send + 'static {
    /// Builds the tick's message from the table (the delta since the last tick).
    fn tick(&mut self, table: &mut Table) -> Option<bytes::Bytes>;
}

/// The handle every other part holds: a bounded command queue to the actor and the live
/// broadcast.
#[derive(Clone)]
pub struct Viewers {
    tx: mpsc::Sender<Cmd>,
    /// One message per tick, the same bytes for every dashboard client.
    pub live: broadcast::Sender<bytes::Bytes>,
}

/// Commands queued for the actor at most (a full queue refuses reports: counted, 503).
pub const QUEUE: usize = 8192;

impl Viewers {
    /// Starts the actor on the current tokio runtime; it publishes every `tick`.
    pub fn spawn(cfg: TableConfig, tick: Duration, mut publisher: impl Publisher) -> Viewers {
        let (tx, mut rx) = mpsc::channel::<Cmd>(QUEUE);
        let (live, _) = broadcast::channel(4);
        let out = live.clone();
        tokio::spawn(async move {
            let mut table = Table::new(cfg);
            let mut iv = tokio::time::interval(tick);
            iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tokio::select! {
                    c = rx.recv() => match c {
                        None => break,
                        Some(Cmd::Report { t, addr, reply }) => {
                            let r = table.report(*t, addr, Instant::now(), crate::state::unix_now());
                            if let Some(reply) = reply {
                                let _ = reply.send(r);
                            }
                        }
                        Some(Cmd::Query(f)) => {
                            table.expire(Instant::now());
                            f(&mut table);
                        }
                    },
                    _ = iv.tick() => {
                        table.expire(Instant::now());
                        if let Some(b) = publisher.tick(&mut table) {
                            let _ = out.send(b);
                        }
                    }
                }
            }
        });
        Viewers { tx, live }
    }

    /// Queues one report and waits for the verdict (HTTP: the status code).
    pub async fn report(&self, t: Telemetry, addr: String) -> Result<()> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .try_send(Cmd::Report {
                t: Box::new(t),
                addr,
                reply: Some(reply),
            })
            .map_err(|_| Error::Unavailable("viewer table busy".into()))?;
        rx.await
            .map_err(|_| Error::Unavailable("viewer table stopped".into()))?
    }

    /// Queues one report without waiting (the UDP path); `false` when the queue is full.
    pub fn report_nowait(&self, t: Telemetry, addr: String) -> bool {
        self.tx
            .try_send(Cmd::Report {
                t: Box::new(t),
                addr,
                reply: None,
            })
            .is_ok()
    }

    /// Runs `f` on the table and returns its result.
    pub async fn query<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Table) -> R + Send + 'static,
    ) -> Result<R> {
        let (reply, rx) = oneshot::channel();
        let q: Query = Box::new(move |t| {
            let _ = reply.send(f(t));
        });
        self.tx
            .send(Cmd::Query(q))
            .await
            .map_err(|_| Error::Unavailable("viewer table stopped".into()))?;
        rx.await
            .map_err(|_| Error::Unavailable("viewer table stopped".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(id: &str, session: &str, layers: u32) -> Telemetry {
        serde_json::from_value(serde_json::json!({
            "viewer_id": id, "session_id": session, "protocol": "era", "layers": layers,
            "max_layers": 10, "rate_bps": 1.0, "estimate_bps": null, "loss_ratio": 0.0
        }))
        .unwrap()
    }

    fn table(max: usize) -> Table {
        Table::new(TableConfig {
            viewer_timeout: Duration::from_secs(5),
            min_interval: Duration::from_millis(500),
            max_viewers: max,
        })
    }

    /// The aggregates follow reports, layer changes, timeouts and evictions exactly.
    #[test]
    fn aggregates_are_kept_incrementally() {
        let mut tb = table(3);
        let t0 = Instant::now();
        tb.report(t("a", "s", 2), "x".into(), t0, 0.0).unwrap();
        tb.report(t("b", "s", 2), "x".into(), t0, 0.0).unwrap();
        tb.report(t("c", "z", 1), "x".into(), t0, 0.0).unwrap();
        assert_eq!(tb.by_layer("s", 3), vec![0, 2, 0]);
        // Too soon: refused, nothing changes.
        assert!(matches!(
            tb.report(t("a", "s", 3), "x".into(), t0, 0.0),
            Err(Error::RateLimited(_))
        ));
        let t1 = t0 + Duration::from_secs(1);
        tb.report(t("a", "s", 3), "x".into(), t1, 1.0).unwrap();
        assert_eq!(tb.by_layer("s", 3), vec![0, 1, 1]);
        // b and c time out; a stays.
        tb.expire(t0 + Duration::from_millis(5_500));
        assert_eq!(tb.by_layer("s", 3), vec![0, 0, 1]);
        assert_eq!(tb.by_layer("z", 3), vec![0, 0, 0]);
        assert!(tb.get("b").unwrap().gone);
        // A fourth viewer evicts the longest-silent (b or c, both at t0), never a.
        tb.report(t("d", "s", 1), "x".into(), t1, 1.0).unwrap();
        assert_eq!(tb.len(), 3);
        assert!(tb.get("a").is_some() && tb.get("d").is_some());
        assert_eq!(tb.evicted, 1);
        assert_eq!(tb.by_layer("s", 3), vec![1, 0, 1]);
    }

    /// F4: decision bytes per viewer are bounded, and long input names are refused.
    #[test]
    fn decisions_are_bounded_in_bytes() {
        let mut x = t("a", "s", 1);
        let inputs: BTreeMap<String, f64> = (0..32).map(|i| (format!("{i:0>32}"), 1.0)).collect();
        x.decisions = (0..100)
            .map(|i| DecisionJson {
                at_s: i as f64,
                from: 1,
                to: 1,
                reason: "r".repeat(64),
                inputs: inputs.clone(),
            })
            .collect();
        x.validate().unwrap();
        let mut tb = table(10);
        tb.report(x.clone(), "x".into(), Instant::now(), 0.0)
            .unwrap();
        let v = tb.get("a").unwrap();
        let bytes: usize = v.decisions.iter().map(DecisionJson::bytes).sum();
        assert!(bytes <= DECISION_BYTES_KEPT, "{bytes}");
        assert!(!v.decisions.is_empty());
        // The newest are the ones kept.
        assert_eq!(v.decisions.back().unwrap().at_s, 99.0);
        let mut long = x;
        long.decisions[0]
            .inputs
            .insert("n".repeat(MAX_INPUT_NAME + 1), 0.0);
        assert!(long.validate().is_err());
    }

    /// The delta names each changed viewer once with its new decisions, and removals.
    #[test]
    fn delta_carries_changes_and_removals() {
        let mut tb = table(1);
        let t0 = Instant::now();
        let mut a = t("a", "s", 1);
        a.decisions = vec![DecisionJson {
            at_s: 1.0,
            from: 0,
            to: 1,
            reason: "join".into(),
            inputs: BTreeMap::new(),
        }];
        a.audio_packets = 250;
        a.audio_concealed = 4;
        tb.report(a, "x".into(), t0, 0.0).unwrap();
        let (v, r) = tb.take_delta();
        let j = serde_json::to_value(&v).unwrap();
        assert_eq!(j[0]["id"], "a");
        // The audio track's counters reach the dashboards with the rest of the report.
        assert_eq!(
            (
                j[0]["audio_packets"].as_u64(),
                j[0]["audio_concealed"].as_u64()
            ),
            (Some(250), Some(4))
        );
        assert_eq!(j[0]["decisions"].as_array().unwrap().len(), 1);
        assert!(r.is_empty());
        let (v, _) = tb.take_delta();
        assert!(v.is_empty());
        // b evicts a (cap 1).
        tb.report(t("b", "s", 1), "x".into(), t0, 0.0).unwrap();
        let (v, r) = tb.take_delta();
        assert_eq!(serde_json::to_value(&v).unwrap()[0]["id"], "b");
        assert_eq!(r, vec!["a".to_string()]);
    }
}
