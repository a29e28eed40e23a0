//! Each flow of a scenario as simulator agents: its sources, receivers and their start and
//! stop commands, added in the flows' order (the schedule finds a flow's source by it).

use super::{at, make_controller};
use crate::agents::cbr::{DatagramSink, DatagramSource, OnOff};
use crate::agents::layered::{LayeredReceiver, LayeredSender, Layering};
use crate::agents::linux_tcp::{LinuxCc, LinuxTcpSender, LINUX_HEADER};
use crate::agents::tcp::{TcpSender, TcpSink, Variant};
use crate::agents::tfmcc::{TfmccReceiverAgent, TfmccSenderAgent};
use crate::agents::tfrc::{TfrcReceiverAgent, TfrcSenderAgent, TfrcSenderOptions};
use crate::engine::{Command, Dest, Sim};
use crate::metrics::MonKind;
use crate::scenario::Flow;
use crate::Error;
use congestion::{LayerInfo, SessionInfo, Time};
use netmodel::rng::Rng;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::time::Duration;

/// Adds flows to a simulation whose network is built.
pub(super) struct FlowBuilder<'a> {
    sim: &'a mut Sim,
    nodes: &'a HashMap<&'a str, usize>,
    seed: u64,
    /// Start-time jitter: one stream drawn by every flow in turn.
    rng: Rng,
}

impl<'a> FlowBuilder<'a> {
    pub(super) fn new(sim: &'a mut Sim, nodes: &'a HashMap<&'a str, usize>, seed: u64) -> Self {
        FlowBuilder {
            sim,
            nodes,
            seed,
            rng: Rng::derive(seed, 0x5ce7),
        }
    }

    /// `s` seconds plus a uniform draw in [0, `j`) (none when `j` is 0).
    fn start_of(&mut self, s: f64, j: f64) -> Time {
        at(s + if j > 0.0 {
            self.rng.uniform(0.0, j)
        } else {
            0.0
        })
    }

    /// Agent `id` starts at `start` and, when `stop_s` is given, stops then.
    fn run_between(&mut self, id: usize, start: Time, stop_s: Option<f64>) {
        self.sim.net.schedule_command(start, id, Command::Start);
        if let Some(t) = stop_s {
            self.sim.net.schedule_command(at(t), id, Command::Stop);
        }
    }

    /// A unicast flow's sink and source start together at `t0` (the sink first); the source
    /// stops at `stop_s`.
    fn start_pair(&mut self, t0: Time, sink: usize, source: usize, stop_s: Option<f64>) {
        self.sim.net.schedule_command(t0, sink, Command::Start);
        self.run_between(source, t0, stop_s);
    }

    /// The agents of flow `fi`, `f`.
    pub(super) fn add(&mut self, fi: usize, f: &Flow) -> Result<(), Error> {
        match f {
            Flow::Layered { .. } => self.layered(fi, f),
            Flow::Tfmcc { .. } => self.tfmcc(fi, f),
            Flow::Aer { .. } => self.aer(fi, f),
            Flow::Tfrc { .. } => self.tfrc(fi, f),
            Flow::Web { .. } => self.web(fi, f),
            Flow::Tcp { .. } => self.tcp(fi, f),
            Flow::TfrcPcc { .. } => self.tfrc_pcc(fi, f),
            Flow::Cbr { .. } | Flow::Onoff { .. } => self.datagrams(fi, f),
        }
    }

