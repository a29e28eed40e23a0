//! Media AEAD: round trip, every tamper class refused (header, extension, prefix, payload,
//! tag), nonce uniqueness, and the sealer's refusal to reuse a sequence number.

use proptest::prelude::*;
use proto::wire::cc_ext::CcFields;
use proto::Error;
use security::auth::{
    GroupKey, MediaOpener, MediaSealer, MEDIA_OVERHEAD, MEDIA_PREFIX_LEN, MEDIA_TAG_LEN,
};
use std::collections::HashSet;

/// A plain RTP packet: V=2, X=1, PT 98, `seq`, `ssrc`, one cc extension element, payload.
fn rtp(seq: u16, ssrc: u32, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0x90, 98];
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&90_000u32.to_be_bytes());
    p.extend_from_slice(&ssrc.to_be_bytes());
    let cc = CcFields {
        layer: 2,
        bunch_pos: 1,
        bunch_len: 2,
        send_time_us: 77_000_000,
    };
    cc.write_extension_block(1, &mut p).unwrap();
    p.extend_from_slice(payload);
    p
}

const HDR: usize = 12 + 16; // fixed header + extension (4 + 12)

fn key() -> GroupKey {
    GroupKey::new([0x42; 32], 1)
}

#[test]
fn seal_open_round_trip() {
    let k = key();
    let plain = rtp(
        0xFFFE,
        0xAABB_CCDD,
        b"a VP9 payload descriptor and frame bytes",
    );
    let ext = 0x0003_FFFE;
    let sealed = k.seal(&plain, ext).unwrap();
    assert_eq!(sealed.len(), plain.len() + MEDIA_OVERHEAD);
    // Header and extension travel in clear (routers, the cc fields, stock tools can read it).
    assert_eq!(&sealed[..HDR], &plain[..HDR]);
    // The payload does not.
    assert_ne!(
        &sealed[HDR + MEDIA_PREFIX_LEN..sealed.len() - MEDIA_TAG_LEN],
        &plain[HDR..]
    );
    let o = k.open(&sealed).unwrap();
    assert_eq!(o.packet, plain);
    assert_eq!(o.ext_seq, ext);
    assert_eq!(o.ssrc, 0xAABB_CCDD);
    // Empty payloads seal too.
    let e = rtp(5, 1, b"");
    assert_eq!(k.open(&k.seal(&e, 5).unwrap()).unwrap().packet, e);
    // Key handover text round trip.
    let k2 = GroupKey::from_hex(&k.key_hex(), 1).unwrap();
    assert_eq!(k2.open(&sealed).unwrap().packet, plain);
}

#[test]
fn every_tamper_class_is_refused() {
    let k = key();
    let plain = rtp(1000, 7, b"payload payload payload");
    let sealed = k.seal(&plain, 1000).unwrap();
    let n = sealed.len();
    let cases: &[(&str, std::ops::Range<usize>)] = &[
        ("header", 0..12),
        ("extension", 12..HDR),
        ("prefix (epoch, roll-over)", HDR..HDR + MEDIA_PREFIX_LEN),
        ("payload", HDR + MEDIA_PREFIX_LEN..n - MEDIA_TAG_LEN),
        ("tag", n - MEDIA_TAG_LEN..n),
    ];
    for (what, range) in cases {
        for i in range.clone() {
            for bit in 0..8 {
                let mut t = sealed.clone();
                t[i] ^= 1 << bit;
                let r = k.open(&t);
                assert!(r.is_err(), "{what}: flip of byte {i} bit {bit} opened");
            }
        }
    }
    // The common cases return AuthFailed specifically.
    let mut t = sealed.clone();
    t[1] ^= 0x80; // marker bit
    assert!(matches!(k.open(&t), Err(Error::AuthFailed { .. })));
    let mut t = sealed.clone();
    t[24] ^= 1; // a cc field byte: a forged send timestamp
    assert!(matches!(k.open(&t), Err(Error::AuthFailed { .. })));
    let mut t = sealed.clone();
    t[n - 1] ^= 1;
    assert!(matches!(k.open(&t), Err(Error::AuthFailed { .. })));
    // Truncation anywhere, and an appended byte.
    for cut in 0..n {
        assert!(k.open(&sealed[..cut]).is_err(), "cut at {cut} opened");
    }
    let mut longer = sealed.clone();
    longer.push(0);
    assert!(k.open(&longer).is_err());
    // Another key, and the same key bytes under another epoch.
    assert!(GroupKey::new([0x43; 32], 1).open(&sealed).is_err());
    assert!(GroupKey::new([0x42; 32], 2).open(&sealed).is_err());
    // Moving the payload to another sequence number (replay at another position) fails.
    let mut moved = sealed.clone();
    moved[2..4].copy_from_slice(&1001u16.to_be_bytes());
    assert!(k.open(&moved).is_err());
}

#[test]
fn opener_counts_drops_and_handles_rotation() {
    let k1 = key();
    let k2 = GroupKey::new([0x99; 32], 2);
    let mut o = MediaOpener::new(k1.clone());
    let a = k1.seal(&rtp(1, 9, b"x"), 1).unwrap();
    let b = k2.seal(&rtp(2, 9, b"y"), 2).unwrap();
    assert!(o.open(&a).is_ok());
    assert!(matches!(o.open(&b), Err(Error::AuthFailed { .. })));
    let mut bad = a.clone();
    let n = bad.len();
    bad[n - 1] ^= 1;
    assert!(o.open(&bad).is_err());
    assert!(o.open(&[1, 2, 3]).is_err());
    let s = o.stats();
    assert_eq!(
        (s.opened, s.unknown_epoch, s.auth_failed, s.malformed),
        (1, 1, 1, 1)
    );
    // After the next epoch's key arrives, both epochs open; a third evicts the oldest.
    o.add_key(k2.clone());
    assert!(o.open(&a).is_ok());
    assert!(o.open(&b).is_ok());
    o.add_key(GroupKey::new([0x77; 32], 3));
    assert!(o.open(&a).is_err());
    assert!(o.open(&b).is_ok());
}

