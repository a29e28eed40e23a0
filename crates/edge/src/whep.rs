//! A browser's SDP offer (WHEP, draft-ietf-wish-whep over RFC 9725's HTTP rules) and the
//! answer: what the edge accepts, what it refuses and why, and the WebRTC configuration of a
//! viewer.
//!
//! The edge only sends: one VP9 video section (profile 0, the profile libvpx encodes here),
//! with RTX, NACK, PLI/FIR and transport-wide congestion control feedback, and an Opus section
//! when the offer has audio. It is ICE-lite with one host candidate (the edge's public address)
//! and takes the DTLS server role the browser's `actpass` leaves it. Checks that need no
//! parser run first on the text, so a hostile body is refused cheaply with a reason a person
//! can act on; the rest is str0m's SDP parser and negotiation.

use crate::error::{Error, Result};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use str0m::bwe::Bitrate;
use str0m::change::SdpOffer;
use str0m::format::{Codec, FormatParams};
use str0m::media::{Direction, Frequency, MediaKind, Mid, Pt};
use str0m::{Candidate, Rtc, RtcConfig};

/// Largest offer accepted (a browser's offer with audio and video is 4-8 KiB).
pub const MAX_OFFER_BYTES: usize = 64 * 1024;

/// WebRTC settings of every viewer.
#[derive(Debug, Clone)]
pub struct RtcSettings {
    /// The address browsers send to (the one host candidate in every answer).
    pub candidate: SocketAddr,
    /// The bandwidth estimate a viewer starts from.
    pub initial_estimate_bps: u64,
    /// How long sent packets stay answerable by NACK (RTX).
    pub rtx_history: Duration,
}

/// The media sections of an accepted offer.
#[derive(Debug, Clone, Copy)]
pub struct Negotiated {
    pub video: Mid,
    pub video_pt: Pt,
    pub audio: Option<(Mid, Pt)>,
}

/// Text checks before parsing: size, shape, a receiving video section that offers VP9.
pub fn check_offer(sdp: &str) -> Result<()> {
    if sdp.len() > MAX_OFFER_BYTES {
        return Err(Error::MalformedOffer(format!(
            "offer of {} bytes, at most {MAX_OFFER_BYTES}",
            sdp.len()
        )));
    }
    if !sdp.starts_with("v=0") {
        return Err(Error::MalformedOffer("does not start with v=0".into()));
    }
    let mut in_video = false;
    let mut video = false;
    let mut vp9 = false;
    let mut receives = false;
    let mut section_dir = "sendrecv";
    let close_section = |in_video: bool, dir: &str, receives: &mut bool| {
        if in_video && (dir == "sendrecv" || dir == "recvonly") {
            *receives = true;
        }
    };
    for line in sdp.lines().map(str::trim_end) {
        if let Some(m) = line.strip_prefix("m=") {
            close_section(in_video, section_dir, &mut receives);
            section_dir = "sendrecv";
            in_video = m.starts_with("video ");
            video |= in_video;
            continue;
        }
        if !in_video {
            continue;
        }
        if let Some(rtpmap) = line.strip_prefix("a=rtpmap:") {
            let codec = rtpmap.split_whitespace().nth(1).unwrap_or("");
            if codec.eq_ignore_ascii_case("VP9/90000") {
                vp9 = true;
            }
        }
        if let Some(d) = line.strip_prefix("a=") {
            if matches!(d, "sendrecv" | "recvonly" | "sendonly" | "inactive") {
                section_dir = d;
            }
        }
    }
    close_section(in_video, section_dir, &mut receives);
    if !video {
        return Err(Error::UnsupportedOffer(
            "no video section (m=video): the edge serves video".into(),
        ));
    }
    if !vp9 {
        return Err(Error::UnsupportedOffer(
            "the video section does not offer VP9 (a=rtpmap:<pt> VP9/90000)".into(),
        ));
    }
    if !receives {
        return Err(Error::UnsupportedOffer(
            "no video section that receives (recvonly or sendrecv)".into(),
        ));
    }
    Ok(())
}

