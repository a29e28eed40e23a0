//! AF_PACKET raw sockets bound to one interface (libc; Linux only).

use crate::Error;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const ETH_P_ALL: u16 = 0x0003;
/// `PACKET_IGNORE_OUTGOING` (Linux 4.20): do not hand us our own transmissions back.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// A raw socket on one interface: receives every frame arriving on it, sends frames out of it.
pub struct RawSock {
    fd: OwnedFd,
    /// The interface index.
    pub ifindex: i32,
    /// The interface name.
    pub name: String,
}

fn setsockopt_int(fd: RawFd, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> bool {
    // SAFETY: passing a pointer to a live c_int with its size.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// What `recv` saw.
pub enum Recv {
    /// A frame of this length (truncated to the buffer if longer: see `truncated`).
    Frame {
        /// Bytes in the buffer.
        len: usize,
        /// The frame was longer than the buffer.
        truncated: bool,
    },
    /// Nothing to read now.
    Empty,
}

impl RawSock {
    /// Opens a non-blocking raw socket bound to `ifname`, promiscuous, with a large receive
    /// buffer (bursts must queue in our qdisc, not be lost in the kernel).
    pub fn open(ifname: &str) -> Result<RawSock, Error> {
        let cname = CString::new(ifname).map_err(|_| Error::NoInterface(ifname.into()))?;
        // SAFETY: plain FFI calls with valid arguments; the fd is owned right after creation.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) } as i32;
        if ifindex == 0 {
            return Err(Error::NoInterface(ifname.into()));
        }
        // Protocol 0 at creation so nothing is queued before the bind to our interface.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(Error::last_os("socket(AF_PACKET)"));
        }
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex;
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(Error::last_os(format!("bind to {ifname}")));
        }
        // Best effort: older kernels lack it; recv() also filters PACKET_OUTGOING.
        let _ = setsockopt_int(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1);
        let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mr.mr_ifindex = ifindex;
        mr.mr_type = libc::PACKET_MR_PROMISC as u16;
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                &mr as *const libc::packet_mreq as *const libc::c_void,
                std::mem::size_of::<libc::packet_mreq>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(Error::last_os(format!("promiscuous mode on {ifname}")));
        }
        for opt in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
            if !setsockopt_int(fd.as_raw_fd(), libc::SOL_SOCKET, opt, 16 << 20) {
                let o2 = if opt == libc::SO_RCVBUFFORCE {
                    libc::SO_RCVBUF
                } else {
                    libc::SO_SNDBUF
                };
                let _ = setsockopt_int(fd.as_raw_fd(), libc::SOL_SOCKET, o2, 16 << 20);
            }
        }
        Ok(RawSock {
            fd,
            ifindex,
            name: ifname.to_string(),
        })
    }

    /// The file descriptor (for poll).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Reads one incoming frame into `buf`, skipping frames we sent ourselves.
    pub fn recv(&self, buf: &mut [u8]) -> Result<Recv, Error> {
        loop {
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut alen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: buffer and address pointers are valid for the lengths given.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_TRUNC,
                    &mut sll as *mut libc::sockaddr_ll as *mut libc::sockaddr,
                    &mut alen,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::EAGAIN) => Ok(Recv::Empty),
                    Some(libc::EINTR) => continue,
                    _ => Err(Error::Sys {
                        what: format!("recv on {}", self.name),
                        source: e,
                    }),
                };
            }
            if sll.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            let n = n as usize;
            return Ok(Recv::Frame {
                len: n.min(buf.len()),
                truncated: n > buf.len(),
            });
        }
    }

    /// Sends one frame out of the interface. Returns false if the kernel refused it
    /// (counted as a send drop by the caller).
    pub fn send(&self, frame: &[u8]) -> bool {
        // SAFETY: the frame slice is valid for its length; the socket is bound to the interface.
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                libc::MSG_DONTWAIT,
            )
        };
        n == frame.len() as isize
    }

    /// Frames the kernel dropped on this socket since the last call (PACKET_STATISTICS).
    pub fn kernel_drops(&self) -> u64 {
        let mut st: libc::tpacket_stats = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: valid pointer and length for the option's struct.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                &mut st as *mut libc::tpacket_stats as *mut libc::c_void,
                &mut len,
            )
        };
        if rc == 0 {
            st.tp_drops as u64
        } else {
            0
        }
    }
}
