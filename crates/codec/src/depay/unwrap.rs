//! Extension of the wrapping RTP sequence numbers and VP9 picture IDs.

/// Unwraps an N-bit counter into a monotone u64 around the largest value seen.
#[derive(Debug, Clone, Default)]
pub(super) struct Unwrapper {
    last: Option<u64>,
}

impl Unwrapper {
    pub(super) fn unwrap(&mut self, v: u64, bits: u32) -> u64 {
        let m = 1u64 << bits;
        let Some(last) = self.last else {
            // Start well above zero so that reordered earlier values never underflow.
            let x = (m << 4) | v;
            self.last = Some(x);
            return x;
        };
        let base = last & !(m - 1);
        let mut best = base | v;
        for cand in [best.wrapping_sub(m), best + m] {
            if cand.abs_diff(last) < best.abs_diff(last) {
                best = cand;
            }
        }
        if best > last {
            self.last = Some(best);
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwrapper() {
        let mut u = Unwrapper::default();
        let a = u.unwrap(0xfffe, 16);
        let b = u.unwrap(0xffff, 16);
        let c = u.unwrap(0x0001, 16);
        let d = u.unwrap(0x0000, 16);
        assert_eq!(b, a + 1);
        assert_eq!(c, a + 3);
        assert_eq!(d, a + 2);
        let mut p = Unwrapper::default();
        let x = p.unwrap(0x7fff, 15);
        assert_eq!(p.unwrap(0, 15), x + 1);
    }
}
