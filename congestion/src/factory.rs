//! Picks a controller by name.
//!
//! One match arm and one `CONTROLLERS` entry per controller. The baselines (RLM, RLC,
//! FLID-DL, WEBRC, delay-based) add theirs below the marked line; keep the list and the
//! match in the same order.

use crate::controller::LayeredController;
use crate::era::Era;
use crate::error::{Error, Result};
use crate::plm::Plm;

/// Names the factory accepts (lower case).
pub const CONTROLLERS: &[&str] = &[
    "era", "plm",
    // baselines (cc-baselines) and others: add names here
];

/// Builds the controller called `name` (case-insensitive) with its default parameters.
pub fn controller_by_name(name: &str) -> Result<Box<dyn LayeredController>> {
    match name.to_ascii_lowercase().as_str() {
        "era" => Ok(Box::new(Era::default())),
        "plm" => Ok(Box::new(Plm::default())),
        // baselines (cc-baselines): "rlm", "rlc", "flid-dl", "webrc", "delay" arms go here
        _ => Err(Error::UnknownController(
            name.to_string(),
            CONTROLLERS.join(", "),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_builds_and_reports_its_name() {
        for n in CONTROLLERS {
            let c = controller_by_name(n).unwrap();
            assert_eq!(c.name(), *n);
            assert_eq!(c.layers(), 0);
        }
        assert_eq!(controller_by_name("ERA").unwrap().name(), "era");
        match controller_by_name("nope") {
            Err(Error::UnknownController(n, known)) => {
                assert_eq!(n, "nope");
                assert!(known.contains("era") && known.contains("plm"));
            }
            _ => panic!("expected UnknownController"),
        }
    }
}
