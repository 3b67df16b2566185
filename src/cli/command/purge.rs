//! `purge` on the command line: its arguments, its words in help, and what they make of it.

use clap::Args;

use super::Subcommand;
use crate::cli::args::{
    AppArgs, Common, LockArgs, LogSigningArgs, MetricsArgs, ReplicaArgs, RetryArgs, S3Args,
    SourceArgs, StopArgs,
};
use crate::cli::help::{Help, APP, ENDPOINT, VERIFIER};
use crate::cli::options::{failpoints_from_env, Groups, IntoOptions};
use crate::cli::parse::{millis, parse_duration};
use crate::model::command::CommandName;
use crate::pipeline::purge;

#[derive(Debug, Args)]
pub(crate) struct PurgeArgs {
    #[command(flatten)]
    pub apps: AppArgs,
    /// Only batches verified longer ago than this (30s, 15m, 24h, 7d).
    #[arg(long, value_name = "DURATION", env = "OUTBOX_ARCHIVER_GRACE", default_value = "24h", value_parser = parse_duration)]
    pub grace: i64,
    /// Delete at most this many rows per second.
    #[arg(long, value_name = "N", env = "OUTBOX_ARCHIVER_MAX_ROWS_PER_SECOND")]
    pub max_rows_per_second: Option<u64>,
    /// Start no new chunk after this long.
    #[arg(long, value_name = "DURATION", env = "OUTBOX_ARCHIVER_MAX_RUNTIME", value_parser = parse_duration)]
    pub max_runtime: Option<i64>,
    /// Count what would be deleted; delete nothing.
    #[arg(long, env = "OUTBOX_ARCHIVER_DRY_RUN")]
    pub dry_run: bool,
    /// Re-read and verify each batch's objects in full (as verify) right before deleting its
    /// rows, instead of the default HEAD check (set OUTBOX_ARCHIVER_PURGE_REVERIFY=true to make
    /// it the default).
    #[arg(
        long,
        env = "OUTBOX_ARCHIVER_PURGE_REVERIFY",
        conflicts_with = "trust_receipts"
    )]
    pub reverify: bool,
    /// Delete on the strength of the receipts alone: do not look at the batches' objects before
    /// deleting (for operators who scrub the archive with verify separately). Logged every run.
    #[arg(long, env = "OUTBOX_ARCHIVER_TRUST_RECEIPTS")]
    pub trust_receipts: bool,
    /// Purge batches restored into the source (restore --into-source) again too; without it
    /// their rows stay. Logged every run.
    #[arg(long, env = "OUTBOX_ARCHIVER_INCLUDE_RESTORED")]
    pub include_restored: bool,
    /// Purge this many apps at the same time, each under its own lock (1 to 4);
    /// --max-rows-per-second stays the limit of the whole run.
    #[arg(long, value_name = "N", env = "OUTBOX_ARCHIVER_PARALLEL_APPS", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4))]
    pub parallel_apps: u32,
    #[command(flatten)]
    pub source: SourceArgs,
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
    pub log_keys: LogSigningArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

impl IntoOptions for PurgeArgs {
    type Options = purge::PurgeOptions;
    fn into_options(self, common: &Common, _: i64) -> Result<purge::PurgeOptions, String> {
        Ok(purge::PurgeOptions {
            apps: self.apps.apps()?,
            grace_ms: self.grace,
            max_rows_per_second: self.max_rows_per_second,
            max_runtime: self.max_runtime.map(millis),
            dry_run: self.dry_run,
            objects: match (self.reverify, self.trust_receipts) {
                (true, _) => crate::pipeline::report::details::ObjectCheck::Read,
                (false, true) => crate::pipeline::report::details::ObjectCheck::Trusted,
                (false, false) => crate::pipeline::report::details::ObjectCheck::Head,
            },
            include_restored: self.include_restored,
            delivered_status: common.delivered_status(&self.source),
            lock_prefix: self.lock.lock_prefix.clone(),
            db_retries: self.retry.db_retries,
            parallel_apps: self.parallel_apps as usize,
            failpoints: failpoints_from_env(),
        })
    }
}

impl Subcommand for PurgeArgs {
    const HELP: Help = Help {
        name: CommandName::Purge,
        about: "Delete the source rows of VERIFIED receipts older than the grace",
        shown: &[
            APP,
            ("all-apps", "Every app with receipts not purged yet"),
            ("dry-run", "List the batches it would purge; delete nothing"),
            ("grace", "Only batches verified longer ago than this"),
            (
                "max-rows-per-second",
                "Delete at most this many rows per second",
            ),
            ("max-runtime", "Start no new chunk after this long (2h)"),
            (
                "reverify",
                "Read each batch in full right before deleting its rows",
            ),
            VERIFIER,
            ENDPOINT,
        ],
        exit_status: "Exit status: 0 every eligible batch purged (nothing eligible yet — rows in --grace — is 0 too; the summary says when they become eligible), or stopped by a limit or SIGTERM; 1 a batch was not purged because its objects or member rows disagree with its receipt (see findings), or an app failed; 2 bad usage or configuration, an --app that matches nothing; 130 Ctrl-C.",
        all_apps: Some("Every app with VERIFIED receipts not purged yet (its rows may already be gone from the source)"),
        unused_common: &[],
    };

    fn groups(&self) -> Groups<'_> {
        Groups {
            s3: Some(&self.s3),
            replicas: Some(&self.replicas),
            stops: Some(&self.stops),
            log_keys: Some(&self.log_keys),
            metrics: Some(&self.metrics),
            ..Groups::default()
        }
    }

    fn app_args(&self) -> Option<&AppArgs> {
        Some(&self.apps)
    }
}
