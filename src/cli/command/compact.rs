//! `compact` on the command line: its arguments, its words in help, and what they make of it.

use clap::Args;

use super::Subcommand;
use crate::cli::args::{
    AppArgs, Common, LockArgs, MetricsArgs, ReplicaArgs, RetryArgs, S3Args, StopArgs, ThawArgs,
};
use crate::cli::help::{Help, APP, ENDPOINT};
use crate::cli::options::{failpoints_from_env, Groups, IntoOptions};
use crate::cli::parse::{millis, parse_duration};
use crate::model::command::CommandName;
use crate::pipeline::compact;

#[derive(Debug, Args)]
pub(crate) struct CompactArgs {
    #[command(flatten)]
    pub apps: AppArgs,
    /// Only receipts whose rows purge finished deleting longer ago than this (30d, 90d).
    #[arg(long, value_name = "DURATION", env = "OUTBOX_ARCHIVER_COMPACT_OLDER_THAN", default_value = "90d", value_parser = parse_duration)]
    pub older_than: i64,
    /// Stop each app after this many batches; a later run compacts the rest.
    #[arg(long, value_name = "N", env = "OUTBOX_ARCHIVER_MAX_BATCHES")]
    pub max_batches: Option<u64>,
    /// Start no new batch after this long.
    #[arg(long, value_name = "DURATION", env = "OUTBOX_ARCHIVER_MAX_RUNTIME", value_parser = parse_duration)]
    pub max_runtime: Option<i64>,
    /// Read and verify every batch, count the member rows that would go; delete nothing.
    #[arg(long, env = "OUTBOX_ARCHIVER_DRY_RUN")]
    pub dry_run: bool,
    #[command(flatten)]
    pub thaw: ThawArgs,
    #[command(flatten)]
    pub lock: LockArgs,
    #[command(flatten)]
    pub retry: RetryArgs,
    #[command(flatten)]
    pub s3: S3Args,
    #[command(flatten)]
    pub replicas: ReplicaArgs,
    #[command(flatten)]
    pub stops: StopArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

impl IntoOptions for CompactArgs {
    type Options = compact::CompactOptions;
    fn into_options(self, _: &Common, _: i64) -> Result<compact::CompactOptions, String> {
        Ok(compact::CompactOptions {
            apps: self.apps.apps()?,
            older_than_ms: self.older_than,
            max_batches: self.max_batches,
            max_runtime: self.max_runtime.map(millis),
            dry_run: self.dry_run,
            thaw: self.thaw.thaw(),
            lock_prefix: self.lock.lock_prefix.clone(),
            db_retries: self.retry.db_retries,
            failpoints: failpoints_from_env(),
        })
    }
}

impl Subcommand for CompactArgs {
    const HELP: Help = Help {
        name: CommandName::Compact,
        about: "Replace old purged receipts' member rows by a digest",
        shown: &[
            APP,
            ("all-apps", "Every app with receipts"),
            ("older-than", "Receipts purged longer ago than this (90d)"),
            ("max-batches", "Stop each app after this many batches"),
            (
                "dry-run",
                "Read every batch, count what would go; delete nothing",
            ),
            ("max-runtime", "Start no new batch after this long"),
            ENDPOINT,
        ],
        exit_status: "Exit status: 0 every eligible receipt compacted, or stopped by a limit or SIGTERM; 1 a batch was not compacted (its objects or member rows disagree with its receipt) or an app failed; 2 bad usage or configuration; 130 Ctrl-C.",
        all_apps: Some("Every app with receipts"),
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

    fn app_args(&self) -> Option<&AppArgs> {
        Some(&self.apps)
    }
}
