//! TFMCC placeholder
