//! VP9 superframe index (VP9 bitstream spec, Annex B): split a superframe into its layer frames
//! and rebuild a superframe from a subset of them.
//!
//! libvpx SVC emits one superframe per picture: the spatial-layer frames in order, then an index
//! whose marker byte `0b110 ss fff` (`ss` = bytes per size − 1, `fff` = frames − 1) appears at
//! both ends, with little-endian frame sizes between. A receiver holding only some layers rebuilds
//! a smaller superframe so the decoder sees a well-formed access unit.

use crate::error::{Error, Result};

/// Split `data` into layer frames. A buffer without a valid index is one frame.
pub fn split(data: &[u8]) -> Result<Vec<&[u8]>> {
    if data.is_empty() {
        return Err(Error::BadBitstream("empty frame"));
    }
    let marker = data[data.len() - 1];
    if marker & 0xe0 != 0xc0 {
        return Ok(vec![data]);
    }
    let frames = (marker & 0x7) as usize + 1;
    let mag = ((marker >> 3) & 0x3) as usize + 1;
    let index_sz = 2 + mag * frames;
    if data.len() < index_sz || data[data.len() - index_sz] != marker {
        // Not an index after all: the last byte of a frame happened to look like a marker.
        return Ok(vec![data]);
    }
    let body = data.len() - index_sz;
    let mut sizes = data[body + 1..data.len() - 1].chunks_exact(mag);
    let mut out = Vec::with_capacity(frames);
    let mut off = 0usize;
    for _ in 0..frames {
        let c = sizes.next().ok_or(Error::BadBitstream("short index"))?;
        let sz = c
            .iter()
            .rev()
            .fold(0usize, |acc, &b| (acc << 8) | b as usize);
        if sz == 0 {
            // A zero-size entry is legal (skipped frame); it carries nothing.
            continue;
        }
        let end = off
            .checked_add(sz)
            .filter(|&e| e <= body)
            .ok_or(Error::BadBitstream(
                "frame size in index exceeds superframe",
            ))?;
        out.push(&data[off..end]);
        off = end;
    }
    Ok(out)
}

/// Concatenate `frames` into one access unit, appending a superframe index when there is more
/// than one frame.
pub fn build(frames: &[&[u8]], out: &mut Vec<u8>) -> Result<()> {
    if frames.is_empty() || frames.len() > 8 {
        return Err(Error::OutOfRange {
            field: "frames in superframe",
            value: frames.len() as u64,
        });
    }
    for f in frames {
        out.extend_from_slice(f);
    }
    if frames.len() == 1 {
        return Ok(());
    }
    let max = frames.iter().map(|f| f.len()).max().unwrap_or(0);
    let mag = match max {
        0..=0xff => 1,
        0x100..=0xffff => 2,
        0x1_0000..=0xff_ffff => 3,
        _ => 4,
    };
    if max > u32::MAX as usize {
        return Err(Error::OutOfRange {
            field: "frame size",
            value: max as u64,
        });
    }
    let marker = 0xc0 | (((mag - 1) as u8) << 3) | (frames.len() - 1) as u8;
    out.push(marker);
    for f in frames {
        let sz = f.len() as u32;
        out.extend_from_slice(&sz.to_le_bytes()[..mag]);
    }
    out.push(marker);
    Ok(())
}

/// Frame type bits read from a VP9 uncompressed header (only the first bytes are needed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameInfo {
    /// Key frame (frame_type == 0).
    pub key: bool,
    /// show_frame flag.
    pub show: bool,
    /// show_existing_frame (no new coded data).
    pub show_existing: bool,
}

/// Parse the first bits of a VP9 frame's uncompressed header.
pub fn frame_info(frame: &[u8]) -> Result<FrameInfo> {
    let mut r = BitReader { d: frame, pos: 0 };
    if r.bits(2)? != 2 {
        return Err(Error::BadBitstream("frame marker"));
    }
    let lo = r.bits(1)?;
    let hi = r.bits(1)?;
    if (hi << 1 | lo) == 3 {
        r.bits(1)?;
    }
    if r.bits(1)? == 1 {
        return Ok(FrameInfo {
            key: false,
            show: true,
            show_existing: true,
        });
    }
    let ft = r.bits(1)?;
    let show = r.bits(1)? == 1;
    Ok(FrameInfo {
        key: ft == 0,
        show,
        show_existing: false,
    })
}

struct BitReader<'a> {
    d: &'a [u8],
    pos: usize,
}

impl BitReader<'_> {
    fn bits(&mut self, n: usize) -> Result<u32> {
        let mut v = 0u32;
        for _ in 0..n {
            let byte = *self
                .d
                .get(self.pos / 8)
                .ok_or(Error::BadBitstream("header cut"))?;
            v = (v << 1) | ((byte >> (7 - self.pos % 8)) & 1) as u32;
            self.pos += 1;
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn build_split_roundtrip() {
        let a = vec![0x82u8; 300];
        let b = vec![0x83u8; 10];
        let mut sf = Vec::new();
        build(&[&a, &b], &mut sf).unwrap();
        // 2-byte sizes, 2 frames: marker 0b110_01_001
        assert_eq!(*sf.last().unwrap(), 0xc9);
        let parts = split(&sf).unwrap();
        assert_eq!(parts, vec![&a[..], &b[..]]);
        let mut one = Vec::new();
        build(&[&b], &mut one).unwrap();
        assert_eq!(split(&one).unwrap(), vec![&b[..]]);
    }

    #[test]
    fn bad_index() {
        // Marker at both ends but sizes exceed the data.
        let d = [0u8, 0, 0xc1, 0xff, 0xff, 0xc1];
        assert!(split(&d).is_err());
    }

    proptest! {
        #[test]
        fn split_never_panics(d in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = split(&d);
            let _ = frame_info(&d);
        }
        #[test]
        fn roundtrip(frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..600), 2..5)) {
            let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
            let mut sf = Vec::new();
            build(&refs, &mut sf).unwrap();
            prop_assert_eq!(split(&sf).unwrap(), refs);
        }
    }
}
