//! What the API publishes, rendered from the session registry (`crate::state`) and the viewer
//! table (`crate::viewers`): the JSON contract of `docs/api.md`, the Prometheus exposition and
//! the session's SDP.

pub mod json;
pub mod prometheus;
pub mod sdp;
