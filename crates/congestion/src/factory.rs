//! Controllers by name, with what each one needs from the sender.
//!
//! A controller is only as good as the sender it runs against: ERA and PLM assume constant-rate
//! cumulative layers, RLC needs synchronisation-point bursts, FLID-DL dynamic layers, WEBRC
//! waves. A [`ControllerSpec`] says which [`SenderLayout`] a controller needs, so a server can
//! refuse a session whose receivers would silently run against a sender that does not exist.
//!
//! [`LIVE_CONTROLLERS`] are the product's: what the player offers and the server announces.
//! The papers' baselines add their own specs from `research/baselines`; hosts that want them
//! (the simulator, the testbed build of the player) pass them as `extra` to [`find`].

use crate::controller::LayeredController;
use crate::era::{Era, EraConfig, RttMode};
use crate::lcc::Lcc;
use crate::plm::{Plm, PlmConfig};
use proto::{Error, Result};

/// The sender behaviour a controller relies on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SenderLayout {
    /// Every cumulative layer at its announced constant rate in equal-size bunches (what the
    /// live server sends).
    ConstantLayers,
    /// RLC: bursts before synchronisation points.
    SyncPoints,
    /// FLID-DL: layers that change their rate each time slot (dynamic layering).
    DynamicLayers,
    /// WEBRC: waves of decreasing rate on rotating channels.
    Waves,
}

/// One controller a host can build by name.
#[derive(Clone, Copy)]
pub struct ControllerSpec {
    /// The name users type (lower case).
    pub name: &'static str,
    /// What the controller reports as its own name ([`LayeredController::name`]).
    pub protocol: &'static str,
    /// What it needs from the sender.
    pub layout: SenderLayout,
    /// One line for `--help` and error messages.
    pub about: &'static str,
    /// Builds one instance with this spec's parameters.
    pub build: fn() -> Box<dyn LayeredController>,
}

impl std::fmt::Debug for ControllerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerSpec")
            .field("name", &self.name)
            .field("layout", &self.layout)
            .finish()
    }
}

fn era_live() -> Box<dyn LayeredController> {
    Box::new(Era::new(EraConfig::live()))
}
fn era_paper() -> Box<dyn LayeredController> {
    Box::new(Era::default())
}
fn era_rtt_join() -> Box<dyn LayeredController> {
    Box::new(Era::new(EraConfig {
        rtt: RttMode::JoinLatency {
            initial: 0.05,
            window: 32,
        },
        ..EraConfig::live()
    }))
}
fn lcc() -> Box<dyn LayeredController> {
    Box::new(Lcc::default())
}
fn plm_paper() -> Box<dyn LayeredController> {
    Box::new(Plm::default())
}
fn plm_live() -> Box<dyn LayeredController> {
    Box::new(Plm::new(PlmConfig::live()))
}
fn plm_confirm() -> Box<dyn LayeredController> {
    Box::new(Plm::new(PlmConfig::confirming()))
}

/// LCC has one configuration, live and in the simulator (it has no paper to reproduce).
const LCC: ControllerSpec = ControllerSpec {
    name: "lcc",
    protocol: "lcc",
    layout: SenderLayout::ConstantLayers,
    about: "the product default, for FIFO, FQ-CoDel and fair queues (docs/protocols/lcc.md)",
    build: lcc,
};

