//! The freeze rule of the W3C `freezeCount` statistic, as libwebrtc's VideoQualityObserver
//! (what Chrome's getStats reports) applies it, so a native viewer's freezes and a browser
//! viewer's count the same way.
//!
//! A gap between two shown pictures is a freeze when it is at least max(3 × avg, avg + 150 ms),
//! where avg is the linear average of the last 30 gaps including this one, judged once 5 are
//! known. The average is a recent one: a steady low frame rate (a viewer at the base temporal
//! layer, 3.75 fps) is not a string of freezes, a stall in a fast stream is. The nominal frame
//! period used before counted every picture of a viewer at the base layer as a freeze.
//! `e2e/src/quality.ts` (`freezeGaps`) applies the same rule to the frame logs.

use std::collections::VecDeque;

/// Gaps the average runs over.
pub const WINDOW: usize = 30;
/// Gaps known before any is judged.
pub const MIN_SAMPLES: usize = 5;

/// The running window of gaps between shown pictures.
#[derive(Debug, Default)]
pub struct FreezeDetector {
    gaps: VecDeque<f64>,
    sum: f64,
}

impl FreezeDetector {
    /// The gap (s) from the previous shown picture to this one: whether it is a freeze.
    pub fn gap(&mut self, gap_s: f64) -> bool {
        self.gaps.push_back(gap_s);
        self.sum += gap_s;
        if self.gaps.len() > WINDOW {
            self.sum -= self.gaps.pop_front().unwrap_or(0.0);
        }
        if self.gaps.len() < MIN_SAMPLES {
            return false;
        }
        let avg = self.sum / self.gaps.len() as f64;
        gap_s >= (3.0 * avg).max(avg + 0.15)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn freezes(gaps: &[f64]) -> Vec<f64> {
        let mut d = FreezeDetector::default();
        gaps.iter().copied().filter(|&g| d.gap(g)).collect()
    }

    #[test]
    fn recent_average_judges_each_gap() {
        // A steady 4 fps start before 25 fps: no freeze (the nominal period counted six).
        let mut start = vec![0.25; 6];
        start.extend([0.04; 3]);
        assert!(freezes(&start).is_empty());
        // 0.3 s after 30 pictures at 25 fps is one.
        let mut fast = vec![0.04; 30];
        fast.extend([0.3, 0.04]);
        assert_eq!(freezes(&fast), vec![0.3]);
        // Fewer than five gaps judge nothing.
        assert!(freezes(&[0.04, 0.04, 0.04, 2.0]).is_empty());
        // After 4 fps, 0.3 s is below 3 × the average; 1 s is a freeze.
        let mut slow = vec![0.25; 10];
        slow.extend([0.3, 1.0]);
        assert_eq!(freezes(&slow), vec![1.0]);
        // The window forgets: 40 s of 4 fps then 30 gaps at 25 fps judge 0.2 s a freeze.
        let mut forget = vec![0.25; 40];
        forget.extend([0.04; 30]);
        forget.push(0.2);
        assert_eq!(freezes(&forget), vec![0.2]);
    }
}
