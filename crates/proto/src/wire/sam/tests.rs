//! Tests of `sam`.

use super::*;
use proptest::prelude::*;

fn sample() -> SessionInfo {
    let mut s = SessionInfo::equal_layers(3, 20_000, Ipv4Addr::new(239, 1, 2, 3), 5000);
    s.session_id = 0xA1B2C3D4;
    s.announce_seq = 7;
    s.sender = Ipv4Addr::new(10, 0, 0, 1);
    s.tracks = vec![Track {
        id: 0,
        kind: TrackKind::Video,
        codec: Codec::Vp9(Vp9Params {
            payload_type: 96,
            width: 1280,
            height: 720,
            fps_num: 30,
            fps_den: 1,
            spatial: 1,
            temporal: 3,
        }),
        streams: (0..3u8)
            .map(|k| Stream {
                layer: k,
                spatial: 0,
                temporal: k,
                group: Ipv4Addr::new(239, 1, 2, 3 + k),
                port: 5000 + k as u16,
                ssrc: 0x1000 + k as u32,
                rate_bps: 20_000,
                repair: (k == 0).then(|| Repair {
                    payload_type: 97,
                    params: vec![4, 1],
                }),
            })
            .collect(),
    }];
    s
}

#[test]
fn layout_offsets() {
    let b = to_bytes(&sample()).unwrap();
    assert_eq!(&b[0..4], b"LCSA");
    assert_eq!(b[4], 2);
    assert_eq!(b[5], 0);
    assert_eq!(&b[6..8], &[0, 3]);
    assert_eq!(&b[8..12], &[0xA1, 0xB2, 0xC3, 0xD4]);
    assert_eq!(&b[12..16], &[0, 0, 0, 7]);
    assert_eq!(&b[16..20], &[10, 0, 0, 1]);
    assert_eq!(&b[20..22], &512u16.to_be_bytes());
    assert_eq!(b[22], 2);
    assert_eq!(&b[24..28], &1_000_000u32.to_be_bytes());
    assert_eq!(&b[32..40], &20_000u64.to_be_bytes());
    assert_eq!(&b[40..44], &[239, 1, 2, 3]);
    assert_eq!(&b[44..46], &5000u16.to_be_bytes());
    assert_eq!(b[74], 1, "one track");
    // Track record: length, id, kind video, codec VP9, 15 bytes of parameters, 3 streams.
    let len = u16::from_be_bytes([b[75], b[76]]) as usize;
    assert_eq!(len, b.len() - 77);
    assert_eq!(&b[77..80], &[0, 1, 1]);
    assert_eq!(b[80], 96);
    assert_eq!(&b[81..85], &[0x05, 0x00, 0x02, 0xD0]);
    assert_eq!(b[95], 3);
    // First stream: layer 0, S0T0, group, port, SSRC, rate, repair PT 97 with 2 bytes.
    assert_eq!(&b[96..99], &[0, 0, 0]);
    assert_eq!(&b[99..103], &[239, 1, 2, 3]);
    assert_eq!(&b[105..109], &0x1000u32.to_be_bytes());
    assert_eq!(&b[117..121], &[97, 2, 4, 1]);
    let d = decode(&b).unwrap();
    assert_eq!(d.info, sample());
    assert_eq!(d.signature, None);
}

#[test]
fn signed_trailer_is_returned_apart() {
    let mut v = Vec::new();
    let mut seen = Vec::new();
    encode_signed(&sample(), &mut v, |body| {
        seen = body.to_vec();
        vec![0x55; 64]
    })
    .unwrap();
    let d = decode(&v).unwrap();
    let t = d.signature.unwrap();
    assert_eq!(&v[t.signed_range.clone()], &seen[..]);
    assert_eq!(t.signature, &[0x55; 64][..]);
    assert_eq!(v[5], FLAG_SIGNED);
    // Truncating the trailer or appending bytes is an error.
    assert!(decode(&v[..v.len() - 1]).is_err());
    let mut longer = v.clone();
    longer.push(0);
    assert!(decode(&longer).is_err());
    // An oversized signature is refused and leaves `out` untouched.
    let mut w = vec![1, 2];
    assert!(encode_signed(&sample(), &mut w, |_| vec![0; MAX_TRAILER + 1]).is_err());
    assert_eq!(w, vec![1, 2]);
}

