//! `schema` on the command line: its arguments, its words in help, and what they make of it.

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::{Runs, Subcommand};
use crate::cli::args::Common;
use crate::cli::help::Help;
use crate::cli::options::Connect;
use crate::commands::schema;
use crate::model::command::CommandName;
use crate::pipeline::report::Summary;

#[derive(Debug, Args)]
pub(crate) struct SchemaArgs {}

impl Subcommand for SchemaArgs {
    const HELP: Help = Help {
        name: CommandName::Schema,
        about: "Print the JSON Schema of the table's NDJSON record",
        shown: &[],
        exit_status:
            "Exit status: 0 the schema was printed; 2 the table or profile could not be described.",
        all_apps: None,
        unused_common: &[],
    };

    fn needs_store(&self) -> bool {
        false
    }

    fn needs_database(&self, common: &Common) -> bool {
        common.db.table_profile.is_some()
    }
}

#[async_trait::async_trait]
impl Runs for SchemaArgs {
    /// `schema`: a built-in table's record schema needs nothing (its own columns; with a database, the
    /// columns added to the table too); a profile's, the database that describes its columns.
    async fn run(self, common: &Common, _: &Connect, _: i64, _: CancellationToken) -> Summary {
        let spec = match common.profile() {
            Err(e) => return Summary::unusable(CommandName::Schema, e),
            Ok(None) if common.db.database_url.is_none() => common.spec(),
            Ok(_) => match common.database().await {
                Err(e) => Err(e),
                Ok(db) => {
                    let spec = common.spec_on(&db).await;
                    db.close().await;
                    spec
                }
            },
        };
        match spec {
            Err(e) => Summary::unusable(CommandName::Schema, e),
            Ok(spec) => schema::run(spec),
        }
    }
}
