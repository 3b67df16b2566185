//! `status` on the command line: its arguments, its words in help, and what they make of it.

use clap::Args;

use super::Subcommand;
use crate::cli::args::{AnyAppArgs, Common, CutoffArgs, MetricsArgs, SourceArgs};
use crate::cli::help::{Help, APP};
use crate::cli::options::{Groups, IntoOptions};
use crate::cli::parse::parse_duration;
use crate::model::command::CommandName;
use crate::pipeline::status;

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    pub apps: AnyAppArgs,
    #[command(flatten)]
    pub cutoff: CutoffArgs,
    /// Purge's grace period, to split rows awaiting purge into those purge takes on its next run
    /// and those that still wait (as purge --grace).
    #[arg(long, value_name = "DURATION", env = "OUTBOX_ARCHIVER_GRACE", default_value = "24h", value_parser = parse_duration)]
    pub grace: i64,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

impl IntoOptions for StatusArgs {
    type Options = status::StatusOptions;
    fn into_options(self, common: &Common, now_ms: i64) -> Result<status::StatusOptions, String> {
        Ok(status::StatusOptions {
            apps: self.apps.apps(),
            cutoff_ms: self.cutoff.cutoff_ms(now_ms),
            grace_ms: self.grace,
            delivered_status: common.delivered_status(&self.source),
        })
    }
}

impl Subcommand for StatusArgs {
    const HELP: Help = Help {
        name: CommandName::Status,
        about: "Per app: cursor, archived rows, backlog, rows awaiting purge, last runs",
        shown: &[
            APP,
            ("grace", "Purge's grace, to tell what its next run takes"),
            (
                "older-than",
                "Rows delivered longer ago than this count as backlog",
            ),
        ],
        exit_status: "Exit status: 0 the figures were read; 2 the database could not be reached or an --app matches nothing.",
        all_apps: None,
        unused_common: &[],
    };

    fn groups(&self) -> Groups<'_> {
        Groups {
            metrics: Some(&self.metrics),
            ..Groups::default()
        }
    }

    fn needs_store(&self) -> bool {
        false
    }
}
