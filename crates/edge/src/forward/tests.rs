use super::*;
use crate::gate::GateConfig;
use crate::keycache::KeyCache;
use crate::layout::VideoLayout;
use crate::source::{Source, SourcePicture};
use crate::vp9::Continuity;
use codec::vp9rtp::PayloadDescriptor;
use codec::vpx::{DecodedFrame, Decoder};
use std::collections::BTreeSet;
use std::time::Duration;

struct Bed {
    pics: Vec<SourcePicture>,
    gate: Gate,
    cache: KeyCache,
    t0: Instant,
    /// Every frame released: (picture, spatial layer, temporal layer, filler).
    released: Vec<(u64, u8, u8, bool)>,
}

impl Bed {
    fn new(n: usize) -> Bed {
        Bed::of(Source::small_l3t3(1000, 0).unwrap(), n)
    }

    fn of(mut src: Source, n: usize) -> Bed {
        let pics = (0..n).map(|_| src.next_picture().unwrap()).collect();
        let layout = VideoLayout::from_session("t", src.session()).unwrap();
        Bed {
            pics,
            gate: Gate::new(layout, GateConfig::default(), Continuity::default()),
            cache: KeyCache::new(3, 8 << 20),
            t0: Instant::now(),
            released: Vec::new(),
        }
    }

    /// Pushes picture `i` (layer k `delay_ms(k)` late) and hands the events to `fwds`.
    fn step(&mut self, i: usize, delay_ms: impl Fn(usize) -> u64, fwds: &mut [&mut Forwarder]) {
        let at = self.t0 + Duration::from_millis(33 * i as u64);
        let mut order: Vec<(u64, usize, Vec<u8>)> = Vec::new();
        for (k, pkts) in self.pics[i].layers.iter().enumerate() {
            for b in pkts {
                order.push((delay_ms(k), k, b.clone()));
            }
        }
        order.sort_by_key(|x| x.0);
        for (d, k, b) in order {
            self.gate.push(at + Duration::from_millis(d), k, &b);
            self.dispatch(fwds);
        }
        self.gate.handle_timeout(at + Duration::from_millis(32));
        self.dispatch(fwds);
    }

    fn dispatch(&mut self, fwds: &mut [&mut Forwarder]) {
        while let Some(ev) = self.gate.poll_event() {
            if let GateEvent::Released { pid, spatial } = ev {
                let f = self.gate.frame(pid, spatial).unwrap();
                self.released.push((pid, spatial, f.temporal, f.filler));
            }
            self.cache.on_event(&self.gate, ev);
            for f in fwds.iter_mut() {
                f.on_event(&self.gate, ev);
            }
        }
    }
}

fn drain(f: &mut Forwarder) -> Vec<Send> {
    std::iter::from_fn(|| f.poll_send()).collect()
}

/// Checks what a browser would check (frames whole and in order, one marker per picture at its
/// end, and, as libwebrtc's flexible-mode reference finder does, every frame's references
/// among the frames it got before: its P_DIFFs at its own spatial layer, the layer below when
/// D = 1) and decodes it; returns each picture's upstream ID and what the decoder showed.
fn browser_pictures(sends: &[Send]) -> Vec<(u64, DecodedFrame)> {
    let mut dec = Decoder::new(1).unwrap();
    let mut shown = Vec::new();
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let mut cur: Option<(u64, u8)> = None;
    let mut last_pid = None;
    let mut got: BTreeSet<(u16, u8)> = BTreeSet::new();
    for s in sends {
        let (d, n) = PayloadDescriptor::parse(&s.payload).unwrap();
        let l = d.layer.unwrap();
        assert_eq!(l.sid, s.spatial);
        assert!(d.flexible && d.tl0_pic_idx.is_none());
        if d.start {
            if let Some((p, sp)) = cur {
                assert!(
                    p == s.pid && s.spatial == sp + 1,
                    "frame order {p}/{sp} -> {}/{}",
                    s.pid,
                    s.spatial
                );
            } else {
                assert_eq!(s.spatial, 0, "picture {} starts above layer 0", s.pid);
                assert!(
                    last_pid.is_none_or(|lp| s.pid > lp),
                    "pictures out of order"
                );
            }
            frames.push(Vec::new());
            cur = Some((s.pid, s.spatial));
        }
        frames
            .last_mut()
            .unwrap()
            .extend_from_slice(&s.payload[n..]);
        if d.end {
            let pid = d.picture_id.unwrap();
            assert_eq!(
                d.inter_picture,
                !d.p_diffs.is_empty(),
                "P_DIFFs exactly when P = 1"
            );
            for &pd in &d.p_diffs {
                let r = (pid + 0x8000 - pd as u16) & 0x7fff;
                assert!(
                    got.contains(&(r, l.sid)),
                    "frame {}/{} references picture {r} at its layer, which the browser never got",
                    s.pid,
                    l.sid
                );
            }
            if l.inter_layer {
                assert!(l.sid > 0 && got.contains(&(pid, l.sid - 1)));
            }
            got.insert((pid, l.sid));
        }
        if s.marker {
            assert!(d.end);
            let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
            if let Some(out) = dec.decode_layers(&refs).expect("decodes") {
                shown.push((s.pid, out));
            }
            frames.clear();
            last_pid = Some(s.pid);
            cur = None;
        }
    }
    shown
}