#[test]
fn rejects_malformed() {
    let good = to_bytes(&sample()).unwrap();
    for cut in 0..good.len() {
        assert!(
            decode(&good[..cut]).is_err(),
            "prefix of {cut} bytes accepted"
        );
    }
    let mut bad = good.clone();
    bad[0] = b'X';
    assert!(matches!(decode(&bad), Err(Error::Malformed { .. })));
    let mut bad = good.clone();
    bad[4] = 3;
    assert!(matches!(decode(&bad), Err(Error::Malformed { .. })));
    let mut bad = good.clone();
    bad[5] = 0x80;
    assert!(decode(&bad).is_err());
    let mut bad = good.clone();
    bad[6] = 0;
    bad[7] = 0;
    assert!(decode(&bad).is_err());
    let mut bad = good.clone();
    bad[22] = 0;
    assert!(decode(&bad).is_err());
    // Version 1 (a codec string where the tracks are) is refused, not misread.
    let mut bad = good.clone();
    bad[4] = 1;
    match decode(&bad) {
        Err(Error::Malformed { what, detail }) => {
            assert_eq!(what, "SAM version");
            assert!(detail.contains("older sender"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    // Unknown track kind and codec are errors.
    let mut bad = good.clone();
    bad[78] = 9;
    assert!(matches!(decode(&bad), Err(Error::Malformed { .. })));
    let mut bad = good.clone();
    bad[79] = 9;
    assert!(matches!(decode(&bad), Err(Error::Malformed { .. })));
    // A stream naming a layer the session does not have.
    let mut s = sample();
    s.tracks[0].streams[2].layer = 3;
    assert!(to_bytes(&s).is_err());
    let mut s = sample();
    s.layers.clear();
    assert!(to_bytes(&s).is_err());
    let mut s = sample();
    s.adapt_interval = Duration::ZERO;
    assert!(to_bytes(&s).is_err());
    let mut s = sample();
    s.announce_interval = Duration::from_secs(10_000);
    assert!(to_bytes(&s).is_err());
}

#[test]
fn retransmission_is_a_flag_bit() {
    let mut s = sample();
    let plain = to_bytes(&s).unwrap();
    s.retransmission = true;
    let b = to_bytes(&s).unwrap();
    assert_eq!(b[5], FLAG_RETRANSMISSION);
    assert_eq!(b.len(), plain.len());
    assert_eq!(decode(&b).unwrap().info, s);
    assert!(!decode(&plain).unwrap().info.retransmission);
    // The next bit is still unknown: refused, not ignored.
    let mut x = b.clone();
    x[5] |= 0x08;
    assert!(decode(&x).is_err());
}

#[test]
fn feedback_port_only_when_not_the_default() {
    let mut s = sample();
    let plain = to_bytes(&s).unwrap();
    assert_eq!(plain[5], 0);
    assert_eq!(
        decode(&plain).unwrap().info.feedback_port_or_default(),
        Some(5001)
    );
    // The default port set explicitly encodes as its absence.
    s.feedback_port = Some(5001);
    assert_eq!(to_bytes(&s).unwrap(), plain);
    s.feedback_port = Some(41_000);
    let b = to_bytes(&s).unwrap();
    assert_eq!(b[5], FLAG_FEEDBACK_PORT);
    assert_eq!(b.len(), plain.len() + 2);
    assert_eq!(&b[b.len() - 2..], &41_000u16.to_be_bytes());
    let d = decode(&b).unwrap();
    assert_eq!(d.info, s);
    assert_eq!(d.info.feedback_port_or_default(), Some(41_000));
    // Signed: the port is under the signature.
    let mut v = Vec::new();
    encode_signed(&s, &mut v, |_| vec![7; 8]).unwrap();
    let d = decode(&v).unwrap();
    assert_eq!(d.info.feedback_port, Some(41_000));
    assert_eq!(d.signature.unwrap().signed_range, 0..b.len());
    // A second encoding of the default, port 0, or a missing port are refused.
    let mut bad = b.clone();
    let n = bad.len();
    bad[n - 2..].copy_from_slice(&5001u16.to_be_bytes());
    assert!(decode(&bad).is_err());
    bad[n - 2..].copy_from_slice(&[0, 0]);
    assert!(decode(&bad).is_err());
    assert!(decode(&b[..n - 1]).is_err());
    s.feedback_port = Some(0);
    assert!(to_bytes(&s).is_err());
}

fn arb_info() -> impl Strategy<Value = SessionInfo> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        proptest::collection::vec((any::<u64>(), any::<u32>(), any::<u16>()), 1..=40),
        1u16..,
        1u8..,
        1u32..,
        1u32..,
        proptest::collection::vec(arb_track(), 0..=3),
        proptest::option::of(1u16..),
    )
        .prop_map(|(sid, seq, snd, layers, m, b, ai, an, mut tracks, fb)| {
            let n = layers.len() as u8;
            // One encoding: the default port is announced by its absence.
            let fb = fb.filter(|&p| Some(p) != layers[0].2.checked_add(1));
            for st in tracks.iter_mut().flat_map(|t| t.streams.iter_mut()) {
                st.layer %= n;
            }
            SessionInfo {
                session_id: sid,
                announce_seq: seq,
                sender: Ipv4Addr::from(snd),
                layers: layers
                    .into_iter()
                    .map(|(r, g, p)| LayerInfo {
                        rate_bps: r,
                        group: Ipv4Addr::from(g),
                        port: p,
                    })
                    .collect(),
                packet_size: m,
                bunch_len: b,
                adapt_interval: Duration::from_micros(ai as u64),
                announce_interval: Duration::from_micros(an as u64),
                tracks,
                feedback_port: fb,
                // Either value of the flag, drawn from a bit of the sequence number.
                retransmission: seq & 1 == 1,
            }
        })
}

fn arb_track() -> impl Strategy<Value = Track> {
    let stream = (
        any::<(u8, u8, u8, u32, u16, u32, u64)>(),
        proptest::option::of((1u8..=127, proptest::collection::vec(any::<u8>(), 0..8))),
    )
        .prop_map(
            |((layer, spatial, temporal, g, port, ssrc, rate_bps), rep)| Stream {
                layer,
                spatial,
                temporal,
                group: Ipv4Addr::from(g),
                port,
                ssrc,
                rate_bps,
                repair: rep.map(|(payload_type, params)| Repair {
                    payload_type,
                    params,
                }),
            },
        );
    let codec = prop_oneof![
        any::<(u8, u16, u16, u32, u32, u8, u8)>().prop_map(|(pt, w, h, n, d, sp, te)| {
            Codec::Vp9(Vp9Params {
                payload_type: pt,
                width: w,
                height: h,
                fps_num: n,
                fps_den: d,
                spatial: sp,
                temporal: te,
            })
        }),
        any::<(u8, u8, u8, bool)>().prop_map(|(pt, ch, ms, fec)| {
            Codec::Opus(OpusParams {
                payload_type: pt,
                channels: ch,
                frame_ms: ms,
                inband_fec: fec,
            })
        }),
    ];
    (
        any::<u8>(),
        any::<bool>(),
        codec,
        proptest::collection::vec(stream, 1..5),
    )
        .prop_map(|(id, video, codec, streams)| Track {
            id,
            kind: if video {
                TrackKind::Video
            } else {
                TrackKind::Audio
            },
            codec,
            streams,
        })
}

proptest! {
    #[test]
    fn round_trip(info in arb_info(), sig in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..100))) {
        let mut v = Vec::new();
        match &sig {
            None => encode(&info, &mut v).unwrap(),
            Some(s) => encode_signed(&info, &mut v, |_| s.clone()).unwrap(),
        }
        let d = decode(&v).unwrap();
        prop_assert_eq!(&d.info, &info);
        prop_assert_eq!(d.signature.map(|t| t.signature.to_vec()), sig);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data: Vec<u8>) {
        let _ = decode(&data);
    }

    #[test]
    fn mutated_messages_never_panic(info in arb_info(), idx: usize, byte: u8) {
        let mut v = to_bytes(&info).unwrap();
        let i = idx % v.len();
        v[i] = byte;
        if let Ok(d) = decode(&v) {
            // Whatever decodes must re-encode to the same bytes.
            prop_assert_eq!(to_bytes(&d.info).unwrap(), v);
        }
    }
}
