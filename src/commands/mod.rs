//! What runs a command above the pipeline: [`run`], any command's options run with a progress
//! line (or log lines) for its name; and the commands that are not a pipeline's work — the tour
//! (`demo.rs`, `cargo run -- demo`), the record schema (`schema.rs`), a log key made
//! (`log_key.rs`), the preflight's printing (`doctor.rs`) and the owned tables made, before a
//! run's context can exist (`migrate.rs`). A command that works on the
//! archive is its pipeline module ([`crate::pipeline::command`]), not a file here.

pub mod demo;
pub(crate) mod doctor;
pub(crate) mod log_key;
pub(crate) mod migrate;
pub(crate) mod schema;

use crate::output::progress::Progress;
use crate::pipeline::command::Command;
use crate::pipeline::report::Summary;

/// Runs a command's options on what it runs with, its progress drawn on a terminal or logged.
pub async fn run<C: Command>(ctx: &C::Context, options: &C) -> Summary {
    let progress = Progress::new(C::NAME);
    options.run(ctx, &progress).await
}
