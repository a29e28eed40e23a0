//! Selective acknowledgements for the simulated TCP (`agents::tcp`, `variant: sack`).
//!
//! Three pieces, all in segments (the TCP model numbers segments, not bytes):
//! - [`SackBlocks`]: the SACK option an ACK carries (RFC 2018: at most 3 blocks; the first
//!   holds the segment that triggered the ACK, the rest repeat the most recently reported
//!   blocks). Stored as offsets from the cumulative ACK so that [`crate::engine::Body`]
//!   keeps its 40 bytes (every packet in flight sits in the engine's slab).
//! - [`RecvBuffer`]: the receiver's out-of-order data as disjoint intervals, and the
//!   recency list that orders its SACK blocks.
//! - [`Scoreboard`]: the sender's record of what was SACKed above the cumulative ACK, with
//!   RFC 6675's `IsLost`, `SetPipe` and `NextSeg` (DupThresh 3).

use std::collections::{BTreeMap, VecDeque};

/// RFC 6675 `DupThresh`: a segment is lost once this many segments above it were SACKed.
pub const DUP_THRESH: u32 = 3;

/// Most blocks one ACK carries (RFC 2018 §3: 3 with the timestamp option in 40 option bytes).
pub const MAX_BLOCKS: usize = 3;

/// The SACK option of one ACK: up to [`MAX_BLOCKS`] half-open segment ranges
/// `[start, end)` above the cumulative ACK, in the order the receiver put them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SackBlocks {
    n: u8,
    /// Block start minus the cumulative ACK.
    off: [u32; MAX_BLOCKS],
    /// Block length, segments.
    len: [u16; MAX_BLOCKS],
}

// The engine's packet slab holds a `Body` per packet in flight: SACK blocks must not grow it.
const _: () = assert!(std::mem::size_of::<crate::engine::Body>() <= 40);

impl SackBlocks {
    /// Appends `[start, end)` (relative to the cumulative ACK `ack`); false when full, empty,
    /// below `ack`, or too far above it to encode (a receiver window of 2^32 segments or a
    /// block of 2^16: never in our scenarios; the block is then just not reported).
    pub fn push(&mut self, ack: u64, start: u64, end: u64) -> bool {
        let i = self.n as usize;
        if i >= MAX_BLOCKS || start < ack || end <= start {
            return false;
        }
        let (Ok(off), Ok(len)) = (u32::try_from(start - ack), u16::try_from(end - start)) else {
            return false;
        };
        self.off[i] = off;
        self.len[i] = len;
        self.n += 1;
        true
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.n as usize
    }

    /// No blocks.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The blocks as absolute `[start, end)` ranges, for the cumulative ACK `ack` they were
    /// built against.
    pub fn iter(&self, ack: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..self.len()).map(move |i| {
            let s = ack + u64::from(self.off[i]);
            (s, s + u64::from(self.len[i]))
        })
    }
}

/// The receiver's out-of-order segments: disjoint, non-adjacent intervals `[start, end)`
/// above the next expected segment, plus which of them changed most recently.
#[derive(Clone, Debug, Default)]
pub struct RecvBuffer {
    blocks: BTreeMap<u64, u64>,
    /// Segments that triggered recent ACKs, most recent first: each names the block that
    /// holds it (RFC 2018 §4 orders blocks by when they were last changed).
    recent: VecDeque<u64>,
}

impl RecvBuffer {
    /// True if `seq` is buffered.
    pub fn contains(&self, seq: u64) -> bool {
        self.block_of(seq).is_some()
    }

    /// The block holding `seq`.
    fn block_of(&self, seq: u64) -> Option<(u64, u64)> {
        self.blocks
            .range(..=seq)
            .next_back()
            .filter(|(_, &e)| seq < e)
            .map(|(&s, &e)| (s, e))
    }

    /// Delivers `seq` against the next expected segment `next` and returns the new next
    /// expected segment (in-order data pulls the buffered block behind it along). A segment
    /// below `next` or already buffered changes nothing.
    pub fn receive(&mut self, next: u64, seq: u64) -> u64 {
        if seq < next || self.contains(seq) {
            return next;
        }
        if seq == next {
            let n = seq + 1;
            return match self.blocks.remove(&n) {
                Some(e) => e,
                None => n,
            };
        }
        let (mut s, mut e) = (seq, seq + 1);
        if let Some((ps, pe)) = self.blocks.range(..seq).next_back().map(|(&a, &b)| (a, b)) {
            if pe == seq {
                self.blocks.remove(&ps);
                s = ps;
            }
        }
        if let Some(ne) = self.blocks.remove(&e) {
            e = ne;
        }
        self.blocks.insert(s, e);
        self.recent.retain(|&r| r != seq);
        self.recent.push_front(seq);
        self.recent.truncate(2 * MAX_BLOCKS + 2);
        next
    }

