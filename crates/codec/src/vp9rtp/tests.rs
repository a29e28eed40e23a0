//! Tests of `vp9rtp`.

use super::*;
use proptest::prelude::*;

#[test]
fn descriptor_bytes() {
    let d = PayloadDescriptor {
        picture_id: Some(0x1234),
        long_picture_id: true,
        inter_picture: true,
        start: true,
        end: true,
        layer: Some(LayerIndices {
            tid: 2,
            switch_up: true,
            sid: 1,
            inter_layer: true,
        }),
        tl0_pic_idx: Some(9),
        ..Default::default()
    };
    let mut v = Vec::new();
    d.write(&mut v).unwrap();
    // I P L - B E - -, M|0x12, 0x34, TID=2 U SID=1 D, TL0PICIDX
    assert_eq!(v, vec![0xec, 0x92, 0x34, 0b0101_0011, 9]);
    let (p, n) = PayloadDescriptor::parse(&v).unwrap();
    assert_eq!(n, 5);
    assert_eq!(p, d);
}

#[test]
fn ss_bytes() {
    let ss = ScalabilityStructure {
        resolutions: vec![(320, 180), (640, 360)],
        spatial_layers: 2,
        gof: gof_for_temporal_layers(2),
    };
    let mut v = Vec::new();
    write_ss(&ss, &mut v).unwrap();
    assert_eq!(
        v,
        vec![0x38, 1, 0x40, 0, 180, 2, 0x80, 1, 0x68, 2, 0x04, 2, 0x34, 1]
    );
    let mut r = Reader { b: &v, pos: 0 };
    assert_eq!(parse_ss(&mut r).unwrap(), ss);
}

#[test]
fn flexible_pdiffs() {
    let d = PayloadDescriptor {
        inter_picture: true,
        flexible: true,
        layer: Some(LayerIndices::default()),
        p_diffs: vec![1, 5, 127],
        ..Default::default()
    };
    let mut v = Vec::new();
    d.write(&mut v).unwrap();
    assert_eq!(PayloadDescriptor::parse(&v).unwrap().0, d);
    assert!(PayloadDescriptor::parse(&[0x50, 0x03, 0x03, 0x03, 0x03]).is_err());
}

fn arb_desc() -> impl Strategy<Value = PayloadDescriptor> {
    (
        proptest::option::of(0u16..0x8000),
        any::<[bool; 6]>(),
        proptest::option::of((0u8..8, any::<bool>(), 0u8..8, any::<bool>())),
        any::<u8>(),
        proptest::collection::vec(1u8..128, 1..4),
        proptest::option::of((
            1u8..=8,
            any::<bool>(),
            proptest::collection::vec(
                (
                    0u8..8,
                    any::<bool>(),
                    proptest::collection::vec(1u8..=255, 0..4),
                ),
                0..6,
            ),
        )),
    )
        .prop_map(|(pid, b, l, tl0, pd, ss)| {
            let flexible = b[1];
            let inter = b[0];
            PayloadDescriptor {
                picture_id: pid,
                long_picture_id: pid.is_some_and(|p| p > 0x7f) || (pid.is_some() && b[5]),
                inter_picture: inter,
                flexible,
                start: b[2],
                end: b[3],
                not_ref_upper: b[4],
                layer: l.map(|(tid, switch_up, sid, inter_layer)| LayerIndices {
                    tid,
                    switch_up,
                    sid,
                    inter_layer,
                }),
                tl0_pic_idx: (l.is_some() && !flexible).then_some(tl0),
                p_diffs: if flexible && inter { pd } else { vec![] },
                ss: ss.map(|(n, y, g)| ScalabilityStructure {
                    resolutions: if y {
                        (0..n)
                            .map(|i| (i as u16 * 100, i as u16 * 50 + 7))
                            .collect()
                    } else {
                        vec![]
                    },
                    spatial_layers: n,
                    gof: g
                        .into_iter()
                        .map(|(tid, switch_up, p_diffs)| GofEntry {
                            tid,
                            switch_up,
                            p_diffs,
                        })
                        .collect(),
                }),
            }
        })
}

proptest! {
    #[test]
    fn descriptor_roundtrip(d in arb_desc(), tail in proptest::collection::vec(any::<u8>(), 0..8)) {
        let mut v = Vec::new();
        d.write(&mut v).unwrap();
        let n = v.len();
        v.extend_from_slice(&tail);
        let (p, m) = PayloadDescriptor::parse(&v).unwrap();
        prop_assert_eq!(m, n);
        prop_assert_eq!(p, d);
    }

    #[test]
    fn descriptor_parse_never_panics(v in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = PayloadDescriptor::parse(&v);
    }
}
