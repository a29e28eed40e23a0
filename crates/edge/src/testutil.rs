//! Helpers of the unit tests.

use proto::media::{Track, Vp9Params};
use proto::SessionInfo;
use std::net::Ipv4Addr;

/// A session of the default 720p L3T3 ladder (layer k = cell (k / 3, k % 3)).
pub(crate) fn l3t3_session() -> SessionInfo {
    let rates = [90, 30, 30, 240, 80, 80, 600, 200, 200];
    let mut info = SessionInfo::equal_layers(9, 0, Ipv4Addr::new(239, 9, 0, 0), 6000);
    for (l, r) in info.layers.iter_mut().zip(rates) {
        l.rate_bps = r * 1000;
    }
    let p = Vp9Params {
        payload_type: 96,
        width: 1280,
        height: 720,
        fps_num: 30,
        fps_den: 1,
        spatial: 3,
        temporal: 3,
    };
    info.tracks = vec![Track::vp9_ladder(0, p, &info.layers, 0x4C43_0000)];
    info
}
