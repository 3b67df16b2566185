//! The command line's shape (SPEC §6): clap derive, every option also an environment variable
//! (`OUTBOX_ARCHIVER_*`, `DATABASE_URL`; the AWS SDK reads its own). The options every command
//! accepts come in groups with help headings; each subcommand has its own arguments.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use super::parse::{
    parse_bytes, parse_conditional_put, parse_day, parse_duration, parse_parallel_apps,
    parse_percent, parse_recorded_command, parse_retention, parse_storage_class, parse_table_name,
    parse_time, parse_timeout, ParallelApps,
};
use crate::model::protection::Retention;
use crate::model::shard::Shard;
use crate::store::{self, ConditionalPutSetting};

/// Options every command accepts, before or after the subcommand: which database, which table,
/// which archive, and how the run reports. Everything else belongs to the commands that use it
/// (each subcommand flattens the groups below that apply to it), so a command's help lists only
/// what does something there, and an option given to a command it means nothing to is refused.
#[derive(Debug, Args)]
pub struct Common {
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

/// The database and the table: every command's.
#[derive(Debug, Args)]
#[command(next_help_heading = "Common options")]
pub struct DbArgs {
    /// MySQL URL: mysql://user:password@host:3306/database (mariadb:// too)
    #[arg(long, global = true, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// The outbox table to archive: a built-in one (wallet_outbox, room_outbox).
    #[arg(
        long,
        global = true,
        env = "OUTBOX_ARCHIVER_TABLE",
        default_value = "wallet_outbox"
    )]
    pub table: String,
    /// A table described by a profile file (.toml or .json; README "Archiving another outbox
    /// table") instead of a built-in one: checked against the live schema at start-up.
    #[arg(
        long,
        global = true,
        env = "OUTBOX_ARCHIVER_TABLE_PROFILE",
        value_name = "PATH",
        conflicts_with = "table"
    )]
    pub table_profile: Option<std::path::PathBuf>,
}

/// Which source rows count as delivered: the commands that read the source table's rows.
#[derive(Debug, Args)]
#[command(next_help_heading = "Database")]
pub struct SourceArgs {
    /// The status value that means delivered [default: DELIVERED, or the profile's
    /// delivered_status].
    #[arg(long, env = "OUTBOX_ARCHIVER_DELIVERED_STATUS")]
    pub delivered_status: Option<String>,
}

/// The advisory lock of each app: the commands that take it.
#[derive(Debug, Args)]
#[command(next_help_heading = "Database")]
pub struct LockArgs {
    /// Prepended to advisory lock names, for servers that host several databases.
    #[arg(long, env = "OUTBOX_ARCHIVER_LOCK_PREFIX", default_value = "")]
    pub lock_prefix: String,
}

/// Trying an app again after a transient database error: the commands that write in batches.
#[derive(Debug, Args)]
#[command(next_help_heading = "Database")]
pub struct RetryArgs {
    /// After a transient database error (restart, failover, killed connection), try the app
    /// again up to this many times, waiting about 1 s, 2 s, 4 s, … (with jitter) in between.
    #[arg(long, env = "OUTBOX_ARCHIVER_DB_RETRIES", default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=20))]
    pub db_retries: u32,
}

/// How to talk to an S3-compatible store: every command that reads or writes the archive.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Object store")]
pub struct S3Args {
    /// S3 endpoint for MinIO, COS and other compatible stores [default: AWS_ENDPOINT_URL, else
    /// AWS]
    #[arg(long, env = "OUTBOX_ARCHIVER_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// PEM file of the CA certificates an https:// S3 endpoint's certificate must chain to (a
    /// company CA on MinIO, Ceph or COS); only these are trusted then [default: AWS_CA_BUNDLE,
    /// else the system's trusted roots]
    #[arg(long, env = "OUTBOX_ARCHIVER_STORE_CA_BUNDLE")]
    pub store_ca_bundle: Option<std::path::PathBuf>,
    /// S3 region [default: AWS_REGION, else the AWS config, else us-east-1]
    #[arg(long, env = "OUTBOX_ARCHIVER_S3_REGION")]
    pub s3_region: Option<String>,
    /// Path-style addressing [default: true when an endpoint is set]
    #[arg(long, env = "OUTBOX_ARCHIVER_S3_FORCE_PATH_STYLE")]
    pub s3_force_path_style: Option<bool>,
    /// Attempts per S3 request (first included), with exponential backoff and jitter between
    /// them; a body read that breaks off is resumed as many times.
    #[arg(long, env = "OUTBOX_ARCHIVER_S3_MAX_ATTEMPTS", default_value_t = store::DEFAULT_MAX_ATTEMPTS, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub s3_max_attempts: u32,
    /// Limit on opening a connection to the store, e.g. 10s.
    #[arg(long, env = "OUTBOX_ARCHIVER_S3_CONNECT_TIMEOUT", value_parser = parse_timeout, default_value = "10s")]
    pub s3_connect_timeout: Duration,
    /// Limit on waiting for a response to start, and on silence inside a body, e.g. 30s.
    #[arg(long, env = "OUTBOX_ARCHIVER_S3_READ_TIMEOUT", value_parser = parse_timeout, default_value = "30s")]
    pub s3_read_timeout: Duration,
}

