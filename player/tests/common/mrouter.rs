//! A minimal IGMP-driven multicast router for the test router namespace, run on a thread of
//! the test process (it enters the namespace with `setns`).
//!
//! Why not igmpproxy: igmpproxy 0.3 records the *source* of a route activation (the sender,
//! whose traffic reaches the router before anyone joins) as a downstream host of the group,
//! so its quickleave never fires ("quickleave is enabled but there are still some downstream
//! hosts left") and a left group keeps flowing until the route ages out, 26-28 s here
//! (`netns_leave` measures both). ERA and PLM assume fast leaves (era.md AC-14: <= 200 ms).
//!
//! What it does, with the kernel's multicast routing API (`linux/mroute.h`):
//! - one VIF for the upstream and one for the downstream interface;
//! - `IGMPMSG_NOCACHE` upcall for (S,G) traffic without a route: install the (S,G) route at
//!   once, forwarding downstream if G has members, else to nothing (so the kernel neither
//!   queues the first packets, which would arrive seconds late on a join, nor keeps asking);
//! - IGMPv2 report / IGMPv3 report with an EXCLUDE record on the downstream side: G joined,
//!   every known (S,G) route now forwards downstream;
//! - IGMPv2 leave / IGMPv3 TO_INCLUDE({}) record: G left at once (fast leave: the test
//!   network has one receiver host per downstream link), routes stop forwarding.
//!
//! No querier and no membership timeout: test hosts always leave explicitly or are torn down.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

const MRT_INIT: libc::c_int = 200;
const MRT_ADD_VIF: libc::c_int = 202;
const MRT_ADD_MFC: libc::c_int = 204;
const VIFF_USE_IFINDEX: u8 = 0x8;
const MAXVIFS: usize = 32;
const IGMPMSG_NOCACHE: u8 = 1;

#[repr(C)]
struct VifCtl {
    vifc_vifi: u16,
    vifc_flags: u8,
    vifc_threshold: u8,
    vifc_rate_limit: u32,
    vifc_lcl_ifindex: i32,
    vifc_rmt_addr: u32,
}

#[repr(C)]
struct MfcCtl {
    mfcc_origin: u32,
    mfcc_mcastgrp: u32,
    mfcc_parent: u16,
    mfcc_ttls: [u8; MAXVIFS],
    mfcc_pkt_cnt: u32,
    mfcc_byte_cnt: u32,
    mfcc_wrong_if: u32,
    mfcc_expire: i32,
}

/// Join/leave events with their times, for latency measurements.
#[derive(Default, Debug, Clone)]
pub struct RouterLog {
    pub events: Vec<(Instant, String)>,
}

pub struct MRouter {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub log: Arc<Mutex<RouterLog>>,
}

