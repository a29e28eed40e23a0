//! Cost of the per-message security operations (`wire::auth`): how "near-instant" packet and
//! announcement authentication is (`era.md` §1.1.18 asks that it be, or ERA reacts late).
//! Run: `cargo bench -p layercast-congestion --bench auth`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use proto::wire::tfmcc::TfmccReport;
use proto::{SessionInfo, Time};
use security::auth::{
    GroupKey, InfluenceConfig, InfluenceLimiter, ReportMac, SamSigner, SamVerifier,
};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

fn rtp(payload: usize) -> Vec<u8> {
    let mut p = vec![0x80, 98, 0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 9];
    p.resize(12 + payload, 0xA5);
    p
}

fn bench(c: &mut Criterion) {
    let key = GroupKey::new([1; 32], 1);
    let plain = rtp(1200);
    let sealed = key.seal(&plain, 0x1234).unwrap();
    let mut g = c.benchmark_group("media");
    g.throughput(Throughput::Bytes(1200));
    g.bench_function("seal_1200B", |b| {
        b.iter(|| key.seal(black_box(&plain), 0x1234).unwrap())
    });
    g.bench_function("open_1200B", |b| {
        b.iter(|| key.open(black_box(&sealed)).unwrap())
    });
    g.finish();

    let signer = SamSigner::from_seed(&[2; 32]);
    let info = SessionInfo::equal_layers(9, 300_000, Ipv4Addr::new(239, 1, 0, 0), 5000);
    let sam = signer.to_signed_bytes(&info, 1_000).unwrap();
    let verifier = SamVerifier::new(&signer.public_key()).unwrap();
    c.bench_function("sam_sign_9_layers", |b| {
        b.iter(|| signer.to_signed_bytes(black_box(&info), 1_000).unwrap())
    });
    c.bench_function("sam_verify_9_layers", |b| {
        b.iter(|| verifier.check(black_box(&sam), 1_000).unwrap())
    });

    let mac = ReportMac::new([3; 32]);
    let rep = mac
        .receiver_key(5)
        .seal_tfmcc(&TfmccReport {
            rid: 5,
            ..TfmccReport::default()
        })
        .unwrap();
    c.bench_function("report_verify", |b| {
        b.iter(|| mac.verify_tfmcc(black_box(&rep)).unwrap())
    });

    let mut lim = InfluenceLimiter::new(InfluenceConfig::default());
    let src = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    let mut t = 0u64;
    c.bench_function("influence_admit_clamp", |b| {
        b.iter(|| {
            t += 100_000;
            let now = Time::from_micros(t);
            let _ = lim.admit(now, src);
            lim.clamp(now, 5, 1e6, black_box(4e5), Duration::from_millis(100))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
