//! VP9 RTP payload format (RFC 9628): payload descriptor, scalability structure, packetizer and
//! the per-layer RTP stream writer.
//!
//! Layout of the descriptor (non-flexible mode, what we send):
//! `I P L F B E V Z` · `M PID(15)` · `TID U SID D` · `TL0PICIDX` · \[SS on key pictures\].
//! Every cumulative layer k carries exactly one cell's frame per picture, so within each RTP
//! stream the marker bit on the frame's last packet is the correct end-of-picture marker for
//! that stream; layer 0 alone is therefore a standard single-layer VP9 RTP stream.

use crate::error::{need, Error, Result};
use crate::ladder::LayerLadder;
use crate::rtp::RtpHeader;
use crate::vpx::{EncodedPicture, LayerFrame};

/// One entry of the picture group in the scalability structure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GofEntry {
    pub tid: u8,
    pub switch_up: bool,
    /// Reference picture-ID differences (1..=255), at most 3.
    pub p_diffs: Vec<u8>,
}

/// Scalability structure (RFC 9628 §4.2.1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScalabilityStructure {
    /// Resolution per spatial layer (lowest first), if present (Y bit). Its length is N_S + 1
    /// when present.
    pub resolutions: Vec<(u16, u16)>,
    /// Number of spatial layers (N_S + 1), 1..=8.
    pub spatial_layers: u8,
    /// Picture group (G bit), empty if absent.
    pub gof: Vec<GofEntry>,
}

/// Parsed VP9 payload descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PayloadDescriptor {
    /// 7- or 15-bit picture ID (I bit).
    pub picture_id: Option<u16>,
    /// Whether the picture ID used the 15-bit form.
    pub long_picture_id: bool,
    /// P: inter-picture predicted.
    pub inter_picture: bool,
    /// F: flexible mode.
    pub flexible: bool,
    /// B: start of a layer frame.
    pub start: bool,
    /// E: end of a layer frame.
    pub end: bool,
    /// Z: not used for inter-layer prediction by the next spatial layer.
    pub not_ref_upper: bool,
    /// Layer indices (L bit): (TID, U, SID, D).
    pub layer: Option<LayerIndices>,
    /// TL0PICIDX (non-flexible mode with L).
    pub tl0_pic_idx: Option<u8>,
    /// Reference P_DIFFs (flexible mode with P), at most 3.
    pub p_diffs: Vec<u8>,
    /// Scalability structure (V bit).
    pub ss: Option<ScalabilityStructure>,
}

/// Layer indices byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LayerIndices {
    pub tid: u8,
    pub switch_up: bool,
    pub sid: u8,
    pub inter_layer: bool,
}

impl PayloadDescriptor {
    /// Key picture (RFC 9628: P = 0, SID = 0, B = 1).
    pub fn is_key_picture_start(&self) -> bool {
        !self.inter_picture && self.start && self.layer.map_or(0, |l| l.sid) == 0
    }
    /// Spatial id (0 when layer indices are absent).
    pub fn sid(&self) -> u8 {
        self.layer.map_or(0, |l| l.sid)
    }
    /// Temporal id (0 when layer indices are absent).
    pub fn tid(&self) -> u8 {
        self.layer.map_or(0, |l| l.tid)
    }

    /// Parse a descriptor from the front of an RTP payload; returns it and its length.
    pub fn parse(buf: &[u8]) -> Result<(Self, usize)> {
        let mut r = Reader { b: buf, pos: 0 };
        let b0 = r.u8("descriptor")?;
        let (i, p, l, f, b, e, v, z) = (
            b0 & 0x80 != 0,
            b0 & 0x40 != 0,
            b0 & 0x20 != 0,
            b0 & 0x10 != 0,
            b0 & 0x08 != 0,
            b0 & 0x04 != 0,
            b0 & 0x02 != 0,
            b0 & 0x01 != 0,
        );
        let mut d = PayloadDescriptor {
            inter_picture: p,
            flexible: f,
            start: b,
            end: e,
            not_ref_upper: z,
            ..Default::default()
        };
        if i {
            let x = r.u8("picture id")?;
            if x & 0x80 != 0 {
                let y = r.u8("extended picture id")?;
                d.picture_id = Some((((x & 0x7f) as u16) << 8) | y as u16);
                d.long_picture_id = true;
            } else {
                d.picture_id = Some(x as u16);
            }
        }
        if l {
            let x = r.u8("layer indices")?;
            d.layer = Some(LayerIndices {
                tid: x >> 5,
                switch_up: x & 0x10 != 0,
                sid: (x >> 1) & 0x7,
                inter_layer: x & 0x01 != 0,
            });
            if !f {
                d.tl0_pic_idx = Some(r.u8("TL0PICIDX")?);
            }
        }
        if f && p {
            loop {
                let x = r.u8("P_DIFF")?;
                if d.p_diffs.len() == 3 {
                    return Err(Error::BadDescriptor("more than 3 P_DIFFs"));
                }
                if x >> 1 == 0 {
                    return Err(Error::BadDescriptor("P_DIFF of zero"));
                }
                d.p_diffs.push(x >> 1);
                if x & 1 == 0 {
                    break;
                }
            }
        }
        if v {
            d.ss = Some(parse_ss(&mut r)?);
        }
        Ok((d, r.pos))
    }

