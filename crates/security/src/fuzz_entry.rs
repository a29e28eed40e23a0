//! The bodies of the cargo-fuzz targets in `crates/security/fuzz`, one `pub fn` per target.
//!
//! Each target is a one-line `fuzz_target!` that calls the function of the same name here,
//! and `crates/security/tests/fuzz_corpus.rs` replays every saved corpus file through the same
//! functions on stable Rust, so a corpus entry that once crashed stays a regression test.
//! A function panics only when an invariant of the code under test is broken (that is the
//! finding); malformed input must come back as an error.

use crate::auth::{GroupKey, ReportMac, SamSigner, SamVerifier};
use proto::wire::cc_ext::{find_element, CcFields};
use proto::wire::sam;
use proto::wire::tfmcc::{TfmccDataFields, TfmccReport};
use proto::wire::tfrc::{TfrcDataFields, TfrcFeedback};
use proto::wire::SeqExtender;
use proto::SessionInfo;
use std::net::Ipv4Addr;
use std::sync::OnceLock;

/// A fuzz target's body.
pub type Entry = fn(&[u8]);

/// Every target by name, for the corpus replay test and `scripts/fuzz.sh`.
pub const TARGETS: &[(&str, Entry)] = &[
    ("cc_ext", cc_ext),
    ("sam", sam),
    ("seq_extender", seq_extender),
    ("sam_verify", sam_verify),
    ("media_open", media_open),
    ("report_mac", report_mac),
    ("tfmcc_data", tfmcc_data),
    ("tfmcc_report", tfmcc_report),
    ("tfrc_data", tfrc_data),
    ("tfrc_feedback", tfrc_feedback),
];

/// Parses arbitrary bytes as a cc extension element and as an RTP header-extension body.
pub fn cc_ext(data: &[u8]) {
    if let Ok(f) = CcFields::parse(data) {
        // Whatever parses re-encodes to the first 11 bytes.
        assert_eq!(&f.to_bytes()[..], &data[..11]);
    }
    if data.len() >= 3 {
        let profile = u16::from_be_bytes([data[0], data[1]]);
        let id = data[2];
        let body = &data[3..];
        let _ = find_element(profile, body, id);
        let _ = CcFields::from_extension(profile, body, id);
    }
}

/// Decodes arbitrary bytes as a Session Announcement Message.
pub fn sam(data: &[u8]) {
    if let Ok(d) = sam::decode(data) {
        // Decode is strict, so an accepted message re-encodes byte for byte.
        let mut v = Vec::new();
        match d.signature {
            None => sam::encode(&d.info, &mut v).expect("decoded SAM re-encodes"),
            Some(t) => sam::encode_signed(&d.info, &mut v, |_| t.signature.to_vec())
                .expect("decoded signed SAM re-encodes"),
        }
        assert_eq!(v, data);
    }
}

/// Feeds arbitrary 16-bit sequence numbers to the extender: it must never panic and must
/// keep its highest value monotone.
pub fn seq_extender(data: &[u8]) {
    let mut x = SeqExtender::new();
    let mut hi = 0u64;
    for c in data.chunks_exact(2) {
        let s = u16::from_be_bytes([c[0], c[1]]);
        let e = x.extend(s);
        assert_eq!(e as u16, s);
        let h = x.highest().expect("highest after extend");
        assert!(h >= hi);
        hi = h;
    }
}

/// XORs `mask` into a copy of `valid`; says whether any byte changed.
fn apply_mask(valid: &[u8], mask: &[u8]) -> (Vec<u8>, bool) {
    let mut m = valid.to_vec();
    let mut changed = false;
    for (b, x) in m.iter_mut().zip(mask) {
        *b ^= x;
        changed |= *x != 0;
    }
    (m, changed)
}

struct SamFixture {
    public: [u8; 32],
    valid: Vec<u8>,
    issued_at: u64,
}

fn sam_fixture() -> &'static SamFixture {
    static F: OnceLock<SamFixture> = OnceLock::new();
    F.get_or_init(|| {
        let signer = SamSigner::from_seed(&[7; 32]);
        let mut info = SessionInfo::equal_layers(3, 20_000, Ipv4Addr::new(239, 1, 2, 3), 5000);
        info.session_id = 0x5e55_1011;
        info.announce_seq = 42;
        info.tracks = vec![proto::Track::vp9_ladder(0, vp9(), &info.layers, 0x1000)];
        let issued_at = 1_800_000_000_000;
        SamFixture {
            public: signer.public_key(),
            valid: signer
                .to_signed_bytes(&info, issued_at)
                .expect("fixture SAM signs"),
            issued_at,
        }
    })
}

