//! Wire structures the protocols exchange, with parse and serialise.
