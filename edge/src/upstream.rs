//! TEMPORARY upstream receive path, to be replaced by the `session` crate's Subscriber: one
//! multicast socket per endpoint of every layer, all joined (no receiver-driven control of the
//! edge's own upstream path yet), packets mapped to (track, stream) by their SSRC and handed to
//! the media loop with their arrival time. The session description comes from the server's
//! HTTP API (`/api/sessions/{id}/announcement`), as the player fetches it. Media encryption
//! (`encrypt: true` sessions) is not handled here: such sessions are refused.

use crate::error::{Error, Result};
use crate::media::{count_unknown, deliver, Up, UpCounters};
use proto::SessionInfo;
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Instant;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

/// Every (group, port) of the session, each once.
pub fn endpoints(info: &SessionInfo) -> Vec<(Ipv4Addr, u16)> {
    let mut v = Vec::new();
    for k in 0..info.layers.len() {
        for e in info.endpoints_of_layer(k) {
            if !v.contains(&e) {
                v.push(e);
            }
        }
    }
    v
}

/// SSRC -> (track id, stream index) of every stream of the session.
pub fn ssrc_map(info: &SessionInfo) -> Arc<HashMap<u32, (u8, u8)>> {
    let mut m = HashMap::new();
    for t in &info.tracks {
        for (i, s) in t.streams.iter().enumerate() {
            m.insert(s.ssrc, (t.id, i as u8));
        }
    }
    Arc::new(m)
}

/// Opens and joins one socket per endpoint: source-specifically to `ssm` when the session's
/// description names a source (an SSM range, where routers build only (S,G) state), else
/// any-source.
pub fn open(
    info: &SessionInfo,
    interface: Ipv4Addr,
    ssm: Option<Ipv4Addr>,
) -> Result<Vec<std::net::UdpSocket>> {
    endpoints(info)
        .into_iter()
        .map(|(g, p)| {
            let io = |e| Error::io(format!("multicast {g}:{p}"), e);
            let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).map_err(io)?;
            s.set_reuse_address(true).map_err(io)?;
            s.set_reuse_port(true).map_err(io)?;
            let _ = s.set_recv_buffer_size(4 << 20);
            // Bound to the group: only that group's datagrams reach this socket.
            s.bind(&SocketAddr::V4(SocketAddrV4::new(g, p)).into())
                .map_err(io)?;
            match (g.is_multicast(), ssm) {
                (true, Some(src)) => s.join_ssm_v4(&src, &g, &interface).map_err(io)?,
                (true, None) => s.join_multicast_v4(&g, &interface).map_err(io)?,
                (false, _) => {}
            }
            s.set_nonblocking(true).map_err(io)?;
            Ok(s.into())
        })
        .collect()
}

/// Reads one socket until the task is aborted.
pub(crate) async fn receive(
    sock: UdpSocket,
    session: Arc<str>,
    map: Arc<HashMap<u32, (u8, u8)>>,
    tx: mpsc::Sender<Up>,
    counters: Arc<UpCounters>,
) {
    let mut buf = vec![0u8; 2048];
    loop {
        let Ok((n, _)) = sock.recv_from(&mut buf).await else {
            continue;
        };
        let at = Instant::now();
        let b = &buf[..n];
        let Some(&(track, stream)) = (b.len() >= 12)
            .then(|| u32::from_be_bytes([b[8], b[9], b[10], b[11]]))
            .and_then(|ssrc| map.get(&ssrc))
        else {
            count_unknown(&counters);
            continue;
        };
        deliver(&tx, &counters, &session, track, stream, b.to_vec(), at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::LayerInfo;
    use std::time::Duration;

    fn info(groups: &[(Ipv4Addr, u16)]) -> SessionInfo {
        SessionInfo {
            session_id: 1,
            announce_seq: 0,
            sender: Ipv4Addr::new(127, 0, 0, 1),
            layers: groups
                .iter()
                .map(|&(group, port)| LayerInfo {
                    rate_bps: 100_000,
                    group,
                    port,
                })
                .collect(),
            packet_size: 1000,
            bunch_len: 2,
            adapt_interval: Duration::from_secs(1),
            announce_interval: Duration::from_secs(1),
            tracks: vec![],
            feedback_port: None,
            retransmission: false,
        }
    }

    /// The kernel's source filters (/proc/net/mcfilter) for `group`: (source, include, exclude).
    fn filters(group: Ipv4Addr) -> Vec<(Ipv4Addr, u32, u32)> {
        let t = std::fs::read_to_string("/proc/net/mcfilter").unwrap();
        t.lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let hex = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).ok();
                (f.len() >= 6 && hex(f[2])? == u32::from(group)).then(|| {
                    Some((
                        Ipv4Addr::from(hex(f[3])?),
                        f[4].parse().ok()?,
                        f[5].parse().ok()?,
                    ))
                })?
            })
            .collect()
    }

    /// With a source, each group is joined as INCLUDE {source} (an SSM join a router in the
    /// SSM range acts on); without, any-source, with no source filter at all.
    #[test]
    fn joins_source_specific_when_the_description_names_a_source() {
        let lo = Ipv4Addr::LOCALHOST;
        let src = Ipv4Addr::new(10, 201, 0, 2);
        let ssm = [
            (Ipv4Addr::new(232, 254, 77, 1), 47101),
            (Ipv4Addr::new(232, 254, 77, 2), 47102),
        ];
        let socks = open(&info(&ssm), lo, Some(src)).unwrap();
        assert_eq!(socks.len(), 2);
        for (g, _) in ssm {
            assert_eq!(filters(g), vec![(src, 1, 0)], "group {g}");
        }
        let asm = [(Ipv4Addr::new(239, 254, 77, 1), 47103)];
        let asm_socks = open(&info(&asm), lo, None).unwrap();
        assert_eq!(asm_socks.len(), 1);
        assert!(filters(asm[0].0).is_empty());
        drop(socks);
        for (g, _) in ssm {
            assert!(filters(g).is_empty(), "group {g} left on close");
        }
    }
}
