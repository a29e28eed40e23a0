//! Announcements and group membership: a new session or layout, joins and leaves.

use super::*;

impl Subscriber {
    /// The SSRCs of the session being replaced: what the streams received, or received before
    /// a new sender took over, except that new sender's own.
    pub(super) fn previous_session_ssrcs(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .streams
            .iter()
            .flat_map(|s| [s.ssrc, s.prev_ssrc])
            .flatten()
            .filter(|x| !self.new_ssrcs.contains(x))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    pub(super) fn apply_announcement(&mut self, now: Time, new: SessionInfo) {
        let changed = match &self.info {
            None => true,
            Some(old) => old.session_id != new.session_id || !same_layout(old, &new),
        };
        if changed {
            let old_ssrcs = self.previous_session_ssrcs();
            self.new_ssrcs.clear();
            let relayout = self.info.as_ref().is_none_or(|o| !same_layout(o, &new));
            if relayout {
                self.relayout(&new);
            } else {
                self.streams.iter_mut().for_each(Stream::reset_sequence);
            }
            self.stale.reset();
            let new_instance = self
                .info
                .as_ref()
                .is_some_and(|o| o.session_id != new.session_id);
            if new_instance {
                self.retired = old_ssrcs;
                // A new sender instance has new keys: its media key and report secret are
                // made per session start, and a sender with a persistent SAM key gives no
                // other sign of it. Ask for the description again.
                self.out.push_back(Output::Event(Event::RefreshSecurity));
            }
            self.info = Some(new.clone());
            self.repair.configure(&new);
            self.configure_audio(&new);
            self.out.push_back(Output::Event(Event::SessionChanged {
                info: Box::new(new.clone()),
                new_instance,
            }));
            // The new sender's packets that came before its announcement: delivered first
            // (they hold its first key picture).
            if self.limbo.active() {
                let deliver = self.cfg.deliver_media && !new.tracks.is_empty();
                let held = self.limbo.release(deliver, new_instance);
                self.deliver_held(held);
            }
        }
        match &mut self.driver {
            Driver::Fixed { n, target } => *target = (*n).min(new.layers.len() as u8),
            _ => {
                if let Some(c) = self.driver.ctl() {
                    c.handle_announcement(now, &new);
                }
            }
        }
        self.info = Some(new);
    }

    /// A new layout: held layers keep being held at their new endpoints (quarantined again);
    /// endpoints that are in both layouts keep their sockets.
    pub(super) fn relayout(&mut self, new: &SessionInfo) {
        let held_layers: Vec<usize> = (0..self.held.len()).filter(|&k| self.held[k]).collect();
        let mut fresh: Vec<Stream> = Vec::new();
        for &k in &held_layers {
            if k >= new.layers.len() {
                continue;
            }
            for (g, p) in Self::layer_endpoints(new, k) {
                fresh.push(Stream::joined(k as u8, g, p));
            }
        }
        let old = std::mem::take(&mut self.streams);
        for s in &old {
            if !fresh.iter().any(|f| f.group == s.group && f.port == s.port) {
                self.out
                    .push_back(Output::Leave(self.endpoint(s.layer, s.group, s.port)));
            }
        }
        for f in &fresh {
            if !old.iter().any(|s| s.group == f.group && s.port == f.port) {
                self.out
                    .push_back(Output::Join(self.endpoint(f.layer, f.group, f.port)));
            }
        }
        self.streams = fresh;
        self.held = (0..new.layers.len())
            .map(|k| held_layers.contains(&k))
            .collect();
    }

    pub(super) fn join(&mut self, k: u8) {
        let Some(info) = &self.info else { return };
        if (k as usize) >= info.layers.len() || self.held.get(k as usize) == Some(&true) {
            return;
        }
        if self.held.len() < info.layers.len() {
            self.held.resize(info.layers.len(), false);
        }
        let eps = Self::layer_endpoints(info, k as usize);
        self.held[k as usize] = true;
        for (g, p) in eps {
            if self.stream_index(g, p).is_some() {
                continue;
            }
            self.streams.push(Stream::joined(k, g, p));
            self.out.push_back(Output::Join(self.endpoint(k, g, p)));
        }
        self.first_join.get_or_insert(self.now);
    }

    pub(super) fn leave(&mut self, k: u8) {
        if let Some(h) = self.held.get_mut(k as usize) {
            *h = false;
        }
        let mut i = 0;
        while i < self.streams.len() {
            if self.streams[i].layer == k {
                let s = self.streams.remove(i);
                self.out
                    .push_back(Output::Leave(self.endpoint(s.layer, s.group, s.port)));
            } else {
                i += 1;
            }
        }
    }

    pub(super) fn fixed_joins(&mut self) {
        if let Driver::Fixed { target, .. } = self.driver {
            if self.info.is_some() && !self.exited {
                for k in 0..target {
                    self.join(k);
                }
            }
        }
    }
}
