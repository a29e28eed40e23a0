//! Bounded influence of one receiver on the TFMCC rate (token buckets, replay check, pull cap).

use super::*;

/// Knobs of [`InfluenceLimiter`] (defaults in `docs/security.md`).
#[derive(Clone, Debug, PartialEq)]
pub struct InfluenceConfig {
    /// Within one window, one receiver id can lower the rate to no less than this fraction of
    /// the rate when its window opened. Default 0.5 (TCP's one halving per RTT).
    pub rid_floor: f64,
    /// Within one window, all receivers together can lower the rate to no less than this
    /// fraction of the rate when the session's window opened (bounds many ids). Default 0.25.
    pub global_floor: f64,
    /// Absolute floor, bytes/s: no report lowers the rate below it. Default 0.
    pub min_rate: f64,
    /// Reports per second one source address may send (token refill). Default 20.
    pub reports_per_sec: f64,
    /// Token bucket depth per source address. Default 40.
    pub burst: f64,
    /// Most source addresses / receiver ids tracked at once. Default 4096 each.
    pub max_entries: usize,
    /// An entry idle this long may be forgotten to make room. Default 60 s.
    pub idle: Duration,
    /// Shortest limiter window, whatever window the caller passes (F8): the TFMCC sender
    /// passes its feedback round or `R_max`, which on a LAN is a few milliseconds and grows
    /// only as the rate falls, so one liar could halve the rate hundreds of times a second.
    /// Default 1 s: one receiver id lowers the rate by at most half per second, all ids
    /// together by at most three quarters.
    pub min_window: Duration,
}

impl Default for InfluenceConfig {
    fn default() -> Self {
        InfluenceConfig {
            rid_floor: 0.5,
            global_floor: 0.25,
            min_rate: 0.0,
            reports_per_sec: 20.0,
            burst: 40.0,
            max_entries: 4096,
            idle: Duration::from_secs(60),
            min_window: Duration::from_secs(1),
        }
    }
}

/// Counters of an [`InfluenceLimiter`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InfluenceStats {
    /// Reports admitted by the per-source bucket.
    pub admitted: u64,
    /// Reports dropped by the per-source bucket or a full table.
    pub rate_limited: u64,
    /// Reports whose timestamp was not newer than that receiver's last one.
    pub replayed: u64,
    /// Rate requests raised to a floor.
    pub clamped: u64,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    last: Time,
}

#[derive(Clone, Copy, Debug)]
struct Window {
    opened: Time,
    start_rate: f64,
}

#[derive(Clone, Copy, Debug, Default)]
struct RidState {
    last_ts: Option<u32>,
    /// When `last_ts` was accepted.
    last_fresh: Time,
    window: Option<Window>,
    last_seen: Time,
}

/// How long a receiver's last report timestamp is trusted for the replay check. Its clock is
/// 32-bit microseconds, so serial-number arithmetic reads "newer" only within 2^31 µs
/// (35.8 min); after a longer silence an honest report would look old (F9). After this much
/// silence the next authentic report starts a new sequence instead. What that admits: one
/// report captured more than this long ago and replayed while its receiver is silent, whose
/// effect on the rate the influence limiter bounds like any other report's.
pub const FRESHNESS_MEMORY: Duration = Duration::from_secs(600);

/// Sans-IO helper for the TFMCC sender: per-source rate limit, per-receiver replay check and
/// the cap on how fast any receiver id can pull the sending rate down.
///
/// Order of use per report: [`admit`](Self::admit) (before any crypto, so a flood costs a
/// hash lookup), then [`ReportMac::verify_tfmcc`], then [`check_fresh`](Self::check_fresh),
/// then feed [`clamp`](Self::clamp)'s result to the TFMCC sender instead of the raw `x_rate`.
#[derive(Clone, Debug)]
pub struct InfluenceLimiter {
    cfg: InfluenceConfig,
    sources: HashMap<IpAddr, Bucket>,
    rids: HashMap<u32, RidState>,
    global: Option<Window>,
    sources_purged: Option<Time>,
    rids_purged: Option<Time>,
    stats: InfluenceStats,
}

