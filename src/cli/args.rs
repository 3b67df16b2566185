//! The command line's shape (SPEC §6): clap derive, every option also an environment variable
//! (`OUTBOX_ARCHIVER_*`, `DATABASE_URL`; the AWS SDK reads its own). The common options are
//! global; each subcommand has its own arguments and flattens the shared groups (`groups`) that
//! do something there.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

pub(crate) use super::groups::*;

use super::parse::{
    parse_bytes, parse_day, parse_duration, parse_parallel_apps, parse_percent,
    parse_recorded_command, parse_since, parse_time, ParallelApps,
};
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

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Apply migrations/ (receipts and members tables).
    Migrate(MigrateArgs),
    /// Archive delivered rows below the cutoff (the CronJob).
    Archive(ArchiveArgs),
    /// Re-read archived batches and check them against receipts and members; find gaps. With
    /// --batch-id, a batch read in full whose objects were written again with the archived bytes
    /// (restored from versioning) is recorded under their new versions, with the evidence.
    Verify(VerifyArgs),
    /// Per app: cursor, receipts, archived rows, backlog, rows awaiting purge, last run.
    Status(StatusArgs),
    /// Where an archived event is and what it said: by --event-id (or --event-ids-from), or by
    /// --where COLUMN=VALUE over --from/--to or --batch-id. Prints each row found with its app,
    /// batch, object key and line, and whether it is still in the source, purged or restored.
    Find(FindArgs),
    /// The last runs, newest first: command, app, outcome, rows, batches, how long, and the error
    /// of a failed one (every command's runs per app, and runs that could not start).
    History(HistoryArgs),
    /// Delete source rows that are exact members of VERIFIED receipts older than the grace period.
    Purge(PurgeArgs),
    /// Load archived batches back into a table, verifying every object first.
    Restore(RestoreArgs),
    /// Replace the member rows of receipts purged longer ago than --older-than by a digest on the
    /// receipt, after reading each batch back in full.
    Compact(CompactArgs),
    /// The auditor's statement for UTC days --from..=--to, days that are over (--to before
    /// today, UTC): per app and day the rows, batches, control totals, first and last cursor,
    /// the log's tree heads at the period's start and end with the consistency proofs between
    /// them and to the checkpoint, each batch's inclusion proof, last full verification,
    /// retention and storage class — canonical JSON (hash and sign it) or CSV; refused when an
    /// app's log does not prove its period. A batch whose latest check found it damaged is
    /// named with the findings, not vouched for (exit 1).
    Attest(AttestArgs),
    /// Set up a throwaway database and archive location, seed rows, archive them, show the result.
    Demo(DemoArgs),
    /// Move the archive's home to another bucket (or folder) under the same prefix, where it was
    /// copied whole (its marker included): every batch is read there in full first (a copy
    /// lacking or changing one is refused, nothing moved), then the move is recorded with the
    /// reason and each batch's object versions there. The old home need not be reachable.
    Relocate(RelocateArgs),
    /// Print the JSON Schema of the table's NDJSON record (--table, or --table-profile: then
    /// the database describes the table's columns).
    Schema,
    /// Preflight: check the database (grants, tables, collations, buffer pool) and the store
    /// (versioning, Object Lock, encryption, KMS key, create-only puts, a probe put with the
    /// configured class and retention) without writing a row; each line ok / warning / problem,
    /// with the fix.
    Doctor(DoctorArgs),
    /// Make a signing key for the log's checkpoints (C2SP signed-note, Ed25519; the text form
    /// of Go's golang.org/x/mod/sumdb/note): the signing key goes to --out (mode 0600, for a
    /// Kubernetes secret and --log-key-file), its verifier is printed (for --log-verifier and
    /// the auditors). Touches no database and no store.
    LogKey(LogKeyArgs),
}

#[derive(Debug, Args)]
pub(crate) struct LogKeyArgs {
    /// The key's name, as signatures carry it: a name the auditors recognise, without '+' or
    /// spaces (say archive.example.com/wallet).
    #[arg(long)]
    pub name: String,
    /// Where the signing key is written: a new file (an existing one is never replaced).
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
}

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

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// The commands this login is meant to run, whose grants are checked (archive, verify,
    /// status, purge, restore, restore-into-source, compact): the archive role runs archive,
    /// verify and status, the purge role purge, the compaction role compact
    /// (deploy/mysql-grants.sql).
    #[arg(
        long,
        value_name = "COMMANDS",
        env = "OUTBOX_ARCHIVER_DOCTOR_GRANTS_FOR",
        value_delimiter = ',',
        value_enum,
        default_value = "archive,verify,status"
    )]
    pub grants_for: Vec<CommandArg>,
    #[command(flatten)]
    pub s3: S3Args,
    #[command(flatten)]
    pub upload: UploadArgs,
    #[command(flatten)]
    pub protection: ProtectionArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

