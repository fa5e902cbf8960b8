//! The directory compiled over shuttle's primitives, for model checking.
#![allow(dead_code)]

#[path = "sync_shuttle.rs"]
pub(crate) mod sync;

#[allow(clippy::duplicate_mod)]
#[path = "directory.rs"]
pub(crate) mod directory;
