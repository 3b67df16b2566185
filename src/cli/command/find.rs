//! `find` on the command line: its arguments, its words in help, and what they make of it.

use clap::Args;
use std::path::PathBuf;

use super::Subcommand;
use crate::cli::args::{BatchScopeArgs, Common, MetricsArgs, S3Args, SourceArgs, StopArgs};
use crate::cli::help::{Help, APP, BATCH, FROM, TO};
use crate::cli::options::{Groups, IntoOptions};
use crate::model::command::CommandName;
use crate::pipeline::find;

#[derive(Debug, Args)]
pub(crate) struct FindArgs {
    #[command(flatten)]
    pub scope: BatchScopeArgs,
    /// An event id to find (repeatable).
    #[arg(
        long = "event-id",
        env = "OUTBOX_ARCHIVER_EVENT_IDS",
        value_delimiter = ','
    )]
    pub event_ids: Vec<String>,
    /// A file of event ids to find, one a line (- for standard input).
    #[arg(long, value_name = "FILE")]
    pub event_ids_from: Option<PathBuf>,
    /// Rows whose COLUMN (its key in the NDJSON lines) holds VALUE: a string's text, a number as
    /// written, or null. Needs --from/--to or --batch-id (it reads every batch in scope).
    #[arg(long = "where", value_name = "COLUMN=VALUE", conflicts_with_all = ["event_ids", "event_ids_from"])]
    pub filter: Option<String>,
    /// Batches read at once.
    #[arg(long, env = "OUTBOX_ARCHIVER_PARALLEL", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub parallel: u32,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub s3: S3Args,
    #[command(flatten)]
    pub stops: StopArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

impl IntoOptions for FindArgs {
    type Options = find::FindOptions;
    fn into_options(self, common: &Common, _: i64) -> Result<find::FindOptions, String> {
        let mut event_ids = self.event_ids;
        if let Some(path) = &self.event_ids_from {
            let text = if path.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())
            } else {
                std::fs::read_to_string(path)
            }
            .map_err(|e| format!("--event-ids-from {}: {e}", path.display()))?;
            event_ids.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string),
            );
        }
        let filter = match &self.filter {
            None => None,
            Some(text) => match text.split_once('=') {
                Some((column, value)) if !column.trim().is_empty() => {
                    Some((column.trim().to_string(), value.to_string()))
                }
                _ => return Err(format!("--where {text:?}: write COLUMN=VALUE")),
            },
        };
        Ok(find::FindOptions {
            selection: self.scope.selection(),
            event_ids,
            filter,
            parallel: self.parallel as usize,
            delivered_status: common.delivered_status(&self.source),
        })
    }
}

impl Subcommand for FindArgs {
    const HELP: Help = Help {
        name: CommandName::Find,
        about: "Where an archived event is and what it said",
        shown: &[
            ("event-id", "An event id to find (repeatable)"),
            (
                "event-ids-from",
                "A file of event ids, one a line (- for standard input)",
            ),
            (
                "where",
                "Rows whose COLUMN holds VALUE (with --from/--to or --batch-id)",
            ),
            FROM,
            TO,
            APP,
            BATCH,
        ],
        exit_status: "Exit status: 0 every event asked for was found (or, with --where, at least one row); 1 not found; 2 could not look (bad usage, the store or database unreachable, a --batch-id that matches nothing).",
        all_apps: None,
        unused_common: &[],
    };

    fn groups(&self) -> Groups<'_> {
        Groups {
            s3: Some(&self.s3),
            stops: Some(&self.stops),
            metrics: Some(&self.metrics),
            ..Groups::default()
        }
    }
}
