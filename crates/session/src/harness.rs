//! The in-process harness.
