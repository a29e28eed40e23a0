//! The media loop: one thread that owns the edge core, the WebRTC UDP socket shared by every
//! browser and the upstream sockets. It talks to the rest of the binary through channels only:
//! commands in (sessions, viewers), events out (key requests, connections, layer decisions),
//! and a snapshot of every viewer published twice a second for the HTTP side.

use crate::cli::Config;
use crate::error::{Error, Result};
use edge::edge::{EdgeCounters, Totals};
use edge::relay::RelayStats;
use edge::{Edge, EdgeConfig, EdgeEvent, UpstreamPacket, ViewerReport};
use proto::SessionInfo;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot, watch};

/// A request to the media loop.
pub enum Cmd {
    SetSession {
        name: String,
        info: SessionInfo,
        sockets: Vec<std::net::UdpSocket>,
        reply: oneshot::Sender<std::result::Result<(), edge::Error>>,
    },
    RemoveSession {
        name: String,
    },
    AddViewer {
        session: String,
        offer: String,
        reply: oneshot::Sender<std::result::Result<(u64, String), edge::Error>>,
    },
    RemoveViewer {
        id: u64,
        reply: oneshot::Sender<std::result::Result<(), edge::Error>>,
    },
    Shutdown,
}

/// What the media loop tells the control side.
#[derive(Debug, Clone)]
pub enum MediaEvent {
    KeyRequest {
        session: String,
    },
    Gone {
        viewer: u64,
    },
    Decision {
        viewer: u64,
        at_s: f64,
        from: u32,
        to: u32,
        reason: &'static str,
        estimate_bps: f64,
        loss: f32,
    },
}

/// One session in the snapshot.
#[derive(Debug, Clone)]
pub struct SessionSnap {
    pub name: String,
    pub stats: RelayStats,
    pub cache_bytes: usize,
}

/// Everything the HTTP side shows (refreshed twice a second).
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub viewers: Vec<ViewerReport>,
    pub counters: EdgeCounters,
    pub totals: Totals,
    pub sessions: Vec<SessionSnap>,
    /// Upstream packets dropped before the core: unknown SSRC, queue full.
    pub upstream_unknown: u64,
    pub upstream_queue_full: u64,
    pub send_errors: u64,
}

/// The handle the HTTP and control sides hold.
#[derive(Clone)]
pub struct Media {
    cmd: mpsc::Sender<Cmd>,
    pub snapshot: watch::Receiver<Arc<Snapshot>>,
}

