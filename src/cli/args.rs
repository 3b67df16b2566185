//! The command line's shape (SPEC §6): clap derive, every option also an environment variable
//! (`OUTBOX_ARCHIVER_*`, `DATABASE_URL`; the AWS SDK reads its own). The common options are
//! global; each subcommand has its own arguments (`command/`) and flattens the shared groups
//! (`groups`, and the app, cutoff, scope and thaw groups here) that do something there.

use clap::{Args, ValueEnum};

pub(crate) use super::groups::*;

use super::parse::{parse_duration, parse_time};
use crate::model::shard::Shard;

/// Options every command accepts, before or after the subcommand: which database, which table,
/// which archive, and how the run reports. Everything else belongs to the commands that use it
/// (each subcommand flattens the groups below that apply to it), so a command's help lists only
/// what does something there, and an option given to a command it means nothing to is refused.
#[derive(Debug, Args)]
pub(crate) struct Common {
    #[command(flatten)]
    pub db: DbArgs,
    /// Archive location: s3://bucket/prefix, or file:///absolute/path. A table's archive has one
    /// home: the first batch binds it, and every command refuses another (README, "Moving an
    /// archive").
    #[arg(
        long,
        global = true,
        env = "OUTBOX_ARCHIVER_STORE",
        help_heading = "Common options"
    )]
    pub store: Option<String>,
    #[command(flatten)]
    pub log: LogArgs,
    /// Print the effective configuration (each setting's value and where it came from, secrets
    /// redacted) and the problems found in it, then exit without connecting to anything.
    #[arg(long, global = true, help_heading = "Common options")]
    pub print_config: bool,
    /// `OUTBOX_ARCHIVER_*` variables in the environment that no option reads (logged).
    #[arg(skip)]
    pub unknown_variables: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct AppArgs {
    /// An app code to work on (repeatable; in OUTBOX_ARCHIVER_APPS separated by commas or
    /// spaces).
    #[arg(
        long = "app",
        env = "OUTBOX_ARCHIVER_APPS",
        value_delimiter = ',',
        required_unless_present = "all_apps",
        conflicts_with = "all_apps"
    )]
    pub apps: Vec<String>,
    /// Every app (each command says which: archive those with rows, purge those with receipts
    /// to finish).
    #[arg(long, env = "OUTBOX_ARCHIVER_ALL_APPS")]
    pub all_apps: bool,
    /// With --all-apps: only the apps whose stable hash falls in shard I of N (e.g. 0/4; an
    /// Indexed Job's completion index as I). N shards together cover every app exactly once.
    #[arg(long, env = "OUTBOX_ARCHIVER_SHARD")]
    pub shard: Option<Shard>,
}

/// `--app`/`--all-apps` where neither means every app.
#[derive(Debug, Args)]
pub(crate) struct AnyAppArgs {
    /// An app code to look at (repeatable; in OUTBOX_ARCHIVER_APPS separated by commas or
    /// spaces) [default: every app]
    #[arg(
        long = "app",
        env = "OUTBOX_ARCHIVER_APPS",
        value_delimiter = ',',
        conflicts_with = "all_apps"
    )]
    pub apps: Vec<String>,
    /// Every app (the default).
    #[arg(long, env = "OUTBOX_ARCHIVER_ALL_APPS")]
    pub all_apps: bool,
}

/// Which rows are old enough to archive.
#[derive(Debug, Args)]
pub(crate) struct CutoffArgs {
    /// Rows delivered longer ago than this are old enough (30s, 15m, 24h, 7d).
    #[arg(long, value_name = "DURATION", env = "OUTBOX_ARCHIVER_OLDER_THAN", default_value = "7d", value_parser = parse_duration)]
    pub older_than: i64,
    /// Rows with updated_at_ms below this instant (2026-06-01 = its UTC midnight, RFC 3339, or
    /// epoch ms); overrides --older-than.
    #[arg(long, env = "OUTBOX_ARCHIVER_CUTOFF", value_parser = parse_time)]
    pub cutoff: Option<i64>,
}

/// Which receipts `verify` and `restore` work on.
#[derive(Debug, Args)]
pub(crate) struct BatchScopeArgs {
    #[command(flatten)]
    pub apps: AnyAppArgs,
    /// Only this batch (repeatable).
    #[arg(
        long = "batch-id",
        env = "OUTBOX_ARCHIVER_BATCH_IDS",
        value_delimiter = ','
    )]
    pub batch_ids: Vec<String>,
    /// Only batches with rows at or after this instant (2026-11-01 = its UTC midnight, RFC 3339,
    /// or epoch ms; on updated_at_ms).
    #[arg(long, env = "OUTBOX_ARCHIVER_FROM", value_parser = parse_time)]
    pub from: Option<i64>,
    /// Only batches with rows before this instant (2026-11-08 = its UTC midnight, not included;
    /// RFC 3339, or epoch ms).
    #[arg(long, env = "OUTBOX_ARCHIVER_TO", value_parser = parse_time)]
    pub to: Option<i64>,
}

/// What to do with batches whose objects are in a storage class that cannot be read at once.
#[derive(Debug, Args)]
pub(crate) struct ThawArgs {
    /// Ask the store to restore objects in GLACIER / DEEP_ARCHIVE for this many days, so that a
    /// later run can read them in full (this run checks them by HEAD and reports them pending).
    #[arg(long, value_name = "DAYS", env = "OUTBOX_ARCHIVER_THAW", value_parser = clap::value_parser!(u32).range(1..=365))]
    pub thaw: Option<u32>,
    /// The retrieval tier of --thaw: Bulk (cheapest; DEEP_ARCHIVE within 48 h), Standard
    /// (GLACIER 3-5 h, DEEP_ARCHIVE within 12 h) or Expedited (GLACIER only, minutes).
    #[arg(
        long,
        env = "OUTBOX_ARCHIVER_THAW_TIER",
        value_enum,
        default_value = "standard"
    )]
    pub thaw_tier: ThawTierArg,
}

/// `--thaw-tier`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ThawTierArg {
    Bulk,
    Standard,
    Expedited,
}
