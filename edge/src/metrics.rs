//! The edge's `/metrics` (Prometheus text, prefix `layercast_edge_`), rendered from the media
//! loop's latest snapshot on each scrape by a prometheus-client collector: peers, traffic,
//! repair (NACKs, RTX, PLIs), layer switches, key requests, the upstream side per session, and
//! per-viewer gauges for at most `max_viewer_labels` viewers (aggregates only beyond).

use crate::media::Snapshot;
use crate::telemetry::Outcomes;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::watch;

struct Snap {
    rx: watch::Receiver<Arc<Snapshot>>,
    edge: String,
    max_labels: usize,
}

impl std::fmt::Debug for Snap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("edge snapshot collector")
    }
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    m.encode_counter::<NoLabelSet, _, u64>(&v, None)
}

fn labelled<'a>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    ty: MetricType,
    rows: impl Iterator<Item = (Vec<(&'a str, String)>, f64)>,
) -> std::fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, ty)?;
    for (labels, v) in rows {
        let l: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mut f = m.encode_family(&l)?;
        match ty {
            MetricType::Counter => f.encode_counter::<NoLabelSet, _, u64>(&(v as u64), None)?,
            _ => f.encode_gauge(&v)?,
        }
    }
    Ok(())
}

impl Collector for Snap {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.rx.borrow().clone();
        let c = &s.counters;
        let t = &s.totals;
        let connected = s.viewers.iter().filter(|v| v.connected).count();
        labelled(
            &mut e,
            "layercast_edge_peers",
            "browsers at this edge, by state",
            MetricType::Gauge,
            [
                ("connected", connected),
                ("connecting", s.viewers.len() - connected),
            ]
            .into_iter()
            .map(|(st, n)| (vec![("state", st.to_string())], n as f64)),
        )?;
        counter(
            &mut e,
            "layercast_edge_viewers_added",
            "WHEP sessions accepted",
            c.viewers_added,
        )?;
        counter(
            &mut e,
            "layercast_edge_viewers_gone",
            "WHEP sessions ended",
            c.viewers_gone,
        )?;
        labelled(
            &mut e,
            "layercast_edge_refused",
            "WHEP offers refused, by reason",
            MetricType::Counter,
            [
                ("full", c.refused_full),
                ("offer", c.refused_offer),
                ("session", c.refused_session),
            ]
            .into_iter()
            .map(|(r, n)| (vec![("reason", r.to_string())], n as f64)),
        )?;
        counter(
            &mut e,
            "layercast_edge_datagrams_sent",
            "UDP datagrams sent to browsers",
            c.transmits,
        )?;
        counter(
            &mut e,
            "layercast_edge_bytes_sent",
            "UDP payload bytes sent to browsers",
            c.transmit_bytes,
        )?;
        counter(
            &mut e,
            "layercast_edge_datagrams_received",
            "UDP datagrams from browsers",
            c.datagrams_in,
        )?;
        counter(
            &mut e,
            "layercast_edge_datagrams_unmatched",
            "datagrams no browser session took",
            c.datagrams_unmatched,
        )?;
        counter(
            &mut e,
            "layercast_edge_send_errors",
            "datagrams the socket refused",
            s.send_errors,
        )?;
        counter(
            &mut e,
            "layercast_edge_media_packets",
            "video RTP packets forwarded (first transmissions)",
            t.media_packets,
        )?;
        counter(
            &mut e,
            "layercast_edge_audio_packets",
            "audio RTP packets forwarded",
            t.audio_packets,
        )?;
        counter(
            &mut e,
            "layercast_edge_pictures",
            "pictures forwarded",
            t.pictures,
        )?;
        counter(
            &mut e,
            "layercast_edge_fillers_left_out",
            "encoder fillers (dropped layer frames) left out at the top of a browser's picture",
            t.fillers_left_out,
        )?;
        counter(
            &mut e,
            "layercast_edge_nacks",
            "NACK requests received from browsers",
            t.nacks,
        )?;
        counter(
            &mut e,
            "layercast_edge_rtx_packets",
            "retransmissions (RTX) answering NACKs",
            t.rtx_packets,
        )?;
        labelled(
            &mut e,
            "layercast_edge_repair_copies",
            "NACKed packets by what became of their second copy (sent; not made: budget spent, heavy loss, pacer backlog)",
            MetricType::Counter,
            [
                ("sent", t.repair_copies),
                ("refused", t.repair_copies_refused),
                ("skipped_loss", t.repair_copies_skipped_loss),
                ("skipped_backlog", t.repair_copies_skipped_backlog),
            ]
            .into_iter()
            .map(|(o, n)| (vec![("outcome", o.to_string())], n as f64)),
        )?;
        counter(
            &mut e,
            "layercast_edge_plis",
            "picture loss indications received",
            t.plis,
        )?;
        counter(
            &mut e,
            "layercast_edge_firs",
            "full intra requests received",
            t.firs,
        )?;
        labelled(
            &mut e,
            "layercast_edge_layer_switches",
            "changes of a browser's target layers",
            MetricType::Counter,
            [("up", c.layer_switches_up), ("down", c.layer_switches_down)]
                .into_iter()
                .map(|(d, n)| (vec![("direction", d.to_string())], n as f64)),
        )?;
        counter(
            &mut e,
            "layercast_edge_cache_starts",
            "browsers started from the key-picture cache",
            c.cache_starts,
        )?;
        counter(
            &mut e,
            "layercast_edge_key_requests",
            "key-picture requests sent upstream",
            c.key_requests,
        )?;
        let per_session = |f: fn(&crate::media::SessionSnap) -> f64| {
            s.sessions
                .iter()
                .map(move |x| (vec![("session", x.name.clone())], f(x)))
                .collect::<Vec<_>>()
                .into_iter()
        };
        labelled(
            &mut e,
            "layercast_edge_upstream_packets",
            "upstream RTP packets received",
            MetricType::Counter,
            per_session(|x| x.stats.gate.packets as f64 + x.stats.audio_packets as f64),
        )?;
        labelled(
            &mut e,
            "layercast_edge_upstream_bytes",
            "upstream video bytes received",
            MetricType::Counter,
            per_session(|x| x.stats.gate.bytes as f64),
        )?;
        labelled(
            &mut e,
            "layercast_edge_upstream_frames_released",
            "layer frames complete and decodable",
            MetricType::Counter,
            per_session(|x| x.stats.gate.frames_released as f64),
        )?;
        labelled(
            &mut e,
            "layercast_edge_upstream_frames_lost",
            "layer frames lost upstream or unreferenceable",
            MetricType::Counter,
            per_session(|x| x.stats.gate.frames_lost as f64),
        )?;
        labelled(
            &mut e,
            "layercast_edge_upstream_malformed",
            "upstream packets that did not parse",
            MetricType::Counter,
            per_session(|x| x.stats.gate.malformed as f64),
        )?;
        labelled(
            &mut e,
            "layercast_edge_upstream_fec_repairs",
            "upstream FEC repair packets received (used at the edge, never forwarded)",
            MetricType::Counter,
            per_session(|x| x.stats.repair.repairs as f64),
        )?;
        labelled(
            &mut e,
            "layercast_edge_upstream_fec_recovered",
            "upstream media packets lost and rebuilt from FEC repair packets",
            MetricType::Counter,
            per_session(|x| x.stats.repair.recovered as f64),
        )?;
        labelled(
            &mut e,
            "layercast_edge_upstream_restarts",
            "session restarts followed",
            MetricType::Counter,
            per_session(|x| x.stats.restarts as f64),
        )?;
        labelled(
            &mut e,
            "layercast_edge_key_cache_bytes",
            "bytes in the key-picture cache",
            MetricType::Gauge,
            per_session(|x| x.cache_bytes as f64),
        )?;
        labelled(
            &mut e,
            "layercast_edge_upstream_dropped",
            "upstream packets dropped before the core",
            MetricType::Counter,
            [
                ("unknown_ssrc", s.upstream_unknown),
                ("queue_full", s.upstream_queue_full),
            ]
            .into_iter()
            .map(|(r, n)| (vec![("reason", r.to_string())], n as f64)),
        )?;
        let shown: Vec<_> = s.viewers.iter().take(self.max_labels).collect();
        let id = |v: &edge::ViewerReport| format!("{}-{:x}", self.edge, v.id);
        let rows = |f: fn(&edge::ViewerReport) -> Option<f64>| {
            shown
                .iter()
                .filter_map(|v| {
                    f(v).map(|x| (vec![("session", v.session.clone()), ("viewer", id(v))], x))
                })
                .collect::<Vec<_>>()
                .into_iter()
        };
        labelled(
            &mut e,
            "layercast_edge_viewer_estimate_bps",
            "bandwidth estimate from the browser's TWCC feedback",
            MetricType::Gauge,
            rows(|v| v.stats.estimate_bps),
        )?;
        labelled(
            &mut e,
            "layercast_edge_viewer_rate_bps",
            "media rate sent",
            MetricType::Gauge,
            rows(|v| Some(v.stats.rate_bps)),
        )?;
        labelled(
            &mut e,
            "layercast_edge_viewer_spatial",
            "top spatial layer sent",
            MetricType::Gauge,
            rows(|v| Some(f64::from(v.current.spatial))),
        )?;
        labelled(
            &mut e,
            "layercast_edge_viewer_temporal",
            "top temporal layer sent",
            MetricType::Gauge,
            rows(|v| Some(f64::from(v.current.temporal))),
        )?;
        labelled(
            &mut e,
            "layercast_edge_viewer_loss_ratio",
            "fraction lost in the browser's last receiver report",
            MetricType::Gauge,
            rows(|v| Some(f64::from(v.stats.loss))),
        )?;
        labelled(
            &mut e,
            "layercast_edge_viewer_rtt_seconds",
            "round-trip time from RTCP",
            MetricType::Gauge,
            rows(|v| v.stats.rtt.map(|r| r.as_secs_f64())),
        )?;
        labelled(
            &mut e,
            "layercast_edge_viewer_latency_seconds",
            "edge-added latency per frame, median of the last second",
            MetricType::Gauge,
            rows(|v| v.stats.frame_latency_p50_us.map(|u| u as f64 / 1e6)),
        )?;
        Ok(())
    }
}