    /// A layered session: its sender and receivers (RLC, FLID-DL and WEBRC with their own
    /// sender behaviour).
    fn layered(&mut self, fi: usize, f: &Flow) -> Result<(), Error> {
        let Flow::Layered {
            name,
            protocol,
            from,
            layers,
            packet_size,
            bunch,
            adapt_interval_s,
            start_s,
            start_jitter_s,
            stop_s,
            burst_jitter,
            receivers,
        } = f
        else {
            unreachable!("FlowBuilder::add dispatches on the variant")
        };
        let flow = fi as u32;
        let src = self.nodes[from.as_str()];
        let rates = layers.rates()?;
        let info = SessionInfo {
            session_id: fi as u32 + 1,
            announce_seq: 0,
            sender: Ipv4Addr::new(10, 0, 0, (fi % 250) as u8 + 1),
            layers: rates
                .iter()
                .enumerate()
                .map(|(k, r)| LayerInfo {
                    rate_bps: (r * 1000.0).round() as u64,
                    group: Ipv4Addr::new(239, 1, fi as u8, k as u8),
                    port: 5000 + k as u16,
                })
                .collect(),
            packet_size: (*packet_size).min(65_535) as u16,
            bunch_len: *bunch,
            adapt_interval: Duration::from_secs_f64(*adapt_interval_s),
            announce_interval: Duration::from_secs_f64(*adapt_interval_s),
            tracks: Vec::new(),
            feedback_port: None,
            retransmission: false,
        };
        // RLC, FLID-DL and WEBRC need their own sender behaviour (agents::layered).
        let layering = Layering::for_protocol(protocol, &info);
        let groups: Vec<usize> = (0..layering.groups(rates.len()))
            .map(|_| self.sim.net.add_group(src))
            .collect();
        // No link rate for the schedule: the simulated access link serialises what the
        // tree actually forwards (pruned layers never occupy it).
        let link_bps = 0.0;
        let mut sender = LayeredSender::new(src, flow, groups.clone(), info.clone(), link_bps)?
            .with_layering(layering.clone())?;
        if *burst_jitter != 0.0 {
            // Its own stream: files without jitter draw exactly as before.
            sender = sender
                .with_burst_jitter(*burst_jitter, Rng::derive(self.seed, 0xb_0000 + fi as u64))?;
        }
        let s_id = self.sim.add_agent(src, Box::new(sender));
        let t0 = self.start_of(*start_s, *start_jitter_s);
        self.run_between(s_id, t0, *stop_s);
        let mut ladder = vec![0.0];
        for r in &rates {
            ladder.push(ladder.last().copied().unwrap_or(0.0) + r);
        }
        for (r, rname) in receivers
            .iter()
            .flat_map(|r| r.names().into_iter().map(move |n| (r, n)))
        {
            let proto = r.protocol.as_deref().unwrap_or(protocol);
            let ctl = make_controller(proto)?;
            let mon = self.sim.net.monitors.add(
                format!("{name}/{rname}"),
                name.clone(),
                MonKind::Layered,
                ladder.clone(),
            );
            let rn = self.nodes[r.at.as_str()];
            let rcv = LayeredReceiver::new(rn, ctl, info.clone(), groups.clone(), mon, t0)
                .with_layering(layering.clone())
                .with_delivered_level(crate::agents::alma::budget_scale(protocol).is_some());
            let id = self.sim.add_agent(rn, Box::new(rcv));
            let t = self.start_of(r.start_s, r.start_jitter_s).max(t0);
            self.run_between(id, t, r.stop_s);
        }
        Ok(())
    }

    /// A TFMCC session: its sender and receivers (each with a receiver id).
    fn tfmcc(&mut self, fi: usize, f: &Flow) -> Result<(), Error> {
        let Flow::Tfmcc {
            name,
            from,
            packet_size,
            start_s,
            start_jitter_s,
            stop_s,
            receivers,
        } = f
        else {
            unreachable!("FlowBuilder::add dispatches on the variant")
        };
        let flow = fi as u32;
        let src = self.nodes[from.as_str()];
        let g = self.sim.net.add_group(src);
        let cfg = congestion::tfmcc::TfmccConfig {
            packet_size: *packet_size,
            seed: self.seed ^ (0x7f3c + fi as u64),
            ..Default::default()
        };
        let smon = self.sim.net.monitors.add(
            format!("{name}/sender"),
            name.clone(),
            MonKind::Tfmcc,
            Vec::new(),
        );
        let s_id = self.sim.agents.len();
        let snd = TfmccSenderAgent::new(src, flow, g, cfg, smon);
        self.sim.add_agent(src, Box::new(snd));
        let t0 = self.start_of(*start_s, *start_jitter_s);
        self.run_between(s_id, t0, *stop_s);
        self.sim.net.monitors.started(smon, t0);
        let info = SessionInfo {
            packet_size: (*packet_size).min(65_535) as u16,
            ..SessionInfo::equal_layers(1, 1, Ipv4Addr::new(239, 2, fi as u8, 0), 6000)
        };
        let (cfg, info) = (std::sync::Arc::new(cfg), std::sync::Arc::new(info));
        let mut rid = 0u32;
        for (r, rname) in receivers
            .iter()
            .flat_map(|r| r.names().into_iter().map(move |n| (r, n)))
        {
            rid += 1;
            let mon = self.sim.net.monitors.add(
                format!("{name}/{rname}"),
                name.clone(),
                MonKind::Tfmcc,
                vec![0.0, 0.0],
            );
            self.sim.net.monitors.list[mon].rid = Some(rid);
            let rn = self.nodes[r.at.as_str()];
            let agent = TfmccReceiverAgent::new(
                rn,
                cfg.clone(),
                rid,
                info.clone(),
                g,
                (src, s_id),
                flow,
                mon,
            )
            .crash_on_stop(r.crash);
            let id = self.sim.add_agent(rn, Box::new(agent));
            let t = self.start_of(r.start_s, r.start_jitter_s).max(t0);
            self.run_between(id, t, r.stop_s);
        }
        Ok(())
    }