/// A viewer's `Rtc`: ICE-lite, RTP mode, VP9 profile 0 + RTX and Opus only, bandwidth
/// estimation on, statistics every second (every 500 ms cost the benchmark's edge thread a
/// third more CPU: 59 % of a core at 200 viewers against 43 %).
pub fn rtc_config(s: &RtcSettings) -> RtcConfig {
    let mut cfg = Rtc::builder()
        .set_ice_lite(true)
        .set_rtp_mode(true)
        .clear_codecs()
        .enable_opus(true, false)
        .enable_bwe(Some(Bitrate::bps(s.initial_estimate_bps)))
        .set_stats_interval(Some(Duration::from_secs(1)))
        // The NACKs' sequence numbers, for the second copy of each repair (`resend.rs`):
        // str0m hands incoming RTCP out only this way. It also copies each sent RTP packet
        // into an event, which the viewer drops at once.
        .enable_raw_packets(true)
        .set_mtu(1200..=1500);
    cfg.codec_config().add_config(
        98.into(),
        Some(99.into()),
        Codec::Vp9,
        Frequency::NINETY_KHZ,
        None,
        FormatParams {
            profile_id: Some(0),
            ..Default::default()
        },
    );
    cfg
}

/// Accepts a browser's offer: the viewer's `Rtc`, the SDP answer and the sections to send on.
pub fn accept(now: Instant, s: &RtcSettings, sdp: &str) -> Result<(Rtc, String, Negotiated)> {
    check_offer(sdp)?;
    let offer = SdpOffer::from_sdp_string(sdp).map_err(|e| Error::MalformedOffer(e.to_string()))?;
    let mut rtc = rtc_config(s).build(now);
    let cand = Candidate::host(s.candidate, "udp")
        .map_err(|e| Error::Config(format!("candidate {}: {e}", s.candidate)))?;
    rtc.add_local_candidate(cand);
    let answer = rtc
        .sdp_api()
        .accept_offer(offer)
        .map_err(|e| Error::UnsupportedOffer(e.to_string()))?;
    let neg = negotiated(&rtc, &offer_mids(sdp))?;
    let mut api = rtc.direct_api();
    for mid in std::iter::once(neg.video).chain(neg.audio.map(|(m, _)| m)) {
        if let Some(tx) = api.stream_tx_by_mid(mid, None) {
            // The per-layer history already holds the payloads (shared by every browser);
            // this keeps each browser's references to what it was sent, for its NACKs.
            // Resends stop while they are over half of what is sent (str0m's default is a
            // quarter): a path step loses a quarter or more of a second's packets before the
            // layers go down, and with the layers down there is room to repair them; the
            // browser waits for those repairs (it asks no key picture), so refused resends
            // were the freeze after the step.
            tx.set_rtx_cache(4096, s.rtx_history, Some(RTX_RATIO_CAP));
        }
    }
    Ok((rtc, answer.to_sdp_string(), neg))
}

/// The share of retransmitted bytes above which str0m drops queued resends.
pub const RTX_RATIO_CAP: f32 = 0.5;

/// The first sending video section with VP9 negotiated, and an Opus section if there is one.
fn negotiated(rtc: &Rtc, mids: &[Mid]) -> Result<Negotiated> {
    let mut video = None;
    let mut audio = None;
    let params = rtc.codec_config().params();
    for &mid in mids {
        let Some(m) = rtc.media(mid) else { continue };
        if !matches!(m.direction(), Direction::SendOnly | Direction::SendRecv) {
            continue;
        }
        let pt_of = |codec: Codec| {
            params
                .iter()
                .find(|p| p.spec().codec == codec && m.remote_pts().contains(&p.pt()))
                .map(|p| p.pt())
        };
        match m.kind() {
            MediaKind::Video if video.is_none() => {
                if let Some(pt) = pt_of(Codec::Vp9) {
                    video = Some((mid, pt));
                }
            }
            MediaKind::Audio if audio.is_none() => {
                audio = pt_of(Codec::Opus).map(|pt| (mid, pt));
            }
            _ => {}
        }
    }
    let (video, video_pt) = video.ok_or_else(|| {
        Error::UnsupportedOffer("no video section negotiated VP9 profile 0 to receive".into())
    })?;
    Ok(Negotiated {
        video,
        video_pt,
        audio,
    })
}

