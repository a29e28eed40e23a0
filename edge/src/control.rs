//! The control side: which sessions the edge subscribes to (on demand, refreshed from the
//! server, left when idle), key requests towards the server, the WHEP resource names, and the
//! telemetry task.

use crate::cli::Config;
use crate::error::{Error, Result};
use crate::media::{Media, MediaEvent};
use crate::server::Server;
use crate::upstream;
use proto::SessionInfo;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc};

struct Sub {
    info: SessionInfo,
    endpoints: Vec<(Ipv4Addr, u16)>,
    /// The SSM source of the session's description (source-specific joins), if any.
    ssm: Option<Ipv4Addr>,
    idle_since: Option<Instant>,
}

struct Inner {
    conf: Arc<Config>,
    server: Arc<Server>,
    media: Media,
    subs: tokio::sync::Mutex<HashMap<String, Sub>>,
    events: broadcast::Sender<MediaEvent>,
    /// WHEP resource name -> (viewer id, session).
    resources: Mutex<HashMap<String, (u64, String)>>,
    telemetry: Arc<crate::telemetry::Outcomes>,
}

#[derive(Clone)]
pub struct Control(Arc<Inner>);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Control {
    pub fn new(conf: Arc<Config>, server: Arc<Server>, media: Media) -> Control {
        let (events, _) = broadcast::channel(4096);
        Control(Arc::new(Inner {
            conf,
            server,
            media,
            subs: tokio::sync::Mutex::new(HashMap::new()),
            events,
            resources: Mutex::new(HashMap::new()),
            telemetry: Arc::default(),
        }))
    }

    /// The telemetry posts' outcomes (for `/metrics`).
    pub fn telemetry_outcomes(&self) -> Arc<crate::telemetry::Outcomes> {
        self.0.telemetry.clone()
    }

    /// Subscribes to `name` if the edge does not serve it yet.
    pub async fn ensure_session(&self, name: &str) -> Result<()> {
        let mut subs = self.0.subs.lock().await;
        if subs.contains_key(name) {
            return Ok(());
        }
        let info = self.0.server.announcement(name).await?;
        edge::layout::VideoLayout::from_session(name, &info)?;
        let desc = self.0.server.description(name).await?;
        if desc.encrypted {
            return Err(Error::Server(format!(
                "session {name:?} is encrypted; the edge's temporary receive path does not decrypt"
            )));
        }
        let sockets = upstream::open(&info, self.0.conf.interface, desc.ssm_source)?;
        self.0
            .media
            .set_session(name, info.clone(), sockets)
            .await?;
        tracing::info!(
            "subscribed to session {name} ({}): {}",
            match desc.ssm_source {
                Some(s) => format!("source-specific joins to {s}"),
                None => "any-source joins".into(),
            },
            info.describe()
        );
        subs.insert(
            name.to_string(),
            Sub {
                endpoints: upstream::endpoints(&info),
                ssm: desc.ssm_source,
                info,
                idle_since: None,
            },
        );
        Ok(())
    }

    /// A new WHEP resource for viewer `id` of `session` (unguessable: the id alone is not).
    pub fn register(&self, id: u64, session: &str) -> String {
        let r = format!("{id:x}{:016x}", fastrand::u64(..));
        lock(&self.0.resources).insert(r.clone(), (id, session.to_string()));
        r
    }

    pub fn lookup(&self, resource: &str) -> Option<(u64, String)> {
        lock(&self.0.resources).get(resource).cloned()
    }

    fn forget(&self, id: u64) {
        lock(&self.0.resources).retain(|_, (v, _)| *v != id);
    }

    pub fn events(&self) -> broadcast::Receiver<MediaEvent> {
        self.0.events.subscribe()
    }

    /// The background tasks: event fan-out, key requests, session refresh, telemetry.
    pub fn spawn_background(&self, mut events: mpsc::UnboundedReceiver<MediaEvent>) {
        let me = self.clone();
        tokio::spawn(async move {
            while let Some(e) = events.recv().await {
                match &e {
                    MediaEvent::KeyRequest { session } => {
                        let (server, s) = (me.0.server.clone(), session.clone());
                        tokio::spawn(async move {
                            match server.keyframe(&s).await {
                                Ok(204) => tracing::debug!("key picture requested for {s}"),
                                Ok(code) => tracing::warn!("key request for {s}: HTTP {code}"),
                                Err(e) => tracing::warn!("key request for {s}: {e}"),
                            }
                        });
                    }
                    MediaEvent::Gone { viewer } => me.forget(*viewer),
                    MediaEvent::Decision { .. } => {}
                }
                let _ = me.0.events.send(e);
            }
        });
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            loop {
                tick.tick().await;
                me.refresh().await;
            }
        });
        if self.0.conf.telemetry {
            let t = crate::telemetry::Telemetry::new(&self.0.conf.name, self.0.conf.telemetry_rate);
            tokio::spawn(crate::telemetry::run(
                t,
                self.0.server.clone(),
                self.0.telemetry.clone(),
                self.0.media.snapshot.clone(),
                self.events(),
            ));
        }
    }

    /// Re-reads every subscribed session's description; follows restarts, leaves sessions the
    /// server dropped and sessions without viewers for `idle_leave`.
    async fn refresh(&self) {
        let snap = self.0.media.snapshot();
        let names: Vec<String> = self.0.subs.lock().await.keys().cloned().collect();
        for name in names {
            let viewers = snap.viewers.iter().filter(|v| v.session == name).count();
            let fetched = self.0.server.announcement(&name).await;
            let mut subs = self.0.subs.lock().await;
            let Some(sub) = subs.get_mut(&name) else {
                continue;
            };
            let now = Instant::now();
            if viewers > 0 {
                sub.idle_since = None;
            } else if sub.idle_since.is_none() {
                sub.idle_since = Some(now);
            }
            let pinned = self.0.conf.sessions.contains(&name);
            let idle = sub
                .idle_since
                .is_some_and(|t| now >= t + self.0.conf.idle_leave);
            let gone = matches!(fetched, Err(Error::NoSession(_)));
            if gone || (idle && !pinned) {
                tracing::info!(
                    "leaving session {name} ({})",
                    if gone {
                        "gone from the server"
                    } else {
                        "no viewers"
                    }
                );
                subs.remove(&name);
                self.0.media.remove_session(&name).await;
                continue;
            }
            let Ok(info) = fetched else { continue };
            if info.session_id == sub.info.session_id
                && info.tracks == sub.info.tracks
                && info.layers == sub.info.layers
            {
                continue;
            }
            // New sockets (and so a new SSRC map) for the new description.
            let endpoints = upstream::endpoints(&info);
            let sockets = match upstream::open(&info, self.0.conf.interface, sub.ssm) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("session {name}: {e}");
                    continue;
                }
            };
            tracing::info!("session {name} changed (restart or new layout)");
            if let Err(e) = self.0.media.set_session(&name, info.clone(), sockets).await {
                tracing::warn!("session {name}: {e}");
                continue;
            }
            sub.endpoints = endpoints;
            sub.info = info;
        }
    }
}
