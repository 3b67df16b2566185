//! `log-key` on the command line: its arguments, its words in help, and what they make of it.

use clap::Args;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

use super::{Runs, Subcommand};
use crate::cli::args::Common;
use crate::cli::help::Help;
use crate::cli::options::Connect;
use crate::model::command::CommandName;
use crate::pipeline::report::Summary;

#[derive(Debug, Args)]
pub(crate) struct LogKeyArgs {
    /// The key's name, as signatures carry it: a name the auditors recognise, without '+' or
    /// spaces (say archive.example.com/wallet).
    #[arg(long)]
    pub name: String,
    /// Where the signing key is written: a new file (an existing one is never replaced).
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
}

impl Subcommand for LogKeyArgs {
    const HELP: Help = Help {
        name: CommandName::LogKey,
        about: "Make a signing key for the log's checkpoints",
        shown: &[
            ("name", "The key's name, as signatures carry it"),
            ("out", "Where the signing key is written (a new file)"),
        ],
        exit_status: "Exit status: 0 the key was written (its verifier printed); 2 the name is not a key name, or the file exists already or cannot be written.",
        all_apps: None,
        unused_common: &["database-url", "store", "table", "table-profile"],
    };

    fn needs_store(&self) -> bool {
        false
    }

    fn needs_database(&self, _: &Common) -> bool {
        false
    }
}

#[async_trait::async_trait]
impl Runs for LogKeyArgs {
    async fn run(self, _: &Common, _: &Connect, _: i64, _: CancellationToken) -> Summary {
        crate::commands::log_key::run(&self.name, &self.out)
    }
}
