//! Shortening one decoded frame by about a pitch period, so that the playout delay can come
//! down without a gap (what WebRTC's NetEq calls "accelerate").
//!
//! A stretch near the frame's start is compared with the stretches `L` samples later, for
//! every cut `L` the caller allows; at the lag where the frame best repeats itself the `L`
//! samples in between are cut out and the seam is cross-faded. Voiced speech and tonal music
//! repeat themselves at their period (and its multiples), so the cut is not heard; a quiet
//! frame may lose any cut. A frame that does not repeat itself (a transient, noise) is left
//! whole and the playout tries a later one: a cut there would be heard as a dip or a click.
//! Both ends of the frame are kept, so the seams with its neighbours are untouched.

/// Shortest cut, samples per channel (2.5 ms at 48 kHz): a pitch shorter than this repeats
/// within a longer cut (its multiples), and cuts this short would have to come often.
pub const MIN_CUT: usize = 120;
/// Longest cut (10 ms at 48 kHz: a 100-Hz voice's period).
pub const MAX_CUT: usize = 480;
/// Where the compared stretch starts in the frame (the first 2.5 ms are kept as they are).
const START: usize = 120;
/// Length of the compared stretches and of the cross-fade (5 ms).
const FADE: usize = 240;
/// Normalised correlation of the two stretches a cut needs (1: the same up to scale).
const MIN_CORRELATION: f64 = 0.8;
/// Mean square of a sample (full scale 1.0) below which a frame is quiet: about -50 dBFS.
const QUIET_MEAN_SQUARE: f64 = 1e-5;

/// Cuts between [`MIN_CUT`] and `max_cut` samples per channel out of the interleaved frame
/// `pcm` where the frame repeats itself (or anywhere, if it is quiet), and returns how many
/// (0: the frame is left as it was). The frame must hold at least `START + FADE + MIN_CUT`
/// samples per channel (a 20-ms frame at 48 kHz holds 960); shorter frames are left whole.
pub fn shorten(pcm: &mut Vec<i16>, channels: usize, max_cut: usize) -> usize {
    if channels == 0 || !pcm.len().is_multiple_of(channels) {
        return 0;
    }
    let n = pcm.len() / channels;
    let longest = max_cut.min(MAX_CUT).min(n.saturating_sub(START + FADE));
    if longest < MIN_CUT {
        return 0;
    }
    // One channel (the sum) decides; every channel is cut in the same place.
    let mono: Vec<f64> = pcm
        .chunks_exact(channels)
        .map(|c| c.iter().map(|&s| s as f64 / 32768.0).sum::<f64>())
        .collect();
    let mean_square = mono.iter().map(|x| x * x).sum::<f64>() / n as f64;
    let cut = if mean_square < QUIET_MEAN_SQUARE * (channels * channels) as f64 {
        longest
    } else {
        match best_lag(&mono, longest) {
            Some(l) => l,
            None => return 0,
        }
    };
    cut_at(pcm, channels, cut);
    cut
}

/// The lag in `MIN_CUT..=longest` at which the stretch at `START` best matches the one that
/// far later, if it matches well enough.
fn best_lag(x: &[f64], longest: usize) -> Option<usize> {
    let a = &x[START..START + FADE];
    let ea: f64 = a.iter().map(|v| v * v).sum();
    let mut best: Option<(f64, usize)> = None;
    for lag in MIN_CUT..=longest {
        let b = &x[START + lag..START + lag + FADE];
        let (mut ab, mut eb) = (0.0, 0.0);
        for (p, q) in a.iter().zip(b) {
            ab += p * q;
            eb += q * q;
        }
        let denom = (ea * eb).sqrt();
        if denom <= 0.0 {
            continue;
        }
        let c = ab / denom;
        if best.is_none_or(|(bc, _)| c > bc) {
            best = Some((c, lag));
        }
    }
    best.filter(|(c, _)| *c >= MIN_CORRELATION).map(|(_, l)| l)
}