    /// The SACK option for an ACK of `next` (RFC 2018 §4): the block holding the segment
    /// that triggered it first (when that segment is buffered out of order), then the most
    /// recently changed other blocks, at most [`MAX_BLOCKS`], none repeated.
    pub fn sack(&mut self, next: u64, trigger: u64) -> SackBlocks {
        self.recent.retain(|&r| r >= next);
        let mut out = SackBlocks::default();
        let mut seen: [(u64, u64); MAX_BLOCKS] = [(0, 0); MAX_BLOCKS];
        let first = (trigger >= next).then_some(trigger);
        for key in first.into_iter().chain(self.recent.iter().copied()) {
            if out.len() == MAX_BLOCKS {
                break;
            }
            let Some(b) = self.block_of(key) else {
                continue;
            };
            if seen[..out.len()].contains(&b) {
                continue;
            }
            seen[out.len()] = b;
            out.push(next, b.0, b.1);
        }
        out
    }

    /// Number of disjoint buffered blocks.
    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }
}

/// The sender's SACK scoreboard: one flag per segment from the cumulative ACK up.
#[derive(Clone, Debug, Default)]
pub struct Scoreboard {
    una: u64,
    sacked: VecDeque<bool>,
    count: u64,
}

impl Scoreboard {
    /// Forgets everything below the new cumulative ACK `una`.
    pub fn advance(&mut self, una: u64) {
        while self.una < una {
            if self.sacked.pop_front() == Some(true) {
                self.count -= 1;
            }
            self.una += 1;
        }
    }

    /// Forgets all SACK information (after a timeout, RFC 2018 §8); keeps the base.
    pub fn clear(&mut self) {
        self.sacked.clear();
        self.count = 0;
    }

    /// Marks the ACK's blocks, clipped to `[una, high)` (`high`: one past the highest
    /// segment ever sent, so a block can never SACK what was not sent). Returns how many
    /// segments were newly SACKed.
    pub fn mark(&mut self, ack: u64, blocks: &SackBlocks, high: u64) -> u64 {
        let mut newly = 0;
        for (s, e) in blocks.iter(ack) {
            let (s, e) = (s.max(self.una), e.min(high));
            for seq in s..e {
                let i = (seq - self.una) as usize;
                if self.sacked.len() <= i {
                    self.sacked.resize(i + 1, false);
                }
                if !self.sacked[i] {
                    self.sacked[i] = true;
                    self.count += 1;
                    newly += 1;
                }
            }
        }
        newly
    }

    /// True if `seq` was SACKed.
    pub fn is_sacked(&self, seq: u64) -> bool {
        seq >= self.una
            && self
                .sacked
                .get((seq - self.una) as usize)
                .copied()
                .unwrap_or(false)
    }

    /// Segments SACKed in total.
    pub fn sacked_count(&self) -> u64 {
        self.count
    }

    /// RFC 6675 `IsLost(seq)`: at least [`DUP_THRESH`] segments above `seq` were SACKed.
    pub fn is_lost(&self, seq: u64) -> bool {
        if seq < self.una {
            return false;
        }
        let upto = ((seq - self.una + 1) as usize).min(self.sacked.len());
        let below = self.sacked.iter().take(upto).filter(|&&b| b).count() as u64;
        self.count - below >= u64::from(DUP_THRESH)
    }

    /// RFC 6675 `SetPipe`: segments in `[una, high)` not SACKed count once if not lost and
    /// once more if retransmitted in this recovery (at or below `high_rxt`).
    pub fn pipe(&self, high: u64, high_rxt: Option<u64>) -> u64 {
        let mut above = self.count;
        let mut pipe = 0;
        for seq in self.una..high {
            let i = (seq - self.una) as usize;
            if self.sacked.get(i).copied().unwrap_or(false) {
                above -= 1;
                continue;
            }
            if above < u64::from(DUP_THRESH) {
                pipe += 1;
            }
            if high_rxt.is_some_and(|h| seq <= h) {
                pipe += 1;
            }
        }
        pipe
    }

    /// RFC 6675 `NextSeg` rule (1): the lowest segment above `high_rxt` (or from `una` if
    /// none was retransmitted yet), below `high`, not SACKed and lost.
    pub fn next_lost(&self, high: u64, high_rxt: Option<u64>) -> Option<u64> {
        let from = high_rxt.map_or(self.una, |h| (h + 1).max(self.una));
        let mut above = self.count;
        for seq in self.una..high {
            let i = (seq - self.una) as usize;
            let sacked = self.sacked.get(i).copied().unwrap_or(false);
            if sacked {
                above -= 1;
                continue;
            }
            if above < u64::from(DUP_THRESH) {
                // IsLost only falls as seq rises: nothing higher is lost either.
                return None;
            }
            if seq >= from {
                return Some(seq);
            }
        }
        None
    }

