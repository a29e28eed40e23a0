//! Which spatial layers a picture was sent with: one byte in an RTP header extension element
//! (RFC 8285) on every media packet of the picture, on every layer.
//!
//! Why: every (spatial, temporal) cell of the SVC encode is its own stream, paced on its own,
//! so a receiver that holds a picture's base frame cannot tell a higher frame that is only
//! late in its layer's queue from one that will never come. The sender leaves frames out on
//! purpose (a frame its layer's queue would deliver too late, and the frames predicted from
//! it; frames the encoder dropped); without this element a receiver waits for them until
//! their layer moves past, which holds every later picture back (in-order decoding) and is
//! seen as a freeze. With it the picture is complete without them and is shown at the layer
//! below at once (docs/protocols/wire.md §1.1).
//!
//! # Element layout (2 bytes)
//!
//! | byte | meaning |
//! |---|---|
//! | 0 | bit s (0..=7): the picture has a frame on spatial layer s |
//! | 1 | how many pictures right before this one were sent with no frame at all (every frame left out): a receiver does not wait for their picture IDs |
//!
//! Negotiated in SDP as `a=extmap:3 urn:layercast:frames` (element ID 3). Receivers that do
//! not know it skip it. A receiver that does not get it (no packet of the picture carried it,
//! or a repair rebuilt the packet without its extension) waits as before. Longer data is
//! accepted and the tail ignored.

use crate::error::{Error, Result};

/// The URI the SDP `a=extmap` line names.
pub const URI: &str = "urn:layercast:frames";
/// Extension element ID.
pub const ID: u8 = 3;

/// What a picture was sent with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SentFrames {
    /// Bit s: the picture has a frame on spatial layer s.
    pub spatial: u8,
    /// Pictures right before this one that were sent with no frame at all.
    pub unsent_before: u8,
}

impl SentFrames {
    /// Parses the element's data. A one-byte element (no count) means no unsent pictures.
    pub fn parse(data: &[u8]) -> Result<SentFrames> {
        match data {
            [] => Err(Error::Truncated {
                what: "sent-frames element",
                need: 1,
                have: 0,
            }),
            [s] => Ok(SentFrames {
                spatial: *s,
                unsent_before: 0,
            }),
            [s, u, ..] => Ok(SentFrames {
                spatial: *s,
                unsent_before: *u,
            }),
        }
    }

    /// The element's data.
    pub fn to_bytes(self) -> [u8; 2] {
        [self.spatial, self.unsent_before]
    }

    /// Whether the picture has a frame on spatial layer `s`.
    pub fn has(self, s: u8) -> bool {
        s < 8 && self.spatial >> s & 1 == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtp::{RtpHeader, RtpPacket};

    #[test]
    fn round_trips_next_to_the_cc_element() {
        let hdr = RtpHeader {
            payload_type: 96,
            extensions: vec![
                (
                    ID,
                    SentFrames {
                        spatial: 0b011,
                        unsent_before: 2,
                    }
                    .to_bytes()
                    .to_vec(),
                ),
                (1, vec![0; 11]),
            ],
            ..RtpHeader::default()
        };
        let mut out = Vec::new();
        hdr.write(&[1, 2, 3], &mut out).unwrap();
        let p = RtpPacket::parse(&out).unwrap();
        let f = SentFrames::parse(p.extension(ID).unwrap()).unwrap();
        assert!(f.has(0) && f.has(1) && !f.has(2) && !f.has(9));
        assert_eq!(f.unsent_before, 2);
        assert_eq!(p.extension(1).unwrap().len(), 11);
        assert_eq!(p.payload(), &[1, 2, 3]);
    }

    #[test]
    fn empty_data_is_an_error() {
        assert!(SentFrames::parse(&[]).is_err());
        let one = SentFrames::parse(&[4]).unwrap();
        assert_eq!((one.spatial, one.unsent_before), (4, 0));
        let long = SentFrames::parse(&[4, 9, 7]).unwrap();
        assert_eq!((long.spatial, long.unsent_before), (4, 9));
    }
}
