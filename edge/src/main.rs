//! `layercast-edge`: subscribes to a Layercast session's multicast layers once and serves
//! browsers over WebRTC (WHEP), each at the layers its bandwidth estimate allows.
//!
//! The shell around `edge::Edge` (crates/edge): the media loop (one thread, one UDP socket for
//! every browser, the upstream sockets), the HTTP side (WHEP, the watch page, stats,
//! `/metrics`) and the control side (session descriptions, key requests and telemetry towards
//! the server). docs/edge.md describes it.

mod auth;
mod cli;
mod control;
mod error;
mod http;
mod media;
mod metrics;
mod server;
mod telemetry;
mod upstream;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use std::sync::Arc;

fn main() -> std::process::ExitCode {
    let args = cli::Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,str0m=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("layercast-edge: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// SIGINT or SIGTERM.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

fn run(args: cli::Args) -> error::Result<()> {
    let conf = args.validate()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| error::Error::io("tokio runtime", e))?;
    rt.block_on(async move {
        let conf = Arc::new(conf);
        let server = Arc::new(server::Server::new(&conf)?);
        let (media, mut handle) = media::start(conf.clone())?;
        let control = control::Control::new(conf.clone(), server.clone(), media.clone());
        if let Some(events) = handle.events.take() {
            control.spawn_background(events);
        }
        for s in &conf.sessions {
            if let Err(e) = control.ensure_session(s).await {
                tracing::warn!("session {s}: {e}");
            }
        }
        let app = http::router(http::App {
            conf: conf.clone(),
            media,
            control: control.clone(),
        });
        let listener = tokio::net::TcpListener::bind(conf.http)
            .await
            .map_err(|e| error::Error::io(format!("bind HTTP {}", conf.http), e))?;
        tracing::info!(
            "layercast-edge {}: WHEP on http://{}/whep/<session>, watch page http://{}/watch/<session>, WebRTC UDP {} (candidate {})",
            conf.name,
            conf.http,
            conf.http,
            conf.webrtc_bind,
            conf.candidate
        );
        println!("{{\"ready\":true,\"http\":\"{}\",\"webrtc\":\"{}\"}}", conf.http, conf.candidate);
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown_signal())
            .await
            .map_err(|e| error::Error::io("HTTP server", e))?;
        handle.stop();
        Ok(())
    })
}