fn setopt<T>(fd: i32, opt: libc::c_int, v: &T) -> std::io::Result<()> {
    // SAFETY: v is a live T of the stated size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_IP,
            opt,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as u32,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn ifindex(name: &str) -> i32 {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: valid C string.
    unsafe { libc::if_nametoindex(c.as_ptr()) as i32 }
}

impl MRouter {
    /// Starts the router in namespace `ns` between `up` (vif 0) and `down` (vif 1).
    pub fn start(ns: &str, up: &str, down: &str) -> MRouter {
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(RouterLog::default()));
        let (st, lg) = (stop.clone(), log.clone());
        let (ns, up, down) = (ns.to_string(), up.to_string(), down.to_string());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let f = std::fs::File::open(format!("/var/run/netns/{ns}")).expect("netns");
            // SAFETY: setns for this thread only.
            assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
            // SAFETY: plain socket call.
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_IGMP) };
            assert!(
                fd >= 0,
                "raw IGMP socket: {}",
                std::io::Error::last_os_error()
            );
            let one: i32 = 1;
            setopt(fd, MRT_INIT, &one).expect("MRT_INIT");
            for (i, name) in [&up, &down].iter().enumerate() {
                let v = VifCtl {
                    vifc_vifi: i as u16,
                    vifc_flags: VIFF_USE_IFINDEX,
                    vifc_threshold: 1,
                    vifc_rate_limit: 0,
                    vifc_lcl_ifindex: ifindex(name),
                    vifc_rmt_addr: 0,
                };
                setopt(fd, MRT_ADD_VIF, &v).expect("MRT_ADD_VIF");
            }
            // IGMPv2 leaves go to all-routers (224.0.0.2), IGMPv3 reports to 224.0.0.22: the
            // router must be a member of both on the downstream side to receive them.
            let down_addr = u32::from(Ipv4Addr::new(10, 77, 2, 1)).to_be();
            for g in [Ipv4Addr::new(224, 0, 0, 2), Ipv4Addr::new(224, 0, 0, 22)] {
                let m = libc::ip_mreq {
                    imr_multiaddr: libc::in_addr {
                        s_addr: u32::from(g).to_be(),
                    },
                    imr_interface: libc::in_addr { s_addr: down_addr },
                };
                setopt(fd, libc::IP_ADD_MEMBERSHIP, &m).expect("join all-routers");
            }
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 100_000,
            };
            // SAFETY: valid timeval.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_RCVTIMEO,
                    &tv as *const _ as *const libc::c_void,
                    std::mem::size_of::<libc::timeval>() as u32,
                );
            }
            let _ = ready_tx.send(());
            let mut members: BTreeSet<u32> = BTreeSet::new();
            let mut sources: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
            let set_route = |src: u32, grp: u32, fwd: bool| {
                let mut ttls = [0u8; MAXVIFS];
                if fwd {
                    ttls[1] = 1;
                }
                let m = MfcCtl {
                    mfcc_origin: src.to_be(),
                    mfcc_mcastgrp: grp.to_be(),
                    mfcc_parent: 0,
                    mfcc_ttls: ttls,
                    mfcc_pkt_cnt: 0,
                    mfcc_byte_cnt: 0,
                    mfcc_wrong_if: 0,
                    mfcc_expire: 0,
                };
                let _ = setopt(fd, MRT_ADD_MFC, &m);
            };
            let mut buf = [0u8; 2048];
            while !st.load(Ordering::Relaxed) {
                // SAFETY: buf is valid for its length.
                let n =
                    unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
                if n < 20 {
                    continue;
                }
                let b = &buf[..n as usize];
                let be = |o: usize| u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
                if b[9] == 0 {
                    // Kernel upcall (struct igmpmsg overlays the IP header).
                    if b[8] == IGMPMSG_NOCACHE && b[10] == 0 {
                        let (src, grp) = (be(12), be(16));
                        sources.entry(grp).or_default().insert(src);
                        set_route(src, grp, members.contains(&grp));
                    }
                    continue;
                }
                let ihl = ((b[0] & 0x0f) as usize) * 4;
                if b.len() < ihl + 8 {
                    continue;
                }
                let src_ip = be(12);
                // Only hosts on the downstream link (10.77.2.0/24) other than the router.
                if src_ip >> 8 != u32::from(Ipv4Addr::new(10, 77, 2, 0)) >> 8
                    || src_ip == u32::from(Ipv4Addr::new(10, 77, 2, 1))
                {
                    continue;
                }
                let t = b[ihl];
                let mut changes: Vec<(u32, bool)> = Vec::new();
                match t {
                    0x16 => changes.push((be(ihl + 4), true)),
                    0x17 => changes.push((be(ihl + 4), false)),
                    0x22 => {
                        let nrec = u16::from_be_bytes([b[ihl + 6], b[ihl + 7]]) as usize;
                        let mut o = ihl + 8;
                        for _ in 0..nrec {
                            if b.len() < o + 8 {
                                break;
                            }
                            let (rtype, aux, nsrc) = (
                                b[o],
                                b[o + 1] as usize,
                                u16::from_be_bytes([b[o + 2], b[o + 3]]) as usize,
                            );
                            let grp = be(o + 4);
                            match (rtype, nsrc) {
                                (2, _) | (4, _) => changes.push((grp, true)),
                                (1, 0) | (3, 0) => changes.push((grp, false)),
                                _ => {}
                            }
                            o += 8 + 4 * nsrc + 4 * aux;
                        }
                    }
                    _ => {}
                }
                for (grp, join) in changes {
                    if !Ipv4Addr::from(grp).is_multicast() || Ipv4Addr::from(grp).octets()[0] == 224
                    {
                        continue;
                    }
                    let changed = if join {
                        members.insert(grp)
                    } else {
                        members.remove(&grp)
                    };
                    if changed {
                        for &s in sources.get(&grp).into_iter().flatten() {
                            set_route(s, grp, join);
                        }
                        lg.lock().unwrap().events.push((
                            Instant::now(),
                            format!(
                                "{} {}",
                                if join { "join" } else { "leave" },
                                Ipv4Addr::from(grp)
                            ),
                        ));
                    }
                }
            }
            // SAFETY: closing our own fd; the kernel tears down VIFs and routes (MRT_DONE).
            unsafe { libc::close(fd) };
        });
        ready_rx.recv().expect("router thread failed to start");
        MRouter {
            stop,
            thread: Some(thread),
            log,
        }
    }
}

impl Drop for MRouter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