    /// An AER/NCA or PGMCC session, installed by its agents module.
    fn aer(&mut self, fi: usize, f: &Flow) -> Result<(), Error> {
        let Flow::Aer {
            name,
            from,
            protocol,
            packet_size,
            repair_servers,
            start_s,
            start_jitter_s,
            stop_s,
            receivers,
        } = f
        else {
            unreachable!("FlowBuilder::add dispatches on the variant")
        };
        let flow = fi as u32;
        let t0 = self.start_of(*start_s, *start_jitter_s);
        let mut rcv = Vec::new();
        for (r, rname) in receivers
            .iter()
            .flat_map(|r| r.names().into_iter().map(move |n| (r, n)))
        {
            rcv.push((
                rname,
                self.nodes[r.at.as_str()],
                self.start_of(r.start_s, r.start_jitter_s),
                r.stop_s.map(at),
            ));
        }
        let spec = crate::agents::aer::SessionSpec {
            name,
            flow,
            source: self.nodes[from.as_str()],
            repair_servers: repair_servers
                .iter()
                .map(|n| self.nodes[n.as_str()])
                .collect(),
            receivers: rcv,
            start: t0,
            stop: stop_s.map(at),
            cfg: crate::agents::aer::AerConfig {
                packet_size: *packet_size,
                ..Default::default()
            },
            seed: self.seed,
        };
        if protocol == "pgmcc" {
            crate::agents::pgmcc::install(self.sim, &spec);
        } else {
            crate::agents::aer::install(self.sim, &spec);
        }
        Ok(())
    }

    /// A unicast TFRC flow: sender and receiver.
    fn tfrc(&mut self, fi: usize, f: &Flow) -> Result<(), Error> {
        let Flow::Tfrc {
            name,
            from,
            to,
            packet_size,
            periodic_loss,
            discounting,
            start_s,
            start_jitter_s,
            stop_s,
        } = f
        else {
            unreachable!("FlowBuilder::add dispatches on the variant")
        };
        let flow = fi as u32;
        let (a, b) = (self.nodes[from.as_str()], self.nodes[to.as_str()]);
        let mon = self
            .sim
            .net
            .monitors
            .add(name.clone(), name.clone(), MonKind::Tfrc, Vec::new());
        let s_id = self.sim.agents.len();
        let r_id = s_id + 1;
        let snd = TfrcSenderAgent::new(
            a,
            Dest::Agent(b, r_id),
            flow,
            *packet_size,
            TfrcSenderOptions {
                periodic_loss: periodic_loss.clone(),
                log: Some(mon),
                ..TfrcSenderOptions::default()
            },
        );
        let s_got = self.sim.add_agent(a, Box::new(snd));
        let mut cfg = baselines::tfrc::TfrcReceiverConfig::default();
        cfg.ali.discounting = *discounting;
        let r_got = self.sim.add_agent(
            b,
            Box::new(TfrcReceiverAgent::new(b, (a, s_id), flow, mon, cfg)),
        );
        debug_assert_eq!((s_got, r_got), (s_id, r_id));
        let t0 = self.start_of(*start_s, *start_jitter_s);
        self.start_pair(t0, r_id, s_id, *stop_s);
        Ok(())
    }

