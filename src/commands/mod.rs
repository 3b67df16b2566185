//! The subcommands: each module takes its options, runs its apps through the pipeline's driver
//! ([`crate::pipeline`]), and returns the [`crate::pipeline::report::Summary`] to print, with its exit
//! status. No SQL, no object-store calls and no loops over apps of their own live here.

pub mod archive;
pub mod attest;
pub mod compact;
pub mod demo;
pub(crate) mod doctor;
pub(crate) mod find;
pub(crate) mod history;
pub(crate) mod log_key;
pub mod migrate;
pub mod purge;
pub(crate) mod relocate;
pub mod restore;
pub(crate) mod schema;
pub mod status;
pub mod verify;
