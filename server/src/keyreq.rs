//! Key-picture and spatial re-sync requests from viewers (HTTP today, the UDP report channel
//! too), handed to the media side. The one call site of the encoder's request queue, so that
//! the media path can change how it takes requests in one place.

use crate::error::{Error, Result};
use crate::state::Session;

/// Asks the encoder of `s` for a key picture, or with `spatial = Some(n)` for a re-sync of
/// spatial layer `n`. The encoder coalesces requests under its own rate limit.
pub fn request(s: &Session, spatial: Option<u8>) -> Result<()> {
    let q = s
        .queues
        .as_ref()
        .ok_or_else(|| Error::NotFound("session has no video".into()))?;
    match spatial {
        Some(n) => q.request_sync(n),
        None => q.request_key(),
    }
    Ok(())
}