/// The mids of the offer's media sections, in order (`a=mid:` lines).
fn offer_mids(sdp: &str) -> Vec<Mid> {
    sdp.lines()
        .filter_map(|l| l.trim_end().strip_prefix("a=mid:"))
        .filter(|m| !m.is_empty() && m.len() <= 16)
        .map(Mid::from)
        .collect()
}

/// The fuzz body of the offer path: any bytes as an offer, through the text checks, str0m's
/// parser and the negotiation. Must never panic.
pub fn fuzz_offer(data: &[u8]) {
    let Ok(sdp) = std::str::from_utf8(data) else {
        return;
    };
    let s = RtcSettings {
        candidate: "192.0.2.1:4000".parse().expect("literal address"),
        initial_estimate_bps: 500_000,
        rtx_history: Duration::from_secs(1),
    };
    let _ = accept(Instant::now(), &s, sdp);
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const CHROME_OFFER: &str = include_str!("../fuzz/corpus/offer/chrome-recvonly.sdp");

    #[test]
    fn a_chrome_offer_is_accepted_with_vp9_and_opus() {
        let s = RtcSettings {
            candidate: "192.0.2.1:4000".parse().unwrap(),
            initial_estimate_bps: 500_000,
            rtx_history: Duration::from_secs(1),
        };
        let (_rtc, answer, neg) = accept(Instant::now(), &s, CHROME_OFFER).unwrap();
        assert!(answer.contains("a=ice-lite"), "{answer}");
        assert!(answer.contains("VP9/90000"));
        assert!(answer.contains("opus/48000"));
        assert!(answer.contains("192.0.2.1 4000"));
        assert!(neg.audio.is_some());
        assert!(!answer.contains("H264") && !answer.contains("VP8/"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Mutated browser offers (lines dropped or duplicated, bytes changed) never panic.
        #[test]
        fn mutated_offers_never_panic(
            drops in proptest::collection::vec(0usize..200, 0..8),
            flips in proptest::collection::vec((0usize..7000, proptest::prelude::any::<u8>()), 0..8),
        ) {
            let mut lines: Vec<&str> = CHROME_OFFER.split("\r\n").collect();
            for d in drops {
                if d < lines.len() {
                    if d % 2 == 0 { lines.remove(d); } else { let l = lines[d]; lines.insert(d, l); }
                }
            }
            let mut b = lines.join("\r\n").into_bytes();
            for (i, v) in flips {
                if i < b.len() {
                    b[i] = v;
                }
            }
            fuzz_offer(&b);
        }
    }

    #[test]
    fn refusals_name_the_reason() {
        let cases = [
            ("", "v=0"),
            ("v=0\r\ns=-\r\n", "no video section"),
            (
                "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=recvonly\r\na=rtpmap:96 VP8/90000\r\n",
                "does not offer VP9",
            ),
            (
                "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 98\r\na=sendonly\r\na=rtpmap:98 VP9/90000\r\n",
                "no video section that receives",
            ),
        ];
        for (sdp, why) in cases {
            let e = check_offer(sdp).unwrap_err();
            assert!(e.to_string().contains(why), "{sdp:?}: {e}");
        }
        let big = format!("v=0\r\n{}", "a=x\r\n".repeat(20_000));
        assert!(matches!(check_offer(&big), Err(Error::MalformedOffer(_))));
        // Passes the text checks but str0m's parser refuses it.
        let junk =
            "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 98\r\na=recvonly\r\na=rtpmap:98 VP9/90000\r\n";
        fuzz_offer(junk.as_bytes());
        let s = RtcSettings {
            candidate: "192.0.2.1:4000".parse().unwrap(),
            initial_estimate_bps: 500_000,
            rtx_history: Duration::from_secs(1),
        };
        assert!(accept(Instant::now(), &s, junk).is_err());
    }
}
