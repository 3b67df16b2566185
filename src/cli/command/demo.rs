//! `demo` on the command line: its arguments, its words in help, and what they make of it.

use clap::Args;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

use super::{Runs, Subcommand};
use crate::cli::args::Common;
use crate::cli::help::Help;
use crate::cli::options::Connect;
use crate::commands::demo;
use crate::model::command::CommandName;
use crate::pipeline::report::Summary;
use crate::pipeline::system_clock;

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// How many rows to seed.
    #[arg(long, env = "OUTBOX_ARCHIVER_DEMO_ROWS", default_value_t = 100_000)]
    pub rows: u64,
    /// Where the archive's objects go (emptied first, if the demo made it).
    #[arg(
        long,
        env = "OUTBOX_ARCHIVER_DEMO_DIR",
        default_value = "target/demo-archive"
    )]
    pub dir: PathBuf,
    /// The throwaway database to (re)create (dropped first, if the demo made it).
    #[arg(
        long,
        env = "OUTBOX_ARCHIVER_DEMO_DATABASE",
        default_value = "outbox_archiver_demo"
    )]
    pub database: String,
    /// Write to a file:// folder instead of the in-process S3 server.
    #[arg(long)]
    pub file_store: bool,
    /// Drop the database and empty the folder even if the demo did not make them.
    #[arg(long)]
    pub force: bool,
    /// Serve the last demo's folder as S3 again (its own server ends with the demo), until
    /// Ctrl-C: what the settings in {dir}/demo.env reach.
    #[arg(long, conflicts_with_all = ["force", "file_store"])]
    pub serve: bool,
    /// The port --serve listens on (and demo.env names).
    #[arg(long, env = "OUTBOX_ARCHIVER_DEMO_PORT", default_value_t = 9321)]
    pub port: u16,
}

impl Subcommand for DemoArgs {
    const HELP: Help = Help {
        name: CommandName::Demo,
        about: "A throwaway database and archive, seeded, archived and shown",
        shown: &[
            ("rows", "How many rows to seed"),
            (
                "file-store",
                "A file:// folder instead of the in-process S3 server",
            ),
            ("database", "The throwaway database to (re)create"),
            ("dir", "Where the archive's objects go"),
            ("serve", "Serve the last demo's folder as S3 again"),
            ("force", "Drop and empty even what the demo did not make"),
        ],
        exit_status: "Exit status: 0 the demo ran end to end; 2 a step failed (the message says which), it would drop a database or empty a folder it did not make (--force), or the database could not be reached.",
        all_apps: None,
        unused_common: &[],
    };

    fn needs_store(&self) -> bool {
        false
    }

    fn needs_database(&self, _: &Common) -> bool {
        false
    }
}

#[async_trait::async_trait]
impl Runs for DemoArgs {
    /// `demo` makes its own database and store; it needs only the server's URL from the settings.
    async fn run(
        self,
        common: &Common,
        _: &Connect,
        _: i64,
        shutdown: CancellationToken,
    ) -> Summary {
        let spec = match common.spec() {
            Ok(spec) => spec,
            Err(e) => return Summary::unusable(CommandName::Demo, e),
        };
        let options = demo::DemoOptions {
            server_url: common
                .db
                .database_url
                .clone()
                .unwrap_or_else(|| demo::DEFAULT_SERVER_URL.to_string()),
            database: self.database,
            rows: self.rows,
            dir: std::path::absolute(&self.dir).unwrap_or(self.dir),
            file_store: self.file_store,
            force: self.force,
            serve: self.serve,
            port: self.port,
        };
        demo::run(spec, &options, shutdown, system_clock()).await
    }
}