/// What `main` keeps: the event stream and the way to stop the thread.
pub struct Handle {
    pub events: Option<mpsc::UnboundedReceiver<MediaEvent>>,
    cmd: mpsc::Sender<Cmd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Handle {
    pub fn stop(mut self) {
        let _ = self.cmd.try_send(Cmd::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Media {
    async fn call<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Cmd) -> Result<T> {
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(make(tx))
            .await
            .map_err(|_| Error::MediaGone)?;
        rx.await.map_err(|_| Error::MediaGone)
    }

    pub async fn set_session(
        &self,
        name: &str,
        info: SessionInfo,
        sockets: Vec<std::net::UdpSocket>,
    ) -> Result<()> {
        let name = name.to_string();
        self.call(|reply| Cmd::SetSession {
            name,
            info,
            sockets,
            reply,
        })
        .await?
        .map_err(Error::Edge)
    }

    pub async fn remove_session(&self, name: &str) {
        let _ = self
            .cmd
            .send(Cmd::RemoveSession {
                name: name.to_string(),
            })
            .await;
    }

    pub async fn add_viewer(
        &self,
        session: &str,
        offer: String,
    ) -> Result<std::result::Result<(u64, String), edge::Error>> {
        let session = session.to_string();
        self.call(|reply| Cmd::AddViewer {
            session,
            offer,
            reply,
        })
        .await
    }

    pub async fn remove_viewer(&self, id: u64) -> Result<std::result::Result<(), edge::Error>> {
        self.call(|reply| Cmd::RemoveViewer { id, reply }).await
    }

    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.borrow().clone()
    }
}

/// Starts the media thread.
pub fn start(conf: Arc<Config>) -> Result<(Media, Handle)> {
    let std_sock = std::net::UdpSocket::bind(conf.webrtc_bind)
        .map_err(|e| Error::io(format!("bind WebRTC UDP {}", conf.webrtc_bind), e))?;
    std_sock
        .set_nonblocking(true)
        .map_err(|e| Error::io("WebRTC socket", e))?;
    let sock2 = socket2::SockRef::from(&std_sock);
    let _ = sock2.set_recv_buffer_size(4 << 20);
    let _ = sock2.set_send_buffer_size(4 << 20);
    let (cmd_tx, cmd_rx) = mpsc::channel(256);
    let (ev_tx, ev_rx) = mpsc::unbounded_channel();
    let empty = Arc::new(Snapshot {
        viewers: Vec::new(),
        counters: EdgeCounters::default(),
        totals: Totals::default(),
        sessions: Vec::new(),
        upstream_unknown: 0,
        upstream_queue_full: 0,
        send_errors: 0,
    });
    let (snap_tx, snap_rx) = watch::channel(empty);
    let thread = std::thread::Builder::new()
        .name("edge-media".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!("media runtime: {e}");
                    return;
                }
            };
            rt.block_on(async move {
                let sock = match UdpSocket::from_std(std_sock) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::error!("WebRTC socket: {e}");
                        return;
                    }
                };
                Loop::new(&conf, sock, ev_tx, snap_tx).run(cmd_rx).await;
            });
        })
        .map_err(|e| Error::io("media thread", e))?;
    Ok((
        Media {
            cmd: cmd_tx.clone(),
            snapshot: snap_rx,
        },
        Handle {
            events: Some(ev_rx),
            cmd: cmd_tx,
            thread: Some(thread),
        },
    ))
}

/// An upstream packet handed from a socket task to the loop.
pub(crate) struct Up {
    session: Arc<str>,
    track: u8,
    stream: u8,
    data: Vec<u8>,
    at: Instant,
}

struct Loop {
    edge: Edge,
    sock: UdpSocket,
    candidate: std::net::SocketAddr,
    ev: mpsc::UnboundedSender<MediaEvent>,
    snap: watch::Sender<Arc<Snapshot>>,
    up_tx: mpsc::Sender<Up>,
    up_rx: mpsc::Receiver<Up>,
    subs: HashMap<String, Vec<tokio::task::JoinHandle<()>>>,
    counters: Arc<UpCounters>,
    send_errors: u64,
}

#[derive(Default)]
pub(crate) struct UpCounters {
    unknown: std::sync::atomic::AtomicU64,
    queue_full: std::sync::atomic::AtomicU64,
}

impl Loop {
    fn new(
        conf: &Config,
        sock: UdpSocket,
        ev: mpsc::UnboundedSender<MediaEvent>,
        snap: watch::Sender<Arc<Snapshot>>,
    ) -> Loop {
        let mut ec = EdgeConfig::new(conf.candidate);
        ec.max_viewers = conf.max_peers;
        ec.rtc.initial_estimate_bps = conf.initial_estimate_bps;
        let (up_tx, up_rx) = mpsc::channel(8192);
        Loop {
            edge: Edge::new(ec),
            sock,
            candidate: conf.candidate,
            ev,
            snap,
            up_tx,
            up_rx,
            subs: HashMap::new(),
            counters: Arc::new(UpCounters::default()),
            send_errors: 0,
        }
    }