    /// Web background traffic: one agent for all its virtual servers and clients.
    fn web(&mut self, fi: usize, f: &Flow) -> Result<(), Error> {
        let Flow::Web {
            name,
            servers,
            clients,
            virtual_servers,
            virtual_clients,
            sessions,
            pages,
            mean_session_gap_s,
            mean_think_s,
            mean_object_packets,
            shape,
            packet_size,
            max_cwnd,
            start_s,
            stop_s,
        } = f
        else {
            unreachable!("FlowBuilder::add dispatches on the variant")
        };
        let flow = fi as u32;
        let mon = self
            .sim
            .net
            .monitors
            .add(name.clone(), name.clone(), MonKind::Tcp, Vec::new());
        let cfg = crate::agents::web::WebConfig {
            server_nodes: servers.iter().map(|n| self.nodes[n.as_str()]).collect(),
            client_nodes: clients.iter().map(|n| self.nodes[n.as_str()]).collect(),
            servers: *virtual_servers,
            clients: *virtual_clients,
            sessions: *sessions,
            pages: *pages,
            mean_session_gap_s: *mean_session_gap_s,
            mean_think_s: *mean_think_s,
            mean_object_packets: *mean_object_packets,
            shape: *shape,
            packet_size: *packet_size,
            max_cwnd: *max_cwnd,
            // Above every scenario flow index; one block of 2^24 ids per flow.
            flow_base: 0x4000_0000u32.wrapping_add(flow << 24),
        };
        let node0 = cfg.server_nodes[0];
        let agent = crate::agents::web::WebBackground::new(
            cfg,
            mon,
            Rng::derive(self.seed, 0x5000 + fi as u64),
        );
        let id = self.sim.add_agent(node0, Box::new(agent));
        self.run_between(id, at(*start_s), *stop_s);
        Ok(())
    }

    /// A TCP flow: a Linux CUBIC/BBR sender, or an ns-2 style Reno/NewReno/SACK/ACC one, and
    /// its sink.
    fn tcp(&mut self, fi: usize, f: &Flow) -> Result<(), Error> {
        let Flow::Tcp {
            name,
            from,
            to,
            variant,
            packet_size,
            max_cwnd,
            header_bytes,
            bug_fix,
            ack_every_segment,
            start_s,
            start_jitter_s,
            stop_s,
        } = f
        else {
            unreachable!("FlowBuilder::add dispatches on the variant")
        };
        let flow = fi as u32;
        let (a, b) = (self.nodes[from.as_str()], self.nodes[to.as_str()]);
        let mon = self
            .sim
            .net
            .monitors
            .add(name.clone(), name.clone(), MonKind::Tcp, Vec::new());
        let sink_id = self.sim.agents.len() + 1;
        if matches!(variant.as_str(), "cubic" | "bbr") {
            let cc = if variant == "bbr" {
                LinuxCc::bbr(Rng::derive(self.seed, 0xbb00 + fi as u64).next_u64())
            } else {
                LinuxCc::cubic(true)
            };
            let snd = LinuxTcpSender::new(a, Dest::Agent(b, sink_id), flow, *packet_size, cc);
            let s_id = self.sim.add_agent(a, Box::new(snd));
            let sink = TcpSink::new(b, mon)
                .with_header(LINUX_HEADER)
                .with_sack(true)
                .with_delayed_ack(!ack_every_segment);
            let k_id = self.sim.add_agent(b, Box::new(sink));
            debug_assert_eq!(k_id, sink_id);
            let t0 = self.start_of(*start_s, *start_jitter_s);
            self.start_pair(t0, k_id, s_id, *stop_s);
            return Ok(());
        }
        let v = match variant.as_str() {
            "newreno" => Variant::NewReno,
            "sack" => Variant::Sack,
            _ => Variant::Reno,
        };
        let snd = TcpSender::new(a, Dest::Agent(b, sink_id), flow, *packet_size, v, *max_cwnd)
            .with_header(*header_bytes)
            .with_bug_fix(*bug_fix);
        // ACC TCP (agents::acc): a Reno sender whose segments carry its state.
        let snd = if variant == "acc-reno" {
            snd.with_acc()
        } else {
            snd
        };
        let s_id = self.sim.add_agent(a, Box::new(snd));
        let k_id = self.sim.add_agent(
            b,
            Box::new(
                TcpSink::new(b, mon)
                    .with_header(*header_bytes)
                    .with_sack(v == Variant::Sack),
            ),
        );
        debug_assert_eq!(k_id, sink_id);
        let t0 = self.start_of(*start_s, *start_jitter_s);
        self.start_pair(t0, k_id, s_id, *stop_s);
        Ok(())
    }