    /// Append the descriptor to `out`. Fails if a field does not fit.
    pub fn write(&self, out: &mut Vec<u8>) -> Result<()> {
        let flexible_refs = self.flexible && self.inter_picture;
        if flexible_refs && (self.p_diffs.is_empty() || self.p_diffs.len() > 3) {
            return Err(Error::BadDescriptor("flexible P needs 1..=3 P_DIFFs"));
        }
        let mut b0 = 0u8;
        b0 |= (self.picture_id.is_some() as u8) << 7;
        b0 |= (self.inter_picture as u8) << 6;
        b0 |= (self.layer.is_some() as u8) << 5;
        b0 |= (self.flexible as u8) << 4;
        b0 |= (self.start as u8) << 3;
        b0 |= (self.end as u8) << 2;
        b0 |= (self.ss.is_some() as u8) << 1;
        b0 |= self.not_ref_upper as u8;
        out.push(b0);
        if let Some(pid) = self.picture_id {
            if self.long_picture_id || pid > 0x7f {
                if pid > 0x7fff {
                    return Err(Error::OutOfRange {
                        field: "picture id",
                        value: pid as u64,
                    });
                }
                out.push(0x80 | (pid >> 8) as u8);
                out.push(pid as u8);
            } else {
                out.push(pid as u8);
            }
        }
        if let Some(l) = self.layer {
            if l.tid > 7 || l.sid > 7 {
                return Err(Error::OutOfRange {
                    field: "layer id",
                    value: l.tid.max(l.sid) as u64,
                });
            }
            out.push(
                (l.tid << 5) | ((l.switch_up as u8) << 4) | (l.sid << 1) | l.inter_layer as u8,
            );
            if !self.flexible {
                out.push(self.tl0_pic_idx.unwrap_or(0));
            }
        }
        if flexible_refs {
            for (i, &pd) in self.p_diffs.iter().enumerate() {
                if pd == 0 || pd > 127 {
                    return Err(Error::OutOfRange {
                        field: "P_DIFF",
                        value: pd as u64,
                    });
                }
                let more = (i + 1 < self.p_diffs.len()) as u8;
                out.push((pd << 1) | more);
            }
        }
        if let Some(ss) = &self.ss {
            write_ss(ss, out)?;
        }
        Ok(())
    }

    /// Length of the serialised descriptor.
    pub fn len(&self) -> usize {
        let mut v = Vec::with_capacity(32);
        match self.write(&mut v) {
            Ok(()) => v.len(),
            Err(_) => 0,
        }
    }

    /// Never empty (the first byte is mandatory); present for API symmetry.
    pub fn is_empty(&self) -> bool {
        false
    }
}

fn parse_ss(r: &mut Reader<'_>) -> Result<ScalabilityStructure> {
    let x = r.u8("SS header")?;
    let ns = (x >> 5) + 1;
    let y = x & 0x10 != 0;
    let g = x & 0x08 != 0;
    let mut ss = ScalabilityStructure {
        spatial_layers: ns,
        ..Default::default()
    };
    if y {
        for _ in 0..ns {
            let w = r.u16("SS width")?;
            let h = r.u16("SS height")?;
            ss.resolutions.push((w, h));
        }
    }
    if g {
        let n_g = r.u8("N_G")?;
        for _ in 0..n_g {
            let e = r.u8("GOF entry")?;
            let refs = (e >> 2) & 0x3;
            let mut p_diffs = Vec::with_capacity(refs as usize);
            for _ in 0..refs {
                let pd = r.u8("GOF P_DIFF")?;
                if pd == 0 {
                    return Err(Error::BadDescriptor("GOF P_DIFF of zero"));
                }
                p_diffs.push(pd);
            }
            ss.gof.push(GofEntry {
                tid: e >> 5,
                switch_up: e & 0x10 != 0,
                p_diffs,
            });
        }
    }
    Ok(ss)
}