    async fn run(mut self, mut cmd: mpsc::Receiver<Cmd>) {
        let mut buf = vec![0u8; 2048];
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            self.flush().await;
            let deadline = self
                .edge
                .poll_timeout()
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(1));
            tokio::select! {
                r = self.sock.recv_from(&mut buf) => {
                    if let Ok((n, src)) = r {
                        self.edge.handle_datagram(Instant::now(), src, self.candidate, &buf[..n]);
                        // Take what else is already there without going back to select.
                        for _ in 0..64 {
                            match self.sock.try_recv_from(&mut buf) {
                                Ok((n, src)) => {
                                    self.edge.handle_datagram(Instant::now(), src, self.candidate, &buf[..n]);
                                }
                                Err(_) => break,
                            }
                        }
                    }
                }
                Some(u) = self.up_rx.recv() => {
                    self.upstream(u);
                    for _ in 0..64 {
                        match self.up_rx.try_recv() {
                            Ok(u) => self.upstream(u),
                            Err(_) => break,
                        }
                    }
                }
                c = cmd.recv() => {
                    match c {
                        Some(Cmd::Shutdown) | None => {
                            self.shutdown().await;
                            return;
                        }
                        Some(c) => self.command(c),
                    }
                }
                _ = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)) => {
                    // Upstream packets the readers already handed over go in before time
                    // moves on: the gate would otherwise declare their frames lost.
                    while let Ok(u) = self.up_rx.try_recv() {
                        self.upstream(u);
                    }
                    self.edge.handle_timeout(Instant::now());
                }
                _ = tick.tick() => self.publish(),
            }
        }
    }

    fn upstream(&mut self, u: Up) {
        self.edge.handle_upstream(
            Instant::now(),
            &u.session,
            UpstreamPacket {
                track: u.track,
                stream: u.stream,
                rtp: &u.data,
                at: u.at,
            },
        );
    }

    fn command(&mut self, c: Cmd) {
        let now = Instant::now();
        match c {
            Cmd::SetSession {
                name,
                info,
                sockets,
                reply,
            } => {
                let map = crate::upstream::ssrc_map(&info);
                let r = self.edge.set_session(&name, info);
                if r.is_ok() {
                    for h in self.subs.remove(&name).unwrap_or_default() {
                        h.abort();
                    }
                    let session: Arc<str> = name.as_str().into();
                    let tasks = sockets
                        .into_iter()
                        .filter_map(|s| UdpSocket::from_std(s).ok())
                        .map(|s| {
                            tokio::spawn(crate::upstream::receive(
                                s,
                                session.clone(),
                                map.clone(),
                                self.up_tx.clone(),
                                self.counters.clone(),
                            ))
                        })
                        .collect();
                    self.subs.insert(name, tasks);
                }
                let _ = reply.send(r);
            }
            Cmd::RemoveSession { name } => {
                for h in self.subs.remove(&name).unwrap_or_default() {
                    h.abort();
                }
                self.edge.remove_session(now, &name);
            }
            Cmd::AddViewer {
                session,
                offer,
                reply,
            } => {
                let _ = reply.send(self.edge.add_viewer(now, &session, &offer));
            }
            Cmd::RemoveViewer { id, reply } => {
                let _ = reply.send(self.edge.remove_viewer(now, id));
            }
            Cmd::Shutdown => {}
        }
    }

    /// Sends what the core has to send and passes its events on.
    async fn flush(&mut self) {
        while let Some(t) = self.edge.poll_transmit() {
            match self.sock.try_send_to(&t.contents, t.destination) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if self.sock.writable().await.is_err()
                        || self.sock.try_send_to(&t.contents, t.destination).is_err()
                    {
                        self.send_errors += 1;
                    }
                }
                Err(_) => self.send_errors += 1,
            }
        }
        while let Some(e) = self.edge.poll_event() {
            let m = match e {
                EdgeEvent::KeyRequest { session } => MediaEvent::KeyRequest { session },
                EdgeEvent::Gone { viewer } => MediaEvent::Gone { viewer },
                EdgeEvent::Connected { viewer } => {
                    tracing::info!("viewer {viewer:x} connected");
                    continue;
                }
                EdgeEvent::Target {
                    viewer,
                    from,
                    to,
                    reason,
                    estimate_bps,
                    loss,
                } => {
                    let Some(layout) = self
                        .edge
                        .viewer_session(viewer)
                        .and_then(|s| self.edge.sessions().find(|(n, _)| *n == s))
                        .map(|(_, r)| r.layout().clone())
                    else {
                        continue;
                    };
                    tracing::info!(
                        "viewer {viewer:x}: layers {from:?} -> S{}T{} ({reason}, estimate {:.0} kbit/s, loss {:.3})",
                        to.spatial,
                        to.temporal,
                        estimate_bps / 1000.0,
                        loss
                    );
                    let idx = |c: edge::select::Choice| {
                        layout.ladder_index(c.spatial, c.temporal) as u32 + 1
                    };
                    MediaEvent::Decision {
                        viewer,
                        at_s: unix_now(),
                        from: from.map_or(0, idx),
                        to: idx(to),
                        reason,
                        estimate_bps,
                        loss,
                    }
                }
            };
            let _ = self.ev.send(m);
        }
    }

    fn publish(&mut self) {
        let now = Instant::now();
        let sessions = self
            .edge
            .sessions()
            .map(|(n, r)| SessionSnap {
                name: n.to_string(),
                stats: r.stats(),
                cache_bytes: r.cache().bytes(),
            })
            .collect();
        for (n, r) in self.edge.sessions() {
            let g = r.stats().gate;
            tracing::debug!(
                "session {n}: intact spatial layers {:?}, frames released {} lost {}, packets {} late {} duplicates {} malformed {}, FEC recovered {}",
                r.gate().intact_top().map(|t| t + 1),
                g.frames_released,
                g.frames_lost,
                g.packets,
                g.late,
                g.duplicates,
                g.malformed,
                r.stats().repair.recovered
            );
        }
        let viewers = self.edge.reports(now);
        for v in &viewers {
            tracing::debug!(
                "viewer {:x}: S{}T{} target S{}T{}, estimate {:.0} kbit/s, sent {:.0} kbit/s, loss {:.3}, rtt {:?}, nacks {}, rtx {} (copies {}, refused {}, skipped {}+{}), pictures {} skipped {} fillers left out {}",
                v.id,
                v.current.spatial,
                v.current.temporal,
                v.target.spatial,
                v.target.temporal,
                v.stats.estimate_bps.unwrap_or(0.0) / 1000.0,
                v.stats.rate_bps / 1000.0,
                v.stats.loss,
                v.stats.rtt,
                v.stats.nacks,
                v.stats.rtx_packets,
                v.stats.repair_copies,
                v.stats.repair_copies_refused,
                v.stats.repair_copies_skipped_loss,
                v.stats.repair_copies_skipped_backlog,
                v.forward.pictures,
                v.forward.pictures_skipped,
                v.forward.fillers_left_out
            );
        }
        let s = Snapshot {
            viewers,
            counters: self.edge.counters(),
            totals: self.edge.totals(),
            sessions,
            upstream_unknown: self
                .counters
                .unknown
                .load(std::sync::atomic::Ordering::Relaxed),
            upstream_queue_full: self
                .counters
                .queue_full
                .load(std::sync::atomic::Ordering::Relaxed),
            send_errors: self.send_errors,
        };
        let _ = self.snap.send(Arc::new(s));
    }

    async fn shutdown(&mut self) {
        let now = Instant::now();
        let names: Vec<String> = self.edge.sessions().map(|(n, _)| n.to_string()).collect();
        for n in names {
            self.edge.remove_session(now, &n);
        }
        self.flush().await;
        for (_, hs) in self.subs.drain() {
            for h in hs {
                h.abort();
            }
        }
    }
}

pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Sends one upstream packet to the loop (the socket tasks call this).
pub(crate) fn deliver(
    tx: &mpsc::Sender<Up>,
    c: &UpCounters,
    session: &Arc<str>,
    track: u8,
    stream: u8,
    data: Vec<u8>,
    at: Instant,
) {
    let u = Up {
        session: session.clone(),
        track,
        stream,
        data,
        at,
    };
    if tx.try_send(u).is_err() {
        c.queue_full
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Counts a packet of an SSRC the session does not announce.
pub(crate) fn count_unknown(c: &UpCounters) {
    c.unknown.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}
