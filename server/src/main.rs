//! layercast-server: the sender and control plane (see `docs/server.md`).

/// mimalloc instead of glibc malloc: under the per-second churn of reports, decisions and
/// HTTP buffers (small blocks of many lifetimes, several threads) glibc's heap kept growing
/// from fragmentation with a bounded live heap (docs/reliability.md "Soak").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(feature = "research")]
use layercast_server::tfrc;
use layercast_server::{api, auth, config, error, provision, render, reports, state, tls, token};
use layercast_server::{viewers, SIGNALLED};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    if args.first().map(String::as_str) == Some("token") {
        std::process::exit(token::main(&args[1..]));
    }
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let cfg = match config::load(&args, &env) {
        Ok(config::Cli::Run(c)) => *c,
        Ok(config::Cli::Help(h)) => {
            print!("{h}");
            return;
        }
        Err(error::Error::Cli(e)) => {
            // clap's own rendering (the flag, what is wrong, the usage line).
            let _ = e.print();
            std::process::exit(2);
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

/// Raises the soft open-file limit to the hard one: each API connection is a descriptor, and
/// the connection cap (`http_max_connections`) is meant to bind before the default soft limit
/// of 1024 does.
fn raise_nofile() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid rlimit struct of this process.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

fn run(mut cfg: config::ServerConfig) -> Result<(), error::Error> {
    install_signals();
    raise_nofile();
    let state_lock = provision::lock_state(&cfg)?;
    let first = provision::provision(&mut cfg)?;
    let http_addr = cfg.http_addr;
    let initial = cfg.sessions.clone();
    let (signer, origin) = auth::load_signer(&cfg)?;
    eprintln!(
        "layercast-server: SAM signing key {} ({origin})",
        signer.published_key()
    );
    let mut pin = None;
    let tls = match cfg.tls {
        true => {
            let t = tls::load(
                cfg.tls_cert.as_deref(),
                cfg.tls_key.as_deref(),
                http_addr.ip(),
            )?;
            let acc = api::serve::acceptor(&t.cert_pem, &t.key_pem)?;
            eprintln!(
                "layercast-server: HTTPS on https://{http_addr}, certificate {} sha256:{}",
                t.origin, t.fingerprint
            );
            pin = Some(t.fingerprint);
            Some(acc)
        }
        false => {
            eprintln!("layercast-server: HTTP on http://{http_addr}");
            None
        }
    };
    drop(state_lock);
    eprint!("{}", provision::report(&first, &cfg, pin.as_deref()));
    let limits = api::serve::Limits {
        max_connections: cfg.http_max_connections.max(1),
        io_timeout: cfg.http_io_timeout,
        idle_timeout: cfg.http_idle_timeout,
    };
    let table = viewers::TableConfig {
        viewer_timeout: cfg.viewer_timeout,
        min_interval: cfg.telemetry_min_interval,
        max_viewers: viewers::MAX_VIEWERS,
    };
    let ws_cap = cfg.http_max_websockets;
    let request_timeout = cfg.http_io_timeout * 3;
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
    // The control plane's runtime: two workers (the machine class has two cores; the media
    // threads are real-time threads of their own and share only lock-free queues with it).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("control")
        .enable_all()
        .build()
        .map_err(|e| error::Error::io("starting the control-plane runtime", e))?;
    let backlog = state.cfg.http_listen_backlog;
    let listener = rt
        .block_on(async { api::serve::listen(http_addr, backlog) })
        .map_err(|e| error::Error::io(format!("listening on {http_addr}"), e))?;
    let report_queue = state.take_report_queue();
    let report_budget = state.cfg.report_budget_bps;
    let stop = Arc::new(AtomicBool::new(false));
    let ann = {
        let (st, sp) = (state.clone(), stop.clone());
        std::thread::spawn(move || state::announcer(st, sp))
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let web = {
        let st = state.clone();
        rt.spawn(async move {
            let publisher = render::json::LivePublisher::new(st.clone());
            let viewers = viewers::Viewers::spawn(table, Duration::from_secs(1), publisher);
            let app = api::App {
                state: st,
                viewers,
                ws_slots: Arc::new(tokio::sync::Semaphore::new(ws_cap)),
                request_timeout,
            };
            if let Some(q) = report_queue {
                tokio::spawn(reports::run(q, app.clone(), report_budget));
            }
            api::serve::run(listener, tls, app, limits, async {
                let _ = stop_rx.await;
            })
            .await;
        })
    };
    let mut ticks: u64 = 0;
    while !SIGNALLED.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
        ticks += 1;
        if ticks.is_multiple_of(TRIM_EVERY_TICKS) {
            trim_heap();
        }
        if web.is_finished() {
            // The API task ended without a stop: the process must not live on without its
            // API (a supervisor restarts it).
            return Err(error::Error::io(
                "HTTP API",
                std::io::Error::other("the API task ended"),
            ));
        }
    }
    eprintln!("layercast-server: shutting down");
    stop.store(true, Ordering::SeqCst);
    let _ = stop_tx.send(());
    for s in state.all_sessions() {
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
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(())
}