/// [`browser_pictures`]' decoded sizes, one per picture.
fn decode(sends: &[Send]) -> Vec<(u32, u32)> {
    browser_pictures(sends)
        .into_iter()
        .map(|(_, o)| (o.width, o.height))
        .collect()
}

fn choice(spatial: u8, temporal: u8) -> Choice {
    Choice { spatial, temporal }
}

#[test]
fn each_operating_point_decodes_at_its_size_and_rate() {
    let mut bed = Bed::new(36);
    let mut f = [
        Forwarder::new(3, choice(2, 2)),
        Forwarder::new(3, choice(1, 1)),
        Forwarder::new(3, choice(0, 0)),
    ];
    for i in 0..36 {
        let [a, b, c] = &mut f;
        bed.step(i, |_| 0, &mut [a, b, c]);
    }
    let want = [((640, 360), 36), ((320, 180), 18), ((160, 90), 9)];
    for (fw, (size, n)) in f.iter_mut().zip(want) {
        let sizes = decode(&drain(fw));
        assert_eq!(sizes.len(), n);
        assert!(sizes.iter().all(|&s| s == size), "{sizes:?}");
    }
}

#[test]
fn paced_upper_layers_keep_picture_order_and_markers() {
    let mut bed = Bed::new(30);
    let mut top = Forwarder::new(3, choice(2, 2));
    let mut low = Forwarder::new(3, choice(0, 2));
    let mut low_sends = Vec::new();
    for i in 0..30 {
        // Spatial 2 frames arrive 90 ms late (a slow paced layer), spatial 1 30 ms late.
        bed.step(
            i,
            |k| [0, 0, 0, 30, 30, 30, 90, 90, 90][k],
            &mut [&mut top, &mut low],
        );
        let got = drain(&mut low);
        // The 180p browser gets each picture as soon as its base arrives.
        assert!(got.iter().any(|s| s.pid == got.last().unwrap().pid) || got.is_empty());
        low_sends.extend(got);
    }
    for i in 30..34 {
        bed.gate
            .handle_timeout(bed.t0 + Duration::from_millis(33 * i));
        bed.dispatch(&mut [&mut top, &mut low]);
    }
    assert_eq!(decode(&low_sends).len(), 30);
    let sizes = decode(&drain(&mut top));
    assert!(sizes.len() >= 27, "{}", sizes.len());
    assert!(sizes.iter().all(|&s| s == (640, 360)));
}

#[test]
fn spatial_up_waits_for_a_sync_down_is_immediate() {
    let mut bed = Bed::new(64);
    let mut f = Forwarder::new(3, choice(0, 2));
    let mut sends = Vec::new();
    for i in 0..64 {
        if i == 10 {
            f.set_target(choice(2, 2));
        }
        if i == 50 {
            f.set_target(choice(0, 2));
        }
        bed.step(i, |_| 0, &mut [&mut f]);
        sends.extend(drain(&mut f));
    }
    let sizes = decode(&sends);
    assert_eq!(sizes.len(), 64);
    // Up at the first sync picture after 10 (28), down at 50 at once.
    let first_big = sizes.iter().position(|&s| s == (640, 360)).unwrap();
    assert_eq!(first_big, 28);
    assert!(bed.pics[28].sync_mask & 0b100 != 0);
    assert!(sizes[28..50].iter().all(|&s| s == (640, 360)));
    assert!(sizes[50..].iter().all(|&s| s == (160, 90)));
    assert_eq!(f.stats().spatial_up, 1);
    assert_eq!(f.stats().spatial_down, 1);
}