    /// A unicast TFRC flow, with or without PCC: sender and receiver.
    fn tfrc_pcc(&mut self, fi: usize, f: &Flow) -> Result<(), Error> {
        let Flow::TfrcPcc {
            name,
            from,
            to,
            packet_size,
            pcc,
            start_s,
            start_jitter_s,
            stop_s,
        } = f
        else {
            unreachable!("FlowBuilder::add dispatches on the variant")
        };
        let flow = fi as u32;
        let (a, b) = (self.nodes[from.as_str()], self.nodes[to.as_str()]);
        let mon = self.sim.net.monitors.add(
            format!("{name}/receiver"),
            name.clone(),
            MonKind::Cbr,
            Vec::new(),
        );
        let smon = self.sim.net.monitors.add(
            format!("{name}/sender"),
            name.clone(),
            MonKind::Cbr,
            Vec::new(),
        );
        let s_id = self.sim.agents.len();
        let pcc_def = pcc;
        let pcc = pcc.as_ref().map(|p| {
            (
                p.rate_kbps * 1000.0 / 8.0,
                baselines::pcc::PccConfig {
                    t: Duration::from_secs_f64(p.t_s),
                    t_protected: Duration::from_secs_f64(p.protected_s),
                    seed: Rng::derive(self.seed, 0x9cc0 + fi as u64).next_u64(),
                    ..baselines::pcc::PccConfig::default()
                },
            )
        });
        let snd = TfrcSenderAgent::new(
            a,
            Dest::Agent(b, s_id + 1),
            flow,
            *packet_size,
            TfrcSenderOptions {
                pcc,
                sent: Some(smon),
                ..TfrcSenderOptions::default()
            },
        );
        let id = self.sim.add_agent(a, Box::new(snd));
        debug_assert_eq!(id, s_id);
        let mut cfg = baselines::tfrc::TfrcReceiverConfig::default();
        cfg.ali.n = pcc_def.as_ref().map_or(8, |p| p.ali_n).max(1);
        let rcv = TfrcReceiverAgent::new(b, (a, s_id), flow, mon, cfg);
        let k_id = self.sim.add_agent(b, Box::new(rcv));
        let t0 = self.start_of(*start_s, *start_jitter_s);
        self.start_pair(t0, k_id, s_id, *stop_s);
        Ok(())
    }

    /// A constant-rate or on/off datagram flow: source and sink.
    fn datagrams(&mut self, fi: usize, f: &Flow) -> Result<(), Error> {
        let (Flow::Cbr {
            name,
            from,
            to,
            rate_kbps,
            packet_size,
            start_s,
            start_jitter_s,
            stop_s,
        }
        | Flow::Onoff {
            name,
            from,
            to,
            rate_kbps,
            packet_size,
            start_s,
            start_jitter_s,
            stop_s,
            ..
        }) = f
        else {
            unreachable!("FlowBuilder::add dispatches on the variant")
        };
        let flow = fi as u32;
        let onoff = match f {
            Flow::Onoff {
                mean_on_s,
                mean_off_s,
                shape,
                ..
            } => Some(OnOff {
                mean_on_s: *mean_on_s,
                mean_off_s: *mean_off_s,
                shape: *shape,
            }),
            _ => None,
        };
        let kind = if onoff.is_some() {
            MonKind::Onoff
        } else {
            MonKind::Cbr
        };
        let (a, b) = (self.nodes[from.as_str()], self.nodes[to.as_str()]);
        let mon = self
            .sim
            .net
            .monitors
            .add(name.clone(), name.clone(), kind, Vec::new());
        let sink_id = self.sim.agents.len() + 1;
        let src = DatagramSource::new(
            a,
            Dest::Agent(b, sink_id),
            flow,
            *packet_size,
            (rate_kbps * 1000.0).round() as u64,
            onoff,
            Rng::derive(self.seed, 0x3000 + fi as u64),
        );
        let s_id = self.sim.add_agent(a, Box::new(src));
        let k_id = self.sim.add_agent(b, Box::new(DatagramSink::new(mon)));
        debug_assert_eq!(k_id, sink_id);
        let t0 = self.start_of(*start_s, *start_jitter_s);
        self.start_pair(t0, k_id, s_id, *stop_s);
        Ok(())
    }
}
