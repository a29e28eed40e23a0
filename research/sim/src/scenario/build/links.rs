//! The scenario's links as simulator link directions, with their queues (wrapped in an ALMA
//! active queue when an ALMA session runs), the directions whose queue is probed, and those
//! with an ACC active router.

use crate::agents::probe::QueueProbe;
use crate::engine::{Command, LinkSpec, Sim};
use crate::metrics::MonKind;
use crate::scenario::{Flow, Scenario};
use crate::Error;
use congestion::Time;
use netmodel::QdiscConfig;
use std::collections::HashMap;

/// The link directions to build the simulation on, and what is attached to some of them.
pub(super) struct Links {
    pub(super) specs: Vec<LinkSpec>,
    /// Probed link directions: (link index, node, monitor name).
    pub(super) probes: Vec<(usize, usize, String)>,
    /// Links (from → to direction) with an ACC active router.
    pub(super) acc: Vec<usize>,
}

impl Scenario {
    /// Every link of the topology as one direction (two when duplex), in the topology's
    /// order; each queue seeded from `seed` and its index.
    pub(super) fn links(&self, nodes: &HashMap<&str, usize>, seed: u64) -> Result<Links, Error> {
        let (alma_flows, alma_cum_bps) = self.alma_sessions();
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
            for &(f, t, q, fname, tname) in dirs {
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
        Ok(Links {
            specs,
            probes,
            acc: acc_links,
        })
    }

    /// Per flow, the budget scale of an ALMA session (None for other flows), and its
    /// cumulative layer rates in bit/s.
    fn alma_sessions(&self) -> (Vec<Option<f64>>, Vec<Option<Vec<f64>>>) {
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
        (alma_flows, alma_cum_bps)
    }
}

/// An ACC active router on each of the `acc` link directions.
pub(super) fn add_acc_routers(sim: &mut Sim, acc: Vec<usize>) {
    if !acc.is_empty() {
        sim.net.acc = vec![None; sim.net.links.len()];
        for l in acc {
            sim.net.acc[l] = Some(crate::agents::acc::AccRouter::new());
        }
    }
}

/// A queue probe (every 10 ms, from the start) on each probed link direction.
pub(super) fn add_queue_probes(sim: &mut Sim, probes: Vec<(usize, usize, String)>) {
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
}
