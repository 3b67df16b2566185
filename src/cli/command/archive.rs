//! `archive` on the command line: its arguments, its words in help, and what they make of it.

use clap::Args;

use super::Subcommand;
use crate::cli::args::{
    AppArgs, Common, CutoffArgs, LockArgs, LogSigningArgs, MetricsArgs, ProtectionArgs,
    ReplicaArgs, RetryArgs, S3Args, SourceArgs, StopArgs, UploadArgs,
};
use crate::cli::help::{Help, APP, ENDPOINT};
use crate::cli::options::{failpoints_from_env, write_policy, Groups, IntoOptions};
use crate::cli::parse::{millis, parse_bytes, parse_duration, parse_parallel_apps, ParallelApps};
use crate::model::batch::Limits;
use crate::model::command::CommandName;
use crate::model::timespec;
use crate::pipeline::archive;

#[derive(Debug, Args)]
pub(crate) struct ArchiveArgs {
    #[command(flatten)]
    pub apps: AppArgs,
    #[command(flatten)]
    pub cutoff: CutoffArgs,
    /// After an investigated break of an app's log (a database restored from an older backup,
    /// a batch removed on purpose, a linear chain not carried over): record the leaves as gone
    /// with this reason, write-once (every later verify and statement shows it), and append the
    /// database's receipts after them (README, "The log of batches").
    /// (`--accept-chain-break`, its name before 2026-12-05, is read for one release.)
    #[arg(long, value_name = "REASON", alias = "accept-chain-break")]
    pub accept_log_break: Option<String>,
    /// Most rows in one batch.
    #[arg(long, env = "OUTBOX_ARCHIVER_BATCH_ROWS", default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub batch_rows: u64,
    /// Most uncompressed NDJSON bytes in one batch (64MiB, 500KB, 1048576).
    #[arg(long, env = "OUTBOX_ARCHIVER_BATCH_BYTES", default_value = "64MiB", value_parser = parse_bytes)]
    pub batch_bytes: u64,
    /// gzip level, 1 (fast) to 9 (small); 3 keeps objects within 20 % of their NDJSON at the least
    /// CPU that does (see README, "Performance").
    #[arg(long, env = "OUTBOX_ARCHIVER_GZIP_LEVEL", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub gzip_level: u32,
    /// Stop each app after this many batches.
    #[arg(long, value_name = "N", env = "OUTBOX_ARCHIVER_MAX_BATCHES")]
    pub max_batches: Option<u64>,
    /// Start no new batch after this long (30s, 15m, 24h).
    #[arg(long, value_name = "DURATION", env = "OUTBOX_ARCHIVER_MAX_RUNTIME", value_parser = parse_duration)]
    pub max_runtime: Option<i64>,
    /// Plan the batches and print them; write nothing.
    #[arg(long, env = "OUTBOX_ARCHIVER_DRY_RUN")]
    pub dry_run: bool,
    /// Archive the stragglers `verify` reports (delivered rows below the cursor that no receipt
    /// owns), in batches of their own; the cursor does not move.
    #[arg(long, env = "OUTBOX_ARCHIVER_STRAGGLERS")]
    pub stragglers: bool,
    /// Archive this many apps at the same time, each under its own lock: 1 to 8, or auto — one
    /// per CPU core this process may use (a CPU limit counts), at most 4 (see README,
    /// "Performance").
    #[arg(long, value_name = "N", env = "OUTBOX_ARCHIVER_PARALLEL_APPS", default_value = "auto", value_parser = parse_parallel_apps)]
    pub parallel_apps: ParallelApps,
    /// Memory the batches in flight may hold, all apps together (64MiB, 1GiB); the process
    /// needs about 30 MiB besides. A batch larger than the budget still runs, alone.
    #[arg(long, env = "OUTBOX_ARCHIVER_MEMORY_BUDGET", default_value = "48MiB", value_parser = parse_bytes)]
    pub memory_budget: u64,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub lock: LockArgs,
    #[command(flatten)]
    pub retry: RetryArgs,
    #[command(flatten)]
    pub s3: S3Args,
    #[command(flatten)]
    pub upload: UploadArgs,
    #[command(flatten)]
    pub protection: ProtectionArgs,
    #[command(flatten)]
    pub replicas: ReplicaArgs,
    #[command(flatten)]
    pub stops: StopArgs,
    #[command(flatten)]
    pub log_keys: LogSigningArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

impl IntoOptions for ArchiveArgs {
    type Options = archive::ArchiveOptions;
    fn into_options(self, common: &Common, now_ms: i64) -> Result<archive::ArchiveOptions, String> {
        let cutoff_ms = self.cutoff.cutoff_ms(now_ms);
        if let Some(warning) = timespec::check_cutoff(now_ms, cutoff_ms)? {
            tracing::warn!("{warning}");
        }
        Ok(archive::ArchiveOptions {
            apps: self.apps.apps()?,
            cutoff_ms,
            limits: Limits {
                max_rows: self.batch_rows,
                max_bytes: self.batch_bytes,
            },
            gzip_level: self.gzip_level,
            max_batches: self.max_batches,
            max_runtime: self.max_runtime.map(millis),
            dry_run: self.dry_run,
            stragglers: self.stragglers,
            delivered_status: common.delivered_status(&self.source),
            lock_prefix: self.lock.lock_prefix.clone(),
            db_retries: self.retry.db_retries,
            parallel_apps: self.parallel_apps.resolve(crate::cli::parse::cores()),
            memory_budget: self.memory_budget,
            policy: write_policy(common.store.as_deref(), &self.upload, &self.protection)?,
            accept_log_break: self.accept_log_break.filter(|r| !r.trim().is_empty()),
            failpoints: failpoints_from_env(),
        })
    }
}

impl Subcommand for ArchiveArgs {
    const HELP: Help = Help {
        name: CommandName::Archive,
        about: "Archive delivered rows below the cutoff (the CronJob)",
        shown: &[
            APP,
            ("all-apps", "Every app with rows in the source table"),
            (
                "older-than",
                "Rows delivered longer ago than this (7d, 24h)",
            ),
            ("dry-run", "List the batches it would write; write nothing"),
            ("max-batches", "Stop each app after this many batches"),
            ("max-runtime", "Start no new batch after this long (2h)"),
            ("parallel-apps", "Apps archived at once: 1 to 8, or auto"),
            ("stragglers", "Archive the stragglers verify reports"),
            (
                "log-key-file",
                "The log's signing key (repeatable while a key rotates)",
            ),
            (
                "object-lock-mode",
                "Object Lock on every object: governance or compliance",
            ),
            (
                "retention",
                "How long each batch's objects stay locked (7y, 30d)",
            ),
            ENDPOINT,
        ],
        exit_status: "Exit status: 0 every app archived, up to date, skipped because another archiver holds its lock, or stopped by a limit or SIGTERM; 1 an app failed or was refused (the others still ran); 2 bad usage or configuration, an --app that matches nothing, or the apps could not be listed (nothing was done); 130 stopped by Ctrl-C (SIGINT) between batches.",
        all_apps: Some("Every app code with rows in the source table"),
        unused_common: &[],
    };

    fn groups(&self) -> Groups<'_> {
        Groups {
            s3: Some(&self.s3),
            upload: Some(&self.upload),
            protection: Some(&self.protection),
            replicas: Some(&self.replicas),
            stops: Some(&self.stops),
            log_keys: Some(&self.log_keys),
            metrics: Some(&self.metrics),
        }
    }

    fn app_args(&self) -> Option<&AppArgs> {
        Some(&self.apps)
    }

    fn problems(&self, common: &Common) -> Vec<String> {
        write_policy(common.store.as_deref(), &self.upload, &self.protection)
            .err()
            .into_iter()
            .collect()
    }
}
