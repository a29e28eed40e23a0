//! Discrete-event network simulator (issue 4).
