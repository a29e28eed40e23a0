//! Building the simulation of a scenario: nodes, links, agents and the schedule.

use super::{invalid, Flow, ReceiverDef, Scenario};
use crate::agents::cbr::{DatagramSink, DatagramSource, OnOff};
use crate::agents::layered::{LayeredReceiver, LayeredSender, Layering};
use crate::agents::linux_tcp::{LinuxCc, LinuxTcpSender, LINUX_HEADER};
use crate::agents::local_controllers::local_controller;
use crate::agents::probe::QueueProbe;
use crate::agents::tcp::{TcpSender, TcpSink, Variant};
use crate::agents::tfmcc::{TfmccReceiverAgent, TfmccSenderAgent};
use crate::agents::tfrc::{TfrcReceiverAgent, TfrcSenderAgent, TfrcSenderOptions};
use crate::engine::{Command, Dest, LinkChange, LinkSpec, MulticastTiming, Sim};
use crate::metrics::MonKind;
use crate::Error;
use congestion::{LayerInfo, SessionInfo, Time};
use netmodel::rng::Rng;
use netmodel::QdiscConfig;
use std::net::Ipv4Addr;
use std::time::Duration;

impl Scenario {
    /// Builds the simulation for `seed`.
    pub fn build(&self, seed: u64) -> Result<Sim, Error> {
        if let Some(p) = self.missing_protocols().first() {
            return Err(make_controller(p)
                .err()
                .unwrap_or(Error::Scenario(p.clone())));
        }
        let nodes = self.node_index();
        // ALMA sessions make every interface active (agents::alma, the thesis' assumption).
        let alma_flows: Vec<Option<f64>> = self
            .flows
            .iter()
            .map(|f| match f {
                Flow::Layered { protocol, .. } => crate::agents::alma::budget_scale(protocol),
                _ => None,
            })
            .collect();
        // Their cumulative layer rates (bit/s): an active interface never forwards layers its
        // link cannot carry (agents::alma::AlmaQueue::with_capacity).
        let alma_cum_bps: Vec<Option<Vec<f64>>> = self
            .flows
            .iter()
            .zip(&alma_flows)
            .map(|(f, k)| match (f, k) {
                (Flow::Layered { layers, .. }, Some(_)) => layers.rates().ok().map(|r| {
                    r.iter()
                        .scan(0.0, |acc, x| {
                            *acc += x * 1000.0;
                            Some(*acc)
                        })
                        .collect()
                }),
                _ => None,
            })
            .collect();
        let mut specs = Vec::new();
        // Probed link directions: (link index, node, monitor name).
        let mut probes = Vec::new();
        // Links (from → to direction) with an ACC active router.
        let mut acc_links = Vec::new();
        for l in &self.topology.links {
            if l.acc {
                acc_links.push(specs.len());
            }
            if l.monitor_queue {
                probes.push((
                    specs.len(),
                    nodes[l.from.as_str()],
                    format!("queue:{}-{}", l.from, l.to),
                ));
            }
            let (a, b) = (nodes[l.from.as_str()], nodes[l.to.as_str()]);
            let rate = (l.rate_kbps * 1000.0).round() as u64;
            let dirs: &[(usize, usize, &Option<QdiscConfig>, &str, &str)] = if l.duplex {
                &[
                    (a, b, &l.queue, &l.from, &l.to),
                    (b, a, &l.reverse_queue, &l.to, &l.from),
                ]
            } else {
                &[(a, b, &l.queue, &l.from, &l.to)]
            };
            for (i, &(f, t, q, fname, tname)) in dirs.iter().enumerate() {
                let q = q.clone().or_else(|| l.queue.clone()).unwrap_or_default();
                let queue = netmodel::build_seeded(&q, rate, seed ^ (0x5100 + specs.len() as u64))
                    .map_err(|e| Error::Scenario(e.to_string()))?;
                let queue = if alma_flows.iter().any(Option::is_some) {
                    Box::new(
                        crate::agents::alma::AlmaQueue::new(
                            queue,
                            crate::agents::alma::buffer_packets(&q, rate),
                            alma_flows.clone(),
                            crate::agents::alma::NodeConfig::default(),
                        )
                        .with_capacity(rate as f64, alma_cum_bps.clone()),
                    )
                } else {
                    queue
                };
                let _ = i;
                specs.push(LinkSpec {
                    name: format!("{fname}-{tname}"),
                    from: f,
                    to: t,
                    rate_bps: rate,
                    delay: Time::from_secs_f64(l.delay_ms / 1000.0),
                    loss: l.loss,
                    jitter: Time::from_secs_f64(l.jitter_ms / 1000.0),
                    queue,
                });
            }
        }
        let mut sim = Sim::new(self.topology.nodes.len(), specs, seed);
        if !acc_links.is_empty() {
            sim.net.acc = vec![None; sim.net.links.len()];
            for l in acc_links {
                sim.net.acc[l] = Some(crate::agents::acc::AccRouter::new());
            }
        }
        let mc = &self.topology.multicast;
        let join = Time::from_secs_f64(mc.join_latency_ms / 1000.0);
        sim.net.multicast = MulticastTiming {
            join_latency: join,
            leave_latency: if mc.fast_leave {
                join
            } else {
                Time::from_secs_f64(mc.leave_latency_ms / 1000.0)
            },
        };
        sim.net.monitors.interval = self.interval_s;
        sim.net.flow_drops = vec![0; self.flows.len()];
        sim.net.flow_sent = vec![0; self.flows.len()];
        sim.net.flow_retx = vec![0; self.flows.len()];
        if self.flows.iter().any(|f| matches!(f, Flow::Aer { .. })) {
            // Per-link shares (AN bandwidth usage, trace-style loss ratio: agents::aer).
            for l in &mut sim.net.links {
                l.flow_sent = vec![0; self.flows.len()];
            }
        }
        let mut rng = Rng::derive(seed, 0x5ce7);
        let at = |s: f64| Time::from_secs_f64(s);
        for (fi, f) in self.flows.iter().enumerate() {
            let flow = fi as u32;
            let mut start_of =
                |s: f64, j: f64| at(s + if j > 0.0 { rng.uniform(0.0, j) } else { 0.0 });
            match f {
                Flow::Layered {
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
                } => {
                    let src = nodes[from.as_str()];
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
                    };
                    // RLC, FLID-DL and WEBRC need their own sender behaviour (agents::layered).
                    let layering = Layering::for_protocol(protocol, &info);
                    let groups: Vec<usize> = (0..layering.groups(rates.len()))
                        .map(|_| sim.net.add_group(src))
                        .collect();
                    // No link rate for the schedule: the simulated access link serialises what the
                    // tree actually forwards (pruned layers never occupy it).
                    let link_bps = 0.0;
                    let mut sender =
                        LayeredSender::new(src, flow, groups.clone(), info.clone(), link_bps)?
                            .with_layering(layering.clone())?;
                    if *burst_jitter != 0.0 {
                        // Its own stream: files without jitter draw exactly as before.
                        sender = sender.with_burst_jitter(
                            *burst_jitter,
                            Rng::derive(seed, 0xb_0000 + fi as u64),
                        )?;
                    }
                    let s_id = sim.add_agent(src, Box::new(sender));
                    let t0 = start_of(*start_s, *start_jitter_s);
                    sim.net.schedule_command(t0, s_id, Command::Start);
                    if let Some(t) = stop_s {
                        sim.net.schedule_command(at(*t), s_id, Command::Stop);
                    }
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
                        let mon = sim.net.monitors.add(
                            format!("{name}/{rname}"),
                            name.clone(),
                            MonKind::Layered,
                            ladder.clone(),
                        );
                        let rn = nodes[r.at.as_str()];
                        let rcv =
                            LayeredReceiver::new(rn, ctl, info.clone(), groups.clone(), mon, t0)
                                .with_layering(layering.clone())
                                .with_delivered_level(
                                    crate::agents::alma::budget_scale(protocol).is_some(),
                                );
                        let id = sim.add_agent(rn, Box::new(rcv));
                        let t = start_of(r.start_s, r.start_jitter_s).max(t0);
                        sim.net.schedule_command(t, id, Command::Start);
                        if let Some(t) = r.stop_s {
                            sim.net.schedule_command(at(t), id, Command::Stop);
                        }
                    }
                }
                Flow::Tfmcc {
                    name,
                    from,
                    packet_size,
                    start_s,
                    start_jitter_s,
                    stop_s,
                    receivers,
                } => {
                    let src = nodes[from.as_str()];
                    let g = sim.net.add_group(src);
                    let cfg = congestion::tfmcc::TfmccConfig {
                        packet_size: *packet_size,
                        seed: seed ^ (0x7f3c + fi as u64),
                        ..Default::default()
                    };
                    let smon = sim.net.monitors.add(
                        format!("{name}/sender"),
                        name.clone(),
                        MonKind::Tfmcc,
                        Vec::new(),
                    );
                    let s_id = sim.agents.len();
                    let snd = TfmccSenderAgent::new(src, flow, g, cfg, smon);
                    sim.add_agent(src, Box::new(snd));
                    let t0 = start_of(*start_s, *start_jitter_s);
                    sim.net.schedule_command(t0, s_id, Command::Start);
                    sim.net.monitors.started(smon, t0);
                    if let Some(t) = stop_s {
                        sim.net.schedule_command(at(*t), s_id, Command::Stop);
                    }
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
                        let mon = sim.net.monitors.add(
                            format!("{name}/{rname}"),
                            name.clone(),
                            MonKind::Tfmcc,
                            vec![0.0, 0.0],
                        );
                        sim.net.monitors.list[mon].rid = Some(rid);
                        let rn = nodes[r.at.as_str()];
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
                        let id = sim.add_agent(rn, Box::new(agent));
                        let t = start_of(r.start_s, r.start_jitter_s).max(t0);
                        sim.net.schedule_command(t, id, Command::Start);
                        if let Some(t) = r.stop_s {
                            sim.net.schedule_command(at(t), id, Command::Stop);
                        }
                    }
                }
                Flow::Aer {
                    name,
                    from,
                    protocol,
                    packet_size,
                    repair_servers,
                    start_s,
                    start_jitter_s,
                    stop_s,
                    receivers,
                } => {
                    let t0 = start_of(*start_s, *start_jitter_s);
                    let mut rcv = Vec::new();
                    for (r, rname) in receivers
                        .iter()
                        .flat_map(|r| r.names().into_iter().map(move |n| (r, n)))
                    {
                        rcv.push((
                            rname,
                            nodes[r.at.as_str()],
                            start_of(r.start_s, r.start_jitter_s),
                            r.stop_s.map(at),
                        ));
                    }
                    let spec = crate::agents::aer::SessionSpec {
                        name,
                        flow,
                        source: nodes[from.as_str()],
                        repair_servers: repair_servers.iter().map(|n| nodes[n.as_str()]).collect(),
                        receivers: rcv,
                        start: t0,
                        stop: stop_s.map(at),
                        cfg: crate::agents::aer::AerConfig {
                            packet_size: *packet_size,
                            ..Default::default()
                        },
                        seed,
                    };
                    if protocol == "pgmcc" {
                        crate::agents::pgmcc::install(&mut sim, &spec);
                    } else {
                        crate::agents::aer::install(&mut sim, &spec);
                    }
                }
                Flow::Tfrc {
                    name,
                    from,
                    to,
                    packet_size,
                    periodic_loss,
                    discounting,
                    start_s,
                    start_jitter_s,
                    stop_s,
                } => {
                    let (a, b) = (nodes[from.as_str()], nodes[to.as_str()]);
                    let mon =
                        sim.net
                            .monitors
                            .add(name.clone(), name.clone(), MonKind::Tfrc, Vec::new());
                    let s_id = sim.agents.len();
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
                    let s_got = sim.add_agent(a, Box::new(snd));
                    let mut cfg = baselines::tfrc::TfrcReceiverConfig::default();
                    cfg.ali.discounting = *discounting;
                    let r_got = sim.add_agent(
                        b,
                        Box::new(TfrcReceiverAgent::new(b, (a, s_id), flow, mon, cfg)),
                    );
                    debug_assert_eq!((s_got, r_got), (s_id, r_id));
                    let t0 = start_of(*start_s, *start_jitter_s);
                    sim.net.schedule_command(t0, r_id, Command::Start);
                    sim.net.schedule_command(t0, s_id, Command::Start);
                    if let Some(t) = stop_s {
                        sim.net.schedule_command(at(*t), s_id, Command::Stop);
                    }
                }
                Flow::Web {
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
                } => {
                    let mon =
                        sim.net
                            .monitors
                            .add(name.clone(), name.clone(), MonKind::Tcp, Vec::new());
                    let cfg = crate::agents::web::WebConfig {
                        server_nodes: servers.iter().map(|n| nodes[n.as_str()]).collect(),
                        client_nodes: clients.iter().map(|n| nodes[n.as_str()]).collect(),
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
                        Rng::derive(seed, 0x5000 + fi as u64),
                    );
                    let id = sim.add_agent(node0, Box::new(agent));
                    sim.net.schedule_command(at(*start_s), id, Command::Start);
                    if let Some(t) = stop_s {
                        sim.net.schedule_command(at(*t), id, Command::Stop);
                    }
                }
                Flow::Tcp {
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
                } => {
                    let (a, b) = (nodes[from.as_str()], nodes[to.as_str()]);
                    let mon =
                        sim.net
                            .monitors
                            .add(name.clone(), name.clone(), MonKind::Tcp, Vec::new());
                    let sink_id = sim.agents.len() + 1;
                    if matches!(variant.as_str(), "cubic" | "bbr") {
                        let cc = if variant == "bbr" {
                            LinuxCc::bbr(Rng::derive(seed, 0xbb00 + fi as u64).next_u64())
                        } else {
                            LinuxCc::cubic(true)
                        };
                        let snd =
                            LinuxTcpSender::new(a, Dest::Agent(b, sink_id), flow, *packet_size, cc);
                        let s_id = sim.add_agent(a, Box::new(snd));
                        let sink = TcpSink::new(b, mon)
                            .with_header(LINUX_HEADER)
                            .with_sack(true)
                            .with_delayed_ack(!ack_every_segment);
                        let k_id = sim.add_agent(b, Box::new(sink));
                        debug_assert_eq!(k_id, sink_id);
                        let t0 = start_of(*start_s, *start_jitter_s);
                        sim.net.schedule_command(t0, k_id, Command::Start);
                        sim.net.schedule_command(t0, s_id, Command::Start);
                        if let Some(t) = stop_s {
                            sim.net.schedule_command(at(*t), s_id, Command::Stop);
                        }
                        continue;
                    }
                    let v = match variant.as_str() {
                        "newreno" => Variant::NewReno,
                        "sack" => Variant::Sack,
                        _ => Variant::Reno,
                    };
                    let snd = TcpSender::new(
                        a,
                        Dest::Agent(b, sink_id),
                        flow,
                        *packet_size,
                        v,
                        *max_cwnd,
                    )
                    .with_header(*header_bytes)
                    .with_bug_fix(*bug_fix);
                    // ACC TCP (agents::acc): a Reno sender whose segments carry its state.
                    let snd = if variant == "acc-reno" {
                        snd.with_acc()
                    } else {
                        snd
                    };
                    let s_id = sim.add_agent(a, Box::new(snd));
                    let k_id = sim.add_agent(
                        b,
                        Box::new(
                            TcpSink::new(b, mon)
                                .with_header(*header_bytes)
                                .with_sack(v == Variant::Sack),
                        ),
                    );
                    debug_assert_eq!(k_id, sink_id);
                    let t0 = start_of(*start_s, *start_jitter_s);
                    sim.net.schedule_command(t0, k_id, Command::Start);
                    sim.net.schedule_command(t0, s_id, Command::Start);
                    if let Some(t) = stop_s {
                        sim.net.schedule_command(at(*t), s_id, Command::Stop);
                    }
                }
                Flow::TfrcPcc {
                    name,
                    from,
                    to,
                    packet_size,
                    pcc,
                    start_s,
                    start_jitter_s,
                    stop_s,
                } => {
                    let (a, b) = (nodes[from.as_str()], nodes[to.as_str()]);
                    let mon = sim.net.monitors.add(
                        format!("{name}/receiver"),
                        name.clone(),
                        MonKind::Cbr,
                        Vec::new(),
                    );
                    let smon = sim.net.monitors.add(
                        format!("{name}/sender"),
                        name.clone(),
                        MonKind::Cbr,
                        Vec::new(),
                    );
                    let s_id = sim.agents.len();
                    let pcc_def = pcc;
                    let pcc = pcc.as_ref().map(|p| {
                        (
                            p.rate_kbps * 1000.0 / 8.0,
                            baselines::pcc::PccConfig {
                                t: Duration::from_secs_f64(p.t_s),
                                t_protected: Duration::from_secs_f64(p.protected_s),
                                seed: Rng::derive(seed, 0x9cc0 + fi as u64).next_u64(),
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
                    let id = sim.add_agent(a, Box::new(snd));
                    debug_assert_eq!(id, s_id);
                    let mut cfg = baselines::tfrc::TfrcReceiverConfig::default();
                    cfg.ali.n = pcc_def.as_ref().map_or(8, |p| p.ali_n).max(1);
                    let rcv = TfrcReceiverAgent::new(b, (a, s_id), flow, mon, cfg);
                    let k_id = sim.add_agent(b, Box::new(rcv));
                    let t0 = start_of(*start_s, *start_jitter_s);
                    sim.net.schedule_command(t0, k_id, Command::Start);
                    sim.net.schedule_command(t0, s_id, Command::Start);
                    if let Some(t) = stop_s {
                        sim.net.schedule_command(at(*t), s_id, Command::Stop);
                    }
                }
                Flow::Cbr {
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
                } => {
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
                    let (a, b) = (nodes[from.as_str()], nodes[to.as_str()]);
                    let mon = sim
                        .net
                        .monitors
                        .add(name.clone(), name.clone(), kind, Vec::new());
                    let sink_id = sim.agents.len() + 1;
                    let src = DatagramSource::new(
                        a,
                        Dest::Agent(b, sink_id),
                        flow,
                        *packet_size,
                        (rate_kbps * 1000.0).round() as u64,
                        onoff,
                        Rng::derive(seed, 0x3000 + fi as u64),
                    );
                    let s_id = sim.add_agent(a, Box::new(src));
                    let k_id = sim.add_agent(b, Box::new(DatagramSink::new(mon)));
                    debug_assert_eq!(k_id, sink_id);
                    let t0 = start_of(*start_s, *start_jitter_s);
                    sim.net.schedule_command(t0, k_id, Command::Start);
                    sim.net.schedule_command(t0, s_id, Command::Start);
                    if let Some(t) = stop_s {
                        sim.net.schedule_command(at(*t), s_id, Command::Stop);
                    }
                }
            }
        }
        // Schedule: flows' sources are the first agent of each flow in build order.
        let count =
            |rs: &Vec<ReceiverDef>| rs.iter().map(|r| r.count.max(1) as usize).sum::<usize>();
        let mut first_agent = Vec::new();
        {
            let mut next = 0usize;
            for f in &self.flows {
                first_agent.push(next);
                next += match f {
                    Flow::Layered { receivers, .. } | Flow::Tfmcc { receivers, .. } => {
                        1 + count(receivers)
                    }
                    Flow::Web { .. } => 1,
                    Flow::Aer {
                        receivers,
                        repair_servers,
                        protocol,
                        ..
                    } => {
                        1 + count(receivers)
                            + if protocol == "pgmcc" {
                                0
                            } else {
                                repair_servers.len()
                            }
                    }
                    _ => 2,
                };
            }
        }
        for s in &self.schedule {
            let t = at(s.at_s);
            if let Some(l) = &s.link {
                let id = sim
                    .net
                    .links
                    .iter()
                    .position(|x| &x.name == l)
                    .ok_or_else(|| invalid("schedule", "unknown link"))?;
                sim.net.schedule_link_change(
                    t,
                    id,
                    LinkChange {
                        rate_bps: s.rate_kbps.map(|r| (r * 1000.0).round() as u64),
                        delay: s.delay_ms.map(|d| Time::from_secs_f64(d / 1000.0)),
                        loss: s.loss,
                    },
                );
            } else if let (Some(f), Some(r)) = (&s.flow, s.rate_kbps) {
                let fi = self
                    .flows
                    .iter()
                    .position(|x| x.name() == f)
                    .ok_or_else(|| invalid("schedule", "unknown flow"))?;
                sim.net.schedule_command(
                    t,
                    first_agent[fi],
                    Command::SetRate((r * 1000.0).round() as u64),
                );
            }
        }
        for (link, node, name) in probes {
            let mon = sim
                .net
                .monitors
                .add(name.clone(), name, MonKind::Queue, Vec::new());
            let id = sim.add_agent(
                node,
                Box::new(QueueProbe::new(link, mon, Time::from_millis(10))),
            );
            sim.net.schedule_command(Time::ZERO, id, Command::Start);
        }
        Ok(sim)
    }
}

/// The controller called `name`: the protocol crate's factory first, then the simulator's
/// own test controllers.
pub fn make_controller(name: &str) -> Result<Box<dyn congestion::LayeredController>, Error> {
    match baselines::controller_by_name(name) {
        Ok(c) => Ok(c),
        Err(e) => local_controller(name).ok_or_else(|| Error::Scenario(e.to_string())),
    }
}
