//! placeholder
pub struct Publisher;
