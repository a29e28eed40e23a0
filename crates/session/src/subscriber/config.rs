//! How a Subscriber is set up and what its host hands it: the controller, the options, the
//! keys from the description, the announcements.

use super::*;

/// What drives the subscription.
pub enum Control {
    /// No controller: hold layers `0..n` (measurement mode).
    Fixed(u8),
    /// A receiver-driven layered controller (`congestion::factory`, or a research baseline).
    Layered(Box<dyn LayeredController>),
    /// A TFMCC receiver with this receiver id (its reports go to the feedback port).
    Tfmcc { rid: u32 },
}

/// How a Subscriber is set up.
pub struct SubscriberConfig {
    /// Deliver media packets ([`Output::Media`]) and hold a restarted sender's media.
    pub deliver_media: bool,
    /// Ignore multicast SAMs until [`Subscriber::handle_security`] was called (the host
    /// fetches a description that may pin a key, name an SSM source or carry the media key:
    /// a SAM taken before it would join layers any-source and unauthenticated).
    pub await_security: bool,
    /// A pinned SAM key (never replaced by a description's).
    pub pinned_sam: Option<SamVerifier>,
    /// Source-specific joins to this source (else the description's, unless `ssm_any`).
    pub ssm: Option<Ipv4Addr>,
    pub ssm_any: bool,
    /// Where reports and requests go instead of the announced sender's feedback port.
    pub feedback_override: Option<SocketAddrV4>,
    /// The sender's address when the announcement's is 0.0.0.0 (a sender bound to all
    /// interfaces): the host of the description URL.
    pub feedback_fallback_host: Option<Ipv4Addr>,
    /// Send key-picture and re-sync requests.
    pub media_requests: bool,
    /// Ask for lost media packets again when the sender offers it (`super::nack`); the host
    /// hands the retransmissions, which come to the socket the requests leave by, to
    /// [`super::Subscriber::handle_retransmission`].
    pub retransmission: bool,
    /// The audio track's starting playout delay after its first packet
    /// ([`crate::audio::playout`]; a host raises it with
    /// [`super::Subscriber::delay_audio`]); the track is received (and [`Output::Audio`]
    /// given) when media is delivered.
    pub audio_delay: Duration,
}

impl Default for SubscriberConfig {
    /// Media delivered, no security wait, media requests on.
    fn default() -> SubscriberConfig {
        SubscriberConfig {
            deliver_media: true,
            await_security: false,
            pinned_sam: None,
            ssm: None,
            ssm_any: false,
            feedback_override: None,
            feedback_fallback_host: None,
            media_requests: true,
            retransmission: true,
            audio_delay: Duration::from_millis(800),
        }
    }
}

/// Keys and sources from the session description.
#[derive(Default)]
pub struct Security {
    pub sam: Option<SamVerifier>,
    pub opener: Option<MediaOpener>,
    pub ssm: Option<Ipv4Addr>,
    pub report_key: Option<ReceiverKey>,
}

/// An announcement as the host received it.
pub enum Announcement<'a> {
    /// A SAM datagram from the announcement group.
    Sam(&'a [u8]),
    /// The JSON description served over HTTP (or read from a file).
    Json(&'a [u8]),
    /// A description the host already has in hand.
    Info(SessionInfo),
}
