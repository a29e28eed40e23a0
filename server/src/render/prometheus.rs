//! The Prometheus text exposition of `/metrics` (metric names in `docs/api.md`; the dashboards
//! and alerts in `deploy/` read them). Runs on the viewer actor: the per-viewer and per-layer
//! families come from the table and its aggregates.

use crate::pacer::PacerStats;
use crate::state::{lock, State};
use crate::viewers::{Table, Telemetry};
use std::fmt::Write;
use std::sync::atomic::Ordering;

/// A per-viewer metric: name, Prometheus type, value extractor.
type MetricFn = (&'static str, &'static str, fn(&Telemetry) -> f64);

/// Escapes a Prometheus label value.
fn esc(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The whole exposition.
pub fn metrics(state: &State, table: &Table) -> String {
    let mut m = String::new();
    let sessions = state.all_sessions();
    type Read = fn(&PacerStats) -> u64;
    let counters: [(&str, Read); 13] = [
        ("layercast_sender_packets_total", |st| {
            st.packets.load(Ordering::Relaxed)
        }),
        ("layercast_sender_bytes_total", |st| {
            st.bytes.load(Ordering::Relaxed)
        }),
        ("layercast_sender_send_errors_total", |st| {
            st.send_errors.load(Ordering::Relaxed)
        }),
        ("layercast_sender_sealed_packets_total", |st| {
            st.sealed.load(Ordering::Relaxed)
        }),
        ("layercast_sender_seal_nanoseconds_total", |st| {
            st.seal_ns.load(Ordering::Relaxed)
        }),
        // Video slots without media: FEC repair packets, and padding where none was due.
        ("layercast_sender_repair_packets_total", |st| {
            st.repair_packets.load(Ordering::Relaxed)
        }),
        ("layercast_sender_padding_packets_total", |st| {
            st.padding_packets.load(Ordering::Relaxed)
        }),
        // Datagrams on the session's feedback port (reports, key and re-sync requests).
        ("layercast_feedback_datagrams_total", |st| {
            st.feedback_datagrams.load(Ordering::Relaxed)
        }),
        // Viewer reports among them the report task could not take (queue full, or off).
        ("layercast_feedback_reports_dropped_total", |st| {
            st.reports_dropped.load(Ordering::Relaxed)
        }),
        // Retransmission: packets viewers asked for, sent again, and not sent (no longer kept,
        // or over the requester's or the session's budget).
        ("layercast_sender_rtx_asked_total", |st| {
            st.rtx_asked.load(Ordering::Relaxed)
        }),
        ("layercast_sender_rtx_packets_total", |st| {
            st.rtx_sent.load(Ordering::Relaxed)
        }),
        ("layercast_sender_rtx_not_kept_total", |st| {
            st.rtx_not_kept.load(Ordering::Relaxed)
        }),
        ("layercast_sender_rtx_over_budget_total", |st| {
            st.rtx_over_budget.load(Ordering::Relaxed)
        }),
    ];
    for (name, get) in counters {
        let _ = writeln!(m, "# TYPE {name} counter");
        for s in &sessions {
            let _ = writeln!(m, "{name}{{session=\"{}\"}} {}", s.cfg.id, get(&s.stats));
        }
    }
    // Pictures out of the encoder (`layercast_video_pictures_total`, F12's alert) come with
    // the source's counters below (`crate::media::metrics`).
    type Video = fn(&crate::video::LayerQueues) -> u64;
    // Requests (every viewer's, HTTP and UDP) against what the encoder was asked to make of
    // them: the aggregation's effect (at most one key picture or re-sync per 500 ms).
    let video: [(&str, Video); 4] = [
        ("layercast_video_dropped_total", |q| {
            q.dropped.load(Ordering::Relaxed)
        }),
        ("layercast_video_key_requests_total", |q| {
            q.key_requests.load(Ordering::Relaxed)
        }),
        ("layercast_video_keys_forced_total", |q| {
            q.keys_forced.load(Ordering::Relaxed)
        }),
        ("layercast_video_syncs_forced_total", |q| {
            q.syncs_forced.load(Ordering::Relaxed)
        }),
    ];
    for (name, get) in video {
        let _ = writeln!(m, "# TYPE {name} counter");
        for s in &sessions {
            if let Some(q) = &s.queues {
                let _ = writeln!(m, "{name}{{session=\"{}\"}} {}", s.cfg.id, get(q));
            }
        }
    }
    // Per-layer counts of the send side, one sample per session and layer.
    type PerLayer = fn(&PacerStats) -> &std::sync::Mutex<Vec<u64>>;
    let per_layer: [(&str, &str, &str, PerLayer); 2] = [
        (
            "layercast_sender_queued_packets",
            "gauge",
            "Media packets waiting in a layer's send queue.",
            |st| &st.per_layer_queued,
        ),
        (
            "layercast_sender_discarded_frames_total",
            "counter",
            "Frames dropped before queueing because their layer's send queue would have held them too long (video.max_discardable_wait_ms, video.max_middle_wait_ms), with the frames that predict from them.",
            |st| &st.per_layer_discarded,
        ),
    ];
    for (name, kind, help, get) in per_layer {
        let _ = writeln!(m, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for s in &sessions {
            for (k, n) in lock(get(&s.stats)).iter().enumerate() {
                let _ = writeln!(m, "{name}{{session=\"{}\",layer=\"{k}\"}} {n}", s.cfg.id);
            }
        }
    }
    // Media key rotation of encrypted sessions: the epoch in use and switches done.
    m.push_str("# HELP layercast_media_key_epoch Key epoch the session seals with.\n# TYPE layercast_media_key_epoch gauge\n");
    for s in &sessions {
        if let Some(k) = &s.media_keys {
            let _ = writeln!(
                m,
                "layercast_media_key_epoch{{session=\"{}\"}} {}\nlayercast_media_key_rotations_total{{session=\"{}\"}} {}",
                s.cfg.id,
                k.current().epoch(),
                s.cfg.id,
                k.rotations()
            );
        }
    }
    m.push_str("# HELP layercast_sender_bunch_error_seconds Bunch start time minus schedule.\n# TYPE layercast_sender_bunch_error_seconds summary\n");
    for s in &sessions {
        let h = lock(&s.stats.errors).clone();
        for q in [0.5, 0.99] {
            let _ = writeln!(
                m,
                "layercast_sender_bunch_error_seconds{{session=\"{}\",quantile=\"{q}\"}} {}",
                s.cfg.id,
                h.quantile_us(q) as f64 / 1e6
            );
        }
        let _ = writeln!(
            m,
            "layercast_sender_bunch_error_seconds_sum{{session=\"{}\"}} {}\nlayercast_sender_bunch_error_seconds_count{{session=\"{}\"}} {}",
            s.cfg.id,
            h.sum_us as f64 / 1e6,
            s.cfg.id,
            h.count
        );
    }
    m.push_str("# HELP layercast_video_encode_latency_seconds Capture to the encoded picture's packets queued for sending.\n# TYPE layercast_video_encode_latency_seconds histogram\n");
    for s in &sessions {
        if let Some(q) = &s.queues {
            let h = lock(&q.encode_latency).clone();
            h.render(
                &mut m,
                "layercast_video_encode_latency_seconds",
                &format!("session=\"{}\"", esc(&s.cfg.id)),
            );
        }
    }
    let live = table.live(state.cfg.max_viewer_labels);
    let per_viewer: [MetricFn; 9] = [
        ("layercast_viewer_layers", "gauge", |t| t.layers as f64),
        ("layercast_viewer_rate_bps", "gauge", |t| t.rate_bps),
        ("layercast_viewer_estimate_bps", "gauge", |t| {
            t.estimate_bps.unwrap_or(f64::NAN)
        }),
        ("layercast_viewer_packets_received_total", "counter", |t| {
            t.packets_received as f64
        }),
        ("layercast_viewer_packets_lost_total", "counter", |t| {
            t.packets_lost as f64
        }),
        ("layercast_viewer_freezes_total", "counter", |t| {
            t.freezes as f64
        }),
        // The audio track per viewer (issue 21), from the same reports.
        ("layercast_viewer_audio_packets_total", "counter", |t| {
            t.audio_packets as f64
        }),
        ("layercast_viewer_audio_lost_total", "counter", |t| {
            t.audio_lost as f64
        }),
        (
            "layercast_viewer_audio_concealed_frames_total",
            "counter",
            |t| t.audio_concealed as f64,
        ),
    ];
    for (name, kind, f) in per_viewer {
        let _ = writeln!(m, "# TYPE {name} {kind}");
        for (id, v) in &live {
            let _ = writeln!(
                m,
                "{name}{{session=\"{}\",viewer=\"{}\"}} {}",
                esc(&v.last.session_id),
                esc(id),
                f(&v.last)
            );
        }
    }
    m.push_str("# TYPE layercast_viewers gauge\n");
    for ((s, l), n) in table.live_counts() {
        let _ = writeln!(
            m,
            "layercast_viewers{{session=\"{}\",layers=\"{l}\"}} {n}",
            esc(s)
        );
    }
    crate::tfmcc::metrics(&sessions, &mut m);
    // Pictures, source restarts by reason and audio packets per session (issue 21, F12).
    let sources: Vec<_> = sessions.iter().map(|s| lock(&s.source).clone()).collect();
    let media: Vec<crate::media::SessionMedia<'_>> = sessions
        .iter()
        .zip(&sources)
        .map(|(s, src)| crate::media::SessionMedia {
            id: &s.cfg.id,
            pictures: s
                .queues
                .as_ref()
                .map(|q| q.pictures.load(Ordering::Relaxed)),
            encode_errors: s
                .queues
                .as_ref()
                .map(|q| q.encode_errors.load(Ordering::Relaxed)),
            layer_frames_dropped: s
                .queues
                .as_ref()
                .map(|q| q.layer_frames_dropped.load(Ordering::Relaxed)),
            source: src.as_deref(),
            audio: s.audio.as_deref(),
        })
        .collect();
    crate::media::metrics(&media, &mut m);
    crate::reports::metrics(&state.reports, &mut m);
    let d = &state.drops;
    m.push_str("# TYPE layercast_dropped_total counter\n");
    let rate_limited = d.telemetry_rate_limited.load(Ordering::Relaxed) + table.rate_limited;
    let _ = writeln!(
        m,
        "layercast_dropped_total{{what=\"telemetry\",reason=\"rate_limited\"}} {rate_limited}"
    );
    for (what, reason, c) in [
        ("telemetry", "malformed", &d.telemetry_malformed),
        ("telemetry", "unknown_session", &d.telemetry_unknown_session),
        ("telemetry", "wrong_viewer", &d.telemetry_wrong_viewer),
        ("api", "bad_request", &d.api_bad_request),
        (
            "telemetry",
            "addr_rate_limited",
            &d.telemetry_addr_rate_limited,
        ),
        ("telemetry", "queue_full", &d.telemetry_queue_full),
        ("api", "unauthorized", &d.api_unauthorized),
        ("api", "forbidden", &d.api_forbidden),
        ("api", "headers_too_large", &d.api_headers_too_large),
        ("api", "rid_taken", &d.api_rid_taken),
        ("api", "rid_table_full", &d.api_rid_table_full),
        ("api", "connections_over_cap", &d.api_connections_over_cap),
        ("api", "accept_errors", &d.api_accept_errors),
        ("api", "tls_handshake_failed", &d.api_tls_handshake_failed),
        ("api", "websockets_over_cap", &d.api_websockets_over_cap),
        ("api", "websocket_lagged", &d.api_websocket_lagged),
        ("api", "plain_http_secrets", &d.api_plain_http_secrets),
    ] {
        let _ = writeln!(
            m,
            "layercast_dropped_total{{what=\"{what}\",reason=\"{reason}\"}} {}",
            c.load(Ordering::Relaxed)
        );
    }
    let _ = writeln!(
        m,
        "# TYPE layercast_viewers_evicted_total counter\nlayercast_viewers_evicted_total {}",
        table.evicted
    );
    m
}
