//! The unicast socket the Subscriber's transmits leave by: TFMCC receiver reports and
//! key-picture, re-sync and retransmission requests, to the sender's feedback port (the
//! Subscriber picks the address: the announced sender on the SAM's feedback port, the
//! `--session-url` host when the sender announces 0.0.0.0, or `--tfmcc-feedback`). The
//! sender's retransmissions come back to it, from the address the requests went to.

use crate::error::{Error, Result};
use session::subscriber::Transmit;
use std::hash::{BuildHasher, Hasher};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

/// A random non-zero receiver id (unique per player process with overwhelming probability;
/// the TFMCC sender's CLR logic needs only uniqueness within the session).
pub fn random_rid(viewer_id: &str) -> u32 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write(viewer_id.as_bytes());
    h.write_u32(std::process::id());
    h.write_u64(crate::net::realtime_ns());
    (h.finish() as u32).max(1)
}

/// The socket and its counters.
pub struct Feedback {
    sock: UdpSocket,
    /// Where the last transmit went: only datagrams from there are read.
    peer: Option<SocketAddrV4>,
    pub sent: u64,
    pub errors: u64,
    /// Datagrams from any other address (dropped unread).
    pub foreign: u64,
}

impl Feedback {
    /// A socket bound to `iface` (port chosen by the kernel).
    pub fn new(iface: Ipv4Addr) -> Result<Feedback> {
        let sock = UdpSocket::bind(SocketAddrV4::new(iface, 0))
            .map_err(|e| Error::io("binding the feedback socket", e))?;
        sock.set_nonblocking(true)
            .map_err(|e| Error::io("feedback socket", e))?;
        Ok(Feedback {
            sock,
            peer: None,
            sent: 0,
            errors: 0,
            foreign: 0,
        })
    }

    pub fn raw_fd(&self) -> i32 {
        self.sock.as_raw_fd()
    }

    /// The next datagram from the sender's feedback address (a retransmission), if any.
    pub fn recv(&mut self, buf: &mut [u8]) -> Option<usize> {
        loop {
            let (n, from) = self.sock.recv_from(buf).ok()?;
            if self.peer.is_some_and(|p| SocketAddr::V4(p) == from) && n < buf.len() {
                return Some(n);
            }
            self.foreign += 1;
        }
    }

    /// Sends one datagram (counted; errors never stop the player).
    pub fn send(&mut self, t: &Transmit) {
        self.peer = Some(t.to);
        match self.sock.send_to(&t.payload, t.to) {
            Ok(_) => self.sent += 1,
            Err(_) => self.errors += 1,
        }
    }
}
