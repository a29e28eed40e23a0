//! Placeholder: TFMCC sender and receiver (issue 3).
