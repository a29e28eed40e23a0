//! Queue disciplines, sans-IO, shared by the simulator (`layercast-sim`) and the link
//! emulator (`layercast-linkemu`), so that a scenario's queue means the same thing in both.
//!
//! A queue holds opaque items of type `P` (a simulator packet, or a raw Ethernet frame in the
//! link emulator) together with the metadata the disciplines need.

use congestion::Time;

/// What a discipline needs to know about one packet.
#[derive(Clone, Debug)]
pub struct Queued<P> {
    /// Size on the wire in bytes (what serialisation time and byte limits count).
    pub size: u32,
    /// Flow identifier for per-flow fair queuing. A layered session's groups share one flow.
    pub flow: u64,
    /// When it was enqueued (set by the queue).
    pub enqueued_at: Time,
    /// The item itself.
    pub item: P,
}

/// Why a packet was not queued (or was pushed out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The queue was full (tail drop).
    Overflow,
    /// An active queue management decision (RED/REM early drop).
    Early,
}

/// A queue discipline.
pub trait QueueDiscipline<P>: Send {
    /// Offers a packet at time `now`. Returns the packets dropped as a result (the offered one
    /// on a tail drop; another flow's packet for disciplines that push out).
    fn enqueue(&mut self, now: Time, pkt: Queued<P>) -> Vec<(Queued<P>, DropReason)>;
    /// Takes the next packet to serialise, if any.
    fn dequeue(&mut self, now: Time) -> Option<Queued<P>>;
    /// Packets waiting.
    fn len_packets(&self) -> usize;
    /// Bytes waiting.
    fn len_bytes(&self) -> u64;
}
