//! Building the simulation of a scenario, in steps: the links (with their queues and what is
//! attached to them), the network's settings, each flow's agents, the scheduled changes and
//! the queue probes. Every step keeps the build order (links, agents, groups, monitors and
//! random draws), so a scenario and a seed build the same simulation.

mod flows;
mod links;

use super::{invalid, Flow, ReceiverDef, Scenario};
use crate::agents::local_controllers::local_controller;
use crate::engine::{Command, LinkChange, MulticastTiming, Sim};
use crate::Error;
use congestion::Time;

impl Scenario {
    /// Builds the simulation for `seed`.
    pub fn build(&self, seed: u64) -> Result<Sim, Error> {
        if let Some(p) = self.missing_protocols().first() {
            return Err(make_controller(p)
                .err()
                .unwrap_or(Error::Scenario(p.clone())));
        }
        let nodes = self.node_index();
        let links = self.links(&nodes, seed)?;
        let mut sim = Sim::new(self.topology.nodes.len(), links.specs, seed);
        links::add_acc_routers(&mut sim, links.acc);
        self.configure_network(&mut sim);
        let mut flows = flows::FlowBuilder::new(&mut sim, &nodes, seed);
        for (fi, f) in self.flows.iter().enumerate() {
            flows.add(fi, f)?;
        }
        self.schedule_changes(&mut sim)?;
        links::add_queue_probes(&mut sim, links.probes);
        Ok(sim)
    }

    /// Multicast join and leave latencies, the monitors' interval and the per-flow counters.
    fn configure_network(&self, sim: &mut Sim) {
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
    }

    /// The agent index of each flow's source: the first agent each flow adds, in build order.
    fn first_agents(&self) -> Vec<usize> {
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
        first_agent
    }

    /// The scenario's schedule: link changes, and rate changes of a flow's source.
    fn schedule_changes(&self, sim: &mut Sim) -> Result<(), Error> {
        let first_agent = self.first_agents();
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
        Ok(())
    }
}

/// Seconds as simulator time.
fn at(s: f64) -> Time {
    Time::from_secs_f64(s)
}

/// The controller called `name`: the protocol crate's factory first, then the simulator's
/// own test controllers.
pub fn make_controller(name: &str) -> Result<Box<dyn congestion::LayeredController>, Error> {
    match baselines::controller_by_name(name) {
        Ok(c) => Ok(c),
        Err(e) => local_controller(name).ok_or_else(|| Error::Scenario(e.to_string())),
    }
}
