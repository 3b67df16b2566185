//! `migrate` on the command line: its arguments, its words in help, and what they make of it.

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::{Runs, Subcommand};
use crate::cli::args::Common;
use crate::cli::help::Help;
use crate::cli::options::Connect;
use crate::model::command::CommandName;
use crate::pipeline::report::Summary;

#[derive(Debug, Args)]
pub(crate) struct MigrateArgs {
    /// Also create the reference source table (demos and tests).
    #[arg(long, env = "OUTBOX_ARCHIVER_WITH_SOURCE_TABLE")]
    pub with_source_table: bool,
    /// Then put this many realistic rows into the source table — three apps over the last 30
    /// days, most delivered, as `demo` seeds them — for a first hour on a trial database.
    /// Only an empty table of a built-in kind is filled: a table that holds a row already is
    /// refused, so no real outbox ever gets an invented row.
    #[arg(long, value_name = "ROWS", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub seed_rows: Option<u64>,
}

impl Subcommand for MigrateArgs {
    const HELP: Help = Help {
        name: CommandName::Migrate,
        about: "Create or update the archiver's tables (as a role that may CREATE)",
        shown: &[
            (
                "with-source-table",
                "Also create the reference source table (a trial database)",
            ),
            (
                "seed-rows",
                "Then put this many realistic rows in it (a trial's first hour)",
            ),
        ],
        exit_status: "Exit status: 0 the schema is up to date (what was applied is in the summary); 2 the database could not be reached or a migration failed.",
        all_apps: None,
        unused_common: &[],
    };

    fn needs_store(&self) -> bool {
        false
    }
}

#[async_trait::async_trait]
impl Runs for MigrateArgs {
    /// `migrate`: the table's spec needs the database (a profile's columns are read from it).
    async fn run(self, common: &Common, _: &Connect, _: i64, _: CancellationToken) -> Summary {
        let options = crate::commands::migrate::MigrateOptions {
            with_source_table: self.with_source_table,
            seed_rows: self.seed_rows,
        };
        if let Err(e) = common.profile() {
            return Summary::unusable(CommandName::Migrate, e);
        }
        let db = match common.database().await {
            Ok(db) => db,
            Err(e) => return Summary::unusable(CommandName::Migrate, e),
        };
        let summary = match common.spec_on(&db).await {
            Ok(spec) => crate::commands::migrate::run(&db, spec, &options).await,
            Err(e) => Summary::unusable(CommandName::Migrate, e),
        };
        db.close().await;
        summary
    }
}
