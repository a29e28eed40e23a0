//! Placeholder: filled in by the protocol work (issue 3).
