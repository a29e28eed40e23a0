//! Traffic sources and sinks.

pub mod acc;
pub mod aer;
pub mod alma;
pub mod bbr;
pub mod cbr;
pub mod cubic;
pub mod dlm_trace;
pub mod layered;
pub mod linux_tcp;
pub mod local_controllers;
pub mod nca;
pub mod pgmcc;
pub mod probe;
pub mod sack;
pub mod tcp;
pub mod tfmcc;
pub mod tfrc;
pub mod web;