/// A command, for `doctor --grants-for`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CommandArg {
    Archive,
    Verify,
    Status,
    Purge,
    Restore,
    // `restore --into-source`: INSERT on the live table, UPDATE on the receipts (a plain
    // comment: see UploadChecksumArg).
    RestoreIntoSource,
    Compact,
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

#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    pub scope: BatchScopeArgs,
    /// Check a random sample of about this percent of the batches in scope.
    #[arg(long, env = "OUTBOX_ARCHIVER_SAMPLE_PERCENT", value_parser = parse_percent)]
    pub sample_percent: Option<f64>,
    /// Seed of the sample, to repeat it [default: chosen and printed]
    #[arg(long, env = "OUTBOX_ARCHIVER_SEED")]
    pub seed: Option<u64>,
    /// HEAD only: existence, sizes, store checksums and member counts; no download.
    #[arg(long, env = "OUTBOX_ARCHIVER_METADATA_ONLY")]
    pub metadata_only: bool,
    /// Batches checked at once.
    #[arg(long, env = "OUTBOX_ARCHIVER_PARALLEL", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub parallel: u32,
    /// List at most this many stragglers per app.
    #[arg(long, env = "OUTBOX_ARCHIVER_MAX_STRAGGLERS", default_value_t = 1000)]
    pub max_stragglers: usize,
    #[command(flatten)]
    pub cutoff: CutoffArgs,
    #[command(flatten)]
    pub thaw: ThawArgs,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub s3: S3Args,
    #[command(flatten)]
    pub stops: StopArgs,
    #[command(flatten)]
    pub log_keys: LogSigningArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// Only this app's runs (an app no run and no row names is an error).
    #[arg(long)]
    pub app: Option<String>,
    /// Only this command's runs.
    #[arg(long, value_parser = parse_recorded_command)]
    pub command: Option<String>,
    /// How many runs.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub last: u32,
    /// Only runs started at or after this instant: a UTC day (2026-11-01, its midnight), RFC
    /// 3339, epoch ms, or a duration ago (12h, 7d).
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    pub since: Option<i64>,
    /// Only runs started before this instant (as --since: 2026-11-02, 6h).
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    pub until: Option<i64>,
}

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

#[derive(Debug, Args)]
pub(crate) struct AttestArgs {
    #[command(flatten)]
    pub apps: AnyAppArgs,
    /// The period's first UTC day: 2026-11-01 (or RFC 3339 / epoch ms of its midnight, UTC).
    #[arg(long, value_name = "DAY", value_parser = parse_day)]
    pub from: i64,
    /// The period's last UTC day, included: 2026-11-30 (or RFC 3339 / epoch ms of its midnight).
    /// It must be over: a day still being archived would be stated otherwise tomorrow.
    #[arg(long, value_name = "DAY", value_parser = parse_day)]
    pub to: i64,
    /// The previous statement (a file attest printed before): each app's log must have grown
    /// from the checkpoint it saw — a smaller or other tree is log_rollback, not attested —
    /// and this statement carries the consistency proof from it, which
    /// `deploy/verify-log.go -previous` checks.
    #[arg(long, value_name = "FILE")]
    pub previous: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub s3: S3Args,
    #[command(flatten)]
    pub log_keys: LogSigningArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

#[derive(Debug, Args)]
pub(crate) struct RelocateArgs {
    /// The archive's new home: s3://bucket/prefix or file:///path, the same prefix as now.
    #[arg(long, value_name = "URL")]
    pub to: String,
    /// Why it moves, kept with the move (history and doctor show it).
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    /// Batches re-read at the new home at once (every batch is read there in full before the
    /// home moves: the cost of one full verify).
    #[arg(long, env = "OUTBOX_ARCHIVER_PARALLEL", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub parallel: u32,
    #[command(flatten)]
    pub s3: S3Args,
    #[command(flatten)]
    pub stops: StopArgs,
}

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
