//! Media encryption: ChaCha20-Poly1305 per RTP packet (group key, sealer, opener).

use super::*;

mod rtcp;
pub use rtcp::*;

/// Bytes the sealed packet carries between the RTP header and the ciphertext: key epoch (u16)
/// and the roll-over counter (u32, the extended sequence number's bits 16..48).
pub const MEDIA_PREFIX_LEN: usize = 6;
/// Poly1305 tag length.
pub const MEDIA_TAG_LEN: usize = 16;
/// Bytes sealing adds to a packet (the pacer's packet size must leave room for them).
pub const MEDIA_OVERHEAD: usize = MEDIA_PREFIX_LEN + MEDIA_TAG_LEN;
/// Extended sequence numbers must stay below 2^48 (they fill 48 bits of the nonce). At 100 000
/// packets per second per layer that is 89 years.
pub const MAX_EXT_SEQ: u64 = (1 << 48) - 1;

/// Length of the RTP header of `packet` (fixed part, CSRCs and the header extension), after
/// checking that it is version 2 and that every declared length fits.
pub fn rtp_header_len(packet: &[u8]) -> Result<usize> {
    const WHAT: &str = "RTP header";
    if packet.len() < 12 {
        return Err(Error::Truncated {
            what: WHAT,
            need: 12,
            have: packet.len(),
        });
    }
    if packet[0] >> 6 != 2 {
        return Err(Error::Malformed {
            what: "RTP version",
            detail: format!("{}, must be 2", packet[0] >> 6),
        });
    }
    let mut len = 12 + 4 * (packet[0] & 0x0f) as usize;
    if packet[0] & 0x10 != 0 {
        if packet.len() < len + 4 {
            return Err(Error::Truncated {
                what: WHAT,
                need: len + 4,
                have: packet.len(),
            });
        }
        let words = u16::from_be_bytes([packet[len + 2], packet[len + 3]]) as usize;
        len += 4 + 4 * words;
    }
    if packet.len() < len {
        return Err(Error::Truncated {
            what: WHAT,
            need: len,
            have: packet.len(),
        });
    }
    Ok(len)
}

/// One media key: 32 bytes for ChaCha20-Poly1305 and the epoch it belongs to.
///
/// Stateless: [`GroupKey::seal`] trusts its caller never to pass the same (SSRC, extended
/// sequence) twice. Senders use [`MediaSealer`], which enforces that.
#[derive(Clone)]
pub struct GroupKey {
    cipher: ChaCha20Poly1305,
    /// Under a key derived from `key`, so its nonces never meet the media's (see
    /// [`GroupKey::seal_rtcp`]).
    rtcp: ChaCha20Poly1305,
    key: [u8; 32],
    epoch: u16,
}

impl fmt::Debug for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupKey")
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

/// An opened packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenedPacket {
    /// The plain RTP packet: the header as received, then the decrypted payload.
    pub packet: Vec<u8>,
    /// SSRC from the header.
    pub ssrc: u32,
    /// The sender's extended sequence number (authenticated through the nonce).
    pub ext_seq: u64,
}

impl GroupKey {
    /// A key from its bytes and epoch.
    pub fn new(key: [u8; 32], epoch: u16) -> GroupKey {
        GroupKey {
            cipher: ChaCha20Poly1305::new(&key.into()),
            rtcp: ChaCha20Poly1305::new(&rtcp::derive_rtcp_key(&key).into()),
            key,
            epoch,
        }
    }

    /// A fresh random key (operating-system RNG) for `epoch`.
    pub fn generate(epoch: u16) -> GroupKey {
        GroupKey::new(random32(), epoch)
    }

    /// The key from the hex text the key API hands out.
    pub fn from_hex(text: &str, epoch: u16) -> Result<GroupKey> {
        Ok(GroupKey::new(parse_hex32(text, "media key")?, epoch))
    }

    /// The key as 64 hex digits (what the key API hands to an authenticated player).
    pub fn key_hex(&self) -> String {
        hex_encode(&self.key)
    }

    /// The key epoch.
    pub fn epoch(&self) -> u16 {
        self.epoch
    }

