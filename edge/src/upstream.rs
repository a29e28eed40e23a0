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

/// Opens and joins one socket per endpoint.
pub fn open(info: &SessionInfo, interface: Ipv4Addr) -> Result<Vec<std::net::UdpSocket>> {
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
            if g.is_multicast() {
                s.join_multicast_v4(&g, &interface).map_err(io)?;
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
