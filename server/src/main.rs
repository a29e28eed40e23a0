//! layercast-server: the sender and control plane (see `docs/server.md`).

/// mimalloc instead of glibc malloc: under the per-second churn of reports, decisions and
/// HTTP buffers (small blocks of many lifetimes, several threads) glibc's heap kept growing
/// from fragmentation with a bounded live heap (docs/reliability.md "Soak").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod auth;
mod config;
mod error;
mod fill_study;
mod http;
mod media;
mod pacer;
mod rtp_out;
mod sock;
mod state;
mod tfmcc;
#[cfg(feature = "research")]
mod tfrc;
mod tls;
mod video;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::SeqCst);
}

fn install_signals() {
    let h = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, h);
        libc::signal(libc::SIGTERM, h);
    }
}

/// 50-ms main-loop ticks between two [`trim_heap`] calls (10 s).
const TRIM_EVERY_TICKS: u64 = 200;

/// Gives free pages in every glibc malloc arena back to the kernel (`malloc_trim(0)` walks all
/// arenas). Rust's allocations go to mimalloc (see `ALLOC`); this is for the C libraries'
/// (GStreamer, GLib, OpenSSL) use of glibc malloc, whose per-thread arenas keep the pages of
/// freed blocks resident until something trims them.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; no pointer is passed.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Turns transparent huge pages off for this process (`PR_SET_THP_DISABLE`), first thing in
/// `main`.
///
/// Why: mimalloc reserves a 1-GiB arena and (without the `no_thp` build feature, which the
/// workspace sets) advises it `MADV_HUGEPAGE`; a few hundred KiB of live heap spread over
/// three 2-MiB ranges were then billed as 6 MiB of huge pages, either at the first fault or
/// whenever khugepaged got round to collapsing them, minutes into a run. That made RssAnon
/// jump by 2-6 MiB at random times with no allocation behind it (the soak's one-off steps,
/// docs/reliability.md "The steps were huge pages"). With `no_thp` the arena is no longer
/// advised; this call also covers hosts whose THP mode is `always`, where any 2-MiB-aligned
/// anonymous range qualifies. RssAnon then counts the 4-KiB pages the process touched, so a
/// growth after the warm-up is a growth of memory in use. Failure (old kernel, seccomp) only
/// costs that accuracy: ignored.
fn disable_thp() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and changes a flag of this
    // process's memory descriptor.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

fn main() {
    disable_thp();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("tfrc") {
        // A live unicast TFRC flow (src/tfrc.rs), not a multicast session.
        #[cfg(feature = "research")]
        {
            install_signals();
            std::process::exit(tfrc::main(&args[1..], &SIGNALLED));
        }
        #[cfg(not(feature = "research"))]
        {
            eprintln!("layercast-server: `tfrc` is a research flow; this build leaves it out (build with --features research)");
            std::process::exit(2);
        }
    }
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let cfg = match config::load(&args, &env) {
        Ok(config::Cli::Run(c)) => *c,
        Ok(config::Cli::Help(h)) => {
            print!("{h}");
            return;
        }
        Err(e) => {
            eprintln!("layercast-server: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(cfg) {
        eprintln!("layercast-server: {e}");
        std::process::exit(1);
    }
}

fn run(cfg: config::ServerConfig) -> Result<(), error::Error> {
    install_signals();
    let http_addr = cfg.http_addr;
    let http_io_timeout = cfg.http_io_timeout;
    let initial = cfg.sessions.clone();
    let (signer, origin) = auth::load_signer(&cfg)?;
    eprintln!(
        "layercast-server: SAM signing key {} ({origin})",
        signer.published_key()
    );
    if !cfg.tokens.enabled() {
        eprintln!("layercast-server: no api_token: the API is open to anyone who can reach it");
    }
    let tls = if cfg.tls {
        Some(tls::load(
            cfg.tls_cert.as_deref(),
            cfg.tls_key.as_deref(),
            http_addr.ip(),
        )?)
    } else {
        None
    };
    let state = state::State::new(cfg, signer);
    for (n, s) in initial.iter().enumerate() {
        let s = state.create_session(s, &format!("session[{n}]"))?;
        eprintln!(
            "layercast-server: session {} started: {} layers from {}:{}",
            s.cfg.id,
            s.cfg.rates_bps.len(),
            s.cfg.group,
            s.cfg.port
        );
    }
    let listen_err = |e: Box<dyn std::error::Error + Send + Sync>| error::Error::Io {
        what: format!("listening on {http_addr}"),
        source: std::io::Error::other(e.to_string()),
    };
    let listener = tls::bind_with_timeout(http_addr, http_io_timeout)?;
    let server = match tls {
        Some(t) => {
            let s = tiny_http::Server::from_listener(
                listener,
                Some(tiny_http::SslConfig {
                    certificate: t.cert_pem,
                    private_key: t.key_pem,
                }),
            )
            .map_err(listen_err)?;
            eprintln!(
                "layercast-server: HTTPS on https://{http_addr}, certificate {} sha256:{}",
                t.origin, t.fingerprint
            );
            s
        }
        None => {
            let s = tiny_http::Server::from_listener(listener, None).map_err(listen_err)?;
            eprintln!("layercast-server: HTTP on http://{http_addr}");
            s
        }
    };
    let server = Arc::new(server);
    let stop = Arc::new(AtomicBool::new(false));
    let ann = {
        let (st, sp) = (state.clone(), stop.clone());
        std::thread::spawn(move || state::announcer(st, sp))
    };
    let web = {
        let (srv, st, sp) = (server.clone(), state.clone(), stop.clone());
        std::thread::spawn(move || http::serve(srv, st, sp, 3))
    };
    let mut ticks: u64 = 0;
    while !SIGNALLED.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
        ticks += 1;
        if ticks.is_multiple_of(TRIM_EVERY_TICKS) {
            trim_heap();
        }
    }
    eprintln!("layercast-server: shutting down");
    stop.store(true, Ordering::SeqCst);
    server.unblock();
    for s in state::lock(&state.sessions).values() {
        let h = state::lock(&s.stats.errors).clone();
        eprintln!(
            "layercast-server: session {}: {} packets, {} bunches, realtime pacer {}, bunch start error p50 {} us p99 {} us max {} us",
            s.cfg.id,
            s.stats.packets.load(Ordering::Relaxed),
            s.stats.bunches.load(Ordering::Relaxed),
            s.stats.realtime.load(Ordering::Relaxed),
            h.quantile_us(0.5),
            h.quantile_us(0.99),
            h.max_us
        );
    }
    state.stop_all();
    let _ = ann.join();
    let _ = web.join();
    Ok(())
}
