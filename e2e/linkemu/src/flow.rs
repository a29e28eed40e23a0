//! Frame inspection: the flow id used by per-flow fair queuing, and the multicast/IGMP facts the
//! counters keep (which is what lets the testbed measure IGMP leave latency on the bottleneck).
//!
//! Parsing never panics: anything short or unknown is simply "not IP" (flow 0).

use serde::{Deserialize, Serialize};

/// How frames are mapped to flows.
///
/// A layered session sends every cumulative layer to its own group; a fair scheduler must treat
/// all of them as ONE flow (PLM's requirement, DESIGN.md "Emulated network rules"). We therefore
/// key multicast traffic by the group address masked to `mcast_prefix_len` bits (default /24:
/// a session's groups are allocated inside one /24), or, when `udp_port_block` is non-zero, by
/// the UDP destination port divided by `udp_port_block` (a session's layers use consecutive
/// ports). Unicast IPv4 is keyed by the 5-tuple, so each TCP or CBR flow is its own flow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FlowConfig {
    /// Multicast groups sharing this many leading bits are one flow (0..=32).
    pub mcast_prefix_len: u8,
    /// If non-zero, multicast UDP flows are keyed by `dst_port / udp_port_block` instead of the
    /// group prefix.
    pub udp_port_block: u16,
}

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig {
            mcast_prefix_len: 24,
            udp_port_block: 0,
        }
    }
}

/// IGMP message kinds we record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Igmp {
    /// Membership report (join or refresh) for a group.
    Report(u32),
    /// Leave for a group (IGMPv2 leave, or an IGMPv3 record that leaves).
    Leave(u32),
    /// Membership query (general if group 0).
    Query(u32),
}

/// What we learned about one frame.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FrameInfo {
    /// Flow id for the queue discipline.
    pub flow: u64,
    /// IPv4 destination when it is a multicast data packet (not IGMP).
    pub mcast_dst: Option<u32>,
    /// IGMP messages carried (an IGMPv3 report may carry several records).
    pub igmp: Vec<Igmp>,
    /// Bytes from the start of the IP header (the frame minus its Ethernet header), or the whole
    /// frame length for non-IP frames.
    pub l3_len: u32,
}

const ETH_HDR: usize = 14;

fn be16(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?]))
}
fn be32(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_be_bytes([
        *b.get(i)?,
        *b.get(i + 1)?,
        *b.get(i + 2)?,
        *b.get(i + 3)?,
    ]))
}

/// FNV-1a, to fold a 5-tuple into a flow id without a hashing dependency.
fn fnv(parts: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    // Keep the top bit free: it marks multicast session flows.
    h >> 1
}

fn is_multicast(a: u32) -> bool {
    (a >> 28) == 0xE
}

/// Inspects one Ethernet frame.
pub fn inspect(frame: &[u8], cfg: &FlowConfig) -> FrameInfo {
    let mut info = FrameInfo {
        l3_len: frame.len() as u32,
        ..FrameInfo::default()
    };
    let Some(ethertype) = be16(frame, 12) else {
        return info;
    };
    match ethertype {
        0x0800 => inspect_ipv4(&frame[ETH_HDR..], cfg, &mut info),
        0x86DD => {
            info.l3_len = (frame.len() - ETH_HDR) as u32;
            // IPv6: flow by source and destination address only (we do not emulate v6 sessions).
            if let (Some(s), Some(d)) = (frame.get(22..38), frame.get(38..54)) {
                let w = |x: &[u8], i: usize| {
                    u64::from_le_bytes(x[i..i + 8].try_into().unwrap_or([0; 8]))
                };
                info.flow = fnv(&[6, w(s, 0), w(s, 8), w(d, 0), w(d, 8)]);
            }
        }
        _ => {}
    }
    info
}

