use super::*;
use crate::source::{Source, SourcePicture};
use codec::vpx::Decoder;
use std::collections::BTreeSet;

fn gate_for(src: &Source) -> Gate {
    let layout = VideoLayout::from_session("t", src.session()).unwrap();
    Gate::new(layout, GateConfig::default(), Continuity::default())
}

fn pictures(n: usize, key_interval: u32) -> (Source, Vec<SourcePicture>) {
    let mut src = Source::small_l3t3(1000, key_interval).unwrap();
    let pics = (0..n).map(|_| src.next_picture().unwrap()).collect();
    (src, pics)
}

/// Feeds one picture, every layer's packets at `at` (+ `delay(k)` for layer k).
fn feed(g: &mut Gate, p: &SourcePicture, at: Instant, delay: impl Fn(usize) -> Duration) {
    for (k, pkts) in p.layers.iter().enumerate() {
        for b in pkts {
            g.push(at + delay(k), k, b);
        }
    }
}

fn drain(g: &mut Gate) -> Vec<GateEvent> {
    std::iter::from_fn(|| g.poll_event()).collect()
}

#[test]
fn lossless_stream_releases_every_frame_in_spatial_order() {
    let (src, pics) = pictures(40, 0);
    let mut g = gate_for(&src);
    let t0 = Instant::now();
    let mut released = Vec::new();
    for (i, p) in pics.iter().enumerate() {
        feed(&mut g, p, t0 + Duration::from_millis(33 * i as u64), |_| {
            Duration::ZERO
        });
        for e in drain(&mut g) {
            match e {
                GateEvent::Released { pid, spatial } => released.push((pid, spatial)),
                GateEvent::Lost { pid, spatial } => panic!("lost ({pid}, {spatial})"),
                GateEvent::Started { .. } => {}
            }
        }
    }
    // Every picture has three spatial frames; all released, each picture's in order.
    assert_eq!(released.len(), 3 * pics.len());
    let mut seen = BTreeSet::new();
    for &(pid, s) in &released {
        assert!(
            s == 0 || seen.contains(&(pid, s - 1)),
            "({pid},{s}) before its base"
        );
        seen.insert((pid, s));
    }
    assert_eq!(g.stats().frames_lost, 0);
    assert_eq!(g.stats().key_pictures, 1);
    // The browser form: flexible mode, layer indices everywhere, the SS only on the key's first
    // packet, P_DIFFs those of the picture group (no fillers here), picture IDs as upstream
    // (first epoch).
    let first = released[0].0;
    for &(pid, s) in &released {
        let f = g.frame(pid, s).unwrap();
        assert!(!f.filler);
        for (i, pk) in f.packets.iter().enumerate() {
            let (d, _) = PayloadDescriptor::parse(&pk.payload).unwrap();
            let l = d.layer.expect("layer indices");
            assert_eq!(l.sid, s);
            assert_eq!(l.tid, f.temporal);
            assert_eq!(d.picture_id, Some(f.out_pid));
            assert!(d.flexible && d.tl0_pic_idx.is_none());
            assert_eq!(d.ss.is_some(), pid == first && s == 0 && i == 0);
            if let Some(ss) = &d.ss {
                assert_eq!(ss.spatial_layers, 3);
                assert_eq!(ss.gof.len(), 4);
                assert_eq!(ss.resolutions, vec![(160, 90), (320, 180), (640, 360)]);
            }
            let by_group: Vec<u8> = g
                .picture_refs(pid)
                .unwrap()
                .iter()
                .map(|&r| (pid - r) as u8)
                .collect();
            if d.inter_picture {
                assert_eq!(d.p_diffs, by_group, "({pid}, {s})");
            } else {
                assert!(d.p_diffs.is_empty());
            }
        }
        assert_eq!(f.out_pid as u64, pid & 0x7fff);
    }
}

/// What a browser holding spatial layers 0..=top decodes from the released frames.
fn decode_prefix(g: &Gate, released: &[(u64, u8)], top: u8) -> Vec<(u32, u32)> {
    let mut dec = Decoder::new(1).unwrap();
    let pids: BTreeSet<u64> = released.iter().map(|&(p, _)| p).collect();
    let mut sizes = Vec::new();
    for pid in pids {
        let mut frames = Vec::new();
        for s in 0..=top {
            let Some(f) = g.frame(pid, s) else { break };
            let mut data = Vec::new();
            for pk in &f.packets {
                let (_, n) = PayloadDescriptor::parse(&pk.payload).unwrap();
                data.extend_from_slice(&pk.payload[n..]);
            }
            frames.push(data);
        }
        let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
        if let Some(d) = dec.decode_layers(&refs).unwrap() {
            sizes.push((d.width, d.height));
        }
    }
    sizes
}

#[test]
fn released_frames_decode_at_every_spatial_prefix() {
    let (src, pics) = pictures(24, 0);
    let mut g = gate_for(&src);
    let t0 = Instant::now();
    let mut released = Vec::new();
    for (i, p) in pics.iter().enumerate() {
        feed(&mut g, p, t0 + Duration::from_millis(33 * i as u64), |_| {
            Duration::ZERO
        });
        for e in drain(&mut g) {
            if let GateEvent::Released { pid, spatial } = e {
                released.push((pid, spatial));
            }
        }
    }
    for (top, size) in [(0u8, (160, 90)), (1, (320, 180)), (2, (640, 360))] {
        let sizes = decode_prefix(&g, &released, top);
        assert_eq!(sizes.len(), pics.len(), "top {top}");
        assert!(sizes.iter().all(|&s| s == size), "top {top}: {sizes:?}");
    }
}