fn write_ss(ss: &ScalabilityStructure, out: &mut Vec<u8>) -> Result<()> {
    if ss.spatial_layers == 0 || ss.spatial_layers > 8 {
        return Err(Error::OutOfRange {
            field: "SS spatial layers",
            value: ss.spatial_layers as u64,
        });
    }
    let y = !ss.resolutions.is_empty();
    if y && ss.resolutions.len() != ss.spatial_layers as usize {
        return Err(Error::BadDescriptor(
            "SS needs one resolution per spatial layer",
        ));
    }
    if ss.gof.len() > 255 {
        return Err(Error::OutOfRange {
            field: "N_G",
            value: ss.gof.len() as u64,
        });
    }
    let g = !ss.gof.is_empty();
    out.push(((ss.spatial_layers - 1) << 5) | ((y as u8) << 4) | ((g as u8) << 3));
    for &(w, h) in &ss.resolutions {
        out.extend_from_slice(&w.to_be_bytes());
        out.extend_from_slice(&h.to_be_bytes());
    }
    if g {
        out.push(ss.gof.len() as u8);
        for e in &ss.gof {
            if e.tid > 7 || e.p_diffs.len() > 3 || e.p_diffs.contains(&0) {
                return Err(Error::BadDescriptor("bad GOF entry"));
            }
            out.push((e.tid << 5) | ((e.switch_up as u8) << 4) | ((e.p_diffs.len() as u8) << 2));
            out.extend_from_slice(&e.p_diffs);
        }
    }
    Ok(())
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn u8(&mut self, what: &'static str) -> Result<u8> {
        need(what, self.pos + 1, self.b.len())?;
        self.pos += 1;
        Ok(self.b[self.pos - 1])
    }
    fn u16(&mut self, what: &'static str) -> Result<u16> {
        Ok(((self.u8(what)? as u16) << 8) | self.u8(what)? as u16)
    }
}

/// The picture group libvpx's built-in temporal patterns follow, as SS GOF entries.
///
/// 0212 (3 TL): TL0 refs the previous TL0 (4 back); TL2 refs TL0 (1 back); TL1 refs TL0
/// (2 back); the second TL2 refs TL1 (1 back). 0101 (2 TL): TL0 refs TL0 (2 back), TL1 refs
/// TL0 (1 back). One TL: each picture refs the previous.
pub fn gof_for_temporal_layers(nt: usize) -> Vec<GofEntry> {
    let e = |tid, switch_up, p: &[u8]| GofEntry {
        tid,
        switch_up,
        p_diffs: p.to_vec(),
    };
    match nt {
        1 => vec![e(0, false, &[1])],
        2 => vec![e(0, false, &[2]), e(1, true, &[1])],
        _ => vec![
            e(0, false, &[4]),
            e(2, true, &[1]),
            e(1, true, &[2]),
            e(2, true, &[1]),
        ],
    }
}

/// One RTP payload produced by the packetizer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vp9Payload {
    /// Cumulative layer (RTP stream) this payload belongs to.
    pub layer: usize,
    /// Descriptor + VP9 data.
    pub data: Vec<u8>,
    /// Last packet of the layer frame: the stream's end-of-picture marker.
    pub marker: bool,
}

/// RFC 9628 packetizer in non-flexible mode, one layer frame per cumulative layer.
#[derive(Debug, Clone)]
pub struct Vp9Packetizer {
    ladder: LayerLadder,
    max_payload: usize,
    picture_id: u16,
    tl0_pic_idx: u8,
    resolutions: Vec<(u16, u16)>,
    gof: Vec<GofEntry>,
    started: bool,
}

impl Vp9Packetizer {
    /// `max_payload` is the largest RTP payload (descriptor + data) allowed per packet;
    /// `resolutions` is the size of each spatial layer (for the SS); `first_picture_id` seeds
    /// the 15-bit picture ID (pick it at random in production).
    pub fn new(
        ladder: LayerLadder,
        resolutions: Vec<(u16, u16)>,
        max_payload: usize,
        first_picture_id: u16,
    ) -> Result<Self> {
        if max_payload < 64 {
            return Err(Error::Config(format!(
                "max payload {max_payload} too small (need >= 64 for the SS)"
            )));
        }
        if resolutions.len() != ladder.spatial_layers() as usize {
            return Err(Error::Config("one resolution per spatial layer".into()));
        }
        let gof = gof_for_temporal_layers(ladder.temporal_layers() as usize);
        Ok(Vp9Packetizer {
            ladder,
            max_payload,
            picture_id: first_picture_id & 0x7fff,
            tl0_pic_idx: 0,
            resolutions,
            gof,
            started: false,
        })
    }

