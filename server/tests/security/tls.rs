//! TLS on the safe defaults: the self-signed certificate made at first start, its pin, and
//! the generated tokens.

use crate::support::{body, raw, read_response, req, wait_port, Ns};
use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[test]
fn tls_self_signed_certificate_pinned_by_fingerprint() {
    let Some(mut ns) = Ns::new("tls") else { return };
    // No TLS, token or key setting at all: the safe defaults (docs/security.md §9.8) make
    // the certificate and the tokens in the state directory at the first start.
    let cert = ns.dir.join("state/cert.pem");
    ns.server(&[
        "--http-addr",
        "127.0.0.1:18191",
        "--interface",
        "127.0.0.1",
        "--announce",
        "",
        "--http-io-timeout-ms",
        "1000",
        "--session",
        r#"{"name":"one","layers":1,"layer_rate_bps":20000}"#,
    ]);
    let log_has_fp = {
        let t0 = Instant::now();
        loop {
            let l = ns.log();
            if l.contains("dashboard ") || t0.elapsed() > Duration::from_secs(15) {
                break l;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let pem = std::fs::read(&cert).expect("certificate written at first start");
    let x = openssl::x509::X509::from_pem(&pem).unwrap();
    let fp: Vec<u8> = x
        .digest(openssl::hash::MessageDigest::sha256())
        .unwrap()
        .to_vec();
    let fp_hex: String = fp.iter().map(|b| format!("{b:02x}")).collect();
    assert!(log_has_fp.contains(&fp_hex), "{log_has_fp}");
    // The generated tokens: 0600 files, printed once (this first start) with the pin.
    let token = |name: &str| {
        let f = ns.dir.join(format!("state/{name}.token"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.display());
        std::fs::read_to_string(f).unwrap().trim().to_string()
    };
    let dash = token("dashboard");
    assert!(
        log_has_fp.contains(&token("api")) && log_has_fp.contains(&dash),
        "{log_has_fp}"
    );
    let (pinned, anonymous, system, plain) = ns.run(move || {
        wait_port(18191);
        // A client that connects and never says anything: the server's accept thread does
        // the TLS handshake, so without its receive timeout every later client would hang.
        let _stalled = TcpStream::connect("127.0.0.1:18191").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // Pinned: accept exactly this certificate.
        let mut b = SslConnector::builder(SslMethod::tls_client()).unwrap();
        let want = fp.clone();
        b.set_verify_callback(SslVerifyMode::PEER, move |_, ctx| {
            ctx.error_depth() != 0
                || ctx
                    .current_cert()
                    .and_then(|c| c.digest(openssl::hash::MessageDigest::sha256()).ok())
                    .is_some_and(|d| d.as_ref() == want.as_slice())
        });
        let mut cfg = b.build().configure().unwrap();
        cfg.set_verify_hostname(false);
        let tcp = TcpStream::connect("127.0.0.1:18191").unwrap();
        // Well above the server's 1 s timeout for the stalled client, far below "forever".
        tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut s = cfg
            .connect("localhost", tcp)
            .expect("pinned handshake despite a stalled client");
        s.write_all(&req("GET", "/api/sessions", Some(&dash), ""))
            .unwrap();
        let pinned = read_response(&mut s);
        // Tokens are required by default.
        let tcp = TcpStream::connect("127.0.0.1:18191").unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut anon = SslConnector::builder(SslMethod::tls_client()).unwrap();
        anon.set_verify(SslVerifyMode::NONE);
        let mut s = anon.build().connect("localhost", tcp).unwrap();
        s.write_all(&req("GET", "/api/sessions", None, "")).unwrap();
        let anonymous = read_response(&mut s).0;
        // The system's CAs do not know a self-signed certificate.
        let b = SslConnector::builder(SslMethod::tls_client())
            .unwrap()
            .build();
        let tcp = TcpStream::connect("127.0.0.1:18191").unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let system = b.connect("localhost", tcp).is_ok();
        // Plain HTTP to the TLS port gets no HTTP answer.
        let plain = raw(18191, &req("GET", "/api/sessions", None, "")).0;
        (pinned, anonymous, system, plain)
    });
    assert_eq!(pinned.0, 200, "{}", pinned.1);
    assert_eq!(anonymous, 401);
    assert_eq!(body(&pinned.1)[0]["id"], "one");
    assert!(
        !system,
        "a self-signed certificate must not pass CA verification"
    );
    assert_eq!(plain, 0);
    // A restart reuses the written pair: the pin stays valid.
    let fp2 = {
        let pem2 = std::fs::read(&cert).unwrap();
        openssl::x509::X509::from_pem(&pem2)
            .unwrap()
            .digest(openssl::hash::MessageDigest::sha256())
            .unwrap()
            .to_vec()
    };
    assert_eq!(
        fp_hex,
        fp2.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
}