#[test]
fn slow_upper_layers_do_not_hold_back_the_base() {
    let (src, pics) = pictures(12, 0);
    let mut g = gate_for(&src);
    let t0 = Instant::now();
    // Spatial layer 2 (layers 6..8) arrives 120 ms late, as a slow paced layer would.
    let late = |k: usize| Duration::from_millis(if k >= 6 { 120 } else { 0 });
    let mut base_release = Vec::new();
    for (i, p) in pics.iter().enumerate() {
        let at = t0 + Duration::from_millis(33 * i as u64);
        // Push in arrival order: everything but layer 2 now, layer 2 later.
        for (k, pkts) in p.layers.iter().enumerate().filter(|(k, _)| *k < 6) {
            for b in pkts {
                g.push(at, k, b);
            }
        }
        for e in drain(&mut g) {
            if let GateEvent::Released { pid, spatial: 0 } = e {
                base_release.push(pid);
            }
        }
        assert!(
            base_release.len() > i,
            "picture {i}'s base not released at once"
        );
    }
    for (i, p) in pics.iter().enumerate() {
        let at = t0 + Duration::from_millis(33 * i as u64) + late(6);
        for (k, pkts) in p.layers.iter().enumerate().filter(|(k, _)| *k >= 6) {
            for b in pkts {
                g.push(at, k, b);
            }
        }
    }
    let ev = drain(&mut g);
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, GateEvent::Released { spatial: 2, .. }))
            .count(),
        pics.len()
    );
    assert!(!ev.iter().any(|e| matches!(e, GateEvent::Lost { .. })));
}

#[test]
fn a_lost_upper_tl0_packet_breaks_that_layer_until_its_sync() {
    // Syncs every 28 frames (TL0 positions): a loss at picture 8 costs layer 2 until 28.
    let (src, pics) = pictures(40, 0);
    assert!(
        pics[28].sync_mask & 0b110 != 0,
        "sync at 28: {:#b}",
        pics[28].sync_mask
    );
    let mut g = gate_for(&src);
    let t0 = Instant::now();
    let mut lost = BTreeSet::new();
    let mut released = BTreeSet::new();
    let mut intact = Vec::new();
    for (i, p) in pics.iter().enumerate() {
        let at = t0 + Duration::from_millis(33 * i as u64);
        for (k, pkts) in p.layers.iter().enumerate() {
            for (j, b) in pkts.iter().enumerate() {
                if i == 8 && k == 6 && j == 0 {
                    continue; // the first packet of picture 8's 2,0 frame is lost
                }
                g.push(at, k, b);
            }
        }
        g.handle_timeout(at + Duration::from_millis(30));
        for e in drain(&mut g) {
            match e {
                GateEvent::Released { pid, spatial } => {
                    released.insert((pid - 0x7ff0 - (1 << 23), spatial));
                }
                GateEvent::Lost { pid, spatial } => {
                    lost.insert((pid - 0x7ff0 - (1 << 23), spatial));
                }
                GateEvent::Started { .. } => {}
            }
        }
        intact.push(g.intact_top());
    }
    // Spatial 2 lost from picture 8 up to (not including) the sync at 28, nothing else.
    for i in 0..40u64 {
        let want_lost = (8..28).contains(&i);
        assert_eq!(lost.contains(&(i, 2)), want_lost, "picture {i}");
        assert_eq!(released.contains(&(i, 2)), !want_lost, "picture {i}");
        assert!(released.contains(&(i, 0)) && released.contains(&(i, 1)));
    }
    assert_eq!(intact[7], Some(2));
    assert_eq!(intact[12], Some(1));
    assert_eq!(intact[30], Some(2));
}

#[test]
fn nothing_is_released_before_the_first_key_picture() {
    let (src, pics) = pictures(20, 0);
    let mut g = gate_for(&src);
    let t0 = Instant::now();
    // Join mid-stream: pictures 3..20 (no key among them), then ask: nothing released.
    for (i, p) in pics.iter().enumerate().skip(3) {
        feed(&mut g, p, t0 + Duration::from_millis(33 * i as u64), |_| {
            Duration::ZERO
        });
    }
    g.handle_timeout(t0 + Duration::from_secs(2));
    let ev = drain(&mut g);
    assert!(ev.is_empty(), "{ev:?}");
    assert!(!g.synced());
}

#[test]
fn garbage_is_counted_not_fatal() {
    let (src, _) = pictures(1, 0);
    let mut g = gate_for(&src);
    let t0 = Instant::now();
    g.push(t0, 0, &[]);
    g.push(t0, 0, &[0x80, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0xff]);
    g.push(t0, 99, &[0x80, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0x80, 1]);
    assert_eq!(g.stats().malformed, 3);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    #[test]
    fn arbitrary_packets_never_panic(
        pkts in proptest::collection::vec(
            (0usize..10, proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80)),
            0..60,
        )
    ) {
        let src = Source::small_l3t3(300, 0).unwrap();
        let mut g = gate_for(&src);
        let t0 = Instant::now();
        for (i, (k, mut b)) in pkts.into_iter().enumerate() {
            if b.len() > 13 {
                b[0] = 0x80;
                b[1] = 96;
                b[12] |= 0x80;
            }
            g.push(t0 + Duration::from_millis(i as u64), k, &b);
            while g.poll_event().is_some() {}
        }
        g.handle_timeout(t0 + Duration::from_secs(5));
    }
}
