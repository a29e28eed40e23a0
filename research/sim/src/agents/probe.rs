//! A link monitor, as the active-networks thesis uses it (`active-networks.md` §2.1: the U1
//! queue monitor is sampled every 0.01 s): samples one link's queue length every `every`
//! and records, per time-series interval, the queue samples and the packets the link sent and
//! dropped (overflow, early AQM drops and wire loss), so `mean_queue_packets`, `loss_ratio`
//! (= the link's drop ratio) and `throughput_kbps` (= the link's output) apply to it.

use crate::engine::{Agent, AgentId, Command, LinkId, Net};
use crate::metrics::MonId;
use congestion::Time;

/// Samples one link.
pub struct QueueProbe {
    link: LinkId,
    mon: MonId,
    every: Time,
    running: bool,
    sent: u64,
    sent_bytes: u64,
    dropped: u64,
}

impl QueueProbe {
    /// Probes `link` into monitor `mon` every `every` (at least 1 µs).
    pub fn new(link: LinkId, mon: MonId, every: Time) -> Self {
        QueueProbe {
            link,
            mon,
            every: Time(every.0.max(1_000)),
            running: false,
            sent: 0,
            sent_bytes: 0,
            dropped: 0,
        }
    }

    fn sample(&mut self, net: &mut Net) {
        let now = net.now();
        let Some(l) = net.links.get(self.link) else {
            return;
        };
        let q = l.queue_len() as u64;
        // Queueing delay a packet arriving now would wait (queued bytes at the link rate plus
        // the rest of the packet in service): without the residual, 1000-B packets at
        // 300 kbit/s quantise the delay in 26.7-ms steps, coarser than DLM's d1..d2.
        let qd_ms = 1e3 * l.waiting_time_s(now);
        let sent = l.sent_packets;
        let bytes = l.sent_bytes;
        let dropped = l.drops_overflow + l.drops_early + l.drops_wire + l.drops_filter;
        let (ds, db, dd) = (
            sent - self.sent.min(sent),
            bytes - self.sent_bytes.min(bytes),
            dropped - self.dropped.min(dropped),
        );
        (self.sent, self.sent_bytes, self.dropped) = (sent, bytes, dropped);
        net.monitors.queue_sample(self.mon, now, q);
        net.monitors.list[self.mon]
            .queue_delay_ms
            .push((now.as_secs_f64(), qd_ms));
        net.monitors.link_traffic(self.mon, now, ds, db);
        if dd > 0 {
            net.monitors.lost(self.mon, now, dd);
        }
    }
}

impl Agent for QueueProbe {
    fn command(&mut self, net: &mut Net, me: AgentId, cmd: Command) {
        if let Command::Start = cmd {
            if !self.running {
                self.running = true;
                net.monitors.started(self.mon, net.now());
                let at = net.now() + std::time::Duration::from_nanos(self.every.0);
                net.set_timer(me, at, 0);
            }
        }
    }

    fn on_packet(&mut self, _net: &mut Net, _me: AgentId, _pkt: &crate::engine::Packet) {}

    fn on_timer(&mut self, net: &mut Net, me: AgentId, _token: u64) {
        if !self.running {
            return;
        }
        self.sample(net);
        let at = net.now() + std::time::Duration::from_nanos(self.every.0);
        net.set_timer(me, at, 0);
    }
}