    /// The 96-bit nonce: SSRC (32) ‖ epoch (16) ‖ extended sequence number (48), big-endian.
    /// Injective on `ssrc × epoch × 0..2^48`.
    pub fn nonce(ssrc: u32, epoch: u16, ext_seq: u64) -> [u8; 12] {
        let mut n = [0u8; 12];
        n[..4].copy_from_slice(&ssrc.to_be_bytes());
        n[4..6].copy_from_slice(&epoch.to_be_bytes());
        n[6..].copy_from_slice(&ext_seq.to_be_bytes()[2..]);
        n
    }

    /// Seals the plain RTP `packet` sent as extended sequence number `ext_seq`: returns
    /// header ‖ epoch ‖ roll-over counter ‖ ChaCha20-Poly1305(payload) ‖ tag, with everything
    /// before the ciphertext as associated data. `ext_seq` must agree with the header's 16-bit
    /// sequence number and stay below 2^48.
    pub fn seal(&self, packet: &[u8], ext_seq: u64) -> Result<Vec<u8>> {
        let hl = rtp_header_len(packet)?;
        let seq = u16::from_be_bytes([packet[2], packet[3]]);
        if ext_seq > MAX_EXT_SEQ || ext_seq as u16 != seq {
            return Err(Error::Invalid {
                field: "extended sequence number",
                reason: format!("{ext_seq} does not extend {seq} below 2^48"),
            });
        }
        let ssrc = u32::from_be_bytes([packet[8], packet[9], packet[10], packet[11]]);
        let mut out = Vec::with_capacity(packet.len() + MEDIA_OVERHEAD);
        out.extend_from_slice(&packet[..hl]);
        out.extend_from_slice(&self.epoch.to_be_bytes());
        out.extend_from_slice(&((ext_seq >> 16) as u32).to_be_bytes());
        let ct_start = out.len();
        out.extend_from_slice(&packet[hl..]);
        let nonce = GroupKey::nonce(ssrc, self.epoch, ext_seq);
        let (aad, body) = out.split_at_mut(ct_start);
        let tag = self
            .cipher
            .encrypt_in_place_detached(Nonce::from_slice(&nonce), aad, body)
            .map_err(|_| Error::Invalid {
                field: "media payload",
                reason: "too long to seal".into(),
            })?;
        out.extend_from_slice(&tag);
        Ok(out)
    }

    /// The key epoch a sealed packet names (to pick the key), without authenticating it.
    pub fn sealed_epoch(sealed: &[u8]) -> Result<u16> {
        let hl = rtp_header_len(sealed)?;
        match sealed.get(hl..hl + 2) {
            Some(e) => Ok(u16::from_be_bytes([e[0], e[1]])),
            None => Err(Error::Truncated {
                what: "sealed media packet",
                need: hl + 2,
                have: sealed.len(),
            }),
        }
    }

    /// Opens a sealed packet. Any change to header, extension, prefix, ciphertext or tag, or
    /// a packet sealed under another key or epoch, is [`Error::AuthFailed`].
    pub fn open(&self, sealed: &[u8]) -> Result<OpenedPacket> {
        const WHAT: &str = "sealed media packet";
        let hl = rtp_header_len(sealed)?;
        let need = hl + MEDIA_OVERHEAD;
        if sealed.len() < need {
            return Err(Error::Truncated {
                what: WHAT,
                need,
                have: sealed.len(),
            });
        }
        let epoch = u16::from_be_bytes([sealed[hl], sealed[hl + 1]]);
        if epoch != self.epoch {
            return Err(Error::AuthFailed {
                what: WHAT,
                reason: "sealed under a key epoch this key is not",
            });
        }
        let roc = u32::from_be_bytes([
            sealed[hl + 2],
            sealed[hl + 3],
            sealed[hl + 4],
            sealed[hl + 5],
        ]);
        let seq = u16::from_be_bytes([sealed[2], sealed[3]]);
        let ext_seq = ((roc as u64) << 16) | seq as u64;
        let ssrc = u32::from_be_bytes([sealed[8], sealed[9], sealed[10], sealed[11]]);
        let ct_start = hl + MEDIA_PREFIX_LEN;
        let tag_start = sealed.len() - MEDIA_TAG_LEN;
        let mut out = Vec::with_capacity(tag_start - MEDIA_PREFIX_LEN);
        out.extend_from_slice(&sealed[..hl]);
        out.extend_from_slice(&sealed[ct_start..tag_start]);
        let nonce = GroupKey::nonce(ssrc, epoch, ext_seq);
        self.cipher
            .decrypt_in_place_detached(
                Nonce::from_slice(&nonce),
                &sealed[..ct_start],
                &mut out[hl..],
                Tag::from_slice(&sealed[tag_start..]),
            )
            .map_err(|_| Error::AuthFailed {
                what: WHAT,
                reason: "AEAD tag does not verify",
            })?;
        Ok(OpenedPacket {
            packet: out,
            ssrc,
            ext_seq,
        })
    }
}

