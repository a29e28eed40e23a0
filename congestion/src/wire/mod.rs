//! Wire structures the protocols exchange, with parse and serialise.
pub mod tfmcc;
pub mod tfrc;