impl InfluenceLimiter {
    /// A limiter with `cfg` (fractions are clamped to 0..=1).
    pub fn new(mut cfg: InfluenceConfig) -> InfluenceLimiter {
        let unit = |x: f64| if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
        cfg.rid_floor = unit(cfg.rid_floor);
        cfg.global_floor = unit(cfg.global_floor);
        if cfg.min_rate.is_nan() || cfg.min_rate < 0.0 {
            cfg.min_rate = 0.0;
        }
        InfluenceLimiter {
            cfg,
            sources: HashMap::new(),
            rids: HashMap::new(),
            global: None,
            sources_purged: None,
            rids_purged: None,
            stats: InfluenceStats::default(),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &InfluenceConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> InfluenceStats {
        self.stats
    }

    /// Room for one more entry in `map`? When full, drops entries idle for `idle`, but scans
    /// at most once per second (`last_purge`), so a flood of new (e.g. spoofed) keys against a
    /// full table costs a lookup each, not a scan each.
    fn make_room<K: Copy + Eq + std::hash::Hash, V>(
        map: &mut HashMap<K, V>,
        last_purge: &mut Option<Time>,
        max: usize,
        now: Time,
        idle: Duration,
        last: impl Fn(&V) -> Time,
    ) -> bool {
        if map.len() < max.max(1) {
            return true;
        }
        let due = match *last_purge {
            Some(p) => now.saturating_since(p) >= Duration::from_secs(1),
            None => true,
        };
        if due {
            *last_purge = Some(now);
            map.retain(|_, v| now.saturating_since(last(v)) < idle);
        }
        map.len() < max.max(1)
    }

    /// Takes a token from `src`'s bucket; `Err(RateLimited)` if it is empty or the source
    /// table is full of active sources.
    pub fn admit(&mut self, now: Time, src: IpAddr) -> Result<()> {
        let cfg = &self.cfg;
        if !self.sources.contains_key(&src)
            && !Self::make_room(
                &mut self.sources,
                &mut self.sources_purged,
                cfg.max_entries,
                now,
                cfg.idle,
                |b| b.last,
            )
        {
            self.stats.rate_limited += 1;
            return Err(Error::RateLimited {
                what: "tfmcc report",
                detail: "source table full".into(),
            });
        }
        let b = self.sources.entry(src).or_insert(Bucket {
            tokens: cfg.burst,
            last: now,
        });
        let dt = now.saturating_since(b.last).as_secs_f64();
        b.tokens = (b.tokens + dt * cfg.reports_per_sec).min(cfg.burst);
        b.last = b.last.max(now);
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            self.stats.admitted += 1;
            Ok(())
        } else {
            self.stats.rate_limited += 1;
            Err(Error::RateLimited {
                what: "tfmcc report",
                detail: format!("source {src} over {} reports/s", cfg.reports_per_sec),
            })
        }
    }

    fn rid_entry(&mut self, now: Time, rid: u32) -> Option<&mut RidState> {
        let cfg = &self.cfg;
        if !self.rids.contains_key(&rid)
            && !Self::make_room(
                &mut self.rids,
                &mut self.rids_purged,
                cfg.max_entries,
                now,
                cfg.idle,
                |s| s.last_seen,
            )
        {
            return None;
        }
        let s = self.rids.entry(rid).or_default();
        s.last_seen = s.last_seen.max(now);
        Some(s)
    }

    /// Checks that an authenticated report's timestamp (`ts_us`, the receiver's 32-bit
    /// microsecond clock) is newer than the last accepted one of `rid` (serial-number
    /// arithmetic: newer means 1..2^31 µs ahead), and remembers it.
    pub fn check_fresh(&mut self, now: Time, rid: u32, ts_us: u32) -> Result<()> {
        let Some(s) = self.rid_entry(now, rid) else {
            self.stats.rate_limited += 1;
            return Err(Error::RateLimited {
                what: "tfmcc report",
                detail: "receiver table full".into(),
            });
        };
        let recent = now.saturating_since(s.last_fresh) <= FRESHNESS_MEMORY;
        if let Some(last) = s.last_ts.filter(|_| recent) {
            let ahead = ts_us.wrapping_sub(last) as i32;
            if ahead <= 0 {
                self.stats.replayed += 1;
                return Err(Error::Replayed {
                    what: "tfmcc report",
                    detail: format!("rid {rid} ts {ts_us} not after {last}"),
                });
            }
        }
        s.last_ts = Some(ts_us);
        s.last_fresh = now;
        Ok(())
    }

    /// The rate (bytes/s) the sender may act on when receiver `rid` asks for `requested`
    /// while it sends at `current`. Requests at or above `current` pass unchanged; lower
    /// ones are raised to the highest of: `rid_floor ×` the rate when `rid`'s window opened,
    /// `global_floor ×` the rate when the session's window opened, and `min_rate` — but never
    /// above `current`. A window opens at the first decrease after the previous one is
    /// `window` old; the TFMCC sender passes its feedback round duration (or `R_max`).
    pub fn clamp(
        &mut self,
        now: Time,
        rid: u32,
        current: f64,
        requested: f64,
        window: Duration,
    ) -> f64 {
        let sane = |x: f64| if x.is_nan() { 0.0 } else { x.max(0.0) };
        let (current, requested) = (sane(current), sane(requested));
        if requested >= current {
            return requested;
        }
        let window = window.max(self.cfg.min_window);
        let open = |w: &mut Option<Window>| {
            let expired = match w {
                Some(w) => now.saturating_since(w.opened) >= window,
                None => true,
            };
            if expired {
                *w = Some(Window {
                    opened: now,
                    start_rate: current,
                });
            }
            w.map(|w| w.start_rate).unwrap_or(current)
        };
        let g_start = open(&mut self.global);
        let (rid_floor, global_floor, min_rate) =
            (self.cfg.rid_floor, self.cfg.global_floor, self.cfg.min_rate);
        // A full receiver table: treat the unknown id as if its window opened now.
        let r_start = match self.rid_entry(now, rid) {
            Some(s) => open(&mut s.window),
            None => current,
        };
        let floor = (r_start * rid_floor)
            .max(g_start * global_floor)
            .max(min_rate)
            .min(current);
        if requested < floor {
            self.stats.clamped += 1;
            floor
        } else {
            requested
        }
    }
}
