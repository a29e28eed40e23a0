//! The session's SDP (RFC 8866) through the one SDP writer, `codec::sdp::SessionSdp`: one `m=`
//! section per track of the session (its base stream, which a stock receiver such as ffplay
//! or GStreamer's `sdpdemux` can play alone), or one for the synthetic padding layers.

use crate::error::{Error, Result};
use crate::state::{lock, Session, State};
use codec::sdp::{MediaSdp, OpusSdp, SessionSdp};
use congestion::wire::cc_ext;
use proto::media::Codec;

/// The SDP text of a session.
pub fn sdp(state: &State, s: &Session) -> Result<String> {
    let info = lock(&s.info).clone();
    let l0 = info
        .layers
        .first()
        .ok_or_else(|| Error::NotFound("session has no layers".into()))?;
    let media: Vec<MediaSdp> = if info.tracks.is_empty() {
        vec![MediaSdp {
            media: "video",
            dest: l0.group.into(),
            port: l0.port,
            payload_type: 96,
            encoding: "X-LAYERCAST-SYNTH/90000".into(),
            fmtp: None,
            ptime_ms: None,
            cc_ext: true,
            mid: None,
            ssrc: None,
            fec: None,
        }]
    } else {
        info.tracks
            .iter()
            .filter_map(|t| {
                let st = t.streams.first()?;
                Some(match &t.codec {
                    // The audio track's own group (docs/protocols/audio.md).
                    Codec::Opus(p) => OpusSdp {
                        dest: st.group.into(),
                        port: st.port,
                        payload_type: p.payload_type,
                        channels: p.channels,
                        inband_fec: p.inband_fec,
                        bitrate: s.cfg.audio.as_ref().map_or(64_000, |a| a.bitrate),
                        ssrc: Some(st.ssrc),
                        mid: Some(t.id.to_string()),
                    }
                    .media(),
                    Codec::Vp9(_) => MediaSdp {
                        media: t.kind.sdp_media(),
                        dest: st.group.into(),
                        port: st.port,
                        payload_type: t.codec.payload_type(),
                        encoding: "VP9/90000".into(),
                        fmtp: None,
                        ptime_ms: None,
                        cc_ext: true,
                        mid: Some(t.id.to_string()),
                        ssrc: Some(st.ssrc),
                        // Repair shares the stream under its own payload type, which the
                        // `m=` line does not list: stock receivers drop it
                        // (docs/protocols/fec.md). Written from the SAM's entry so that SDP
                        // and SAM cannot disagree.
                        fec: st.repair.as_ref().and_then(|r| {
                            codec::fec::FecParams::from_announced(r.payload_type, &r.params).ok()
                        }),
                    },
                })
            })
            .collect()
    };
    SessionSdp {
        session_name: s.cfg.name.clone(),
        origin: info.sender.into(),
        session_id: u64::from(info.session_id),
        version: u64::from(info.announce_seq),
        ttl: state.cfg.ttl.min(255) as u8,
        source_filter: state.cfg.ssm_source.map(Into::into),
        cc_ext_id: cc_ext::DEFAULT_ID,
        media,
    }
    .render()
    .map_err(|e| Error::BadRequest(format!("SDP: {e}")))
}