    /// The ladder in use.
    pub fn ladder(&self) -> &LayerLadder {
        &self.ladder
    }

    /// Packetize one picture. Returns, per cumulative layer k (index), its payloads in send
    /// order; a layer with no frame in this picture gets an empty list.
    pub fn packetize(&mut self, pic: &EncodedPicture) -> Result<Vec<Vec<Vp9Payload>>> {
        if self.started {
            self.picture_id = (self.picture_id + 1) & 0x7fff;
        }
        self.started = true;
        if pic.temporal == 0 {
            self.tl0_pic_idx = self.tl0_pic_idx.wrapping_add(1);
        }
        let mut out = vec![Vec::new(); self.ladder.len()];
        let top = self.ladder.spatial_layers().saturating_sub(1);
        for f in &pic.frames {
            let Some(k) = self.ladder.layer_of(f.spatial, f.temporal) else {
                return Err(Error::Config(format!(
                    "frame ({}, {}) not in the ladder",
                    f.spatial, f.temporal
                )));
            };
            // Layer 0 is sent as a plain single-layer stream: no layer indices (its cell is
            // (0, 0) by construction of the ladder) and an SS describing just that stream.
            // This is what stock depayloaders (ffmpeg up to 6.x implements an older draft and
            // rejects SS with N_S > 0 and TL0PICIDX) can play; our assembler infers the cell.
            let base = k == 0;
            // The full structure (all spatial layers, the picture group) rides on the key
            // picture's spatial layer 1 frame, for receivers that hold more than layer 0.
            let ss = if !pic.key {
                None
            } else if base {
                Some(ScalabilityStructure {
                    resolutions: vec![self.resolutions[0]],
                    spatial_layers: 1,
                    gof: Vec::new(),
                })
            } else if f.spatial == 1 {
                Some(ScalabilityStructure {
                    resolutions: self.resolutions.clone(),
                    spatial_layers: self.ladder.spatial_layers(),
                    gof: self.gof.clone(),
                })
            } else {
                None
            };
            self.frame_payloads(f, k, ss, f.spatial == top, base, &mut out[k])?;
        }
        Ok(out)
    }

    fn frame_payloads(
        &self,
        f: &LayerFrame,
        k: usize,
        ss: Option<ScalabilityStructure>,
        top: bool,
        base: bool,
        out: &mut Vec<Vp9Payload>,
    ) -> Result<()> {
        let desc = PayloadDescriptor {
            picture_id: Some(self.picture_id),
            long_picture_id: true,
            inter_picture: f.inter_picture,
            flexible: false,
            start: true,
            end: false,
            not_ref_upper: top,
            layer: (!base).then_some(LayerIndices {
                tid: f.temporal,
                switch_up: f.switch_up,
                sid: f.spatial,
                inter_layer: f.inter_layer,
            }),
            tl0_pic_idx: (!base).then_some(self.tl0_pic_idx),
            p_diffs: Vec::new(),
            ss,
        };
        // The SS rides only on the first packet; size the fragments so every packet fits and
        // they are as equal as possible (the pacer sends equal-size bunches).
        let first_hdr = desc.len();
        let mut plain = desc.clone();
        plain.ss = None;
        let hdr = plain.len();
        let data = &f.data;
        let room_first = self.max_payload - first_hdr;
        let room = self.max_payload - hdr;
        let n = if data.len() <= room_first {
            1
        } else {
            1 + (data.len() - room_first).div_ceil(room)
        };
        let sizes = fragment_sizes(data.len(), n, room_first);
        let mut off = 0;
        for (i, &take) in sizes.iter().enumerate() {
            let mut d = if i == 0 { desc.clone() } else { plain.clone() };
            d.start = i == 0;
            d.end = i + 1 == n;
            let mut p = Vec::with_capacity(hdr + take + 16);
            d.write(&mut p)?;
            p.extend_from_slice(&data[off..off + take]);
            if p.len() > self.max_payload {
                return Err(Error::Config("fragment exceeds max payload".into()));
            }
            out.push(Vp9Payload {
                layer: k,
                data: p,
                marker: i + 1 == n,
            });
            off += take;
        }
        Ok(())
    }
}

/// Split `len` bytes into `n` fragments as equal as possible, the first at most `room_first`.
fn fragment_sizes(len: usize, n: usize, room_first: usize) -> Vec<usize> {
    if n <= 1 {
        return vec![len];
    }
    let first = len.div_ceil(n).min(room_first);
    let rest = len - first;
    let m = n - 1;
    let (base, extra) = (rest / m, rest % m);
    let mut v = Vec::with_capacity(n);
    v.push(first);
    v.extend((0..m).map(|i| base + (i < extra) as usize));
    v
}