/// How objects are written: the commands that write them.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Object store")]
pub struct UploadArgs {
    /// Checksum sent with each upload, checked by the store on arrival: md5 (Content-MD5,
    /// understood by practically every S3-compatible store, COS included), sha256
    /// (x-amz-checksum-sha256), crc64nvme (AWS S3's full-object checksum), or none (the read-back
    /// still verifies every byte).
    #[arg(
        long,
        env = "OUTBOX_ARCHIVER_S3_UPLOAD_CHECKSUM",
        value_enum,
        default_value = "md5"
    )]
    pub s3_upload_checksum: UploadChecksumArg,
    /// Create-only puts send If-None-Match: *. auto: probe once per run whether the store
    /// honours it, and fall back to HEAD-then-PUT if it does not; true: send it without probing;
    /// false: never send it (a store that rejects the header).
    #[arg(long, env = "OUTBOX_ARCHIVER_S3_CONDITIONAL_PUT", default_value = "auto", value_parser = parse_conditional_put)]
    pub s3_conditional_put: ConditionalPutSetting,
}

impl Default for UploadArgs {
    fn default() -> UploadArgs {
        UploadArgs {
            s3_upload_checksum: UploadChecksumArg::Md5,
            s3_conditional_put: ConditionalPutSetting::Auto,
        }
    }
}

/// How `archive` writes objects beyond their bytes: Object Lock retention and legal hold, the
/// data objects' storage class, server-side encryption (see README, "Compliance and cost").
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Object protection and cost")]
pub struct ProtectionArgs {
    /// Object Lock mode of every object archive writes; needs --retention and a bucket with
    /// Object Lock enabled. compliance: nobody, root included, can delete an object version or
    /// shorten its retention before it ends; governance: users with
    /// s3:BypassGovernanceRetention can.
    #[arg(long, env = "OUTBOX_ARCHIVER_OBJECT_LOCK_MODE", value_enum)]
    pub object_lock_mode: Option<LockModeArg>,
    /// How long each batch's objects stay locked after they are written: 7y (calendar years),
    /// 30d, 2555d. The receipt records the exact retain-until date.
    #[arg(long, env = "OUTBOX_ARCHIVER_RETENTION", value_parser = parse_retention)]
    pub retention: Option<Retention>,
    /// Put an Object Lock legal hold on every object archive writes (it lasts until someone with
    /// s3:PutObjectLegalHold lifts it).
    #[arg(long, env = "OUTBOX_ARCHIVER_LEGAL_HOLD")]
    pub legal_hold: bool,
    /// Storage class of the data objects (manifest and _SUCCESS stay in STANDARD): STANDARD,
    /// STANDARD_IA, ONEZONE_IA, INTELLIGENT_TIERING, GLACIER_IR, GLACIER, DEEP_ARCHIVE, … (any
    /// value is passed to the store). GLACIER and DEEP_ARCHIVE cannot be read right after upload:
    /// those batches are verified by the store's own checksum (see README).
    #[arg(long, env = "OUTBOX_ARCHIVER_S3_STORAGE_CLASS", value_parser = parse_storage_class)]
    pub s3_storage_class: Option<String>,
    /// Server-side encryption every put asks for: aws:kms (with --sse-kms-key-id, or the
    /// account's aws/s3 key) or AES256 [default: the bucket's default encryption]
    #[arg(long, env = "OUTBOX_ARCHIVER_SSE", value_enum)]
    pub sse: Option<SseArg>,
    /// The KMS key for --sse aws:kms: its ARN (checked against the key the store reports on
    /// every object), key id, or alias (implies --sse aws:kms).
    #[arg(long, env = "OUTBOX_ARCHIVER_SSE_KMS_KEY_ID")]
    pub sse_kms_key_id: Option<String>,
    /// With aws:kms, use an S3 Bucket Key (far fewer KMS requests, lower KMS cost).
    #[arg(long, env = "OUTBOX_ARCHIVER_SSE_BUCKET_KEY")]
    pub sse_bucket_key: Option<bool>,
    /// Where doctor asks KMS about --sse-kms-key-id [default: AWS's regional KMS endpoint]
    #[arg(long, env = "OUTBOX_ARCHIVER_KMS_ENDPOINT")]
    pub kms_endpoint: Option<String>,
}

