//! §3.3 on packet-pair samples: the immediate drop, the add decision once per check period
//! (periodic or sliding), and `confirm_drop`'s held samples.

use super::Plm;
use crate::time::Time;

impl Plm {
    pub(super) fn reset_window(&mut self) {
        self.w_min = f64::INFINITY;
        self.w_count = 0;
    }

    /// Forgets the sliding window's samples; `since` = the decision that restarts it.
    pub(super) fn reset_slide(&mut self, since: Option<Time>) {
        self.slide_min.clear();
        self.slide_times.clear();
        self.slide_since = since;
        self.sliding = false;
    }

    /// Adds sample `x` at `t` to the sliding window and forgets samples older than C.
    pub(super) fn push_slide(&mut self, t: Time, x: f64) {
        self.slide_since.get_or_insert(t);
        while self.slide_min.back().is_some_and(|&(_, v)| v >= x) {
            self.slide_min.pop_back();
        }
        self.slide_min.push_back((t, x));
        self.slide_times.push_back(t);
        let keep_after = t - self.c;
        while self
            .slide_min
            .front()
            .is_some_and(|&(at, _)| at <= keep_after)
        {
            self.slide_min.pop_front();
        }
        while self.slide_times.front().is_some_and(|&at| at <= keep_after) {
            self.slide_times.pop_front();
        }
    }

    /// `a < b` (strict) or `a <= b` (permissive), for the two loops of §3.3, with `b` (the
    /// PP sample or estimate) read with [`PlmConfig::tolerance`] in the conservative direction
    /// for strict and the permissive one for permissive.
    #[inline]
    pub(super) fn below(&self, a: f64, b: f64) -> bool {
        let tol = self.cfg.tolerance.clamp(0.0, 0.5);
        if self.cfg.permissive {
            a <= b * (1.0 + tol)
        } else {
            a < b * (1.0 - tol)
        }
    }

    /// §3.3, on a PP sample `x` at `t`.
    pub(super) fn on_sample(&mut self, t: Time, x: f64) {
        if self.t_c.is_none() {
            self.t_c = Some(t + self.c);
        }
        let first_pp = *self.first_pp.get_or_insert(t);
        let bn = self.b(self.n);
        if x < bn {
            let recurring = self.last_set_aside.is_some_and(|a| t < a + self.c);
            let settled = t >= self.level_since + self.c && !recurring;
            match (
                self.cfg.confirm_drop.filter(|_| settled),
                self.pending_low.take(),
            ) {
                // Hold the first low sample: a stall ends with a normal sample within `h`.
                (Some(_), None) => self.pending_low = Some((t, x)),
                // Still low `h` after the first: believed, on the largest (the least
                // stretched) sample of the run.
                (Some(h), Some((t0, x0))) if t >= t0 + h => self.pp_drop(t, x.max(x0), true),
                (Some(_), Some((t0, x0))) => self.pending_low = Some((t0, x.max(x0))),
                // DROP on a single sample (the paper).
                (None, _) => self.pp_drop(t, x, false),
            }
            return;
        }
        // A sample within the tolerance of B[n] neither confirms nor ends a held run: at a
        // share equal to a cumulative rate the samples straddle B[n] (timestamp noise), and
        // the strict rule must still drop (plm/E4: 15 layers held at a 300 kbit/s share lost
        // packets when such samples set the low ones aside).
        if self.pending_low.is_some() && self.below(bn, x) {
            let (t0, x0) = self.pending_low.take().unwrap_or((t, x));
            self.set_aside += 1;
            self.last_set_aside = Some(t);
            self.log(
                t,
                self.n,
                "pp-set-aside",
                vec![
                    ("pp_sample", x0),
                    ("next_sample", x),
                    ("b_before", bn),
                    ("age_s", t.saturating_since(t0).as_secs_f64()),
                ],
            );
        }
        self.w_min = self.w_min.min(x);
        self.w_count += 1;
        if self.cfg.sliding_check {
            self.push_slide(t, x);
        }
        let due = self.t_c.is_some_and(|tc| t > tc);
        if due && self.w_count >= self.cfg.min_pp {
            // ADD, at most once per C.
            let (bhat, count) = (self.w_min, self.w_count);
            self.add_decision(t, bhat, count, first_pp, false);
        } else if self.sliding
            && self.slide_since.is_some_and(|s| t > s + self.c)
            && self.slide_times.len() >= self.cfg.min_pp
        {
            // The last check added nothing: add as soon as a full C of samples allows it.
            let bhat = self.slide_min.front().map_or(f64::INFINITY, |&(_, v)| v);
            let lossy =
                self.cfg.no_add_while_lossy && (self.loss_dropped_in_period || self.cycle_lossy());
            if !lossy
                && bhat >= bn
                && self.n < self.cum.len()
                && self.below(self.b(self.n + 1), bhat)
            {
                let count = self.slide_times.len();
                self.add_decision(t, bhat, count, first_pp, true);
            }
        }
    }

