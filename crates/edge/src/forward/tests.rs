use super::*;
use crate::gate::GateConfig;
use crate::keycache::KeyCache;
use crate::layout::VideoLayout;
use crate::source::{Source, SourcePicture};
use crate::vp9::Continuity;
use codec::vp9rtp::PayloadDescriptor;
use codec::vpx::Decoder;
use std::time::Duration;

struct Bed {
    pics: Vec<SourcePicture>,
    gate: Gate,
    cache: KeyCache,
    t0: Instant,
}

impl Bed {
    fn new(n: usize) -> Bed {
        let mut src = Source::small_l3t3(1000, 0).unwrap();
        let pics = (0..n).map(|_| src.next_picture().unwrap()).collect();
        let layout = VideoLayout::from_session("t", src.session()).unwrap();
        Bed {
            pics,
            gate: Gate::new(layout, GateConfig::default(), Continuity::default()),
            cache: KeyCache::new(3, 8 << 20),
            t0: Instant::now(),
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
/// end) and decodes it; returns the decoded sizes per picture.
fn decode(sends: &[Send]) -> Vec<(u32, u32)> {
    let mut dec = Decoder::new(1).unwrap();
    let mut sizes = Vec::new();
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let mut cur: Option<(u64, u8)> = None;
    let mut last_pid = None;
    for s in sends {
        let (d, n) = PayloadDescriptor::parse(&s.payload).unwrap();
        let l = d.layer.unwrap();
        assert_eq!(l.sid, s.spatial);
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
        if s.marker {
            assert!(d.end);
            let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
            let out = dec.decode_layers(&refs).expect("decodes");
            sizes.push(out.map_or((0, 0), |o| (o.width, o.height)));
            frames.clear();
            last_pid = Some(s.pid);
            cur = None;
        }
    }
    sizes
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