fn inspect_ipv4(ip: &[u8], cfg: &FlowConfig, info: &mut FrameInfo) {
    info.l3_len = ip.len() as u32;
    let Some(&vihl) = ip.first() else { return };
    if vihl >> 4 != 4 {
        return;
    }
    let ihl = ((vihl & 0x0F) as usize) * 4;
    if ihl < 20 || ip.len() < ihl {
        return;
    }
    let proto = ip[9];
    let (Some(src), Some(dst)) = (be32(ip, 12), be32(ip, 16)) else {
        return;
    };
    // Only the first fragment carries ports.
    let frag_off = be16(ip, 6).unwrap_or(0) & 0x1FFF;
    let l4 = &ip[ihl..];
    let (sport, dport) = if frag_off == 0 && (proto == 6 || proto == 17) {
        (be16(l4, 0).unwrap_or(0), be16(l4, 2).unwrap_or(0))
    } else {
        (0, 0)
    };
    if proto == 2 {
        // IGMP: control traffic, its own flow.
        info.flow = fnv(&[2, src as u64]);
        parse_igmp(l4, dst, &mut info.igmp);
        return;
    }
    if is_multicast(dst) {
        info.mcast_dst = Some(dst);
        info.flow = if cfg.udp_port_block > 0 && proto == 17 {
            (1u64 << 63) | (1u64 << 62) | (dport / cfg.udp_port_block) as u64
        } else {
            let bits = cfg.mcast_prefix_len.min(32) as u32;
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            (1u64 << 63) | (dst & mask) as u64
        };
        return;
    }
    info.flow = fnv(&[
        proto as u64,
        src as u64,
        dst as u64,
        sport as u64,
        dport as u64,
    ]);
}

/// Where the data of the Layercast cc extension element starts in an Ethernet frame (IPv4,
/// UDP, RTP with the RFC 8285 one-byte extension carrying element ID 1 = `urn:layercast:cc`:
/// layer, bunch_pos, bunch_len, send time in µs), with the IP header length; None for anything
/// else.
fn cc_data(frame: &[u8]) -> Option<(usize, usize)> {
    if be16(frame, 12)? != 0x0800 {
        return None;
    }
    let ip = frame.get(ETH_HDR..)?;
    let ihl = ((ip.first()? & 0x0F) as usize) * 4;
    if ip.first()? >> 4 != 4 || ip.get(9)? != &17 || be16(ip, 6)? & 0x1FFF != 0 || ihl < 20 {
        return None;
    }
    let rtp = ip.get(ihl + 8..)?;
    let b0 = *rtp.first()?;
    if b0 >> 6 != 2 || b0 & 0x10 == 0 {
        return None; // not RTP v2, or no header extension
    }
    let ext = 12 + 4 * (b0 & 0x0F) as usize;
    if be16(rtp, ext)? != 0xBEDE {
        return None;
    }
    let end = (ext + 4 + 4 * be16(rtp, ext + 2)? as usize).min(rtp.len());
    let mut i = ext + 4;
    while i < end {
        let h = rtp[i];
        if h == 0 {
            i += 1; // padding
            continue;
        }
        let (id, len) = (h >> 4, (h & 0x0F) as usize + 1);
        if id == 15 {
            return None;
        }
        if id == 1 {
            return (len >= 11 && i + 1 + 11 <= rtp.len())
                .then_some((ETH_HDR + ihl + 8 + i + 1, ihl));
        }
        i += 1 + len;
    }
    None
}

/// The `bunch_pos` field of a Layercast data packet, or None for anything else.
pub fn cc_bunch_pos(frame: &[u8]) -> Option<u8> {
    cc_data(frame).map(|(d, _)| frame[d + 1])
}

/// Adds `shift_us` to a Layercast data packet's cc send time (a sender clock offset as the
/// receiver sees it) and zeroes the UDP checksum (allowed in IPv4; the payload changed).
/// Returns whether the frame was one.
pub fn shift_cc_send_time(frame: &mut [u8], shift_us: i64) -> bool {
    let Some((d, ihl)) = cc_data(frame) else {
        return false;
    };
    let mut t = [0u8; 8];
    t.copy_from_slice(&frame[d + 3..d + 11]);
    let v = u64::from_be_bytes(t).wrapping_add_signed(shift_us);
    frame[d + 3..d + 11].copy_from_slice(&v.to_be_bytes());
    let ck = ETH_HDR + ihl + 6;
    frame[ck..ck + 2].copy_from_slice(&[0, 0]);
    true
}

