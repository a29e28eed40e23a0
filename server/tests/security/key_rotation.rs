//! Token key and media key rotation on a running server, with an overlap.

use crate::support::{generated_api_token, https, https_text, wait_port, Ns};
use serde_json::Value;
use std::net::{Ipv4Addr, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

/// The epochs of a key API answer's `keys`, oldest first.
fn epochs(v: &Value) -> Vec<u64> {
    v["keys"]
        .as_array()
        .map(|a| a.iter().filter_map(|k| k["epoch"].as_u64()).collect())
        .unwrap_or_default()
}

/// The opener a player builds from a key API answer: every key served, oldest first.
fn opener_of(v: &Value) -> security::auth::MediaOpener {
    let keys: Vec<_> = v["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            security::auth::GroupKey::from_hex(
                k["media_key"].as_str().unwrap(),
                k["epoch"].as_u64().unwrap() as u16,
            )
            .unwrap()
        })
        .collect();
    let mut o = security::auth::MediaOpener::new(keys[0].clone());
    for k in &keys[1..] {
        o.add_key(k.clone());
    }
    o
}

/// Key rotation without a restart on a server on its safe defaults (HTTPS, generated tokens,
/// an encrypted session): (1) the token key: a token signed before the rotation keeps
/// working during the overlap and gets 401 after it, one signed after (by the `token`
/// subcommand, from the rewritten key file) works; (2) the media key: the next key is served
/// for the lead before the switch, a receiver holding only the old key opens every packet
/// sealed before the switch and none after, one that took the keys served during the lead
/// opens every packet across the switch; a second rotation while one is pending is 409, the
/// player token may not rotate (403).
#[test]
fn keys_rotate_with_an_overlap_on_a_secured_server() {
    let Some(mut ns) = Ns::new("rot") else { return };
    let port = 18196;
    ns.server(&[
        "--http-addr",
        "127.0.0.1:18196",
        "--interface",
        "127.0.0.1",
        "--announce",
        "",
        "--session",
        r#"{"name":"enc","layers":1,"layer_rate_bps":400000,"encrypt":true}"#,
        "--session",
        r#"{"name":"plain","layers":1,"layer_rate_bps":20000}"#,
    ]);
    let state = ns.dir.join("state");
    let api = generated_api_token(&ns, &state);
    // Tokens as an operator signs them: the subcommand, reading the state directory's key.
    let key_file = state.join("token.key");
    let sign = move || {
        let out = Command::new(env!("CARGO_BIN_EXE_layercast-server"))
            .args([
                "token",
                "--role",
                "player",
                "--session",
                "enc",
                "--ttl-s",
                "3600",
            ])
            .arg("--token-secret-file")
            .arg(&key_file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let old = sign();
    let r = ns.run(move || {
        wait_port(port);
        let get_keys = |tok: &str| https(port, "GET", "/api/sessions/enc/keys", Some(tok), "");
        let before = get_keys(&old);
        let desc = https(port, "GET", "/api/sessions/enc", Some(&api), "").1;
        let group: Ipv4Addr = desc["layers"][0]["group"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let gport = desc["layers"][0]["port"].as_u64().unwrap() as u16;
        let sock = UdpSocket::bind((group, gport)).unwrap();
        sock.join_multicast_v4(&group, &Ipv4Addr::LOCALHOST)
            .unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        // The token key: overlap of 3 s.
        let rot_tok = https(
            port,
            "POST",
            "/api/token-key/rotate",
            Some(&api),
            r#"{"overlap_s":3}"#,
        );
        let t_rot = Instant::now();
        let new = sign();
        let old_in_overlap = get_keys(&old).0;
        let new_works = get_keys(&new).0;
        // The media key: a lead of 2 s.
        let player_rotate = https(
            port,
            "POST",
            "/api/sessions/enc/keys/rotate",
            Some(&new),
            "",
        )
        .0;
        let bad_lead = https(
            port,
            "POST",
            "/api/sessions/enc/keys/rotate",
            Some(&api),
            r#"{"lead_ms":1}"#,
        )
        .0;
        let plain = https(
            port,
            "POST",
            "/api/sessions/plain/keys/rotate",
            Some(&api),
            "",
        )
        .0;
        let rot_media = https(
            port,
            "POST",
            "/api/sessions/enc/keys/rotate",
            Some(&api),
            r#"{"lead_ms":2000}"#,
        );
        let again = https(
            port,
            "POST",
            "/api/sessions/enc/keys/rotate",
            Some(&api),
            r#"{"lead_ms":2000}"#,
        )
        .0;
        let during = get_keys(&new).1;
        let mut old_only = opener_of(&before.1);
        let mut fresh = opener_of(&during);
        let mut by_epoch = [0u64; 2];
        let mut buf = [0u8; 2048];
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(4) {
            let Ok(n) = sock.recv(&mut buf) else { continue };
            let p = &buf[..n];
            if let Ok(e) = security::auth::GroupKey::sealed_epoch(p) {
                if (e as usize) < by_epoch.len() {
                    by_epoch[e as usize] += 1;
                }
            }
            let _ = old_only.open(p);
            let _ = fresh.open(p);
        }
        // Past the token overlap (3 s from the rotation).
        while t_rot.elapsed() < Duration::from_millis(3200) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let old_after = get_keys(&old).0;
        let after = get_keys(&new);
        let metrics = https_text(port, "GET", "/metrics", Some(&api), "").1;
        (
            before,
            rot_tok,
            old_in_overlap,
            new_works,
            player_rotate,
            bad_lead,
            plain,
            rot_media,
            again,
            during,
            old_only.stats(),
            fresh.stats(),
            by_epoch,
            old_after,
            after,
            metrics,
        )
    });
    let (before, rot_tok, old_in_overlap, new_works, player_rotate, bad_lead, plain) =
        (r.0, r.1, r.2, r.3, r.4, r.5, r.6);
    let (rot_media, again, during, old_only, fresh, by_epoch, old_after, after) =
        (r.7, r.8, r.9, r.10, r.11, r.12, r.13, r.14);
    let log = ns.log();
    assert_eq!(before.0, 200, "{log}");
    assert_eq!(
        (before.1["epoch"].as_u64(), epochs(&before.1)),
        (Some(0), vec![0])
    );
    assert_eq!(rot_tok.0, 200, "{:?}", rot_tok.1);
    assert_ne!(rot_tok.1["key_id"], rot_tok.1["previous_key_id"]);
    assert_eq!((old_in_overlap, new_works), (200, 200), "token overlap");
    assert_eq!(old_after, 401, "the old key's tokens after the overlap");
    assert_eq!((player_rotate, bad_lead, plain), (403, 400, 404));
    assert_eq!(rot_media.0, 202, "{:?}", rot_media.1);
    assert_eq!(again, 409, "a second rotation while one is pending");
    assert_eq!(epochs(&during), vec![0, 1], "{during}");
    assert_eq!(during["next_epoch"].as_u64(), Some(1));
    // Packets of both epochs arrived: the switch happened within the 4 s.
    assert!(by_epoch[0] > 10 && by_epoch[1] > 10, "{by_epoch:?}");
    // Old key only: every epoch-0 packet opened, every epoch-1 packet refused (counted).
    assert_eq!(old_only.opened, by_epoch[0], "{old_only:?}");
    assert_eq!(old_only.unknown_epoch, by_epoch[1], "{old_only:?}");
    // Keys fetched during the lead: everything opened across the switch.
    assert_eq!(fresh.opened, by_epoch[0] + by_epoch[1], "{fresh:?}");
    assert_eq!(
        (fresh.unknown_epoch, fresh.auth_failed, fresh.malformed),
        (0, 0, 0)
    );
    // After the switch: epoch 1 in use, epoch 0 still served for packets in flight.
    assert_eq!(after.0, 200);
    assert_eq!(
        (after.1["epoch"].as_u64(), epochs(&after.1)),
        (Some(1), vec![0, 1])
    );
    let metrics = r.15;
    let m = |name: &str| -> Option<f64> {
        let k = format!("{name}{{session=\"enc\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&k))
            .and_then(|v| v.trim().parse().ok())
    };
    assert_eq!(m("layercast_media_key_epoch"), Some(1.0), "{metrics}");
    assert_eq!(m("layercast_media_key_rotations_total"), Some(1.0));
    testkit::record(
        "issue23/key-rotation",
        &format!(
            "token key: old token 200 in a 3 s overlap, 401 after, new token 200; media key (lead 2 s): {} epoch-0 + {} epoch-1 packets, old key alone opened {} and refused {} (unknown epoch), keys fetched during the lead opened {} with 0 failures",
            by_epoch[0], by_epoch[1], old_only.opened, old_only.unknown_epoch, fresh.opened
        ),
        Some(true),
        "cargo test --release -p layercast-server --test security keys_rotate",
    );
}
