//! `restore` on the command line: its arguments, its words in help, and what they make of it.

use clap::Args;

use super::Subcommand;
use crate::cli::args::{
    BatchScopeArgs, Common, LockArgs, MetricsArgs, ReplicaArgs, S3Args, StopArgs, ThawArgs,
};
use crate::cli::help::{Help, APP, BATCH, ENDPOINT, FROM, TO};
use crate::cli::options::{failpoints_from_env, Groups, IntoOptions};
use crate::model::command::CommandName;
use crate::pipeline::restore;

#[derive(Debug, Args)]
pub(crate) struct RestoreArgs {
    #[command(flatten)]
    pub scope: BatchScopeArgs,
    /// Target table [default: {table}_restored], created like the source if missing.
    #[arg(long, env = "OUTBOX_ARCHIVER_INTO", conflicts_with_all = ["into_source", "drill"])]
    pub into: Option<String>,
    /// Restore into the live source table (existing rows are never overwritten).
    #[arg(long, env = "OUTBOX_ARCHIVER_INTO_SOURCE", conflicts_with = "drill")]
    pub into_source: bool,
    /// Restore each batch into a scratch table, compare it with the receipt, record the result, drop it.
    #[arg(long, env = "OUTBOX_ARCHIVER_DRILL")]
    pub drill: bool,
    /// Restore this many apps at the same time (1 to 4; each under its own lock with
    /// --into-source). One app at a time verifies the next batch while one loads (two batches in
    /// memory); with more, each app holds one.
    #[arg(long, value_name = "N", env = "OUTBOX_ARCHIVER_PARALLEL_APPS", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4))]
    pub parallel_apps: u32,
    /// Restore batches holding these columns without them where the target table lacks them
    /// (dropped from the source since): their values stay in the archive. Without it such a
    /// batch is refused, naming the columns.
    #[arg(
        long = "without-column",
        value_name = "COLUMN",
        env = "OUTBOX_ARCHIVER_WITHOUT_COLUMN",
        value_delimiter = ','
    )]
    pub without_columns: Vec<String>,
    #[command(flatten)]
    pub thaw: ThawArgs,
    #[command(flatten)]
    pub lock: LockArgs,
    #[command(flatten)]
    pub s3: S3Args,
    #[command(flatten)]
    pub replicas: ReplicaArgs,
    #[command(flatten)]
    pub stops: StopArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

impl IntoOptions for RestoreArgs {
    type Options = restore::RestoreOptions;
    fn into_options(self, _: &Common, _: i64) -> Result<restore::RestoreOptions, String> {
        Ok(restore::RestoreOptions {
            selection: self.scope.selection(),
            into: self.into,
            into_source: self.into_source,
            drill: self.drill,
            lock_prefix: self.lock.lock_prefix.clone(),
            parallel_apps: self.parallel_apps as usize,
            thaw: self.thaw.thaw(),
            without_columns: self.without_columns,
            failpoints: failpoints_from_env(),
        })
    }
}

impl Subcommand for RestoreArgs {
    const HELP: Help = Help {
        name: CommandName::Restore,
        about: "Load archived batches back into a table, verifying every object first",
        shown: &[
            APP,
            BATCH,
            FROM,
            TO,
            ("into", "Target table (default {table}_restored)"),
            (
                "into-source",
                "Into the live source table (no row is overwritten)",
            ),
            (
                "drill",
                "Restore into a scratch table, compare, record, drop",
            ),
            (
                "thaw",
                "Ask the store to thaw GLACIER / DEEP_ARCHIVE objects",
            ),
            ENDPOINT,
        ],
        exit_status: "Exit status: 0 every batch restored (or drilled and matching); 1 a batch failed verification or loading, or a drill did not match; 2 bad usage or configuration, a --batch-id or --app that matches nothing; 130 Ctrl-C.",
        all_apps: None,
        unused_common: &[],
    };

    fn groups(&self) -> Groups<'_> {
        Groups {
            s3: Some(&self.s3),
            replicas: Some(&self.replicas),
            stops: Some(&self.stops),
            metrics: Some(&self.metrics),
            ..Groups::default()
        }
    }
}
