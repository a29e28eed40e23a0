//! What drives the subscription (fixed layers, a layered controller, a TFMCC receiver) and
//! how its actions become joins, leaves, transmits and events.

use super::*;

pub(super) enum Driver {
    Fixed { n: u8, target: u8 },
    Layered(Box<dyn LayeredController>),
    Tfmcc(Box<TfmccReceiver>),
}

impl Driver {
    pub(super) fn ctl(&mut self) -> Option<&mut dyn LayeredController> {
        match self {
            Driver::Fixed { .. } => None,
            Driver::Layered(c) => Some(c.as_mut()),
            Driver::Tfmcc(r) => Some(r.as_mut()),
        }
    }
    pub(super) fn ctl_ref(&self) -> Option<&dyn LayeredController> {
        match self {
            Driver::Fixed { .. } => None,
            Driver::Layered(c) => Some(c.as_ref()),
            Driver::Tfmcc(r) => Some(r.as_ref()),
        }
    }
}

impl Subscriber {
    pub(super) fn drain_controller(&mut self) {
        let mut actions = Vec::new();
        let mut decisions = Vec::new();
        if let Some(c) = self.driver.ctl() {
            while let Some(a) = c.poll_action() {
                actions.push(a);
            }
            while let Some(d) = c.poll_decision() {
                decisions.push(d);
            }
        }
        for d in decisions {
            self.out.push_back(Output::Event(Event::Decision(d)));
        }
        for a in actions {
            match a {
                Action::Join(k) if !self.exited => self.join(k),
                Action::Join(_) => {}
                Action::Leave(k) => self.leave(k),
                Action::Exit => {
                    for k in 0..self.held.len() as u8 {
                        self.leave(k);
                    }
                    self.out.push_back(Output::Event(Event::Exit));
                }
                Action::SendFeedback(b) => self.send_report(b),
            }
        }
    }
}
