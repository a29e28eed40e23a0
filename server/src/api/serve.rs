//! Connections of the HTTP API: the accept loop, TLS, and the transport limits (connection
//! cap, handshake deadline, head read deadline, per-read idle and per-write timeouts, head
//! buffer). Each connection is one tokio task; TLS handshakes run concurrently, each under its
//! own deadline, so a slow or silent client holds only its own task.

use super::{App, Conn};
use crate::error::{Error, Result};
use hyper_util::rt::{TokioIo, TokioTimer};
use openssl::ssl::{Ssl, SslAcceptor, SslMethod, SslVersion};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_io_timeout::TimeoutStream;
use tower::ServiceExt;

/// hyper's read buffer per connection, which bounds a request head before it is parsed (a
/// longer head is refused with 431 and the connection closed).
pub const MAX_HEAD_BUF: usize = 64 * 1024;
/// Header fields hyper parses at most (`crate::api::check_head` then refuses over 64 with the
/// reason).
const HYPER_MAX_HEADERS: usize = 100;

/// The transport limits.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Connections open at once; more are closed at accept (counted).
    pub max_connections: usize,
    /// Deadline of the TLS handshake and of a request head.
    pub io_timeout: Duration,
    /// A connection with a pending read and nothing arriving for this long is closed (idle
    /// keep-alive, a stalled body, a WebSocket client that answers no ping).
    pub idle_timeout: Duration,
}

/// A TLS acceptor for the certificate and key (PEM). TLS 1.2 at least.
pub fn acceptor(cert_pem: &[u8], key_pem: &[u8]) -> Result<SslAcceptor> {
    let ssl = |e: openssl::error::ErrorStack| {
        Error::io("TLS setup", std::io::Error::other(e.to_string()))
    };
    let cert = openssl::x509::X509::from_pem(cert_pem).map_err(ssl)?;
    let key = openssl::pkey::PKey::private_key_from_pem(key_pem).map_err(ssl)?;
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).map_err(ssl)?;
    b.set_min_proto_version(Some(SslVersion::TLS1_2))
        .map_err(ssl)?;
    b.set_certificate(&cert).map_err(ssl)?;
    b.set_private_key(&key).map_err(ssl)?;
    b.check_private_key().map_err(ssl)?;
    Ok(b.build())
}

trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// Serves until `stop` resolves. An `accept` error (EMFILE, ENOBUFS, ...) is counted and
/// retried after a pause: the API never silently dies while the process lives.
pub async fn run(
    listener: TcpListener,
    tls: Option<SslAcceptor>,
    app: App,
    limits: Limits,
    stop: impl std::future::Future<Output = ()>,
) {
    let router = super::router(app.clone());
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let tls = tls.map(Arc::new);
    tokio::pin!(stop);
    loop {
        let (tcp, peer) = tokio::select! {
            _ = &mut stop => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    app.state.drops.api_accept_errors.fetch_add(1, Ordering::Relaxed);
                    eprintln!("layercast-server: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            app.state
                .drops
                .api_connections_over_cap
                .fetch_add(1, Ordering::Relaxed);
            drop(tcp);
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let (router, tls, limits, app) = (router.clone(), tls.clone(), limits.clone(), app.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let mut io = TimeoutStream::new(tcp);
            io.set_read_timeout(Some(limits.idle_timeout));
            io.set_write_timeout(Some(limits.io_timeout));
            let io = Box::pin(io);
            let stream: Box<dyn Io> = match &tls {
                None => Box::new(io),
                Some(acc) => {
                    let Ok(ssl) = Ssl::new(acc.context()) else {
                        return;
                    };
                    let Ok(mut s) = tokio_openssl::SslStream::new(ssl, io) else {
                        return;
                    };
                    match tokio::time::timeout(limits.io_timeout, Pin::new(&mut s).accept()).await {
                        Ok(Ok(())) => Box::new(s),
                        _ => {
                            app.state
                                .drops
                                .api_tls_handshake_failed
                                .fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                    }
                }
            };
            let conn = Conn {
                peer,
                tls: tls.is_some(),
            };
            let svc = hyper::service::service_fn(
                move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(conn);
                    router.clone().oneshot(req.map(axum::body::Body::new))
                },
            );
            let mut b = hyper::server::conn::http1::Builder::new();
            b.timer(TokioTimer::new())
                .header_read_timeout(limits.io_timeout)
                .max_buf_size(MAX_HEAD_BUF)
                .max_headers(HYPER_MAX_HEADERS)
                .title_case_headers(true)
                .keep_alive(true);
            let _ = b
                .serve_connection(TokioIo::new(stream), svc)
                .with_upgrades()
                .await;
        });
    }
}
