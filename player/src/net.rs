//! Multicast receive sockets with kernel receive timestamps.
//!
//! One socket per joined layer: each is bound to its layer's group and port (so the kernel
//! only queues that layer's packets on it, whatever else arrives on the host) and holds one
//! `IP_ADD_MEMBERSHIP`. Leaving a layer drops the membership and closes the socket, which
//! also throws away anything still queued for it. `SO_TIMESTAMPNS` makes the kernel attach the
//! time the packet reached the host (`CLOCK_REALTIME`, ns) to every datagram; `recvmsg` reads
//! it from the control message. These timestamps, not the time the player got round to
//! reading the socket, are what the controller's packet-pair estimates are built from.

use crate::error::{Error, Result};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `CLOCK_REALTIME` now, ns: the same clock as `SO_TIMESTAMPNS`.
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time (user + system, every thread) this process has used, seconds. Logged once a
/// second (`cpu_s`) so a benchmark can read a player's cost per second of video from its own
/// log (e2e capacity) instead of sampling `/proc`.
pub fn process_cpu_s() -> f64 {
    // SAFETY: all-zero is a valid rusage; getrusage only writes it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn check(r: libc::c_int, what: &str) -> Result<()> {
    if r < 0 {
        return Err(Error::io(what.to_string(), std::io::Error::last_os_error()));
    }
    Ok(())
}

fn setopt<T>(fd: RawFd, level: libc::c_int, opt: libc::c_int, v: &T, what: &str) -> Result<()> {
    // SAFETY: `v` points to a live T of the stated size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    check(r, what)
}

fn mreq(group: Ipv4Addr, iface: Ipv4Addr) -> libc::ip_mreq {
    libc::ip_mreq {
        imr_multiaddr: libc::in_addr {
            s_addr: u32::from(group).to_be(),
        },
        imr_interface: libc::in_addr {
            s_addr: u32::from(iface).to_be(),
        },
    }
}

/// A UDP socket bound to `group:port`, non-blocking, with kernel timestamps; if `join`, it
/// also holds a membership of `group` on `iface`.
pub struct McastSocket {
    fd: OwnedFd,
    group: Ipv4Addr,
    iface: Ipv4Addr,
    joined: bool,
    /// Source of a source-specific membership (IGMPv3 INCLUDE {source}).
    source: Option<Ipv4Addr>,
}

fn mreq_source(group: Ipv4Addr, iface: Ipv4Addr, source: Ipv4Addr) -> libc::ip_mreq_source {
    libc::ip_mreq_source {
        imr_multiaddr: libc::in_addr {
            s_addr: u32::from(group).to_be(),
        },
        imr_interface: libc::in_addr {
            s_addr: u32::from(iface).to_be(),
        },
        imr_sourceaddr: libc::in_addr {
            s_addr: u32::from(source).to_be(),
        },
    }
}

impl McastSocket {
    pub fn open(group: Ipv4Addr, port: u16, iface: Ipv4Addr, join: bool) -> Result<McastSocket> {
        // SAFETY: plain socket(2) call; the fd is owned right after.
        let raw = unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        check(raw, "socket")?;
        // SAFETY: `raw` is a fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let one: libc::c_int = 1;
        setopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            &one,
            "SO_REUSEADDR",
        )?;
        setopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &one,
            "SO_TIMESTAMPNS",
        )?;
        let rcvbuf: libc::c_int = 2 << 20;
        setopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &rcvbuf,
            "SO_RCVBUF",
        )?;
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(group).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: valid sockaddr_in of the stated size.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        check(r, &format!("bind {group}:{port}"))?;
        let mut s = McastSocket {
            fd,
            group,
            iface,
            joined: false,
            source: None,
        };
        if join {
            setopt(
                s.fd.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_ADD_MEMBERSHIP,
                &mreq(group, iface),
                &format!("IP_ADD_MEMBERSHIP {group}"),
            )?;
            s.joined = true;
        }
        Ok(s)
    }

    /// Like [`McastSocket::open`] with a membership, source-specific when `source` is given:
    /// the kernel then delivers only datagrams from `source` to this socket (and tells the
    /// router, IGMPv3, that only that source is wanted), so data injected into the group by
    /// any other host is dropped before the player sees it (`docs/security.md` T3).
    pub fn open_from(
        group: Ipv4Addr,
        port: u16,
        iface: Ipv4Addr,
        source: Option<Ipv4Addr>,
    ) -> Result<McastSocket> {
        let Some(src) = source else {
            return McastSocket::open(group, port, iface, true);
        };
        let mut s = McastSocket::open(group, port, iface, false)?;
        setopt(
            s.fd.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_ADD_SOURCE_MEMBERSHIP,
            &mreq_source(group, iface, src),
            &format!("IP_ADD_SOURCE_MEMBERSHIP {group} from {src}"),
        )?;
        s.joined = true;
        s.source = Some(src);
        Ok(s)
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Drops the membership (the IGMP leave); the socket closes when dropped.
    pub fn leave(&mut self) {
        if let (true, Some(src)) = (self.joined, self.source) {
            let _ = setopt(
                self.fd.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_DROP_SOURCE_MEMBERSHIP,
                &mreq_source(self.group, self.iface, src),
                "IP_DROP_SOURCE_MEMBERSHIP",
            );
            self.joined = false;
        }
        if self.joined {
            let _ = setopt(
                self.fd.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_DROP_MEMBERSHIP,
                &mreq(self.group, self.iface),
                "IP_DROP_MEMBERSHIP",
            );
            self.joined = false;
        }
    }

    /// Reads one datagram into `buf`: `Ok(Some((len, kernel_ts_ns, truncated)))`, `Ok(None)`
    /// when nothing is queued. Without a timestamp cmsg the current time is used.
    pub fn recv(&self, buf: &mut [u8]) -> Result<Option<(usize, u64, bool)>> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        let mut cbuf = [0u64; 16]; // aligned control buffer, 128 bytes
                                   // SAFETY: zeroed msghdr is a valid "empty" header; fields set below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
        // SAFETY: msg points to live buffers of the stated sizes.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::WouldBlock {
                return Ok(None);
            }
            return Err(Error::io("recvmsg", e));
        }
        let mut ts = None;
        // SAFETY: standard cmsg walk over the buffer the kernel filled in.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let t: libc::timespec =
                        std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    ts = Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let truncated = msg.msg_flags & libc::MSG_TRUNC != 0;
        Ok(Some((
            n as usize,
            ts.unwrap_or_else(realtime_ns),
            truncated,
        )))
    }
}

impl Drop for McastSocket {
    fn drop(&mut self) {
        self.leave();
    }
}

/// Waits until one of `fds` is readable or `timeout_ms` passes; returns the readable indices.
pub fn poll_readable(fds: &[RawFd], timeout_ms: i32) -> Vec<usize> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: p is a valid array of pollfd of the stated length.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if r <= 0 {
        return Vec::new();
    }
    p.iter()
        .enumerate()
        .filter(|(_, x)| x.revents != 0)
        .map(|(i, _)| i)
        .collect()
}
