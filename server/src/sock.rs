//! Multicast sender sockets.

use crate::config::ServerConfig;
use crate::error::{Error, Result};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;

/// A UDP socket for multicast output: bound to the configured interface address (so the
/// source address matches what SSM receivers filter on), with TTL, loop and `IP_MULTICAST_IF`.
pub fn sender_socket(cfg: &ServerConfig) -> Result<UdpSocket> {
    let bind = SocketAddrV4::new(cfg.interface, 0);
    let s = UdpSocket::bind(bind).map_err(|e| Error::io(format!("binding {bind}"), e))?;
    s.set_multicast_ttl_v4(cfg.ttl)
        .map_err(|e| Error::io("setting IP_MULTICAST_TTL", e))?;
    s.set_multicast_loop_v4(cfg.multicast_loop)
        .map_err(|e| Error::io("setting IP_MULTICAST_LOOP", e))?;
    if cfg.interface != Ipv4Addr::UNSPECIFIED {
        set_multicast_if(&s, cfg.interface)
            .map_err(|e| Error::io(format!("setting IP_MULTICAST_IF {}", cfg.interface), e))?;
    }
    // A large send buffer absorbs a whole bunch even at high rates.
    let sz: libc::c_int = 1 << 20;
    // SAFETY: valid fd, pointer to a c_int of the stated size.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            &sz as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    Ok(s)
}

fn set_multicast_if(s: &UdpSocket, addr: Ipv4Addr) -> std::io::Result<()> {
    let a = libc::in_addr {
        s_addr: u32::from(addr).to_be(),
    };
    // SAFETY: valid fd, pointer to an in_addr of the stated size.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MULTICAST_IF,
            &a as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::in_addr>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
