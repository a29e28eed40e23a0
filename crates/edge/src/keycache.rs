//! The key-picture cache: the session's latest key picture and every TL0 picture since, in
//! the form browsers get them. A browser that starts (or that asks for a key before it decoded
//! anything) gets this chain at once instead of waiting for the next key picture: the key
//! picture re-initialises its decoder and each TL0 picture references only the previous one,
//! so after the chain it decodes the live stream from the next TL0 picture on.
//!
//! The chain grows with the key interval (10 s by default): bounded by `max_bytes`, beyond
//! which it is not used (the edge asks upstream for a key picture instead).

use crate::gate::{Frame, Gate, GateEvent};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default)]
struct Cached {
    frames: Vec<Option<Frame>>,
    lost: u8,
}

/// The cache of one session's video.
#[derive(Debug, Clone)]
pub struct KeyCache {
    max_bytes: usize,
    spatial: usize,
    key: Option<u64>,
    pics: BTreeMap<u64, Cached>,
    bytes: usize,
    overflow: bool,
}

/// A chain to send: pictures in order, each with its frames of spatial layers `0..=s`.
pub type Chain = Vec<(u64, Vec<Frame>)>;

impl KeyCache {
    pub fn new(spatial: u8, max_bytes: usize) -> Self {
        KeyCache {
            max_bytes,
            spatial: spatial as usize,
            key: None,
            pics: BTreeMap::new(),
            bytes: 0,
            overflow: false,
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The cached key picture's ID.
    pub fn key(&self) -> Option<u64> {
        self.key
    }

    pub fn on_event(&mut self, gate: &Gate, ev: GateEvent) {
        match ev {
            GateEvent::Released { pid, spatial } => {
                let Some(f) = gate.frame(pid, spatial) else {
                    return;
                };
                if f.key && spatial == 0 && self.key.is_none_or(|k| pid > k) {
                    self.key = Some(pid);
                    self.pics.clear();
                    self.bytes = 0;
                    self.overflow = false;
                }
                let Some(key) = self.key else { return };
                if pid < key || f.temporal != 0 || self.overflow {
                    return;
                }
                if self.bytes + f.bytes > self.max_bytes {
                    self.overflow = true;
                    self.pics.clear();
                    self.bytes = 0;
                    return;
                }
                let c = self.pics.entry(pid).or_default();
                c.frames.resize(self.spatial, None);
                if let Some(slot) = c.frames.get_mut(spatial as usize) {
                    self.bytes += f.bytes;
                    *slot = Some(f.clone());
                }
            }
            GateEvent::Lost { pid, spatial } => {
                if self.key.is_some_and(|k| pid >= k) && gate.temporal_of(pid) == Some(0) {
                    self.pics.entry(pid).or_default().lost |= 1 << spatial;
                }
            }
            GateEvent::Started { .. } => {}
        }
    }

    /// The chain for spatial layers `0..=s`: every cached picture up to the newest whose frames
    /// `0..=s` are all here; None if the cache overflowed, has no key, or a TL0 frame of those
    /// layers was lost since the key.
    pub fn chain(&self, s: u8) -> Option<(Chain, usize)> {
        self.key?;
        if self.overflow {
            return None;
        }
        let mask = (1u16 << (s + 1)) - 1;
        let mut out = Vec::new();
        let mut bytes = 0;
        for (&pid, c) in &self.pics {
            if u16::from(c.lost) & mask != 0 {
                return None;
            }
            let frames: Option<Vec<Frame>> = (0..=s as usize)
                .map(|i| c.frames.get(i).cloned().flatten())
                .collect();
            let Some(frames) = frames else { break };
            bytes += frames.iter().map(|f| f.bytes).sum::<usize>();
            out.push((pid, frames));
        }
        if out.is_empty() {
            return None;
        }
        Some((out, bytes))
    }
}
