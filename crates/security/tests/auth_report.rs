//! TFMCC report MACs: round trip, per-receiver keys, and forgeries refused.

use proptest::prelude::*;
use proto::wire::tfmcc::TfmccReport;
use proto::wire::tfrc::AuthBlock;
use proto::Error;
use security::auth::{hkdf_expand32, ReceiverKey, ReportMac, AUTH_HMAC_SHA256_128, REPORT_TAG_LEN};

fn report(rid: u32) -> TfmccReport {
    TfmccReport {
        rid,
        round: 12,
        have_rtt: true,
        have_loss: true,
        is_clr: true,
        ts_us: 5_000_000,
        echo_ts_us: 4_990_000,
        x_rate: 250_000,
        x_recv: 240_000,
        rtt_us: 30_000,
        p_fixed: 42_949_673,
        ..TfmccReport::default()
    }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn hkdf_expand_matches_rfc5869_case_1() {
    // RFC 5869 A.1: PRK and info given, first 32 bytes of OKM = T(1).
    let prk = unhex("077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5");
    let info = unhex("f0f1f2f3f4f5f6f7f8f9");
    let okm = unhex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf");
    assert_eq!(hkdf_expand32(&prk, &[&info]).to_vec(), okm);
    // Splitting info into parts does not change the result.
    assert_eq!(hkdf_expand32(&prk, &[&info[..3], &info[3..]]).to_vec(), okm);
}

#[test]
fn seal_verify_round_trip() {
    let mac = ReportMac::new([3; 32]);
    let k = mac.receiver_key(77);
    let bytes = k.seal_tfmcc(&report(77)).unwrap();
    assert_eq!(bytes.len(), TfmccReport::MIN_LEN + REPORT_TAG_LEN);
    let got = mac.verify_tfmcc(&bytes).unwrap();
    assert_eq!(got.auth.kind, AUTH_HMAC_SHA256_128);
    assert_eq!(
        TfmccReport {
            auth: AuthBlock::default(),
            ..got
        },
        report(77)
    );
    // The player's copy of the key, handed over as hex, makes the same bytes.
    let k2 = ReceiverKey::from_hex(77, &k.key_hex()).unwrap();
    assert_eq!(k2.seal_tfmcc(&report(77)).unwrap(), bytes);
    // A key cannot seal another receiver's report.
    assert!(k.seal_tfmcc(&report(78)).is_err());
    // Keys differ per receiver and per session secret.
    assert_ne!(mac.receiver_key(78).key_hex(), k.key_hex());
    assert_ne!(
        ReportMac::new([4; 32]).receiver_key(77).key_hex(),
        k.key_hex()
    );
}

#[test]
fn forgeries_are_refused() {
    let mac = ReportMac::new([3; 32]);
    let good = mac.receiver_key(77).seal_tfmcc(&report(77)).unwrap();
    // Unauthenticated report (auth type 0).
    let plain = report(77).to_bytes();
    assert_eq!(
        mac.verify_tfmcc(&plain),
        Err(Error::Unauthenticated {
            what: "tfmcc report"
        })
    );
    // The classic attack: a receiver (or anyone) claims a tiny rate for another id.
    let mut lie = report(77);
    lie.x_rate = 1;
    let forged_by_78 = mac.receiver_key(78);
    let mut b = forged_by_78.seal_tfmcc(&report(78)).unwrap();
    b[8..12].copy_from_slice(&77u32.to_be_bytes()); // claim to be 77
    assert!(matches!(
        mac.verify_tfmcc(&b),
        Err(Error::AuthFailed {
            reason: "MAC does not verify",
            ..
        })
    ));
    // A key from another session.
    let other = ReportMac::new([9; 32])
        .receiver_key(77)
        .seal_tfmcc(&lie)
        .unwrap();
    assert!(mac.verify_tfmcc(&other).is_err());
    // Every bit flip anywhere (fields, reserved bytes, auth header, tag).
    for i in 0..good.len() {
        for bit in 0..8 {
            let mut t = good.clone();
            t[i] ^= 1 << bit;
            assert!(mac.verify_tfmcc(&t).is_err(), "flip {i}/{bit} verified");
        }
    }
    // A tag shortened to 1 byte (with the length byte fixed up) must not verify on 8 bits.
    let mut short = good[..good.len() - REPORT_TAG_LEN + 1].to_vec();
    let n = short.len();
    short[n - 2] = 1;
    assert_eq!(
        mac.verify_tfmcc(&short),
        Err(Error::AuthFailed {
            what: "tfmcc report",
            reason: "MAC has the wrong length"
        })
    );
    // Unknown authentication type.
    let mut t = good.clone();
    t[TfmccReport::MIN_LEN - 2] = 2;
    assert!(matches!(
        mac.verify_tfmcc(&t),
        Err(Error::AuthFailed {
            reason: "unknown authentication type",
            ..
        })
    ));
    // Truncated anywhere.
    for cut in 0..good.len() {
        assert!(mac.verify_tfmcc(&good[..cut]).is_err());
    }
}

proptest! {
    /// A report verifies under the session it was sealed for and under no other receiver id.
    #[test]
    fn mac_binds_rid(secret: [u8; 32], rid: u32, other: u32, x_rate: u32) {
        let mac = ReportMac::new(secret);
        let mut r = report(rid);
        r.x_rate = x_rate;
        let b = mac.receiver_key(rid).seal_tfmcc(&r).unwrap();
        prop_assert!(mac.verify_tfmcc(&b).is_ok());
        prop_assume!(other != rid);
        let mut r2 = r.clone();
        r2.rid = other;
        let forged = mac.receiver_key(rid).tag(&r2.to_bytes());
        let mut b2 = r2.to_bytes();
        b2.truncate(b2.len() - 2);
        b2.extend_from_slice(&[AUTH_HMAC_SHA256_128, REPORT_TAG_LEN as u8]);
        b2.extend_from_slice(&forged);
        prop_assert!(mac.verify_tfmcc(&b2).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_verify(data: Vec<u8>) {
        prop_assert!(ReportMac::new([1; 32]).verify_tfmcc(&data).is_err());
    }
}
