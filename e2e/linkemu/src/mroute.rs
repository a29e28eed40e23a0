//! `layercast-linkemu mrouter`: a minimal IGMP-driven multicast router with immediate leave,
//! for the testbed's emulated networks.
//!
//! Why: igmpproxy 0.3 (the packaged one) prunes a downstream interface only when it ages its
//! routes on the general-query cycle, so traffic keeps crossing the bottleneck for seconds after
//! the last receiver left, quickleave or not (measured: 1.5 to 15 s). ERA and PLM assume a
//! leave takes effect within a fraction of an adaptation interval (era.md AC-14: ≤ 200 ms).
//!
//! Model (all downstream links are point-to-point, as the testbed builds them): a downstream
//! interface is a member of group G from the first report for G heard on it until a leave for G
//! heard on it. A leave removes the interface at once (fast leave); there is no ageing.
//! General queries go out on every downstream interface at start-up (twice, 1 s apart) and then
//! every [`QUERY_INTERVAL_S`] s: a router that restarts knows no members, and without a query
//! the hosts would never report again (they send unsolicited reports only when they join), so
//! the groups they hold would stay cut off (measured on the testbed: no packet in 35 s after a
//! restart; with the start-up query they flow again within the query's response time).
//! Upstream, the router is a host: it joins G on the upstream interface while any downstream
//! member exists, so a parent router (another mrouter, or igmpproxy) sees reports and leaves.
//! Routes: the kernel asks (NOCACHE upcall) for each new (S, G) arriving upstream; we install it
//! with the current member interfaces and re-install every (S, G) of G when membership changes.
//!
//! [`Router`] is the sans-IO core; [`run`] is the socket shell (kernel mroute API).

use crate::flow::{parse_igmp, Igmp};
use crate::Error;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// What the core asks the shell to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Install (or replace) the route for (source, group) from the upstream vif to these vifs.
    SetRoute {
        /// Upstream vif the (source, group) traffic arrives on.
        parent: u16,
        /// Source address.
        source: u32,
        /// Group address.
        group: u32,
        /// Outgoing vifs (possibly empty: the kernel then drops the packets quietly).
        oifs: Vec<u16>,
    },
    /// Join the group upstream (as a host).
    JoinUpstream(u32),
    /// Leave the group upstream.
    LeaveUpstream(u32),
}

/// Membership and route state. Vifs `0..upstreams` are upstream (one per source direction:
/// a node where several sessions' trees meet has several); the rest are downstream.
#[derive(Debug)]
pub struct Router {
    upstreams: u16,
    members: BTreeMap<u32, BTreeSet<u16>>,
    /// group -> (source, parent vif)
    routes: BTreeMap<u32, BTreeSet<(u32, u16)>>,
    /// Counters for the final report.
    pub joins: u64,
    /// Leaves that removed an interface.
    pub leaves: u64,
}

/// Link-local groups (224.0.0.0/24) are never routed.
fn routable(g: u32) -> bool {
    (g >> 28) == 0xE && (g >> 8) != 0xE0_00_00
}

impl Default for Router {
    fn default() -> Self {
        Router::new(1)
    }
}

impl Router {
    /// A router whose first `upstreams` vifs are upstream.
    pub fn new(upstreams: u16) -> Router {
        Router {
            upstreams: upstreams.max(1),
            members: BTreeMap::new(),
            routes: BTreeMap::new(),
            joins: 0,
            leaves: 0,
        }
    }

    fn routes_for(&self, group: u32) -> Vec<Action> {
        let oifs: Vec<u16> = self
            .members
            .get(&group)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        self.routes
            .get(&group)
            .into_iter()
            .flatten()
            .map(|&(source, parent)| Action::SetRoute {
                parent,
                source,
                group,
                oifs: oifs.clone(),
            })
            .collect()
    }

    /// An IGMP message heard on `vif`.
    pub fn igmp(&mut self, vif: u16, msg: Igmp) -> Vec<Action> {
        if vif < self.upstreams {
            return Vec::new(); // upstream: the kernel's host side answers queries for our joins
        }
        match msg {
            Igmp::Report(g) if routable(g) => {
                let set = self.members.entry(g).or_default();
                let first = set.is_empty();
                if !set.insert(vif) {
                    return Vec::new(); // refresh
                }
                self.joins += 1;
                let mut a = Vec::new();
                if first {
                    a.push(Action::JoinUpstream(g));
                }
                a.extend(self.routes_for(g));
                a
            }
            Igmp::Leave(g) if routable(g) => {
                let Some(set) = self.members.get_mut(&g) else {
                    return Vec::new();
                };
                if !set.remove(&vif) {
                    return Vec::new();
                }
                self.leaves += 1;
                let mut a = self.routes_for(g);
                if self.members.get(&g).is_some_and(BTreeSet::is_empty) {
                    self.members.remove(&g);
                    a.push(Action::LeaveUpstream(g));
                }
                a
            }
            _ => Vec::new(),
        }
    }