#[test]
fn sealer_refuses_reuse_and_bad_sequence_numbers() {
    let mut s = MediaSealer::new(key());
    s.seal(&rtp(10, 1, b"a"), 10).unwrap();
    // Same (SSRC, seq) again, or an older one: refused.
    assert!(s.seal(&rtp(10, 1, b"b"), 10).is_err());
    assert!(s.seal(&rtp(9, 1, b"b"), 9).is_err());
    // Another SSRC has its own space.
    s.seal(&rtp(10, 2, b"c"), 10).unwrap();
    // ext_seq must extend the header's 16-bit number and stay below 2^48.
    assert!(s.seal(&rtp(11, 1, b"d"), 12).is_err());
    assert!(s.seal(&rtp(11, 1, b"d"), (1 << 48) | 11).is_err());
    s.seal(&rtp(11, 1, b"d"), 11).unwrap();
    // A wrap of the 16-bit counter carries into the roll-over field, and opens.
    let sealed = s.seal(&rtp(3, 1, b"e"), 0x1_0003).unwrap();
    assert_eq!(key().open(&sealed).unwrap().ext_seq, 0x1_0003);
    // Not an RTP packet.
    assert!(s.seal(&[0u8; 11], 0).is_err());
}

/// Rotation: the control plane hands the next epoch's key to a running sealer; the switch
/// happens at the next packet, a receiver holding only the old key opens everything sealed
/// before it and nothing after, one that took the next key during the overlap opens both,
/// and a key for any epoch but the next is ignored (no epoch ever gets two keys).
#[test]
fn rotatable_sealer_switches_at_the_next_packet() {
    let k1 = key();
    let k2 = GroupKey::new([0x55; 32], 2);
    let (mut s, mut next) = MediaSealer::rotatable(k1.clone());
    let before = s.seal(&rtp(100, 7, b"old"), 100).unwrap();
    // Not the next epoch: dropped, the sealer keeps its key.
    next.hand_over(GroupKey::new([0x66; 32], 5)).unwrap();
    let still = s.seal(&rtp(101, 7, b"old"), 101).unwrap();
    assert_eq!(GroupKey::sealed_epoch(&still).unwrap(), 1);
    assert_eq!(s.rotations(), 0);
    next.hand_over(k2.clone()).unwrap();
    // The sequence continues across the switch; the new key has sealed nothing, so an
    // (SSRC, seq) sealed under the old key is not a reuse under the new one.
    let after = s.seal(&rtp(102, 7, b"new"), 102).unwrap();
    assert_eq!(GroupKey::sealed_epoch(&after).unwrap(), 2);
    assert_eq!((s.rotations(), s.key().epoch()), (1, 2));
    let mut old_only = MediaOpener::new(k1.clone());
    assert!(old_only.open(&before).is_ok());
    assert!(old_only.open(&still).is_ok());
    assert!(old_only.open(&after).is_err());
    assert_eq!(old_only.stats().unknown_epoch, 1);
    // A player that fetched the next key during the overlap: a merge keeps its counters.
    let mut both = MediaOpener::new(k1.clone());
    assert!(both.open(&before).is_ok());
    let mut fresh = MediaOpener::new(k1.clone());
    fresh.add_key(k2.clone());
    both.merge(fresh);
    assert_eq!(both.epochs(), vec![1, 2]);
    for p in [&before, &still, &after] {
        assert!(both.open(p).is_ok());
    }
    assert_eq!((both.stats().opened, both.stats().unknown_epoch), (4, 0));
    // A full queue (a sealer that seals nothing any more) refuses instead of blocking.
    let (_idle, mut n2) = MediaSealer::rotatable(key());
    n2.hand_over(GroupKey::generate(2)).unwrap();
    n2.hand_over(GroupKey::generate(3)).unwrap();
    assert!(n2.hand_over(GroupKey::generate(4)).is_err());
}

proptest! {
    /// The nonce is injective on (SSRC, epoch, ext_seq < 2^48).
    #[test]
    fn nonce_is_injective(a in (any::<u32>(), any::<u16>(), 0u64..1 << 48),
                          b in (any::<u32>(), any::<u16>(), 0u64..1 << 48)) {
        let na = GroupKey::nonce(a.0, a.1, a.2);
        let nb = GroupKey::nonce(b.0, b.1, b.2);
        prop_assert_eq!(na == nb, a == b);
    }

    /// Whatever sequence of seal calls a sender makes, no two successful seals under one key
    /// use the same nonce, and each sealed packet opens to what was sealed.
    #[test]
    fn sealer_never_repeats_a_nonce(ops in proptest::collection::vec((0u32..4, 0u64..300_000), 1..200)) {
        let mut s = MediaSealer::new(key());
        let mut nonces = HashSet::new();
        for (ssrc, ext) in ops {
            let p = rtp(ext as u16, ssrc, &ext.to_be_bytes());
            if let Ok(sealed) = s.seal(&p, ext) {
                let o = key().open(&sealed).unwrap();
                prop_assert_eq!(&o.packet, &p);
                let n = GroupKey::nonce(o.ssrc, key().epoch(), o.ext_seq);
                prop_assert!(nonces.insert(n), "nonce reused for ssrc {} ext {}", ssrc, ext);
            }
        }
    }

    /// Arbitrary bytes never open and never panic.
    #[test]
    fn arbitrary_bytes_never_open(data: Vec<u8>) {
        prop_assert!(key().open(&data).is_err());
    }
}
