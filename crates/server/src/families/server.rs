//! Server commands (INFO CONFIG CLIENT COMMAND ...).

use crate::command::Spec;

pub const COMMANDS: &[Spec] = &[];