    /// The kernel has no route for (source, group) arriving on `vif`.
    pub fn no_route(&mut self, vif: u16, source: u32, group: u32) -> Vec<Action> {
        if vif >= self.upstreams || !routable(group) {
            return Vec::new();
        }
        self.routes.entry(group).or_default().insert((source, vif));
        self.routes_for(group)
            .into_iter()
            .filter(|a| matches!(a, Action::SetRoute { source: s, parent: p, .. } if *s == source && *p == vif))
            .collect()
    }

    /// Downstream vifs holding `group`.
    pub fn members(&self, group: u32) -> Vec<u16> {
        self.members
            .get(&group)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }
}

// ---- kernel interface (linux/mroute.h)

const MRT_INIT: libc::c_int = 200;
const MRT_DONE: libc::c_int = 201;
const MRT_ADD_VIF: libc::c_int = 202;
const MRT_ADD_MFC: libc::c_int = 204;
const VIFF_USE_IFINDEX: u8 = 0x8;
const IGMPMSG_NOCACHE: u8 = 1;
const MAXVIFS: usize = 32;
/// Most interfaces (upstream + downstream) one router can have: the kernel's MAXVIFS.
pub const MAX_VIFS: usize = MAXVIFS;

/// Seconds between general queries after the two start-up queries (RFC 3376's default Query
/// Interval is 125 s; memberships never age here, so the periodic query only repairs a lost
/// report and costs one report per host and interval).
pub const QUERY_INTERVAL_S: u64 = 125;
/// Max response time of our queries, tenths of a second: hosts answer within 1 s.
const QUERY_MAX_RESP_DS: u8 = 10;
const ALL_HOSTS: u32 = 0xE000_0001;

/// An IGMPv3 general query (RFC 3376 §4.1): type 0x11, max resp code, checksum, group 0,
/// S = 0, QRV 2, QQIC = the query interval, no sources. Version 3, so Linux hosts stay in v3
/// mode (a v2 query would switch them to v2 compatibility for minutes).
pub fn general_query(max_resp_ds: u8, qqic: u8) -> [u8; 12] {
    let mut q = [0x11, max_resp_ds, 0, 0, 0, 0, 0, 0, 0x02, qqic, 0, 0];
    let mut sum: u32 = 0;
    for c in q.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    let ck = !(sum as u16);
    q[2..4].copy_from_slice(&ck.to_be_bytes());
    q
}

/// Sends one general query to 224.0.0.1 out of each interface (TTL 1, the default).
fn send_queries(fd: i32, ifindexes: &[i32]) {
    let q = general_query(QUERY_MAX_RESP_DS, QUERY_INTERVAL_S.min(127) as u8);
    for &idx in ifindexes {
        if let Err(e) = sockopt(
            fd,
            libc::IPPROTO_IP,
            libc::IP_MULTICAST_IF,
            &mreqn(0, idx),
            "IP_MULTICAST_IF",
        ) {
            eprintln!("mrouter: {e}");
            continue;
        }
        let dst = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: ALL_HOSTS.to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: buffer and address are live values of the given sizes.
        let rc = unsafe {
            libc::sendto(
                fd,
                q.as_ptr() as *const libc::c_void,
                q.len(),
                0,
                &dst as *const libc::sockaddr_in as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            eprintln!("mrouter: {}", Error::last_os("sendto(general query)"));
        }
    }
}

#[repr(C)]
struct VifCtl {
    vifi: u16,
    flags: u8,
    threshold: u8,
    rate_limit: u32,
    lcl_ifindex: i32,
    rmt_addr: u32,
}

#[repr(C)]
struct MfcCtl {
    origin: u32,
    group: u32,
    parent: u16,
    ttls: [u8; MAXVIFS],
    pkt_cnt: u32,
    byte_cnt: u32,
    wrong_if: u32,
    expire: i32,
}

fn sockopt<T>(fd: i32, level: i32, opt: i32, v: &T, what: &str) -> Result<(), Error> {
    // SAFETY: pointer and size of a live value of the option's type.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(Error::last_os(what.to_string()));
    }
    Ok(())
}