/// Parses one IGMP message (`b` starts at the IGMP header) into `out`.
pub fn parse_igmp(b: &[u8], ip_dst: u32, out: &mut Vec<Igmp>) {
    let Some(&ty) = b.first() else { return };
    match ty {
        0x11 => out.push(Igmp::Query(be32(b, 4).unwrap_or(0))),
        0x12 | 0x16 => {
            if let Some(g) = be32(b, 4) {
                out.push(Igmp::Report(g));
            }
        }
        0x17 => {
            // IGMPv2 leave: group in the message (sent to 224.0.0.2).
            if let Some(g) = be32(b, 4) {
                out.push(Igmp::Leave(g));
            }
            let _ = ip_dst;
        }
        0x22 => {
            // IGMPv3 report: records of (type, aux len, nsrc, group, sources, aux).
            let n = be16(b, 6).unwrap_or(0) as usize;
            let mut off = 8usize;
            for _ in 0..n {
                let (Some(&rtype), Some(&aux), Some(nsrc), Some(g)) = (
                    b.get(off),
                    b.get(off + 1),
                    be16(b, off + 2),
                    be32(b, off + 4),
                ) else {
                    return;
                };
                // Leave = exclude nothing -> include nothing: CHANGE_TO_INCLUDE (3) with no
                // sources, or MODE_IS_INCLUDE (1) with no sources. In the SSM range (232/8,
                // RFC 4607) memberships are include-mode only and a host leaves a channel with
                // BLOCK_OLD_SOURCES (6) {S} (Linux: the last source of an include-mode group);
                // with one source per group, as in every Layercast session, that is the host
                // leaving the group. Outside it BLOCK only removes sources: neither event.
                let ssm = g >> 24 == 232;
                let leave = ((rtype == 3 || rtype == 1) && nsrc == 0) || (rtype == 6 && ssm);
                if rtype != 6 || ssm {
                    out.push(if leave {
                        Igmp::Leave(g)
                    } else {
                        Igmp::Report(g)
                    });
                }
                off += 8 + 4 * nsrc as usize + 4 * aux as usize;
            }
        }
        _ => {}
    }
}