/// The replicas whose lag paces a command's writes to the database.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Replicas")]
pub struct ReplicaArgs {
    /// A replica whose lag paces the writes (repeatable; in OUTBOX_ARCHIVER_REPLICAS separated
    /// by spaces): mysql://user:password@replica:3306/database
    #[arg(
        long = "replica",
        env = "OUTBOX_ARCHIVER_REPLICAS",
        value_delimiter = ' ',
        hide_env_values = true
    )]
    pub replicas: Vec<String>,
    /// Find the replicas on the primary, with --database-url's credentials: hosts (SHOW REPLICA
    /// HOSTS: replicas that set report_host) or processlist (its Binlog Dump threads; the
    /// primary's port).
    #[arg(long, env = "OUTBOX_ARCHIVER_REPLICAS_FROM", value_enum)]
    pub replicas_from: Option<DiscoveryArg>,
    /// Wait before a write while a replica is further behind than this (or its lag cannot be
    /// read), e.g. 5s.
    #[arg(long, env = "OUTBOX_ARCHIVER_MAX_REPLICA_LAG", value_parser = parse_timeout, default_value = "5s")]
    pub max_replica_lag: Duration,
    /// After waiting this long for a replica, stop the app's work with exit status 1, naming the
    /// replica (fail closed), e.g. 10m.
    #[arg(long, env = "OUTBOX_ARCHIVER_REPLICA_WAIT_TIMEOUT", value_parser = parse_timeout, default_value = "10m")]
    pub replica_wait_timeout: Duration,
    /// Read each replica's lag from this pt-heartbeat table (database.table, written by
    /// `pt-heartbeat --update --utc` on the primary) instead of SHOW REPLICA STATUS.
    #[arg(long, env = "OUTBOX_ARCHIVER_HEARTBEAT_TABLE", value_parser = parse_table_name)]
    pub heartbeat_table: Option<String>,
}

/// What stops a command that works in batches or chunks, besides its limits.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Stops and progress")]
pub struct StopArgs {
    /// Stop cleanly before the next batch or chunk while this file exists (outcome stopped,
    /// stop_reason "sentinel file PATH exists"): `touch` it to stop every job that names it.
    #[arg(long, env = "OUTBOX_ARCHIVER_SENTINEL")]
    pub sentinel: Option<PathBuf>,
    /// Where no progress is drawn (JSON logs, or stderr not a terminal): log each app's progress
    /// this often (30s, 5m); 0 logs none.
    #[arg(
        long,
        env = "OUTBOX_ARCHIVER_PROGRESS_EVERY",
        default_value = "30s",
        value_parser = parse_duration
    )]
    pub progress_every: i64,
}

/// `--replicas-from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiscoveryArg {
    Hosts,
    Processlist,
}

/// `--object-lock-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LockModeArg {
    Governance,
    Compliance,
}

/// `--sse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SseArg {
    #[value(name = "aws:kms")]
    Kms,
    #[value(name = "AES256", alias = "aes256")]
    Aes256,
}

/// Where the run's metrics go: the commands a CronJob or a Job runs.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Metrics")]
pub struct MetricsArgs {
    /// Push the run's metrics to this Prometheus Pushgateway (http://host:9091).
    #[arg(long, env = "OUTBOX_ARCHIVER_METRICS_PUSHGATEWAY")]
    pub metrics_pushgateway: Option<String>,
    /// Write the run's metrics to this file for node_exporter's textfile collector (*.prom).
    #[arg(long, env = "OUTBOX_ARCHIVER_METRICS_TEXTFILE")]
    pub metrics_textfile: Option<PathBuf>,
}

