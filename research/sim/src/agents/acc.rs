//! ACC TCP (Active Congestion Control, Faber 1998), the router side: `active-networks.md`
//! §1.4. Sim-only by design (§4: a router rewriting a third party's window breaks end-to-end
//! semantics).
//!
//! Every ACC TCP segment carries the sender's congestion state ([`AccState`]: its window when
//! it sent the segment and an *epoch*, the number of window reductions it has made). When an
//! active router's queue (RED, REM or drop-tail) drops such a segment, the router does at once
//! what the sender would do one RTT later on detecting the loss:
//!
//! 1. it computes the sender's new window, `w_new = max(⌊cwnd / 2⌋, 2)` (Reno's halving, with
//!    Reno's floor of 2 as in `agents::tcp`);
//! 2. it installs a per-flow filter that discards the segments of that flow, still of the old
//!    epoch, with sequence number `≥ seq + w_new`: exactly the segments a sender that had
//!    halved its window at the lost segment would not have sent ("one window of traffic");
//! 3. it sends the sender an [`AccNotify`] (1000 B, as the ns-2 `Active` packet of the thesis'
//!    trace and Table 4.10) carrying the lost sequence number, `w_new` and where the filter
//!    starts.
//!
//! The sender (`agents::tcp`, variant `acc-reno`) adopts `w_new` as cwnd and ssthresh,
//! retransmits the lost segment, rewinds `snd_nxt` to the filter's start (the filtered segments
//! must be sent again, under the new window) and bumps its epoch. Segments of the new epoch
//! pass the filter and clear it. Choices where the thesis is silent are listed in
//! `docs/protocols/active-networks.md`.

use crate::engine::{Body, Dest, NodeId, Packet};
use std::collections::BTreeMap;

/// The congestion state an ACC TCP segment carries (the thesis' "4–8 bytes": a 16-bit
/// window and a 16-bit epoch would do; the simulator keeps them unpacked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccState {
    /// The sender's congestion window when it sent the segment, segments.
    pub cwnd: u32,
    /// Window reductions the sender had made so far (router notifications adopted, fast
    /// retransmits and timeouts).
    pub epoch: u32,
}

/// An active router's message to an ACC TCP sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccNotify {
    /// The dropped segment.
    pub seq: u64,
    /// The window the sender must adopt, segments.
    pub wnd: u32,
    /// The first sequence number the router's filter discards (`seq + wnd`).
    pub filter_from: u64,
    /// The sender epoch the router reacted to.
    pub epoch: u32,
}

/// Size of the router's notification on the wire, bytes (ns-2's `Active` packet of the
/// thesis: 1000 B; 40 would do).
pub const NOTIFY_SIZE: u32 = 1000;

#[derive(Clone, Copy, Debug)]
struct Filter {
    epoch: u32,
    from: u64,
}

/// The active part of one router output queue.
#[derive(Clone, Debug, Default)]
pub struct AccRouter {
    filters: BTreeMap<u32, Filter>,
    /// Notifications sent.
    pub notifications: u64,
    /// Segments the filters discarded.
    pub filtered: u64,
}

impl AccRouter {
    /// A router with no filters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether an arriving packet may go on to the queue; `false` = the flow's filter discards
    /// it. A segment of a newer epoch than the filter's shows the sender has adopted the new
    /// window: the filter is removed.
    pub fn admit(&mut self, pkt: &Packet) -> bool {
        let Body::AccTcp { seq, state } = pkt.body else {
            return true;
        };
        let Some(f) = self.filters.get(&pkt.flow).copied() else {
            return true;
        };
        if state.epoch > f.epoch {
            self.filters.remove(&pkt.flow);
            return true;
        }
        if state.epoch == f.epoch && seq >= f.from {
            self.filtered += 1;
            return false;
        }
        true
    }

    /// The queue dropped `pkt`: for an ACC segment of an epoch the router has not yet cut,
    /// install the filter and return the notification to send from `router`.
    pub fn on_drop(&mut self, pkt: &Packet, router: NodeId) -> Option<Packet> {
        let Body::AccTcp { seq, state } = pkt.body else {
            return None;
        };
        if let Some(f) = self.filters.get(&pkt.flow) {
            if f.epoch >= state.epoch {
                // This window was already cut (one reduction per window, as Reno).
                return None;
            }
        }
        let wnd = (state.cwnd / 2).max(2);
        let from = seq + u64::from(wnd);
        self.filters.insert(
            pkt.flow,
            Filter {
                epoch: state.epoch,
                from,
            },
        );
        self.notifications += 1;
        Some(Packet {
            src: router,
            src_agent: pkt.src_agent,
            dst: Dest::Agent(pkt.src, pkt.src_agent),
            size: NOTIFY_SIZE,
            flow: pkt.flow,
            sent_at: pkt.sent_at,
            body: Body::AccNotify(AccNotify {
                seq,
                wnd,
                filter_from: from,
                epoch: state.epoch,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use congestion::Time;

    fn seg(flow: u32, seq: u64, cwnd: u32, epoch: u32) -> Packet {
        Packet {
            src: 0,
            src_agent: 7,
            dst: Dest::Agent(3, 8),
            size: 1000,
            flow,
            sent_at: Time::ZERO,
            body: Body::AccTcp {
                seq,
                state: AccState { cwnd, epoch },
            },
        }
    }

    #[test]
    fn drop_halves_the_window_and_filters_one_window() {
        let mut r = AccRouter::new();
        let n = r.on_drop(&seg(1, 100, 20, 0), 5).expect("notification");
        assert_eq!(n.dst, Dest::Agent(0, 7));
        assert_eq!(n.src, 5);
        assert_eq!(n.size, NOTIFY_SIZE);
        let Body::AccNotify(m) = n.body else {
            panic!("not a notification")
        };
        assert_eq!((m.seq, m.wnd, m.filter_from, m.epoch), (100, 10, 110, 0));
        // Old-epoch segments inside the halved window pass, beyond it are discarded.
        assert!(r.admit(&seg(1, 109, 20, 0)));
        assert!(!r.admit(&seg(1, 110, 20, 0)));
        assert!(!r.admit(&seg(1, 119, 20, 0)));
        // Other flows are untouched.
        assert!(r.admit(&seg(2, 119, 20, 0)));
        assert_eq!(r.filtered, 2);
        // A second drop in the same window is not cut again.
        assert!(r.on_drop(&seg(1, 104, 20, 0), 5).is_none());
        // The sender's next epoch clears the filter; its drops are new congestion events.
        assert!(r.admit(&seg(1, 115, 10, 1)));
        assert!(r.admit(&seg(1, 116, 20, 0)));
        let n = r.on_drop(&seg(1, 130, 9, 1), 5).expect("new window");
        let Body::AccNotify(m) = n.body else {
            panic!("not a notification")
        };
        assert_eq!((m.wnd, m.filter_from), (4, 134));
        assert_eq!(r.notifications, 2);
    }

    #[test]
    fn window_floor_and_plain_packets() {
        let mut r = AccRouter::new();
        let n = r.on_drop(&seg(1, 0, 1, 0), 0).expect("notification");
        let Body::AccNotify(m) = n.body else {
            panic!("not a notification")
        };
        assert_eq!(m.wnd, 2);
        let mut plain = seg(1, 5, 1, 0);
        plain.body = Body::Tcp { seq: 5 };
        assert!(r.admit(&plain));
        assert!(r.on_drop(&plain, 0).is_none());
    }
}