/// The telemetry posts to the server, by outcome.
#[derive(Debug)]
struct TelemetryPosts(Arc<Outcomes>);

impl Collector for TelemetryPosts {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let o = &self.0;
        labelled(
            &mut e,
            "layercast_edge_telemetry_reports",
            "viewer reports posted to the server, by outcome (refused: the server answered non-2xx; failed: no answer)",
            MetricType::Counter,
            [
                ("accepted", &o.accepted),
                ("refused", &o.refused),
                ("failed", &o.failed),
            ]
            .into_iter()
            .map(|(r, n)| {
                (
                    vec![("result", r.to_string())],
                    n.load(Ordering::Relaxed) as f64,
                )
            }),
        )
    }
}

/// The registry of the edge's `/metrics`.
pub fn registry(
    rx: watch::Receiver<Arc<Snapshot>>,
    telemetry: Arc<Outcomes>,
    edge: &str,
    max_labels: usize,
) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(Snap {
        rx,
        edge: edge.to_string(),
        max_labels,
    }));
    r.register_collector(Box::new(TelemetryPosts(telemetry)));
    r
}

/// The text exposition.
pub fn render(r: &Registry) -> String {
    let mut out = String::new();
    if prometheus_client::encoding::text::encode(&mut out, r).is_err() {
        out.clear();
    }
    out
}
