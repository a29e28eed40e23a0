//! A session's media besides the video encode: the in-process GStreamer source ([`source`]),
//! the Opus audio track ([`audio`]) and what the sender emits between bunches, audio packets
//! and RTCP sender reports ([`out`]). See docs/protocols/audio.md.

pub mod audio;
pub mod out;
pub mod source;

use proto::{Codec, OpusParams, Stream, Track, TrackKind};
use std::net::Ipv4Addr;

/// Track id of the audio track (the video track is 0).
pub const AUDIO_TRACK_ID: u8 = 1;

/// The audio track announced in the SAM: one Opus stream on its own group, riding in
/// transport layer 0 (so every viewer who holds any video joins it).
pub fn audio_track(
    s: &audio::AudioSettings,
    group: Ipv4Addr,
    port: u16,
    ssrc: u32,
    rate_bps: u64,
) -> Track {
    Track {
        id: AUDIO_TRACK_ID,
        kind: TrackKind::Audio,
        codec: Codec::Opus(OpusParams {
            payload_type: audio::PAYLOAD_TYPE,
            channels: s.channels,
            frame_ms: 20,
            inband_fec: s.inband_fec,
        }),
        streams: vec![Stream {
            layer: 0,
            spatial: 0,
            temporal: 0,
            group,
            port,
            ssrc,
            rate_bps,
            repair: Some(proto::Repair {
                payload_type: audio::REPAIR_PAYLOAD_TYPE,
                params: audio_repair(ssrc)
                    .map(|e| e.announced_params())
                    .unwrap_or_default(),
            }),
        }],
    }
}

/// The audio track's burst repair (lagged copies, `audio::REPAIR_*`), its repairs on SSRC
/// `audio_ssrc + 1`.
pub fn audio_repair(audio_ssrc: u32) -> Option<codec::fec::LaggedRepair> {
    codec::fec::LaggedRepair::new(
        audio::REPAIR_LAG,
        audio::REPAIR_PAYLOAD_TYPE,
        audio_ssrc.wrapping_add(1),
    )
    .ok()
}

/// The source and audio counters of a session for the API (`source`, `audio` objects).
pub fn session_json(
    source: Option<&source::SourceStats>,
    audio: Option<&audio::AudioQueue>,
) -> serde_json::Value {
    use std::sync::atomic::Ordering::Relaxed;
    serde_json::json!({
        "source": source.map(|s| serde_json::json!({
            "pictures": s.pictures.load(Relaxed), "audio_buffers": s.audio_buffers.load(Relaxed),
            "starts": s.starts.load(Relaxed), "eos": s.eos.load(Relaxed),
            "loops": s.loops.load(Relaxed), "repeats": s.repeats.load(Relaxed),
            "errors": s.errors.load(Relaxed), "stalls": s.stalls.load(Relaxed),
            "late": s.late.load(Relaxed), "skipped": s.skipped.load(Relaxed),
            "last_error": s.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        })),
        "audio": audio.map(|a| {
            let s = &a.stats;
            serde_json::json!({
                "packets": s.packets.load(Relaxed), "sent": s.sent.load(Relaxed),
                "bytes": s.bytes.load(Relaxed), "dropped": s.dropped.load(Relaxed),
                "encode_errors": s.encode_errors.load(Relaxed),
                "send_errors": s.send_errors.load(Relaxed),
                "discontinuities": s.discontinuities.load(Relaxed),
                "silence_frames": s.silence_frames.load(Relaxed),
            })
        }),
    })
}

/// One session's media counters as `/metrics` families (appended by `State::metrics`):
/// pictures and encode errors (review finding F12: a stalled source shows as a flat
/// `layercast_video_pictures_total`), source restarts by reason, pictures the source handed
/// over late, audio packets.
pub struct SessionMedia<'a> {
    pub id: &'a str,
    pub pictures: Option<u64>,
    pub encode_errors: Option<u64>,
    pub layer_frames_dropped: Option<u64>,
    pub source: Option<&'a source::SourceStats>,
    pub audio: Option<&'a audio::AudioQueue>,
}

pub fn metrics(sessions: &[SessionMedia<'_>], m: &mut String) {
    use std::fmt::Write;
    use std::sync::atomic::Ordering::Relaxed;
    let mut family = |name: &str, rows: Vec<(String, u64)>| {
        let _ = writeln!(m, "# TYPE {name} counter");
        for (labels, v) in rows {
            let _ = writeln!(m, "{name}{{{labels}}} {v}");
        }
    };
    let lab = |s: &SessionMedia<'_>| format!("session=\"{}\"", s.id);
    family(
        "layercast_video_pictures_total",
        sessions
            .iter()
            .filter_map(|s| Some((lab(s), s.pictures?)))
            .collect(),
    );
    family(
        "layercast_video_encode_errors_total",
        sessions
            .iter()
            .filter_map(|s| Some((lab(s), s.encode_errors?)))
            .collect(),
    );
    family(
        "layercast_video_layer_frames_dropped_total",
        sessions
            .iter()
            .filter_map(|s| Some((lab(s), s.layer_frames_dropped?)))
            .collect(),
    );
    family(
        "layercast_source_restarts_total",
        sessions
            .iter()
            .filter_map(|s| Some((s, s.source?)))
            .flat_map(|(s, st)| {
                [
                    ("eos", &st.eos),
                    ("error", &st.errors),
                    ("stall", &st.stalls),
                ]
                .into_iter()
                .map(move |(r, c)| (format!("{},reason=\"{r}\"", lab(s)), c.load(Relaxed)))
            })
            .collect(),
    );
    family(
        "layercast_source_late_pictures_total",
        sessions
            .iter()
            .filter_map(|s| Some((lab(s), s.source?.late.load(Relaxed))))
            .collect(),
    );
    family(
        "layercast_source_skipped_pictures_total",
        sessions
            .iter()
            .filter_map(|s| Some((lab(s), s.source?.skipped.load(Relaxed))))
            .collect(),
    );
    type Read = fn(&audio::AudioStats) -> u64;
    let audio: [(&str, Read); 4] = [
        ("layercast_audio_packets_total", |a| a.sent.load(Relaxed)),
        ("layercast_audio_dropped_total", |a| a.dropped.load(Relaxed)),
        ("layercast_audio_encode_errors_total", |a| {
            a.encode_errors.load(Relaxed)
        }),
        ("layercast_audio_silence_frames_total", |a| {
            a.silence_frames.load(Relaxed)
        }),
    ];
    for (name, get) in audio {
        family(
            name,
            sessions
                .iter()
                .filter_map(|s| Some((lab(s), get(&s.audio?.stats))))
                .collect(),
        );
    }
}