/// A packet ready for the wire except for the caller's header-extension elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerPacket {
    pub layer: usize,
    pub header: RtpHeader,
    pub payload: Vec<u8>,
}

impl LayerPacket {
    /// Serialise with the given RFC 8285 elements added to the header.
    pub fn to_bytes(&self, extensions: &[(u8, Vec<u8>)]) -> Result<Vec<u8>> {
        let mut h = self.header.clone();
        h.extensions.extend(extensions.iter().cloned());
        Ok(h.to_vec(&self.payload)?)
    }
}

/// Per-layer RTP stream state: SSRC, sequence numbers, timestamps and the packetizer. Each
/// cumulative layer k is its own RTP stream with its own SSRC and sequence space; all layers
/// share the 90 kHz timestamp of the picture.
#[derive(Debug, Clone)]
pub struct LayerStreams {
    pack: Vp9Packetizer,
    ssrcs: Vec<u32>,
    seqs: Vec<u16>,
    payload_type: u8,
    ts_offset: u32,
}

/// RTP parameters of the per-layer streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamConfig {
    /// Dynamic payload type for VP9. Default 96.
    pub payload_type: u8,
    /// One SSRC per cumulative layer; empty = `0x4C43_0000 + k` (pick random ones in
    /// production).
    pub ssrcs: Vec<u32>,
    /// Largest RTP packet (header + payload, no IP/UDP). Default 1200.
    pub mtu: usize,
    /// Bytes left free for the caller's header-extension block (its 4-byte header, elements
    /// and padding). Default 32.
    pub ext_reserve: usize,
    /// First sequence number of every stream. Default 0.
    pub first_seq: u16,
    /// Added to picture pts to form the RTP timestamp. Default 0.
    pub ts_offset: u32,
    /// First 15-bit picture ID. Default 0.
    pub first_picture_id: u16,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            payload_type: 96,
            ssrcs: Vec::new(),
            mtu: 1200,
            ext_reserve: 32,
            first_seq: 0,
            ts_offset: 0,
            first_picture_id: 0,
        }
    }
}

impl LayerStreams {
    /// Streams for `ladder`, with `resolutions` (per spatial layer) announced in the SS.
    pub fn new(
        ladder: LayerLadder,
        resolutions: Vec<(u16, u16)>,
        conf: StreamConfig,
    ) -> Result<Self> {
        let ssrcs = if conf.ssrcs.is_empty() {
            (0..ladder.len() as u32).map(|k| 0x4C43_0000 + k).collect()
        } else {
            conf.ssrcs.clone()
        };
        if ssrcs.len() != ladder.len() {
            return Err(Error::Config("one SSRC per layer".into()));
        }
        if conf.payload_type > 127 {
            return Err(Error::Config("payload type must be < 128".into()));
        }
        let max_payload = conf
            .mtu
            .checked_sub(crate::rtp::FIXED_HEADER_LEN + conf.ext_reserve)
            .ok_or_else(|| Error::Config("mtu too small".into()))?;
        let n = ladder.len();
        Ok(LayerStreams {
            pack: Vp9Packetizer::new(ladder, resolutions, max_payload, conf.first_picture_id)?,
            ssrcs,
            seqs: vec![conf.first_seq; n],
            payload_type: conf.payload_type,
            ts_offset: conf.ts_offset,
        })
    }

    /// SSRC of layer k.
    pub fn ssrc(&self, k: usize) -> Option<u32> {
        self.ssrcs.get(k).copied()
    }

    /// The packetizer (for its ladder).
    pub fn packetizer(&self) -> &Vp9Packetizer {
        &self.pack
    }

    /// Packets of one picture, grouped per layer (index k), in send order.
    pub fn packets(&mut self, pic: &EncodedPicture) -> Result<Vec<Vec<LayerPacket>>> {
        let ts = (pic.pts as u32).wrapping_add(self.ts_offset);
        let per_layer = self.pack.packetize(pic)?;
        let mut out = Vec::with_capacity(per_layer.len());
        for (k, payloads) in per_layer.into_iter().enumerate() {
            let mut v = Vec::with_capacity(payloads.len());
            for p in payloads {
                let seq = self.seqs[k];
                self.seqs[k] = seq.wrapping_add(1);
                v.push(LayerPacket {
                    layer: k,
                    header: RtpHeader {
                        marker: p.marker,
                        payload_type: self.payload_type,
                        sequence_number: seq,
                        timestamp: ts,
                        ssrc: self.ssrcs[k],
                        ..Default::default()
                    },
                    payload: p.data,
                });
            }
            out.push(v);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
