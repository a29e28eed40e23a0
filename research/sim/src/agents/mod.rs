//! Traffic sources and sinks.

pub mod acc;
pub mod aer;
pub mod alma;
pub mod cbr;
pub mod dlm_trace;
pub mod layered;
pub mod local_controllers;
pub mod nca;
pub mod pgmcc;
pub mod probe;
pub mod sack;
pub mod tcp;
pub mod tfmcc;
pub mod tfrc;
pub mod web;
