//! The announcement poller thread: fetches the session description (SAM key, media key, SSM
//! source) first, retrying each interval (nothing is joined before the player knows how to
//! authenticate what it will receive), then polls the announcement URL once per interval and
//! forwards what it gets to the receive loop.
//!
//! `refresh` asks for the description again: the Subscriber asks for it when SAMs stop
//! verifying or packets stop opening, which is what a restarted server (new signing key, new
//! media key) looks like. It is served at once, but at most once per [`REFRESH_SPACING`], so
//! forged SAMs can cost the server one HTTPS request per player per second and no more.

use crate::http_client;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The shortest time between two fetches of the session description asked for by `refresh`.
pub const REFRESH_SPACING: Duration = Duration::from_secs(1);

/// One event per poll (about once a second); the security parameters are boxed so the
/// common announcement events stay small.
pub enum Event {
    /// The announcement's JSON body (the Subscriber parses and checks it).
    Announcement(Vec<u8>),
    /// The session description's security parameters; always before the first announcement.
    Security(Box<crate::auth::SessionSecurity>),
    /// The media keys fetched again (`key_refresh`): merged into the opener in use.
    MediaKeys(Box<security::auth::MediaOpener>),
}

pub fn run(
    url: String,
    every: Duration,
    tx: Sender<Event>,
    stop: Arc<AtomicBool>,
    refresh: Arc<AtomicBool>,
    rid: Option<u32>,
    binding: String,
) {
    let description = crate::auth::description_url(&url);
    let mut need_security = description.clone();
    let mut complained = false;
    let mut last_fetch = Instant::now();
    // Media keys are fetched again this often (an encrypted session's key API says how often),
    // so that the next epoch's key is held before the sender switches to it.
    let mut key_refresh: Option<(Duration, Instant)> = None;
    let refresh_due =
        |last: Instant| refresh.load(Ordering::Relaxed) && last.elapsed() >= REFRESH_SPACING;
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        if need_security.is_none() && refresh_due(last_fetch) {
            refresh.store(false, Ordering::Relaxed);
            need_security = description.clone();
        }
        if need_security.is_some() {
            last_fetch = Instant::now();
        }
        if let Some(d) = &need_security {
            match crate::auth::fetch_security(d, Duration::from_millis(1500), rid, &binding) {
                Ok(sec) => {
                    key_refresh = sec.key_refresh.map(|d| (d, Instant::now()));
                    let _ = tx.send(Event::Security(Box::new(sec)));
                    need_security = None;
                }
                Err(e) => {
                    if !complained {
                        eprintln!("layercast-player: session description: {e} (retrying)");
                        complained = true;
                    }
                    while t0.elapsed() < every && !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    continue;
                }
            }
        }
        if let (Some(d), Some((every_k, last))) = (&description, key_refresh) {
            if last.elapsed() >= every_k {
                // A failure is retried at the next refresh; the keys held stay in use.
                key_refresh = Some((every_k, Instant::now()));
                if let Ok((o, next)) = crate::auth::fetch_media_keys(d, Duration::from_millis(1500))
                {
                    key_refresh = next.map(|n| (n, Instant::now()));
                    let _ = tx.send(Event::MediaKeys(Box::new(o)));
                }
            }
        }
        // A server that is away (error, non-200) leaves the last announcement in force.
        if let Ok((200, body)) = http_client::request("GET", &url, None, Duration::from_millis(700))
        {
            let _ = tx.send(Event::Announcement(body));
        }
        // A due refresh request ends the wait: a restarted server's new key is wanted now, not
        // at the next poll.
        while t0.elapsed() < every && !stop.load(Ordering::Relaxed) {
            if need_security.is_none() && refresh_due(last_fetch) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