/// Verifies arbitrary bytes as a signed SAM (nothing but the fixture itself may pass), then
/// XORs the input into a valid signed SAM: it must verify exactly when no byte changed, and
/// a second copy must then be refused as a replay.
pub fn sam_verify(data: &[u8]) {
    let f = sam_fixture();
    let fresh = || SamVerifier::new(&f.public).expect("fixture key is valid");
    let mut v = fresh();
    if v.verify(data, f.issued_at).is_ok() {
        assert_eq!(
            data,
            &f.valid[..],
            "a SAM other than the signed one verified"
        );
    }
    let (m, changed) = apply_mask(&f.valid, data);
    let mut v = fresh();
    let r = v.verify(&m, f.issued_at);
    assert_eq!(r.is_ok(), !changed, "mutated SAM verified: {r:?}");
    if r.is_ok() {
        assert!(v.verify(&m, f.issued_at).is_err(), "replay accepted");
    }
}

struct MediaFixture {
    key: GroupKey,
    plain: Vec<u8>,
    sealed: Vec<u8>,
}

fn media_fixture() -> &'static MediaFixture {
    static F: OnceLock<MediaFixture> = OnceLock::new();
    F.get_or_init(|| {
        let key = GroupKey::new([9; 32], 3);
        // V=2, X=1, M=1 PT 98, seq 0x1234, ts, SSRC, one-byte extension with the cc element.
        let mut plain = vec![
            0x90, 0xE2, 0x12, 0x34, 0, 0, 0x10, 0, 0xAB, 0xCD, 0xEF, 0x01,
        ];
        let cc = CcFields {
            layer: 1,
            bunch_pos: 0,
            bunch_len: 2,
            send_time_us: 123_456,
        };
        cc.write_extension_block(1, &mut plain)
            .expect("fixture extension encodes");
        plain.extend_from_slice(b"vp9 payload bytes, sealed by the fuzz fixture");
        let sealed = key.seal(&plain, 0x0007_1234).expect("fixture seals");
        MediaFixture { key, plain, sealed }
    })
}

/// Opens arbitrary bytes as a sealed media packet (nothing but the fixture may open), then
/// XORs the input into a valid sealed packet: it must open exactly when no byte changed.
pub fn media_open(data: &[u8]) {
    let f = media_fixture();
    if f.key.open(data).is_ok() {
        assert_eq!(
            data,
            &f.sealed[..],
            "a packet other than the sealed one opened"
        );
    }
    let (m, changed) = apply_mask(&f.sealed, data);
    match f.key.open(&m) {
        Ok(o) => {
            assert!(!changed, "tampered packet opened");
            assert_eq!(o.packet, f.plain);
            assert_eq!(o.ext_seq, 0x0007_1234);
        }
        Err(e) => assert!(changed, "untouched packet failed: {e}"),
    }
}

struct ReportFixture {
    mac: ReportMac,
    valid: Vec<u8>,
}

fn report_fixture() -> &'static ReportFixture {
    static F: OnceLock<ReportFixture> = OnceLock::new();
    F.get_or_init(|| {
        let mac = ReportMac::new([5; 32]);
        let rep = TfmccReport {
            rid: 0x0a00_0002,
            round: 9,
            have_rtt: true,
            have_loss: true,
            ts_us: 1000,
            echo_ts_us: 900,
            x_rate: 125_000,
            x_recv: 120_000,
            rtt_us: 40_000,
            p_fixed: 4_294_967,
            ..TfmccReport::default()
        };
        let valid = mac
            .receiver_key(rep.rid)
            .seal_tfmcc(&rep)
            .expect("fixture report seals");
        ReportFixture { mac, valid }
    })
}

/// Verifies arbitrary bytes as a MAC'd TFMCC report (nothing but the fixture may pass), then
/// XORs the input into a valid report: it must verify exactly when no byte changed.
pub fn report_mac(data: &[u8]) {
    let f = report_fixture();
    if f.mac.verify_tfmcc(data).is_ok() {
        assert_eq!(
            data,
            &f.valid[..],
            "a report other than the sealed one verified"
        );
    }
    let (m, changed) = apply_mask(&f.valid, data);
    let r = f.mac.verify_tfmcc(&m);
    assert_eq!(r.is_ok(), !changed, "mutated report verified: {r:?}");
}

/// Generates a fuzz body for a parser whose accepted values re-encode: whatever parses must
/// serialise, parse again, and serialise to the same bytes (encoding is a fixed point).
macro_rules! reparse_entry {
    ($(#[$doc:meta])* $name:ident, $ty:ty) => {
        $(#[$doc])*
        pub fn $name(data: &[u8]) {
            if let Ok(v) = <$ty>::parse(data) {
                let once = v.to_bytes();
                let again = <$ty>::parse(&once).expect("re-encoded value parses");
                assert_eq!(again.to_bytes(), once, "encoding is not a fixed point");
            }
        }
    };
}

reparse_entry!(
    /// Parses arbitrary bytes as the TFMCC data fields (header-extension element 2).
    tfmcc_data,
    TfmccDataFields
);
reparse_entry!(
    /// Parses arbitrary bytes as a TFMCC receiver report.
    tfmcc_report,
    TfmccReport
);
reparse_entry!(
    /// Parses arbitrary bytes as TFRC's per-packet data fields.
    tfrc_data,
    TfrcDataFields
);
reparse_entry!(
    /// Parses arbitrary bytes as a TFRC feedback packet.
    tfrc_feedback,
    TfrcFeedback
);

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
