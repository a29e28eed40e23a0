//! SAM signatures: round trip, and every forgery class the verifier must refuse
//! (unsigned, forged, wrong key, truncated, tampered, stale, replayed).

use proto::wire::sam;
use proto::{Error, SessionInfo};
use security::auth::{SamSigner, SamVerifier, SamVerifierConfig, KEY_ID_LEN, SAM_TRAILER_LEN};
use std::net::Ipv4Addr;
use std::time::Duration;

const NOW: u64 = 1_800_000_000_000; // Unix ms

fn info(seq: u32) -> SessionInfo {
    let mut s = SessionInfo::equal_layers(4, 250_000, Ipv4Addr::new(239, 9, 0, 1), 6000);
    s.session_id = 0xC0FF_EE01;
    s.announce_seq = seq;
    s.sender = Ipv4Addr::new(10, 1, 0, 1);
    s.tracks = vec![proto::Track::vp9_ladder(0, vp9(), &s.layers, 0x1000)];
    s
}

fn signer() -> SamSigner {
    SamSigner::from_seed(&[0x11; 32])
}

fn verifier() -> SamVerifier {
    SamVerifier::from_published(&signer().published_key()).unwrap()
}

#[test]
fn rfc8032_test_vector_1_key_derivation() {
    // RFC 8032 §7.1 TEST 1: the seed maps to the published public key.
    let s = SamSigner::from_hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
        .unwrap();
    assert_eq!(
        s.published_key(),
        "ed25519:d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    );
    assert_eq!(
        s.seed_hex(),
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
    );
}

#[test]
fn sign_verify_round_trip() {
    let s = signer();
    let mut v = verifier();
    let bytes = s.to_signed_bytes(&info(1), NOW).unwrap();
    // It is still a plain SAM to the codec, with the trailer the auth layer defines.
    let d = sam::decode(&bytes).unwrap();
    assert_eq!(d.info, info(1));
    assert_eq!(d.signature.unwrap().signature.len(), SAM_TRAILER_LEN);
    let ok = v.verify(&bytes, NOW + 500).unwrap();
    assert_eq!(ok.info, info(1));
    assert_eq!(ok.issued_at_unix_ms, NOW);
    assert_eq!(v.highest_seq(info(1).session_id), Some(1));
    // The next announcement is accepted too.
    let b2 = s.to_signed_bytes(&info(2), NOW + 1000).unwrap();
    assert_eq!(v.verify(&b2, NOW + 1000).unwrap().info.announce_seq, 2);
    assert_eq!(v.stats().accepted, 2);
    // Key file round trip.
    let dir = std::env::temp_dir().join(format!("lc-samkey-{}", std::process::id()));
    std::fs::write(&dir, format!("{}\n", s.seed_hex())).unwrap();
    let s2 = SamSigner::from_hex_file(&dir).unwrap();
    std::fs::remove_file(&dir).unwrap();
    assert_eq!(s2.public_key(), s.public_key());
    assert!(SamSigner::from_hex_file(&dir).is_err());
}

#[test]
fn unsigned_is_refused() {
    let mut v = verifier();
    let plain = sam::to_bytes(&info(1)).unwrap();
    assert_eq!(
        v.verify(&plain, NOW),
        Err(Error::Unauthenticated {
            what: "session announcement"
        })
    );
    assert_eq!(v.stats().unsigned, 1);
    assert_eq!(v.stats().accepted, 0);
}

#[test]
fn forged_and_tampered_are_refused() {
    let s = signer();
    let good = s.to_signed_bytes(&info(5), NOW).unwrap();
    // The attack the thesis names: raise a layer rate (lure receivers too high).
    let mut forged = info(5);
    forged.layers[0].rate_bps = 10;
    let mut lure = Vec::new();
    sam::encode_signed(&forged, &mut lure, |_| {
        good[good.len() - SAM_TRAILER_LEN..].to_vec() // the old, valid trailer
    })
    .unwrap();
    let mut v = verifier();
    assert!(matches!(
        v.verify(&lure, NOW),
        Err(Error::AuthFailed {
            reason: "signature does not verify",
            ..
        })
    ));
    // Every single-bit flip anywhere in the message is refused.
    for i in 0..good.len() {
        for bit in [0x01u8, 0x80] {
            let mut b = good.clone();
            b[i] ^= bit;
            let mut v = verifier();
            assert!(
                v.verify(&b, NOW).is_err(),
                "flip of byte {i} bit {bit:#x} accepted"
            );
        }
    }
    // A signature made by someone else with a trailer that claims the right key id.
    let mallory = SamSigner::from_seed(&[0x66; 32]);
    let mut m = mallory.to_signed_bytes(&info(6), NOW).unwrap();
    let n = m.len();
    let kid = s.key_id();
    m[n - SAM_TRAILER_LEN + 1..n - SAM_TRAILER_LEN + 1 + KEY_ID_LEN].copy_from_slice(&kid);
    assert!(matches!(
        verifier().verify(&m, NOW),
        Err(Error::AuthFailed {
            reason: "signature does not verify",
            ..
        })
    ));
    // Garbage signature of the right shape, and a trailer of the wrong shape or algorithm.
    let mut g = good.clone();
    let n = g.len();
    for b in &mut g[n - 64..] {
        *b = 0;
    }
    assert!(verifier().verify(&g, NOW).is_err());
    let mut short = Vec::new();
    sam::encode_signed(&info(5), &mut short, |_| vec![1; 10]).unwrap();
    assert!(matches!(
        verifier().verify(&short, NOW),
        Err(Error::AuthFailed {
            reason: "signature trailer has the wrong length",
            ..
        })
    ));
    let mut alg = good.clone();
    let n = alg.len();
    alg[n - SAM_TRAILER_LEN] = 2;
    assert!(matches!(
        verifier().verify(&alg, NOW),
        Err(Error::AuthFailed {
            reason: "unsupported signature algorithm",
            ..
        })
    ));
}

#[test]
fn wrong_key_is_refused() {
    let other = SamSigner::from_seed(&[0x22; 32]);
    let b = other.to_signed_bytes(&info(1), NOW).unwrap();
    let mut v = verifier();
    assert_eq!(
        v.verify(&b, NOW),
        Err(Error::AuthFailed {
            what: "session announcement",
            reason: "signed with a key other than the pinned one",
        })
    );
    assert_eq!(v.stats().bad_signature, 1);
    // Published-key parsing errors.
    assert!(SamVerifier::from_published("d75a98...").is_err());
    assert!(SamVerifier::from_published("ed25519:zz").is_err());
    // A small-order point is not accepted as a pinned key (identity point encoding).
    let mut ident = [0u8; 32];
    ident[0] = 1;
    assert!(SamVerifier::new(&ident).is_err());
}

#[test]
fn truncated_and_extended_are_refused() {
    let good = signer().to_signed_bytes(&info(3), NOW).unwrap();
    for cut in 0..good.len() {
        assert!(
            verifier().verify(&good[..cut], NOW).is_err(),
            "prefix of {cut} bytes accepted"
        );
    }
    let mut longer = good.clone();
    longer.push(0);
    assert!(verifier().verify(&longer, NOW).is_err());
}

#[test]
fn replayed_and_stale_are_refused() {
    let s = signer();
    let mut v = verifier();
    let b7 = s.to_signed_bytes(&info(7), NOW).unwrap();
    let b6 = s.to_signed_bytes(&info(6), NOW + 10).unwrap();
    v.verify(&b7, NOW).unwrap();
    // Exact replay, and an older (but authentic) announcement of the same session.
    assert!(matches!(
        v.verify(&b7, NOW + 20),
        Err(Error::Replayed { .. })
    ));
    assert!(matches!(
        v.verify(&b6, NOW + 20),
        Err(Error::Replayed { .. })
    ));
    assert_eq!(v.stats().replayed, 2);
    // A failed check does not move the state: seq 8 is still accepted afterwards.
    let b8 = s.to_signed_bytes(&info(8), NOW + 30).unwrap();
    v.verify(&b8, NOW + 30).unwrap();
    // Another session id has its own sequence space.
    let mut other = info(1);
    other.session_id = 0xC0FF_EE02;
    v.verify(&s.to_signed_bytes(&other, NOW).unwrap(), NOW + 40)
        .unwrap();

    // Stale: a captured SAM replayed to a fresh player after the freshness window.
    let mut fresh = verifier();
    let err = fresh.verify(&b7, NOW + 30_001).unwrap_err();
    assert!(matches!(err, Error::Stale { .. }), "{err:?}");
    // From the future beyond the allowed skew.
    assert!(matches!(
        fresh.verify(&b7, NOW - 5_001),
        Err(Error::Stale { .. })
    ));
    assert_eq!(fresh.stats().stale, 2);
    // Inside the window (edges included) it is fine.
    assert!(verifier().verify(&b7, NOW + 30_000).is_ok());
    assert!(verifier().verify(&b7, NOW - 5_000).is_ok());
    // With the freshness check off, age does not matter but order still does.
    let mut lax = verifier().with_config(SamVerifierConfig {
        max_age: None,
        ..SamVerifierConfig::default()
    });
    lax.verify(&b7, NOW + 86_400_000).unwrap();
    assert!(matches!(
        lax.verify(&b7, NOW + 86_400_000),
        Err(Error::Replayed { .. })
    ));
}

#[test]
fn session_table_is_bounded() {
    let s = signer();
    let mut v = verifier().with_config(SamVerifierConfig {
        max_sessions: 2,
        max_age: Some(Duration::from_secs(30)),
        ..SamVerifierConfig::default()
    });
    for id in 1..=3u32 {
        let mut i = info(10);
        i.session_id = id;
        v.verify(&s.to_signed_bytes(&i, NOW).unwrap(), NOW).unwrap();
    }
    // Session 1 was the least recently updated and is forgotten; 2 and 3 are remembered.
    assert_eq!(v.highest_seq(1), None);
    assert_eq!(v.highest_seq(2), Some(10));
    assert_eq!(v.highest_seq(3), Some(10));
}

fn vp9() -> proto::Vp9Params {
    proto::Vp9Params {
        payload_type: 96,
        width: 1280,
        height: 720,
        fps_num: 30,
        fps_den: 1,
        spatial: 3,
        temporal: 3,
    }
}