/// The summary on stdout, and the logs on stderr: every command's.
#[derive(Debug, Args)]
#[command(next_help_heading = "Common options")]
pub struct LogArgs {
    /// The summary on stdout: table (short, for people; alias text), json (one object, for
    /// programs and CronJob logs), or csv (attest's statement) [default: table on a terminal
    /// unless --log-format json is given, json otherwise; attest: json]
    #[arg(long, global = true, env = "OUTBOX_ARCHIVER_FORMAT", value_enum)]
    pub format: Option<FormatArg>,
    /// Whether `--format` came from `OUTBOX_ARCHIVER_FORMAT` (a preference for every command)
    /// rather than the command line (an instruction to this one).
    #[arg(skip)]
    pub format_from_environment: bool,
    /// Log format on stderr [default: json when stderr is not a terminal, text otherwise]
    #[arg(long, global = true, env = "OUTBOX_ARCHIVER_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Log filter, in tracing's EnvFilter syntax.
    #[arg(
        long,
        global = true,
        env = "OUTBOX_ARCHIVER_LOG",
        default_value = "info"
    )]
    pub log: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

/// `--s3-upload-checksum`: which checksum a put carries for the store to check on arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
///
/// (No doc comment on the values: one makes clap print every option's help in its long layout,
/// twice as many lines; the option's own help says what each value is.)
pub enum UploadChecksumArg {
    None,
    Md5,
    Sha256,
    Crc64nvme,
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    #[value(alias = "text")]
    Table,
    Json,
    // attest's statement only (a plain comment: see UploadChecksumArg).
    Csv,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply migrations/ (receipts and members tables).
    Migrate(MigrateArgs),
    /// Archive delivered rows below the cutoff (the CronJob).
    Archive(ArchiveArgs),
    /// Re-read archived batches and check them against receipts and members; find gaps.
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
    /// The auditor's statement for UTC days --from..=--to: per app and day the rows, batches,
    /// control totals, first and last cursor, the chain head at the period's end and the
    /// checkpoint anchoring it, each batch's last full verification, retention and storage
    /// class — canonical JSON (hash and sign it) or CSV; refused when an app's chain is broken.
    Attest(AttestArgs),
    /// Set up a throwaway database and archive location, seed rows, archive them, show the result.
    Demo(DemoArgs),
    /// Move the archive's home to another bucket (or folder) under the same prefix, where it was
    /// copied whole (its marker included): checked there, and recorded with the reason. The old
    /// home need not be reachable.
    Relocate(RelocateArgs),
    /// Print the JSON Schema of the table's NDJSON record (--table, or --table-profile: then
    /// the database describes the table's columns).
    Schema,
    /// Preflight: check the database (grants, tables, collations, buffer pool) and the store
    /// (versioning, Object Lock, encryption, KMS key, create-only puts, a probe put with the
    /// configured class and retention) without writing a row; each line ok / warning / problem,
    /// with the fix.
    Doctor(DoctorArgs),
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Also create the reference source table (demos and tests).
    #[arg(long, env = "OUTBOX_ARCHIVER_WITH_SOURCE_TABLE")]
    pub with_source_table: bool,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The commands this login is meant to run, whose grants are checked (archive, verify,
    /// status, purge, restore, restore-into-source, compact): the archive role runs archive,
    /// verify and status, the purge role purge, the compaction role compact
    /// (deploy/mysql-grants.sql).
    #[arg(
        long,
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
pub enum CommandArg {
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
pub struct AppArgs {
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
pub struct AnyAppArgs {
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
pub struct CutoffArgs {
    /// Rows delivered longer ago than this are old enough (30s, 15m, 24h, 7d).
    #[arg(long, env = "OUTBOX_ARCHIVER_OLDER_THAN", default_value = "7d", value_parser = parse_duration)]
    pub older_than: i64,
    /// Rows with updated_at_ms below this instant (2026-06-01 = its UTC midnight, RFC 3339, or
    /// epoch ms); overrides --older-than.
    #[arg(long, env = "OUTBOX_ARCHIVER_CUTOFF", value_parser = parse_time)]
    pub cutoff: Option<i64>,
}

/// Which receipts `verify` and `restore` work on.
#[derive(Debug, Args)]
pub struct BatchScopeArgs {
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
pub struct ThawArgs {
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
pub enum ThawTierArg {
    Bulk,
    Standard,
    Expedited,
}

#[derive(Debug, Args)]
pub struct ArchiveArgs {
    #[command(flatten)]
    pub apps: AppArgs,
    #[command(flatten)]
    pub cutoff: CutoffArgs,
    /// When the store holds checkpoints of an app's chain that its database no longer continues
    /// (a database restored from an older backup, investigated): record the break with this
    /// reason, in a write-once object every later verify and statement shows, and anchor the
    /// database's chain again (README, "The chain of batches").
    #[arg(long, value_name = "REASON")]
    pub accept_chain_break: Option<String>,
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
    #[arg(long, env = "OUTBOX_ARCHIVER_MAX_BATCHES")]
    pub max_batches: Option<u64>,
    /// Start no new batch after this long (30s, 15m, 24h).
    #[arg(long, env = "OUTBOX_ARCHIVER_MAX_RUNTIME", value_parser = parse_duration)]
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
    #[arg(long, env = "OUTBOX_ARCHIVER_PARALLEL_APPS", default_value = "auto", value_parser = parse_parallel_apps)]
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
    pub metrics: MetricsArgs,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
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
    pub metrics: MetricsArgs,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Only this app's runs (an app no run and no row names is an error).
    #[arg(long)]
    pub app: Option<String>,
    /// Only this command's runs.
    #[arg(long, value_parser = parse_recorded_command)]
    pub command: Option<String>,
    /// How many runs.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub last: u32,
}

#[derive(Debug, Args)]
pub struct FindArgs {
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
pub struct PurgeArgs {
    #[command(flatten)]
    pub apps: AppArgs,
    /// Only batches verified longer ago than this (30s, 15m, 24h, 7d).
    #[arg(long, env = "OUTBOX_ARCHIVER_GRACE", default_value = "24h", value_parser = parse_duration)]
    pub grace: i64,
    /// Delete at most this many rows per second.
    #[arg(long, env = "OUTBOX_ARCHIVER_MAX_ROWS_PER_SECOND")]
    pub max_rows_per_second: Option<u64>,
    /// Start no new chunk after this long.
    #[arg(long, env = "OUTBOX_ARCHIVER_MAX_RUNTIME", value_parser = parse_duration)]
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
    #[arg(long, env = "OUTBOX_ARCHIVER_PARALLEL_APPS", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4))]
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
    pub metrics: MetricsArgs,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
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
    #[arg(long, env = "OUTBOX_ARCHIVER_PARALLEL_APPS", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4))]
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
pub struct CompactArgs {
    #[command(flatten)]
    pub apps: AppArgs,
    /// Only receipts whose rows purge finished deleting longer ago than this (30d, 90d).
    #[arg(long, env = "OUTBOX_ARCHIVER_COMPACT_OLDER_THAN", default_value = "90d", value_parser = parse_duration)]
    pub older_than: i64,
    /// Start no new batch after this long.
    #[arg(long, env = "OUTBOX_ARCHIVER_MAX_RUNTIME", value_parser = parse_duration)]
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
pub struct StatusArgs {
    #[command(flatten)]
    pub apps: AnyAppArgs,
    #[command(flatten)]
    pub cutoff: CutoffArgs,
    /// Purge's grace period, to split rows awaiting purge into those purge takes on its next run
    /// and those that still wait (as purge --grace).
    #[arg(long, env = "OUTBOX_ARCHIVER_GRACE", default_value = "24h", value_parser = parse_duration)]
    pub grace: i64,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

#[derive(Debug, Args)]
pub struct AttestArgs {
    #[command(flatten)]
    pub apps: AnyAppArgs,
    /// The period's first UTC day: 2026-11-01 (or RFC 3339 / epoch ms of its midnight, UTC).
    #[arg(long, value_name = "DAY", value_parser = parse_day)]
    pub from: i64,
    /// The period's last UTC day, included: 2026-11-30 (or RFC 3339 / epoch ms of its midnight).
    #[arg(long, value_name = "DAY", value_parser = parse_day)]
    pub to: i64,
    #[command(flatten)]
    pub s3: S3Args,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

#[derive(Debug, Args)]
pub struct RelocateArgs {
    /// The archive's new home: s3://bucket/prefix or file:///path, the same prefix as now.
    #[arg(long, value_name = "URL")]
    pub to: String,
    /// Why it moves, kept with the move (history and doctor show it).
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    #[command(flatten)]
    pub s3: S3Args,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
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
