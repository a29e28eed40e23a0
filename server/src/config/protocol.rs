//! Which congestion-control protocols a session may announce.

/// Checks that a session may announce `protocol`: TFMCC, or a receiver-driven controller whose
/// sender layout this server sends (constant-rate cumulative layers). RLC, FLID-DL and WEBRC
/// need synchronisation points, dynamic layers or waves, which the pacer does not send: their
/// receivers would silently run against a sender that does not exist, so they are refused.
pub fn check_protocol(protocol: &str) -> std::result::Result<(), String> {
    use congestion::factory::{find, SenderLayout, LIVE_CONTROLLERS};
    if protocol == "tfmcc" {
        return Ok(());
    }
    #[cfg(feature = "research")]
    let extra = baselines::CONTROLLERS;
    #[cfg(not(feature = "research"))]
    let extra: &[congestion::factory::ControllerSpec] = &[];
    let spec = find(protocol, LIVE_CONTROLLERS, extra).map_err(|e| format!("{e}, tfmcc"))?;
    match spec.layout {
        SenderLayout::ConstantLayers => Ok(()),
        other => Err(format!(
            "{protocol} needs a sender with {}, which this server does not send; use lcc, era, plm or tfmcc",
            match other {
                SenderLayout::SyncPoints => "synchronisation-point bursts",
                SenderLayout::DynamicLayers => "dynamic layers",
                SenderLayout::Waves => "waves",
                SenderLayout::ConstantLayers => "constant layers",
            }
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_without_their_sender_layout_are_refused() {
        for ok in ["lcc", "era", "plm", "tfmcc", "PLM"] {
            assert!(check_protocol(ok).is_ok(), "{ok}");
        }
        for bad in ["rlc", "flid", "webrc", "nope"] {
            let why = check_protocol(bad).unwrap_err();
            assert!(why.contains(bad), "{why}");
        }
        #[cfg(feature = "research")]
        {
            assert!(check_protocol("delay").is_ok());
            let why = check_protocol("rlc").unwrap_err();
            assert!(why.contains("synchronisation-point bursts"), "{why}");
            assert!(check_protocol("flid")
                .unwrap_err()
                .contains("dynamic layers"));
        }
    }
}