fn ifindex(name: &str) -> Result<i32, Error> {
    let c = CString::new(name).map_err(|_| Error::NoInterface(name.into()))?;
    // SAFETY: valid C string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) } as i32;
    if i == 0 {
        return Err(Error::NoInterface(name.into()));
    }
    Ok(i)
}

fn mreqn(group: u32, ifindex: i32) -> libc::ip_mreqn {
    libc::ip_mreqn {
        imr_multiaddr: libc::in_addr {
            s_addr: group.to_be(),
        },
        imr_address: libc::in_addr { s_addr: 0 },
        imr_ifindex: ifindex,
    }
}

/// Runs the router on `upstream` and `downstream` interfaces until `stop` is set. Prints one
/// JSON line per membership event to stdout. `leave_delay_ms` > 0 emulates a slow leave (the
/// simulator's `multicast.leave_latency_ms` without fast leave): a leave takes effect that long
/// after it was heard, unless a report for the same group arrives on that interface meanwhile.
pub fn run(
    upstream: &[String],
    downstream: &[String],
    leave_delay_ms: u64,
    stop: &AtomicBool,
) -> Result<Router, Error> {
    if upstream.is_empty() || downstream.is_empty() || upstream.len() + downstream.len() > MAXVIFS {
        return Err(Error::Config(
            "need at least one upstream and one downstream interface, 32 in all".into(),
        ));
    }
    let ups = upstream.len();
    // SAFETY: plain socket creation; ownership taken immediately.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_IGMP) };
    if raw < 0 {
        return Err(Error::last_os("socket(IPPROTO_IGMP)"));
    }
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let fd = sock.as_raw_fd();
    // Host-side joins upstream: one UDP socket per group, because the kernel caps the
    // memberships of one socket (net.ipv4.igmp_max_memberships, default 20) and a session has
    // up to 255 layers. Closing a group's socket leaves the group.
    let mut host: BTreeMap<u32, Vec<OwnedFd>> = BTreeMap::new();
    sockopt(
        fd,
        libc::IPPROTO_IP,
        MRT_INIT,
        &1i32,
        "MRT_INIT (another multicast router running?)",
    )?;
    sockopt(fd, libc::IPPROTO_IP, libc::IP_PKTINFO, &1i32, "IP_PKTINFO")?;
    let mut names: Vec<String> = upstream.to_vec();
    names.extend(downstream.iter().cloned());
    let mut vif_of_ifindex = BTreeMap::new();
    let mut ifindex_of_vif = Vec::new();
    for (v, n) in names.iter().enumerate() {
        let idx = ifindex(n)?;
        let vc = VifCtl {
            vifi: v as u16,
            flags: VIFF_USE_IFINDEX,
            threshold: 1,
            rate_limit: 0,
            lcl_ifindex: idx,
            rmt_addr: 0,
        };
        sockopt(
            fd,
            libc::IPPROTO_IP,
            MRT_ADD_VIF,
            &vc,
            &format!("MRT_ADD_VIF {n}"),
        )?;
        vif_of_ifindex.insert(idx, v as u16);
        ifindex_of_vif.push(idx);
        if v >= ups {
            // All-routers (IGMPv2 leaves) and all-IGMPv3-routers (v3 reports) on downstream links.
            for g in [0xE000_0002u32, 0xE000_0016] {
                sockopt(
                    fd,
                    libc::IPPROTO_IP,
                    libc::IP_ADD_MEMBERSHIP,
                    &mreqn(g, idx),
                    "join 224.0.0.2/22",
                )?;
            }
        }
    }
    let mut r = Router::new(ups as u16);
    let mut buf = vec![0u8; 4096];
    let mut cbuf = [0u8; 256];
    let event = |what: &str, g: u32, vif: u16| {
        println!(
            "{}",
            serde_json::json!({"t_ns": crate::run::wall_ns(), "event": what,
                               "group": crate::flow::ip_string(g), "vif": vif})
        );
    };
    // Delayed leaves: (due, vif, group).
    let mut pending: Vec<(u64, u16, u32)> = Vec::new();
    let mut next_query = crate::run::mono_ns();
    let mut startup_queries = 2u32;
    while !stop.load(Ordering::Relaxed) {
        let now = crate::run::mono_ns();
        if now >= next_query {
            send_queries(fd, &ifindex_of_vif[ups..]);
            startup_queries = startup_queries.saturating_sub(1);
            next_query = now
                + if startup_queries > 0 {
                    1_000_000_000
                } else {
                    QUERY_INTERVAL_S * 1_000_000_000
                };
        }
        let mut actions = Vec::new();
        pending.retain(|&(due, vif, g)| {
            if due <= now {
                actions.extend(r.igmp(vif, Igmp::Leave(g)));
                event("leave", g, vif);
                false
            } else {
                true
            }
        });
        apply(fd, &mut host, &ifindex_of_vif[..ups], actions);
        let wait_ms = pending
            .iter()
            .map(|p| p.0.saturating_sub(now) / 1_000_000 + 1)
            .min()
            .unwrap_or(100)
            .min(100) as i32;
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, wait_ms) } <= 0 {
            continue;
        }
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: msghdr fields point at live buffers of the given lengths.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = cbuf.len() as _;
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
        if n <= 0 {
            continue;
        }
        let pkt = &buf[..n as usize];
        let mut actions = Vec::new();
        if pkt.len() >= 20 && pkt[9] == 0 {
            // Kernel upcall (struct igmpmsg: im_mbz overlays the IP protocol byte).
            if pkt[8] == IGMPMSG_NOCACHE {
                let src = u32::from_be_bytes([pkt[12], pkt[13], pkt[14], pkt[15]]);
                let grp = u32::from_be_bytes([pkt[16], pkt[17], pkt[18], pkt[19]]);
                actions = r.no_route(pkt[10] as u16, src, grp);
            }
        } else if pkt.len() >= 20 && pkt[9] == 2 {
            // An IGMP packet: which interface did it come in on?
            let mut ifidx = None;
            // SAFETY: walking the control messages the kernel filled in.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&msg);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_PKTINFO {
                        let pi = libc::CMSG_DATA(c) as *const libc::in_pktinfo;
                        ifidx = Some(std::ptr::read_unaligned(pi).ipi_ifindex);
                    }
                    c = libc::CMSG_NXTHDR(&msg, c);
                }
            }
            let ihl = ((pkt[0] & 0x0F) as usize) * 4;
            let dst = u32::from_be_bytes([pkt[16], pkt[17], pkt[18], pkt[19]]);
            if let (Some(vif), Some(body)) =
                (ifidx.and_then(|i| vif_of_ifindex.get(&i)), pkt.get(ihl..))
            {
                let mut msgs = Vec::new();
                parse_igmp(body, dst, &mut msgs);
                for m in msgs {
                    match m {
                        Igmp::Leave(g) if leave_delay_ms > 0 && (*vif as usize) >= ups => {
                            pending.push((
                                crate::run::mono_ns() + leave_delay_ms * 1_000_000,
                                *vif,
                                g,
                            ));
                            continue;
                        }
                        Igmp::Report(g) => pending.retain(|p| !(p.1 == *vif && p.2 == g)),
                        _ => {}
                    }
                    let a = r.igmp(*vif, m);
                    if !a.is_empty() {
                        match m {
                            Igmp::Report(g) => event("join", g, *vif),
                            Igmp::Leave(g) => event("leave", g, *vif),
                            Igmp::Query(_) => {}
                        }
                    }
                    actions.extend(a);
                }
            }
        }
        apply(fd, &mut host, &ifindex_of_vif[..ups], actions);
    }
    let _ = sockopt(fd, libc::IPPROTO_IP, MRT_DONE, &1i32, "MRT_DONE");
    Ok(r)
}