/// Most SSRCs one [`MediaSealer`] tracks (one per layer; a session has at most 256 layers).
pub const MAX_SEALER_SSRCS: usize = 1024;

/// The sender's sealing state: a [`GroupKey`] plus the newest extended sequence number sealed
/// per SSRC. Refuses to seal an (SSRC, sequence) that is not above the newest one, so no nonce
/// is ever used twice under one key (see `docs/security.md` for why that suffices).
///
/// A sealer made by [`MediaSealer::rotatable`] also takes the next epoch's key from the control
/// plane over a lock-free single-producer queue ([`NextKeys`]): the real-time thread that owns
/// the sealer never waits for the control plane, and the switch happens at the first packet
/// sealed after the key was handed over.
pub struct MediaSealer {
    key: GroupKey,
    newest: HashMap<u32, u64>,
    /// The next sender-report index per SSRC under the current key.
    rtcp_next: HashMap<u32, u32>,
    next: Option<rtrb::Consumer<GroupKey>>,
    rotations: u64,
}

impl fmt::Debug for MediaSealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MediaSealer")
            .field("epoch", &self.key.epoch)
            .field("ssrcs", &self.newest.len())
            .field("rotations", &self.rotations)
            .finish_non_exhaustive()
    }
}

/// The control plane's end of a rotatable [`MediaSealer`]: hands it the next epoch's key.
pub struct NextKeys {
    tx: rtrb::Producer<GroupKey>,
}

impl fmt::Debug for NextKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NextKeys").finish_non_exhaustive()
    }
}

impl NextKeys {
    /// Hands `key` to the sealer, which seals with it from its next packet on. Refused
    /// (`Invalid`) when the queue still holds keys the sealer has not taken (the sealer's thread
    /// has stopped, or rotations come faster than packets).
    pub fn hand_over(&mut self, key: GroupKey) -> Result<()> {
        self.tx.push(key).map_err(|_| Error::Invalid {
            field: "media key rotation",
            reason: "the sealer has not taken the previous key yet".into(),
        })
    }
}

/// Keys a [`NextKeys`] queue holds at most.
const NEXT_KEYS_DEPTH: usize = 2;

impl MediaSealer {
    /// A sealer for a key that has never sealed anything (a freshly generated one).
    pub fn new(key: GroupKey) -> MediaSealer {
        MediaSealer {
            key,
            newest: HashMap::new(),
            rtcp_next: HashMap::new(),
            next: None,
            rotations: 0,
        }
    }

    /// A sealer whose key the control plane can replace through the returned [`NextKeys`].
    /// A handed-over key is taken only if its epoch is the current epoch + 1 (mod 2^16), so
    /// an epoch, and with it a nonce prefix, is never used with two keys by one sealer.
    pub fn rotatable(key: GroupKey) -> (MediaSealer, NextKeys) {
        let (tx, rx) = rtrb::RingBuffer::new(NEXT_KEYS_DEPTH);
        let mut s = MediaSealer::new(key);
        s.next = Some(rx);
        (s, NextKeys { tx })
    }

    /// The key in use.
    pub fn key(&self) -> &GroupKey {
        &self.key
    }

    /// Keys switched to since the start.
    pub fn rotations(&self) -> u64 {
        self.rotations
    }

    /// Takes a handed-over key, if any. The new key has sealed nothing, so the per-SSRC
    /// sequence record starts afresh; a key for any other epoch than the next is dropped.
    fn take_next(&mut self) {
        let Some(rx) = self.next.as_mut() else { return };
        while let Ok(k) = rx.pop() {
            if k.epoch == self.key.epoch.wrapping_add(1) {
                self.key = k;
                self.newest.clear();
                self.rtcp_next.clear();
                self.rotations += 1;
            }
        }
    }