    /// RFC 6675 `NextSeg` rule (3): the lowest segment above `high_rxt`, below both `high`
    /// and the highest SACKed segment (3.b), not SACKed (sent when no lost segment and no new
    /// data may go). Without (3.b) a receiver-window-limited sender resent the segments
    /// still in flight above the last SACK (`tests/tcp.rs`).
    pub fn next_unsacked(&self, high: u64, high_rxt: Option<u64>) -> Option<u64> {
        let from = high_rxt.map_or(self.una, |h| (h + 1).max(self.una));
        let top = self.una + self.sacked.iter().rposition(|&b| b)? as u64;
        (from..high.min(top)).find(|&s| !self.is_sacked(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(b: &SackBlocks, ack: u64) -> Vec<(u64, u64)> {
        b.iter(ack).collect()
    }

    #[test]
    fn receiver_orders_blocks_most_recent_first() {
        let mut r = RecvBuffer::default();
        let mut next = 0;
        for seq in 0..3 {
            next = r.receive(next, seq);
        }
        assert_eq!(next, 3);
        // 3 lost; 4, 5 arrive; 7 lost; 8 arrives; 10 arrives; then 6.
        for seq in [4, 5] {
            next = r.receive(next, seq);
        }
        assert_eq!(blocks(&r.sack(next, 5), next), vec![(4, 6)]);
        next = r.receive(next, 8);
        assert_eq!(blocks(&r.sack(next, 8), next), vec![(8, 9), (4, 6)]);
        next = r.receive(next, 10);
        assert_eq!(
            blocks(&r.sack(next, 10), next),
            vec![(10, 11), (8, 9), (4, 6)]
        );
        // 6 joins 4-5: that block is now the most recent and comes first.
        next = r.receive(next, 6);
        assert_eq!(
            blocks(&r.sack(next, 6), next),
            vec![(4, 7), (10, 11), (8, 9)]
        );
        // 12: four blocks exist, three are reported (4-7 was changed least recently).
        next = r.receive(next, 12);
        assert_eq!(r.block_count(), 4);
        assert_eq!(
            blocks(&r.sack(next, 12), next),
            vec![(12, 13), (4, 7), (10, 11)]
        );
        // The hole at 3 fills: 4-7 is delivered with it.
        next = r.receive(next, 3);
        assert_eq!(next, 7);
        assert_eq!(
            blocks(&r.sack(next, 3), next),
            vec![(12, 13), (10, 11), (8, 9)]
        );
        // Duplicates change nothing.
        assert_eq!(r.receive(next, 10), next);
        assert_eq!(r.receive(next, 2), next);
    }

    #[test]
    fn scoreboard_is_lost_pipe_and_next_seg() {
        let mut b = Scoreboard::default();
        // 10 segments out (0..10); 0 and 4 lost; 1-3 and 5-9 SACKed.
        let mut o = SackBlocks::default();
        assert!(o.push(0, 5, 10));
        assert!(o.push(0, 1, 4));
        assert_eq!(b.mark(0, &o, 10), 8);
        assert!(b.is_lost(0) && b.is_lost(4) && !b.is_lost(9));
        assert_eq!(b.pipe(10, None), 0);
        assert_eq!(b.next_lost(10, None), Some(0));
        assert_eq!(b.next_lost(10, Some(0)), Some(4));
        assert_eq!(b.next_lost(10, Some(4)), None);
        // Both retransmitted: each counts once in the pipe.
        assert_eq!(b.pipe(10, Some(4)), 2);
        // Only two SACKed above 8 when 8 is not SACKed: not lost.
        let mut c = Scoreboard::default();
        let mut o = SackBlocks::default();
        o.push(0, 9, 11);
        c.mark(0, &o, 11);
        assert!(!c.is_lost(8) && !c.is_lost(0));
        assert_eq!(c.pipe(11, None), 9);
        assert_eq!(c.next_unsacked(11, Some(3)), Some(4));
        assert_eq!(c.next_unsacked(11, Some(8)), None, "nothing SACKed above 9");
        // Blocks beyond what was sent are ignored; advancing drops the bottom.
        let mut o = SackBlocks::default();
        o.push(0, 20, 30);
        assert_eq!(c.mark(0, &o, 11), 0);
        c.advance(10);
        assert_eq!(c.sacked_count(), 1);
        assert!(c.is_sacked(10) && !c.is_sacked(9));
    }

    #[test]
    fn blocks_that_do_not_fit_are_not_reported() {
        let mut o = SackBlocks::default();
        assert!(!o.push(10, 5, 8), "below the ACK");
        assert!(!o.push(10, 12, 12), "empty");
        assert!(!o.push(0, 1 << 40, (1 << 40) + 1), "offset beyond u32");
        assert!(!o.push(0, 1, 1 + (1 << 17)), "length beyond u16");
        for i in 0..3 {
            assert!(o.push(0, 10 * i + 1, 10 * i + 2));
        }
        assert!(!o.push(0, 50, 51), "a fourth block");
        assert_eq!(o.len(), 3);
    }
}