fn apply(fd: i32, host: &mut BTreeMap<u32, Vec<OwnedFd>>, ups: &[i32], actions: Vec<Action>) {
    for a in actions {
        match a {
            Action::SetRoute {
                parent,
                source,
                group,
                oifs,
            } => {
                let mut ttls = [0u8; MAXVIFS];
                for o in oifs {
                    if let Some(t) = ttls.get_mut(o as usize) {
                        *t = 1;
                    }
                }
                let m = MfcCtl {
                    origin: source.to_be(),
                    group: group.to_be(),
                    parent,
                    ttls,
                    pkt_cnt: 0,
                    byte_cnt: 0,
                    wrong_if: 0,
                    expire: 0,
                };
                if let Err(e) = sockopt(fd, libc::IPPROTO_IP, MRT_ADD_MFC, &m, "MRT_ADD_MFC") {
                    eprintln!("mrouter: {e}");
                }
            }
            Action::JoinUpstream(g) => {
                // Join on every upstream: the one towards this group's source pulls it; the
                // others lead to sources that do not send it (hosts ignore the report).
                let socks = host.entry(g).or_default();
                for &up in ups {
                    // SAFETY: plain socket creation; ownership taken immediately.
                    let raw = unsafe {
                        libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
                    };
                    if raw < 0 {
                        eprintln!("mrouter: {}", Error::last_os("socket(udp)"));
                        continue;
                    }
                    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
                    let m = mreqn(g, up);
                    match sockopt(
                        sock.as_raw_fd(),
                        libc::IPPROTO_IP,
                        libc::IP_ADD_MEMBERSHIP,
                        &m,
                        "upstream join",
                    ) {
                        Ok(()) => socks.push(sock),
                        Err(e) => eprintln!("mrouter: {e}"),
                    }
                }
            }
            Action::LeaveUpstream(g) => {
                // Dropping the socket leaves the group (the kernel sends the leave upstream).
                host.remove(&g);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u32 = 0xEFFF_6400; // 239.255.100.0
    const S: u32 = 0x0AC8_0001;

    #[test]
    fn join_route_leave() {
        let mut r = Router::default();
        // data before any member: a route with no outgoing interfaces
        assert_eq!(
            r.no_route(0, S, G),
            vec![Action::SetRoute {
                parent: 0,
                source: S,
                group: G,
                oifs: vec![]
            }]
        );
        // first member: join upstream, route to vif 1
        assert_eq!(
            r.igmp(1, Igmp::Report(G)),
            vec![
                Action::JoinUpstream(G),
                Action::SetRoute {
                    parent: 0,
                    source: S,
                    group: G,
                    oifs: vec![1]
                }
            ]
        );
        // refresh: nothing
        assert!(r.igmp(1, Igmp::Report(G)).is_empty());
        // second member on vif 2: route to both, no second upstream join
        assert_eq!(
            r.igmp(2, Igmp::Report(G)),
            vec![Action::SetRoute {
                parent: 0,
                source: S,
                group: G,
                oifs: vec![1, 2]
            }]
        );
        // vif 1 leaves: pruned at once
        assert_eq!(
            r.igmp(1, Igmp::Leave(G)),
            vec![Action::SetRoute {
                parent: 0,
                source: S,
                group: G,
                oifs: vec![2]
            }]
        );
        // last member leaves: empty route and upstream leave
        assert_eq!(
            r.igmp(2, Igmp::Leave(G)),
            vec![
                Action::SetRoute {
                    parent: 0,
                    source: S,
                    group: G,
                    oifs: vec![]
                },
                Action::LeaveUpstream(G)
            ]
        );
        // a leave for a group nobody holds: nothing
        assert!(r.igmp(2, Igmp::Leave(G)).is_empty());
        assert_eq!((r.joins, r.leaves), (2, 2));
    }

    #[test]
    fn several_upstreams_route_each_source_from_its_own() {
        let mut r = Router::new(2);
        let s2 = S + 1;
        assert_eq!(r.igmp(2, Igmp::Report(G)), vec![Action::JoinUpstream(G)]);
        assert_eq!(
            r.no_route(1, s2, G),
            vec![Action::SetRoute {
                parent: 1,
                source: s2,
                group: G,
                oifs: vec![2]
            }]
        );
        // reports heard on an upstream are not memberships
        assert!(r.igmp(1, Igmp::Report(G + 1)).is_empty());
        assert!(r.no_route(2, S, G).is_empty());
    }

    #[test]
    fn general_query_is_a_valid_igmpv3_query() {
        let q = general_query(10, 125);
        assert_eq!((q[0], q[1]), (0x11, 10));
        assert_eq!(&q[4..8], &[0, 0, 0, 0], "general: group 0");
        assert_eq!((q[8] & 0x07, q[9]), (2, 125), "QRV 2, QQIC 125");
        assert_eq!(&q[10..12], &[0, 0], "no sources");
        // The Internet checksum over the message (checksum included) folds to 0xFFFF.
        let mut sum: u32 = q
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum();
        while sum > 0xFFFF {
            sum = (sum & 0xFFFF) + (sum >> 16);
        }
        assert_eq!(sum, 0xFFFF);
        // and our own parser reads it as a query, not a membership
        let mut m = Vec::new();
        parse_igmp(&q, ALL_HOSTS, &mut m);
        assert_eq!(m, vec![Igmp::Query(0)]);
        assert_ne!(
            general_query(20, 125)[2..4],
            q[2..4],
            "checksum covers the fields"
        );
    }

    #[test]
    fn upstream_and_link_local_are_ignored() {
        let mut r = Router::default();
        assert!(r.igmp(0, Igmp::Report(G)).is_empty());
        assert!(r.igmp(1, Igmp::Report(0xE000_00FB)).is_empty());
        assert!(r.no_route(1, S, G).is_empty());
        assert!(r.members(G).is_empty());
    }
}
