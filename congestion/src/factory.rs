//! Picks a controller by name.

use crate::controller::LayeredController;
use crate::error::{Error, Result};

/// Names the factory accepts.
pub const CONTROLLERS: &[&str] = &[];

/// Builds the controller called `name` with its default parameters.
pub fn controller_by_name(name: &str) -> Result<Box<dyn LayeredController>> {
    Err(Error::UnknownController(
        name.to_string(),
        CONTROLLERS.join(", "),
    ))
}