#[test]
fn temporal_up_and_down() {
    let mut bed = Bed::new(24);
    let mut f = Forwarder::new(3, choice(0, 0));
    let mut sends = Vec::new();
    for i in 0..24 {
        if i == 5 {
            f.set_target(choice(0, 2));
        }
        if i == 14 {
            f.set_target(choice(0, 1));
        }
        bed.step(i, |_| 0, &mut [&mut f]);
        sends.extend(drain(&mut f));
    }
    let mut pids: Vec<u64> = sends.iter().map(|s| s.pid).collect();
    pids.dedup();
    let base = pids[0];
    let idx: Vec<u64> = pids.iter().map(|p| p - base).collect();
    // TL0 only until 5; TL2 (odd) pictures join at picture 5 (its references are TL0);
    // from 14 on, TL1 pictures only.
    assert_eq!(&idx[..3], &[0, 4, 5]);
    assert!(idx.contains(&6) && idx.contains(&7) && idx.contains(&13));
    assert!(idx.iter().filter(|&&i| i >= 14).all(|i| i % 2 == 0));
    assert_eq!(decode(&sends).len(), idx.len());
}

#[test]
fn a_late_joiner_starts_from_the_key_cache() {
    let mut bed = Bed::new(40);
    let mut early = Forwarder::new(3, choice(2, 2));
    for i in 0..21 {
        bed.step(i, |_| 0, &mut [&mut early]);
    }
    let (chain, bytes) = bed.cache.chain(1).expect("a chain at 360p");
    assert_eq!(chain.len(), 6, "key + TL0 pictures 4..20");
    assert!(bytes > 0);
    let mut late = Forwarder::new(3, choice(1, 2));
    late.start_from_chain(&bed.gate, &chain, 1);
    let mut sends = drain(&mut late);
    for i in 21..40 {
        bed.step(i, |_| 0, &mut [&mut late]);
        sends.extend(drain(&mut late));
    }
    let sizes = decode(&sends);
    // 6 cached pictures, then every picture from 21 on (21 is TL2 and references only the
    // chain's last picture, 20: a valid temporal switch).
    assert_eq!(sizes.len(), 6 + 19, "{sizes:?}");
    assert!(sizes.iter().all(|&s| s == (320, 180)));
    assert_eq!(late.stats().cache_starts, 1);
}

/// A layer frame libvpx drops is sent upstream as a one-byte `show_existing_frame` filler
/// (docs/codec.md). A browser never gets one at the top of a picture, where it would show an
/// older picture again (the picture jumped back), and no frame it gets references one it did
/// not get: a budget far below the content makes libvpx drop frames of every layer.
#[test]
fn a_browser_never_sees_a_filler_picture_and_no_reference_is_missing() {
    let n = 96;
    let mut bed = Bed::of(Source::new(codec::synth::starved_l3t3()).unwrap(), n);
    let mut f = [
        Forwarder::new(3, choice(2, 2)),
        Forwarder::new(3, choice(1, 2)),
        Forwarder::new(3, choice(2, 0)),
    ];
    for i in 0..n {
        let [a, b, c] = &mut f;
        bed.step(i, |_| 0, &mut [a, b, c]);
    }
    let mut left_out = 0;
    for fw in &mut f {
        let target = fw.target();
        let stats = fw.stats();
        let shown = browser_pictures(&drain(fw));
        let mut seen: Vec<&(u64, DecodedFrame)> = Vec::new();
        for p in &shown {
            assert!(
                !seen
                    .iter()
                    .any(|q| q.1.width == p.1.width && q.1.i420 == p.1.i420),
                "{target:?}: picture {} shows an earlier picture again",
                p.0
            );
            seen.push(p);
        }
        let want = bed
            .released
            .iter()
            .filter(|&&(_, s, t, filler)| s <= target.spatial && t <= target.temporal && !filler)
            .map(|x| x.0)
            .collect::<BTreeSet<u64>>()
            .len();
        assert_eq!(
            shown.len(),
            want,
            "{target:?}: every picture with a coded frame is shown; {stats:?}"
        );
        left_out += stats.fillers_left_out;
        eprintln!("{target:?}: {} pictures shown, {stats:?}", shown.len());
    }
    assert!(
        left_out > 0,
        "no filler at the top of a picture: nothing was tested"
    );
}
