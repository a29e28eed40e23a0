//! The media burst policy (docs/server.md "Pacer burst"): while layer k has queued media it
//! may send a bunch every `interval_k / peak` instead of every `interval_k`, as long as it is
//! at most `credit[k]` ahead of its constant-rate schedule. Every bunch, early or not,
//! advances the schedule by one interval and padding is sent only when a slot is due, so over
//! any window W the layer's rate deviates from the announced one by at most `credit[k]` / W;
//! the bunches themselves (equal-size packets back to back) are unchanged.

use proto::Time;
use std::time::Duration;

/// The policy.
#[derive(Clone, Debug, PartialEq)]
pub struct Burst {
    /// Peak rate / announced rate (> 1).
    pub peak: f64,
    /// Largest lead over the schedule, per layer.
    pub credit: Vec<Duration>,
}

/// The layer whose bunch goes next, and when: a layer with queued media may go `credit` ahead
/// of its scheduled slot `next`, but no sooner than `gap` after its previous bunch; a layer
/// without media (padding) goes when its slot is due. Ties go to the lower layer (the one
/// every receiver holds).
pub fn next_bunch(
    next: &[Time],
    last_sent: &[Option<Time>],
    has_media: impl Fn(usize) -> bool,
    gap: &[Duration],
    credit: &[Duration],
) -> Option<(usize, Time)> {
    (0..next.len())
        .map(|k| {
            let t = if has_media(k) {
                let lead = Time(next[k].0.saturating_sub(credit[k].as_nanos() as u64));
                match last_sent[k] {
                    // Never later than the constant-rate slot itself.
                    Some(l) => lead.max(l + gap[k]).min(next[k]),
                    None => lead,
                }
            } else {
                next[k]
            };
            (k, t)
        })
        .min_by_key(|&(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: f64) -> Duration {
        Duration::from_secs_f64(x / 1000.0)
    }

    /// In virtual time: a layer of 1 Mbit/s sends 2 x 1000-B bunches every 16 ms; a
    /// 20-packet frame (10 bunches) arrives every 267 ms. With peak 4 and a credit of one
    /// frame period the frame leaves at 4 ms per bunch (within 40 ms of its arrival instead of
    /// ~150 ms), and no window holds more bunches than its length at the announced rate plus
    /// the credit: the mean rate stays the announced one.
    #[test]
    fn burst_sends_frames_at_peak_and_keeps_the_mean_rate() {
        let t0 = Time::from_secs_f64(10.0);
        let interval = ms(16.0);
        let (gap, credit) = (vec![interval / 4], vec![ms(267.0)]);
        let mut next = vec![t0 + interval];
        let mut last: Vec<Option<Time>> = vec![None];
        let mut queued = 0u32;
        let mut sent: Vec<(Time, bool)> = Vec::new();
        let mut frame_at = t0 + ms(100.0);
        let mut frame_done: Vec<Duration> = Vec::new();
        let mut frame_start = None;
        let end = t0 + ms(5000.0);
        loop {
            let (k, due) = next_bunch(&next, &last, |_| queued > 0, &gap, &credit).unwrap();
            // The encoder queues a frame if it comes first (the pacer wakes for it).
            if frame_at <= due {
                queued += 20;
                frame_start = Some(frame_at);
                frame_at += ms(267.0);
                continue;
            }
            if due > end {
                break;
            }
            let media = queued > 0;
            queued = queued.saturating_sub(2);
            if media && queued == 0 {
                frame_done.push(due.saturating_since(frame_start.unwrap()));
            }
            sent.push((due, media));
            last[k] = Some(due);
            next[k] += interval;
        }
        assert!(frame_done.len() >= 17, "{}", frame_done.len());
        for d in &frame_done {
            // 10 bunches, 4 ms apart; the first waits at most one gap (a padding bunch may
            // have just left), so at most 40 ms from the frame's arrival. Strict pacing would
            // take 9 x 16 ms = 144 ms plus the slot phase.
            assert!(*d <= ms(40.5), "frame took {d:?}");
        }
        // Mean rate: in every window of w, at most w / interval + credit / interval + 1 bunches.
        let w = ms(500.0);
        let bound = (w.as_secs_f64() + credit[0].as_secs_f64()) / interval.as_secs_f64() + 1.0;
        for (i, &(t, _)) in sent.iter().enumerate() {
            let n = sent[i..].iter().take_while(|(u, _)| *u < t + w).count();
            assert!(n as f64 <= bound, "{n} bunches in {w:?} from {t:?}");
        }
        // And over the whole run the count is the constant-rate one (padding fills the gaps),
        // plus at most the slots the last frame ran ahead of the schedule.
        let total = sent.len() as f64;
        let expect = end.saturating_since(t0).as_secs_f64() / interval.as_secs_f64();
        let lead = credit[0].as_secs_f64() / interval.as_secs_f64();
        assert!(
            total >= expect - 2.0 && total <= expect + lead + 1.0,
            "{total} vs {expect}"
        );
        // Bunches of one layer never go closer than the peak gap.
        assert!(sent
            .windows(2)
            .all(|p| p[1].0.saturating_since(p[0].0) >= gap[0]));
    }

    #[test]
    fn next_bunch_rules() {
        let t0 = Time::from_secs_f64(1.0);
        let ms = |x: u64| Duration::from_millis(x);
        let next = [t0 + ms(50), t0 + ms(20)];
        let gap = [ms(10), ms(10)];
        let credit = [ms(100), ms(5)];
        // No media: the earliest slot (layer 1 at +20).
        assert_eq!(
            next_bunch(&next, &[None, None], |_| false, &gap, &credit),
            Some((1, t0 + ms(20)))
        );
        // Media on layer 0: it may go 100 ms ahead of its slot, i.e. at once.
        assert_eq!(
            next_bunch(&next, &[None, None], |k| k == 0, &gap, &credit),
            Some((0, Time(t0.0 - ms(50).as_nanos() as u64)))
        );
        // ... but not sooner than the peak gap after its previous bunch.
        assert_eq!(
            next_bunch(&next, &[Some(t0), None], |k| k == 0, &gap, &credit),
            Some((0, t0 + ms(10)))
        );
        // ... and never later than its own slot.
        assert_eq!(
            next_bunch(&next, &[Some(t0 + ms(45)), None], |k| k == 0, &gap, &credit),
            Some((1, t0 + ms(20)))
        );
        assert_eq!(
            next_bunch(
                &[t0 + ms(50)],
                &[Some(t0 + ms(45))],
                |_| true,
                &gap,
                &credit
            ),
            Some((0, t0 + ms(50)))
        );
    }
}