/// The product's controllers, as the player runs them on real sockets; the first is the
/// default. `tfmcc` is not here: its receiver needs a receiver id and a feedback path, so hosts
/// build it directly.
pub const LIVE_CONTROLLERS: &[ControllerSpec] = &[
    LCC,
    ControllerSpec {
        name: "era",
        protocol: "era",
        layout: SenderLayout::ConstantLayers,
        about:
            "ERA with the live configuration (no decision on one stretched pair sample, a doubling climb after loss: era.md E13-E17)",
        build: era_live,
    },
    ControllerSpec {
        name: "era-thesis",
        protocol: "era",
        layout: SenderLayout::ConstantLayers,
        about: "ERA exactly as the thesis specifies it",
        build: era_paper,
    },
    ControllerSpec {
        name: "era-rtt-join",
        protocol: "era",
        layout: SenderLayout::ConstantLayers,
        about: "live ERA with Eq. 5-6's RTT taken from join-to-first-packet latency (era.md E8)",
        build: era_rtt_join,
    },
    ControllerSpec {
        name: "plm",
        protocol: "plm",
        layout: SenderLayout::ConstantLayers,
        about: "PLM with the live configuration (after a drop, a climb at most doubles the rate per check: plm.md section 10)",
        build: plm_live,
    },
    ControllerSpec {
        name: "plm-paper",
        protocol: "plm",
        layout: SenderLayout::ConstantLayers,
        about: "PLM as published (needs fair queuing at the bottleneck)",
        build: plm_paper,
    },
    ControllerSpec {
        name: "plm-confirm",
        protocol: "plm",
        layout: SenderLayout::ConstantLayers,
        about: "PLM holding low pair samples for 200 ms before dropping (plm.md section 9)",
        build: plm_confirm,
    },
];

/// The papers' parameters for the product controllers (what the simulator reproduces), and LCC.
pub const PAPER_CONTROLLERS: &[ControllerSpec] = &[
    LCC,
    ControllerSpec {
        name: "era",
        protocol: "era",
        layout: SenderLayout::ConstantLayers,
        about: "ERA as the thesis specifies it",
        build: era_paper,
    },
    ControllerSpec {
        name: "plm",
        protocol: "plm",
        layout: SenderLayout::ConstantLayers,
        about: "PLM as published",
        build: plm_paper,
    },
];

/// The spec called `name` (case-insensitive) in `primary`, then in `extra`.
pub fn find(
    name: &str,
    primary: &'static [ControllerSpec],
    extra: &'static [ControllerSpec],
) -> Result<&'static ControllerSpec> {
    let lower = name.to_ascii_lowercase();
    primary
        .iter()
        .chain(extra)
        .find(|s| s.name == lower)
        .ok_or_else(|| {
            let known: Vec<&str> = primary.iter().chain(extra).map(|s| s.name).collect();
            Error::UnknownController(name.to_string(), known.join(", "))
        })
}

/// A product controller as the player runs it live.
pub fn live_controller_by_name(name: &str) -> Result<Box<dyn LayeredController>> {
    find(name, LIVE_CONTROLLERS, &[]).map(|s| (s.build)())
}

/// A product controller with the papers' parameters (the simulator's ERA and PLM).
pub fn product_controller_by_name(name: &str) -> Result<Box<dyn LayeredController>> {
    find(name, PAPER_CONTROLLERS, &[]).map(|s| (s.build)())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spec_builds_the_protocol_it_names() {
        for s in LIVE_CONTROLLERS.iter().chain(PAPER_CONTROLLERS) {
            let c = (s.build)();
            assert_eq!(c.name(), s.protocol, "{}", s.name);
            assert_eq!(c.layers(), 0);
            assert_eq!(s.layout, SenderLayout::ConstantLayers);
        }
        assert_eq!(
            LIVE_CONTROLLERS[0].name, "lcc",
            "the product default comes first"
        );
        assert_eq!(live_controller_by_name("LCC").unwrap().name(), "lcc");
        assert_eq!(product_controller_by_name("lcc").unwrap().name(), "lcc");
        assert_eq!(live_controller_by_name("ERA").unwrap().name(), "era");
        assert_eq!(
            live_controller_by_name("plm-confirm").unwrap().name(),
            "plm"
        );
    }

    #[test]
    fn unknown_names_list_what_is_known() {
        match live_controller_by_name("rlc") {
            Err(Error::UnknownController(n, known)) => {
                assert_eq!(n, "rlc");
                assert!(known.contains("era") && known.contains("plm"), "{known}");
                assert!(!known.contains("rlc"));
            }
            other => panic!(
                "expected UnknownController, got {:?}",
                other.map(|c| c.name())
            ),
        }
    }
}
