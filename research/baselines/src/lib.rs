//! The papers' baselines, reproduced for comparison and never offered by the product: RLM,
//! RLC, FLID-DL, WEBRC and the delay-based scheme (receiver-driven, behind the same
//! `congestion::LayeredController` trait as ERA and PLM), PCC and unicast TFRC.
//!
//! [`CONTROLLERS`] are their specs for `congestion::factory::find`; [`controller_by_name`] is
//! what the simulator uses: the product controllers with the papers' parameters, then these.

mod baseline;
pub mod delay;
pub mod flid;
pub mod pcc;
pub mod rlc;
pub mod rlm;
pub mod tfrc;
pub mod webrc;

use congestion::factory::{self, ControllerSpec, SenderLayout};
use congestion::{LayeredController, Result};

fn rlm() -> Box<dyn LayeredController> {
    Box::new(rlm::Rlm::default())
}
fn rlc() -> Box<dyn LayeredController> {
    Box::new(rlc::Rlc::default())
}
fn flid() -> Box<dyn LayeredController> {
    Box::new(flid::Flid::default())
}
fn webrc() -> Box<dyn LayeredController> {
    Box::new(webrc::Webrc::default())
}
fn dlm() -> Box<dyn LayeredController> {
    Box::new(delay::Dlm::default())
}
fn dlm_printed() -> Box<dyn LayeredController> {
    Box::new(delay::Dlm::new(delay::Config::as_printed()))
}

/// The baselines' specs, with the sender layout each needs.
pub const CONTROLLERS: &[ControllerSpec] = &[
    ControllerSpec {
        name: "rlm",
        protocol: "rlm",
        layout: SenderLayout::ConstantLayers,
        about: "RLM (McCanne et al.), join experiments with shared learning",
        build: rlm,
    },
    ControllerSpec {
        name: "rlc",
        protocol: "rlc",
        layout: SenderLayout::SyncPoints,
        about: "RLC (Vicisano et al.), needs synchronisation-point bursts",
        build: rlc,
    },
    ControllerSpec {
        name: "flid",
        protocol: "flid",
        layout: SenderLayout::DynamicLayers,
        about: "FLID-DL (Byers et al.), needs dynamic layers",
        build: flid,
    },
    ControllerSpec {
        name: "flid-dl",
        protocol: "flid",
        layout: SenderLayout::DynamicLayers,
        about: "alias of flid",
        build: flid,
    },
    ControllerSpec {
        name: "webrc",
        protocol: "webrc",
        layout: SenderLayout::Waves,
        about: "WEBRC (Luby et al.), needs waves",
        build: webrc,
    },
    ControllerSpec {
        name: "delay",
        protocol: "delay",
        layout: SenderLayout::ConstantLayers,
        about: "the delay-based scheme (delay-based.md)",
        build: dlm,
    },
    ControllerSpec {
        name: "delay-printed",
        protocol: "delay",
        layout: SenderLayout::ConstantLayers,
        about: "the delay-based scheme exactly as the paper prints it",
        build: dlm_printed,
    },
];

/// What the simulator runs for `name`: ERA and PLM with the papers' parameters, then the
/// baselines.
pub fn controller_by_name(name: &str) -> Result<Box<dyn LayeredController>> {
    factory::find(name, factory::PAPER_CONTROLLERS, CONTROLLERS).map(|s| (s.build)())
}

/// What a live host that also offers the baselines runs for `name` (the testbed build of the
/// player): the product's live controllers first, then the baselines.
pub fn live_controller_by_name(name: &str) -> Result<Box<dyn LayeredController>> {
    factory::find(name, factory::LIVE_CONTROLLERS, CONTROLLERS).map(|s| (s.build)())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_baseline_builds_and_reports_its_protocol() {
        for s in CONTROLLERS {
            let c = (s.build)();
            assert_eq!(c.name(), s.protocol, "{}", s.name);
            assert_eq!(c.layers(), 0);
        }
        assert_eq!(controller_by_name("ERA").unwrap().name(), "era");
        assert_eq!(controller_by_name("flid-dl").unwrap().name(), "flid");
        assert_eq!(
            live_controller_by_name("plm-confirm").unwrap().name(),
            "plm"
        );
        assert!(controller_by_name("nope").is_err());
    }
}