/// Dotted quad for a host-order IPv4 address.
pub fn ip_string(a: u32) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds an Ethernet+IPv4+UDP frame with `payload` bytes of UDP payload.
    pub fn udp_frame(
        src: [u8; 4],
        dst: [u8; 4],
        sport: u16,
        dport: u16,
        payload: usize,
    ) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + payload];
        f[12] = 0x08;
        f[13] = 0x00;
        let ip = &mut f[14..];
        ip[0] = 0x45;
        let tot = (20 + 8 + payload) as u16;
        ip[2..4].copy_from_slice(&tot.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&dst);
        ip[20..22].copy_from_slice(&sport.to_be_bytes());
        ip[22..24].copy_from_slice(&dport.to_be_bytes());
        f
    }

    fn igmp_frame(body: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 24];
        f[12] = 0x08;
        f[14] = 0x46; // IHL 6: router alert option
        f[14 + 9] = 2;
        f[14 + 12..14 + 16].copy_from_slice(&[10, 0, 0, 2]);
        f[14 + 16..14 + 20].copy_from_slice(&[224, 0, 0, 2]);
        f.extend_from_slice(body);
        f
    }

    #[test]
    fn cc_bunch_pos_reads_the_extension() {
        let mut f = udp_frame([10, 0, 0, 1], [239, 255, 100, 1], 5000, 5004, 60);
        let rtp = 14 + 28;
        f[rtp] = 0x90; // V=2, X=1, CC=0
        f[rtp + 12..rtp + 16].copy_from_slice(&[0xBE, 0xDE, 0, 3]);
        f[rtp + 16] = 0x1A; // ID 1, 11 bytes
        f[rtp + 17] = 4; // layer
        f[rtp + 18] = 1; // bunch_pos
        f[rtp + 19] = 2; // bunch_len
        assert_eq!(cc_bunch_pos(&f), Some(1));
        f[rtp + 20..rtp + 28].copy_from_slice(&1_000_000u64.to_be_bytes());
        f[14 + 26] = 0xAB; // a UDP checksum
        assert!(shift_cc_send_time(&mut f, -500_000));
        assert_eq!(&f[rtp + 20..rtp + 28], &500_000u64.to_be_bytes());
        assert_eq!(&f[14 + 26..14 + 28], &[0, 0]);
        assert_eq!(cc_bunch_pos(&f), Some(1));
        f[rtp + 16] = 0x2A; // another element ID
        assert_eq!(cc_bunch_pos(&f), None);
        f[rtp] = 0x80; // no extension
        assert_eq!(cc_bunch_pos(&f), None);
        for n in 0..f.len() {
            let _ = cc_bunch_pos(&f[..n]);
        }
    }

    #[test]
    fn session_groups_share_one_flow() {
        let cfg = FlowConfig::default();
        let a = inspect(
            &udp_frame([10, 0, 0, 1], [239, 1, 1, 1], 5000, 6000, 100),
            &cfg,
        );
        let b = inspect(
            &udp_frame([10, 0, 0, 1], [239, 1, 1, 9], 5000, 6008, 100),
            &cfg,
        );
        let c = inspect(
            &udp_frame([10, 0, 0, 1], [239, 1, 2, 1], 5000, 6000, 100),
            &cfg,
        );
        assert_eq!(a.flow, b.flow);
        assert_ne!(a.flow, c.flow);
        assert_eq!(a.mcast_dst, Some(u32::from_be_bytes([239, 1, 1, 1])));
        assert_eq!(a.l3_len, 128);
        let by_port = FlowConfig {
            mcast_prefix_len: 24,
            udp_port_block: 16,
        };
        let d = inspect(
            &udp_frame([10, 0, 0, 1], [239, 1, 2, 1], 5000, 6001, 100),
            &by_port,
        );
        let e = inspect(
            &udp_frame([10, 0, 0, 1], [239, 9, 9, 9], 5000, 6015, 100),
            &by_port,
        );
        let f = inspect(
            &udp_frame([10, 0, 0, 1], [239, 9, 9, 9], 5000, 6016, 100),
            &by_port,
        );
        assert_eq!(d.flow, e.flow);
        assert_ne!(e.flow, f.flow);
    }

    #[test]
    fn unicast_flows_differ_by_port() {
        let cfg = FlowConfig::default();
        let a = inspect(
            &udp_frame([10, 0, 0, 1], [10, 0, 1, 1], 5000, 6000, 10),
            &cfg,
        );
        let b = inspect(
            &udp_frame([10, 0, 0, 1], [10, 0, 1, 1], 5001, 6000, 10),
            &cfg,
        );
        assert_ne!(a.flow, b.flow);
        assert_eq!(a.mcast_dst, None);
        assert_eq!(a.flow >> 63, 0);
    }

    #[test]
    fn igmp_messages_are_recognised() {
        let cfg = FlowConfig::default();
        let leave = igmp_frame(&[0x17, 0, 0, 0, 239, 1, 1, 3]);
        assert_eq!(
            inspect(&leave, &cfg).igmp,
            vec![Igmp::Leave(u32::from_be_bytes([239, 1, 1, 3]))]
        );
        let v3 = igmp_frame(&[
            0x22, 0, 0, 0, 0, 0, 0, 2, // header, 2 records
            4, 0, 0, 0, 239, 1, 1, 1, // CHANGE_TO_EXCLUDE {} = join
            3, 0, 0, 0, 239, 1, 1, 2, // CHANGE_TO_INCLUDE {} = leave
        ]);
        assert_eq!(
            inspect(&v3, &cfg).igmp,
            vec![
                Igmp::Report(u32::from_be_bytes([239, 1, 1, 1])),
                Igmp::Leave(u32::from_be_bytes([239, 1, 1, 2]))
            ]
        );
        // Source-specific: ALLOW {S} joins the channel; BLOCK {S} leaves it in the SSM range
        // (RFC 4607: include mode only, one source per group in a Layercast session) and is
        // only a change of sources outside it.
        let ssm = igmp_frame(&[
            0x22, 0, 0, 0, 0, 0, 0, 3, // header, 3 records
            5, 0, 0, 1, 232, 255, 100, 0, 10, 0, 0, 1, // ALLOW_NEW_SOURCES {10.0.0.1}
            6, 0, 0, 1, 232, 255, 100, 1, 10, 0, 0, 1, // BLOCK_OLD_SOURCES {10.0.0.1}
            6, 0, 0, 1, 239, 1, 1, 4, 10, 0, 0, 1, // BLOCK in any-source space: no event
        ]);
        assert_eq!(
            inspect(&ssm, &cfg).igmp,
            vec![
                Igmp::Report(u32::from_be_bytes([232, 255, 100, 0])),
                Igmp::Leave(u32::from_be_bytes([232, 255, 100, 1]))
            ]
        );
        // truncated record list: no panic, partial result
        let bad = igmp_frame(&[0x22, 0, 0, 0, 0, 0, 0, 5, 4, 0]);
        assert!(inspect(&bad, &cfg).igmp.is_empty());
    }

    #[test]
    fn garbage_never_panics() {
        let cfg = FlowConfig::default();
        let mut rng = netmodel::rng::Rng::new(1);
        for len in 0..200 {
            for _ in 0..50 {
                let mut f: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                if len > 14 {
                    f[12] = 0x08;
                    f[13] = 0;
                    f[14] = 0x40 | (f[14] & 0x0f);
                }
                let _ = inspect(&f, &cfg);
            }
        }
    }
}