    /// Seals `packet` as `ext_seq` (see [`GroupKey::seal`]); errors if `ext_seq` is not above
    /// every sequence number already sealed for this SSRC under the current key.
    pub fn seal(&mut self, packet: &[u8], ext_seq: u64) -> Result<Vec<u8>> {
        self.take_next();
        rtp_header_len(packet)?;
        let ssrc = u32::from_be_bytes([packet[8], packet[9], packet[10], packet[11]]);
        match self.newest.get(&ssrc) {
            Some(&n) if ext_seq <= n => {
                return Err(Error::Invalid {
                    field: "extended sequence number",
                    reason: format!("{ext_seq} not above {n} already sealed for SSRC {ssrc:#x}"),
                })
            }
            None if self.newest.len() >= MAX_SEALER_SSRCS => {
                // Forgetting an SSRC would allow its nonces again: refuse instead.
                return Err(Error::Invalid {
                    field: "SSRC",
                    reason: format!("more than {MAX_SEALER_SSRCS} SSRCs under one key"),
                });
            }
            _ => {}
        }
        let out = self.key.seal(packet, ext_seq)?;
        self.newest.insert(ssrc, ext_seq);
        Ok(out)
    }
}

/// Counters of a [`MediaOpener`]: every packet that does not open is a counted drop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MediaOpenStats {
    /// Packets opened.
    pub opened: u64,
    /// Tag did not verify (tampered, forged, or another key).
    pub auth_failed: u64,
    /// Named a key epoch the opener does not hold.
    pub unknown_epoch: u64,
    /// Not an RTP packet, or too short to be a sealed one.
    pub malformed: u64,
    /// Sender reports opened ([`MediaOpener::open_rtcp`]).
    pub reports_opened: u64,
    /// Sender reports refused: not sealed, tag or epoch wrong, malformed, or a replay.
    pub reports_refused: u64,
}

/// The receiver's opening state: the keys of the current and the previous epoch (so packets
/// in flight across a rotation still open) and drop counters.
#[derive(Clone, Debug)]
pub struct MediaOpener {
    keys: Vec<GroupKey>,
    stats: MediaOpenStats,
    /// The newest sender-report index accepted per (SSRC, epoch): older or equal ones are
    /// replays.
    rtcp_newest: HashMap<(u32, u16), u32>,
}

impl MediaOpener {
    /// An opener holding one key.
    pub fn new(key: GroupKey) -> MediaOpener {
        MediaOpener {
            keys: vec![key],
            stats: MediaOpenStats::default(),
            rtcp_newest: HashMap::new(),
        }
    }

    /// Adds the key of a new epoch; keeps it and the most recently added other one.
    pub fn add_key(&mut self, key: GroupKey) {
        self.keys.retain(|k| k.epoch != key.epoch);
        self.keys.push(key);
        while self.keys.len() > 2 {
            self.keys.remove(0);
        }
        let held: Vec<u16> = self.keys.iter().map(|k| k.epoch).collect();
        self.rtcp_newest.retain(|(_, e), _| held.contains(e));
    }

    /// Counters.
    pub fn stats(&self) -> MediaOpenStats {
        self.stats
    }

    /// The epochs held, oldest first.
    pub fn epochs(&self) -> Vec<u16> {
        self.keys.iter().map(|k| k.epoch).collect()
    }

    /// Takes the keys of `fresh` (a newer answer of the key API) in its order, keeping this
    /// opener's counters: a key refresh does not reset what has been counted.
    pub fn merge(&mut self, fresh: MediaOpener) {
        for k in fresh.keys {
            self.add_key(k);
        }
    }

    /// Opens a sealed packet with the key its epoch names; counts every failure.
    pub fn open(&mut self, sealed: &[u8]) -> Result<OpenedPacket> {
        let r = GroupKey::sealed_epoch(sealed).and_then(|e| {
            match self.keys.iter().find(|k| k.epoch == e) {
                Some(k) => k.open(sealed),
                None => Err(Error::AuthFailed {
                    what: "sealed media packet",
                    reason: "key epoch not held",
                }),
            }
        });
        match &r {
            Ok(_) => self.stats.opened += 1,
            Err(Error::AuthFailed {
                reason: "key epoch not held",
                ..
            }) => self.stats.unknown_epoch += 1,
            Err(Error::AuthFailed { .. }) => self.stats.auth_failed += 1,
            Err(_) => self.stats.malformed += 1,
        }
        r
    }
}