    /// §3.3 DROP on the sample `x` at `t`: leave layers while `!(B[n] < x)`, down to the base
    /// layer with [`PlmConfig::pp_keeps_base`].
    pub(super) fn pp_drop(&mut self, t: Time, x: f64, confirmed: bool) {
        let from = self.n;
        let bn = self.b(self.n);
        self.pending_low = None;
        self.last_set_aside = None;
        self.t_c = Some(t + self.c);
        let floor = usize::from(self.cfg.pp_keeps_base);
        while self.n > floor && !self.below(self.b(self.n), x) {
            self.leave_top();
        }
        self.reset_window();
        self.reset_slide(Some(t));
        self.cycle = None; // a fresh PP beats stale loss history (ns-2)
        let b_after = self.b(self.n);
        let mut inputs = vec![("pp_sample", x), ("b_before", bn), ("b_after", b_after)];
        if self.cfg.confirm_drop.is_some() {
            inputs.push(("confirmed", if confirmed { 1.0 } else { 0.0 }));
        }
        self.log(t, from, "pp-drop", inputs);
        self.emptied(t);
    }

    /// An add decision on the estimate `bhat` from `count` samples (§3.3): the periodic check
    /// at the first sample after T_c, or (`sliding`) the sliding rule of
    /// [`PlmConfig::sliding_check`].
    pub(super) fn add_decision(
        &mut self,
        t: Time,
        bhat: f64,
        count: usize,
        first_pp: Time,
        sliding: bool,
    ) {
        let bn = self.b(self.n);
        self.last_estimate = Some(bhat);
        self.t_c = Some(t + self.c);
        self.reset_window();
        let from = self.n;
        let lossy = self.cfg.no_add_while_lossy
            && (std::mem::take(&mut self.loss_dropped_in_period) || self.cycle_lossy());
        if !lossy {
            self.cycle = None; // the fresh estimate is trusted over loss history (ns-2)
        }
        let cap = self.climb_cap(t);
        if bhat >= bn && !lossy {
            while self.n < self.cum.len()
                && self.below(self.b(self.n + 1), bhat)
                && (self.n == from || cap.is_none_or(|c| self.b(self.n + 1) <= c))
            {
                self.join_next();
            }
        }
        if self.n > from {
            self.pending_low = None;
            self.reset_slide(Some(t));
        } else {
            // Not after a check held back by the loss rule (`no_add_while_lossy`): the pairs
            // that survive an overloaded queue whole read high (plm/S8).
            self.sliding = self.cfg.sliding_check && !lossy;
        }
        let b_after = self.b(self.n);
        let mut inputs = vec![
            ("bhat_e", bhat),
            ("pp_count", count as f64),
            ("b_before", bn),
            ("b_after", b_after),
            ("lossy", if lossy { 1.0 } else { 0.0 }),
            ("first_pp_age_s", t.saturating_since(first_pp).as_secs_f64()),
            ("sliding", if sliding { 1.0 } else { 0.0 }),
        ];
        if self.cfg.climb_after_drop.is_some() {
            inputs.push(("climb_cap", cap.unwrap_or(-1.0)));
        }
        self.log(t, from, "pp-add", inputs);
    }

    /// [`super::PlmConfig::climb_after_drop`]: the highest cumulative rate an add at `t` may
    /// reach (one layer more is always allowed), or `None` when not capped.
    fn climb_cap(&self, t: Time) -> Option<f64> {
        let ratio = self.cfg.climb_after_drop?;
        let recent = self
            .last_drop
            .is_some_and(|d| t.saturating_since(d) < self.cfg.climb_memory);
        (recent && self.n >= 1).then(|| self.b(self.n) * ratio)
    }

    /// When a held low sample is believed without confirmation (`confirm_drop`).
    pub(super) fn pending_deadline(&self) -> Option<Time> {
        let (t0, _) = self.pending_low?;
        Some(t0 + self.cfg.confirm_drop?)
    }
}