/// Replaces the frame by its first `START` samples, the cross-fade from the stretch at
/// `START` to the one `cut` later, and the rest after that stretch.
fn cut_at(pcm: &mut Vec<i16>, ch: usize, cut: usize) {
    for i in 0..FADE {
        // Raised-cosine weights: the fade's slope is zero at both ends.
        let w = 0.5 - 0.5 * (std::f64::consts::PI * (i as f64 + 0.5) / FADE as f64).cos();
        for c in 0..ch {
            let a = pcm[(START + i) * ch + c] as f64;
            let b = pcm[(START + cut + i) * ch + c] as f64;
            pcm[(START + i) * ch + c] = (a * (1.0 - w) + b * w).round() as i16;
        }
    }
    pcm.drain((START + FADE) * ch..(START + FADE + cut) * ch);
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: usize = 960;

    /// `ch` channels of `f(i)` (full scale 1.0), `n` samples each.
    fn frame(ch: usize, n: usize, f: impl Fn(usize) -> f64) -> Vec<i16> {
        (0..n)
            .flat_map(|i| {
                let v = (f(i) * 32767.0).round() as i16;
                std::iter::repeat_n(v, ch)
            })
            .collect()
    }

    fn sine(hz: f64, amp: f64) -> impl Fn(usize) -> f64 {
        move |i| amp * (2.0 * std::f64::consts::PI * hz * i as f64 / 48_000.0).sin()
    }

    /// Largest step between neighbouring samples of channel 0.
    fn max_step(pcm: &[i16], ch: usize) -> i32 {
        pcm.iter()
            .step_by(ch)
            .zip(pcm.iter().step_by(ch).skip(1))
            .map(|(a, b)| (*b as i32 - *a as i32).abs())
            .max()
            .unwrap_or(0)
    }

    fn rms(pcm: &[i16]) -> f64 {
        (pcm.iter().map(|&s| (s as f64).powi(2)).sum::<f64>() / pcm.len() as f64).sqrt()
    }

    /// A 440-Hz tone loses a whole number of its periods, with no click (no step larger than
    /// the tone's own) and its level kept; both channels alike.
    #[test]
    fn a_tone_loses_whole_periods_without_a_click() {
        let mut pcm = frame(2, N, sine(440.0, 0.5));
        let (step, level) = (max_step(&pcm, 2), rms(&pcm));
        let cut = shorten(&mut pcm, 2, MAX_CUT);
        assert!((MIN_CUT..=MAX_CUT).contains(&cut), "cut {cut}");
        assert_eq!(pcm.len(), (N - cut) * 2);
        let period = 48_000.0 / 440.0;
        let periods = cut as f64 / period;
        assert!(
            (periods - periods.round()).abs() * period <= 1.0,
            "cut {cut} is {periods:.3} periods"
        );
        assert!(
            max_step(&pcm, 2) <= step + 2,
            "{} > {step}",
            max_step(&pcm, 2)
        );
        assert!((rms(&pcm) / level - 1.0).abs() < 0.01);
        assert!(pcm.chunks_exact(2).all(|c| c[0] == c[1]));
        // The frame's ends are what they were: its seams with the neighbours are untouched.
        let orig = frame(2, N, sine(440.0, 0.5));
        assert_eq!(&pcm[..START * 2], &orig[..START * 2]);
        assert_eq!(&pcm[pcm.len() - 200..], &orig[orig.len() - 200..]);
    }

    /// A voiced-speech-like signal (a 140-Hz fundamental and its harmonics, falling): the cut
    /// is one or more periods of it.
    #[test]
    fn a_voice_loses_its_pitch_period() {
        let f0 = 140.0;
        let voice = move |i: usize| {
            (1..8)
                .map(|h| sine(f0 * h as f64, 0.3 / h as f64)(i))
                .sum::<f64>()
        };
        let mut pcm = frame(1, N, voice);
        let cut = shorten(&mut pcm, 1, MAX_CUT);
        let period = 48_000.0 / f0;
        assert!(
            (cut as f64 - period).abs() <= 2.0 || (cut as f64 - 2.0 * period).abs() <= 2.0,
            "cut {cut}, period {period:.1}"
        );
        assert_eq!(pcm.len(), N - cut);
    }

    /// Noise does not repeat itself: left whole.
    #[test]
    fn noise_is_left_whole() {
        let mut s = 0x1234_5678u32;
        let mut noise = || {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f64 / (1u32 << 24) as f64 - 0.5
        };
        let v: Vec<f64> = (0..N).map(|_| noise()).collect();
        let mut pcm = frame(2, N, |i| v[i]);
        let orig = pcm.clone();
        assert_eq!(shorten(&mut pcm, 2, MAX_CUT), 0);
        assert_eq!(pcm, orig);
    }

    /// A quiet frame loses the longest cut allowed; silence likewise.
    #[test]
    fn quiet_frames_lose_the_longest_cut() {
        let mut pcm = frame(2, N, sine(3_000.0, 0.001));
        assert_eq!(shorten(&mut pcm, 2, 300), 300);
        assert_eq!(pcm.len(), (N - 300) * 2);
        let mut zeros = vec![0i16; N];
        assert_eq!(shorten(&mut zeros, 1, 10_000), MAX_CUT);
        assert!(zeros.iter().all(|&s| s == 0));
    }

    /// Nothing is cut when the caller allows less than the shortest cut, when the frame is
    /// too short, or when its length is not whole samples of every channel.
    #[test]
    fn what_cannot_be_cut_is_left_whole() {
        let mut pcm = frame(2, N, sine(440.0, 0.5));
        let orig = pcm.clone();
        assert_eq!(shorten(&mut pcm, 2, MIN_CUT - 1), 0);
        let mut short = frame(1, START + FADE + MIN_CUT - 1, sine(440.0, 0.5));
        assert_eq!(shorten(&mut short, 1, MAX_CUT), 0);
        let mut odd = orig.clone();
        odd.pop();
        assert_eq!(shorten(&mut odd, 2, MAX_CUT), 0);
        assert_eq!(shorten(&mut Vec::new(), 2, MAX_CUT), 0);
        assert_eq!(shorten(&mut pcm, 0, MAX_CUT), 0);
        assert_eq!(pcm, orig);
    }

    /// A cut never lengthens the frame nor reads past it, whatever the allowance and the
    /// frame's length.
    #[test]
    fn any_allowance_and_length_stays_in_bounds() {
        for n in [0, 100, 480, 599, 600, 700, 960, 1920] {
            for max in [0, 119, 120, 200, 480, 481, 5000] {
                let mut pcm = frame(2, n, sine(440.0, 0.5));
                let cut = shorten(&mut pcm, 2, max);
                assert!(cut <= max && cut <= MAX_CUT);
                assert_eq!(pcm.len(), (n - cut) * 2);
            }
        }
    }
}
