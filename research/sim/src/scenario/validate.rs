//! Checks of a parsed scenario: names, references and ranges.

use super::{invalid, make_controller, Flow, Scenario};
use crate::Error;

impl Scenario {
    /// Checks names, references and ranges.
    pub fn validate(&self) -> Result<(), Error> {
        if !(self.duration_s.is_finite() && self.duration_s > 0.0 && self.duration_s <= 1e6) {
            return Err(invalid("duration_s", "must be in (0, 1e6]"));
        }
        if !(self.interval_s.is_finite() && self.interval_s >= 0.001) {
            return Err(invalid("interval_s", "must be >= 0.001"));
        }
        // `fast_seeds: 0` keeps a costly scenario (e.g. 10,000 receivers) out of the fast subset.
        if self.seeds == 0 {
            return Err(invalid("seeds", "must be positive"));
        }
        let nodes = self.node_index();
        if nodes.len() != self.topology.nodes.len() {
            return Err(invalid("nodes", "names must be unique"));
        }
        let node = |n: &str| {
            nodes
                .get(n)
                .copied()
                .ok_or_else(|| invalid("node", &format!("unknown node {n:?}")))
        };
        let mut link_names = Vec::new();
        for l in &self.topology.links {
            node(&l.from)?;
            node(&l.to)?;
            if !(l.rate_kbps.is_finite() && l.rate_kbps > 0.0) {
                return Err(invalid("rate_kbps", "must be positive"));
            }
            if !(l.delay_ms.is_finite() && l.delay_ms >= 0.0) {
                return Err(invalid("delay_ms", "must be >= 0"));
            }
            if !(l.jitter_ms.is_finite() && l.jitter_ms >= 0.0) {
                return Err(invalid("jitter_ms", "must be >= 0"));
            }
            if !(0.0..=1.0).contains(&l.loss) {
                return Err(invalid("loss", "must be in [0, 1]"));
            }
            for q in [&l.queue, &l.reverse_queue].into_iter().flatten() {
                q.validate().map_err(|e| Error::Scenario(e.to_string()))?;
            }
            link_names.push(format!("{}-{}", l.from, l.to));
            if l.duplex {
                link_names.push(format!("{}-{}", l.to, l.from));
            }
        }
        let mut flow_names = Vec::new();
        for f in &self.flows {
            if flow_names.contains(&f.name()) || f.name().contains('/') {
                return Err(invalid(
                    "flow",
                    &format!("duplicate or bad name {:?}", f.name()),
                ));
            }
            flow_names.push(f.name());
            match f {
                Flow::Layered {
                    protocol,
                    from,
                    layers,
                    packet_size,
                    bunch,
                    adapt_interval_s,
                    receivers,
                    ..
                } => {
                    node(from)?;
                    layers.rates()?;
                    if *packet_size == 0 || *packet_size > 65_535 || *bunch == 0 {
                        return Err(invalid("layered", "packet_size 1..65535, bunch >= 1"));
                    }
                    if !adapt_interval_s.is_finite() || *adapt_interval_s <= 0.0 {
                        return Err(invalid("adapt_interval_s", "must be positive"));
                    }
                    let _ = protocol;
                    let mut rn = Vec::new();
                    for r in receivers {
                        node(&r.at)?;
                        if rn.contains(&&r.name) {
                            return Err(invalid("receiver", "duplicate name"));
                        }
                        rn.push(&r.name);
                    }
                }
                Flow::Tfmcc {
                    from,
                    packet_size,
                    receivers,
                    ..
                } => {
                    node(from)?;
                    if *packet_size == 0 || *packet_size > 65_535 {
                        return Err(invalid("tfmcc", "packet_size 1..65535"));
                    }
                    let mut rn = Vec::new();
                    for r in receivers {
                        node(&r.at)?;
                        if r.protocol.is_some() {
                            return Err(invalid("tfmcc", "receivers take no protocol"));
                        }
                        if rn.contains(&&r.name) || r.name == "sender" {
                            return Err(invalid("receiver", "duplicate name or 'sender'"));
                        }
                        rn.push(&r.name);
                    }
                }
                Flow::Aer {
                    from,
                    protocol,
                    packet_size,
                    repair_servers,
                    receivers,
                    ..
                } => {
                    node(from)?;
                    for n in repair_servers {
                        node(n)?;
                    }
                    if !matches!(protocol.as_str(), "aer-nca" | "pgmcc") {
                        return Err(invalid("aer", "protocol aer-nca or pgmcc"));
                    }
                    if *packet_size == 0 || *packet_size > 65_535 || receivers.is_empty() {
                        return Err(invalid("aer", "packet_size 1..65535, receivers"));
                    }
                    let mut rn = Vec::new();
                    for r in receivers {
                        node(&r.at)?;
                        if rn.contains(&&r.name) {
                            return Err(invalid("receiver", "duplicate name"));
                        }
                        rn.push(&r.name);
                    }
                }
                Flow::Tfrc {
                    from,
                    to,
                    packet_size,
                    periodic_loss,
                    ..
                } => {
                    node(from)?;
                    node(to)?;
                    if *packet_size == 0 {
                        return Err(invalid("packet_size", "must be positive"));
                    }
                    if periodic_loss.windows(2).any(|w| w[1].0 < w[0].0) {
                        return Err(invalid("periodic_loss", "times must not decrease"));
                    }
                }
                Flow::Web {
                    servers,
                    clients,
                    virtual_servers,
                    virtual_clients,
                    sessions,
                    mean_session_gap_s,
                    mean_think_s,
                    mean_object_packets,
                    shape,
                    packet_size,
                    ..
                } => {
                    for n in servers.iter().chain(clients) {
                        node(n)?;
                    }
                    let ok = !servers.is_empty()
                        && !clients.is_empty()
                        && *virtual_servers > 0
                        && *virtual_clients > 0
                        && u64::from(*virtual_servers) * u64::from(*virtual_clients) < 1 << 24
                        && *sessions > 0
                        && *mean_session_gap_s > 0.0
                        && *mean_think_s > 0.0
                        && *mean_object_packets > 0.0
                        && *shape > 1.0
                        && *packet_size > 0;
                    if !ok {
                        return Err(invalid(
                            "web",
                            "server and client nodes, positive counts and means, shape > 1, \
                             virtual_servers x virtual_clients < 2^24",
                        ));
                    }
                }
                Flow::TfrcPcc {
                    from,
                    to,
                    packet_size,
                    pcc,
                    ..
                } => {
                    node(from)?;
                    node(to)?;
                    if *packet_size == 0 || *packet_size > 65_535 {
                        return Err(invalid("tfrc-pcc", "packet_size 1..65535"));
                    }
                    if let Some(p) = pcc {
                        let pos = |x: f64| x.is_finite() && x > 0.0;
                        if !pos(p.rate_kbps) || !pos(p.t_s) || !pos(p.protected_s) || p.ali_n == 0 {
                            return Err(invalid(
                                "pcc",
                                "rate_kbps, t_s, protected_s, ali_n positive",
                            ));
                        }
                    }
                }
                Flow::Tcp {
                    from,
                    to,
                    variant,
                    packet_size,
                    ..
                } => {
                    node(from)?;
                    node(to)?;
                    if !matches!(
                        variant.as_str(),
                        "reno" | "newreno" | "sack" | "acc-reno" | "cubic" | "bbr"
                    ) {
                        return Err(invalid(
                            "variant",
                            "reno, newreno, sack, acc-reno, cubic or bbr",
                        ));
                    }
                    if *packet_size == 0 {
                        return Err(invalid("packet_size", "must be positive"));
                    }
                }
                Flow::Cbr {
                    from,
                    to,
                    rate_kbps,
                    packet_size,
                    ..
                }
                | Flow::Onoff {
                    from,
                    to,
                    rate_kbps,
                    packet_size,
                    ..
                } => {
                    node(from)?;
                    node(to)?;
                    if !rate_kbps.is_finite() || *rate_kbps < 0.0 || *packet_size == 0 {
                        return Err(invalid("rate_kbps", "must be >= 0, packet_size > 0"));
                    }
                    if let Flow::Onoff {
                        mean_on_s,
                        mean_off_s,
                        shape,
                        ..
                    } = f
                    {
                        if !(*mean_on_s > 0.0 && *mean_off_s > 0.0 && *shape > 1.0) {
                            return Err(invalid("onoff", "means > 0, shape > 1"));
                        }
                    }
                }
            }
        }
        for s in &self.schedule {
            match (&s.link, &s.flow) {
                (Some(l), None) => {
                    if !link_names.contains(l) {
                        return Err(invalid("schedule", &format!("unknown link {l:?}")));
                    }
                }
                (None, Some(f)) => {
                    if !self.flows.iter().any(|x| {
                        x.name() == f && matches!(x, Flow::Cbr { .. } | Flow::Onoff { .. })
                    }) {
                        return Err(invalid("schedule", &format!("{f:?} is no CBR/on-off flow")));
                    }
                }
                _ => return Err(invalid("schedule", "give exactly one of link, flow")),
            }
        }
        for m in &self.measurements {
            if !crate::report::METRICS.contains(&m.metric.as_str()) {
                return Err(invalid("metric", &format!("unknown metric {:?}", m.metric)));
            }
            self.expand(&m.of)?;
            self.expand(&m.versus)?;
            if m.metric.starts_with("mean_queue_")
                && m.metric != "mean_queue_packets"
                && m.windows.len() < 2
            {
                return Err(invalid(&m.metric, "needs at least two windows"));
            }
            if m.metric == "tfmcc_time_to_clr_rise"
                && (m.windows.len() < 2 || m.windows.len() != self.expand(&m.of)?.len())
            {
                return Err(invalid(
                    &m.metric,
                    "needs one window per receiver, at least two",
                ));
            }
            if matches!(
                m.metric.as_str(),
                "tcp_friendliness" | "cov_ratio" | "an_share" | "rate_share"
            ) && m.versus.is_empty()
            {
                return Err(invalid(&m.metric, "needs versus"));
            }
            if m.metric == "efficiency" && m.available_kbps.is_none() {
                return Err(invalid("efficiency", "needs available_kbps"));
            }
        }
        Ok(())
    }

    /// Controller names the scenario uses that neither the protocol crate's factory nor the
    /// simulator's test controllers know (so the scenario cannot run yet).
    pub fn missing_protocols(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for f in &self.flows {
            if let Flow::Layered {
                protocol,
                receivers,
                ..
            } = f
            {
                let names = std::iter::once(protocol)
                    .chain(receivers.iter().filter_map(|r| r.protocol.as_ref()));
                for p in names {
                    if make_controller(p).is_err() && !v.contains(p) {
                        v.push(p.clone());
                    }
                }
            }
        }
        v
    }
}
