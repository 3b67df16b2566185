//! The option groups the subcommands share: each subcommand flattens the ones that do something
//! there (`args`), and the common ones (database, table, output) are global. Each group carries
//! its help heading, so a command's help shows its own options first and then these, grouped.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::parse::{
    parse_conditional_put, parse_duration, parse_retention, parse_storage_class, parse_table_name,
    parse_timeout,
};
use crate::model::protection::Retention;
use crate::store::{self, ConditionalPutSetting};

/// The database and the table: every command's.
#[derive(Debug, Args)]
#[command(next_help_heading = "Common options")]
pub(crate) struct DbArgs {
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
pub(crate) struct SourceArgs {
    /// The status value that means delivered [default: DELIVERED, or the profile's
    /// delivered_status].
    #[arg(long, env = "OUTBOX_ARCHIVER_DELIVERED_STATUS")]
    pub delivered_status: Option<String>,
}

/// The advisory lock of each app: the commands that take it.
#[derive(Debug, Args)]
#[command(next_help_heading = "Database")]
pub(crate) struct LockArgs {
    /// Prepended to advisory lock names, for servers that host several databases.
    #[arg(long, env = "OUTBOX_ARCHIVER_LOCK_PREFIX", default_value = "")]
    pub lock_prefix: String,
}

/// Trying an app again after a transient database error: the commands that write in batches.
#[derive(Debug, Args)]
#[command(next_help_heading = "Database")]
pub(crate) struct RetryArgs {
    /// After a transient database error (restart, failover, killed connection), try the app
    /// again up to this many times, waiting about 1 s, 2 s, 4 s, … (with jitter) in between.
    #[arg(long, env = "OUTBOX_ARCHIVER_DB_RETRIES", default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=20))]
    pub db_retries: u32,
}

/// How to talk to an S3-compatible store: every command that reads or writes the archive.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Object store")]
pub(crate) struct S3Args {
    /// S3 endpoint for MinIO, COS and other compatible stores [default: AWS_ENDPOINT_URL, else
    /// AWS]
    #[arg(long, value_name = "URL", env = "OUTBOX_ARCHIVER_S3_ENDPOINT")]
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
pub(crate) struct UploadArgs {
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
pub(crate) struct ProtectionArgs {
    /// Object Lock mode of every object archive writes; needs --retention and a bucket with
    /// Object Lock enabled. compliance: nobody, root included, can delete an object version or
    /// shorten its retention before it ends; governance: users with
    /// s3:BypassGovernanceRetention can.
    #[arg(
        long,
        value_name = "MODE",
        env = "OUTBOX_ARCHIVER_OBJECT_LOCK_MODE",
        value_enum
    )]
    pub object_lock_mode: Option<LockModeArg>,
    /// How long each batch's objects stay locked after they are written: 7y (calendar years),
    /// 30d, 2555d. The receipt records the exact retain-until date.
    #[arg(long, value_name = "DURATION", env = "OUTBOX_ARCHIVER_RETENTION", value_parser = parse_retention)]
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
    #[arg(long, value_name = "KEY", env = "OUTBOX_ARCHIVER_SSE_KMS_KEY_ID")]
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
pub(crate) struct ReplicaArgs {
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
pub(crate) struct StopArgs {
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
pub(crate) enum DiscoveryArg {
    Hosts,
    Processlist,
}

/// `--object-lock-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LockModeArg {
    Governance,
    Compliance,
}

/// `--sse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SseArg {
    #[value(name = "aws:kms")]
    Kms,
    #[value(name = "AES256", alias = "aes256")]
    Aes256,
}

/// Where the run's metrics go: the commands a CronJob or a Job runs.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Metrics")]
pub(crate) struct MetricsArgs {
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
pub(crate) struct LogArgs {
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
pub(crate) enum LogFormat {
    Json,
    Text,
}

/// `--s3-upload-checksum`: which checksum a put carries for the store to check on arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
///
/// (No doc comment on the values: one makes clap print every option's help in its long layout,
/// twice as many lines; the option's own help says what each value is.)
pub(crate) enum UploadChecksumArg {
    None,
    Md5,
    Sha256,
    Crc64nvme,
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum FormatArg {
    #[value(alias = "text")]
    Table,
    Json,
    // attest's statement only (a plain comment: see UploadChecksumArg).
    Csv,
}

/// The log's keys: the commands that append to the log or prove from it (README, "The log of
/// batches").
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Log")]
pub(crate) struct LogSigningArgs {
    /// The log's signing key, a file holding `PRIVATE+KEY+name+hash+key` (as `outbox-archiver
    /// log-key` writes it; a Kubernetes secret): archive signs each checkpoint with it, and
    /// holds the store's checkpoint to it. Repeat it (or separate paths with commas) to sign
    /// with two keys while one is rotated; a log begun unsigned starts being signed at the run
    /// that first gives one (recorded in the store, README "Keys over the years").
    #[arg(
        long,
        env = "OUTBOX_ARCHIVER_LOG_KEY_FILE",
        value_name = "PATH",
        value_delimiter = ','
    )]
    pub log_key_file: Vec<PathBuf>,
    /// The log's verifier key (`name+hash+key`, public): a checkpoint that carries no signature
    /// by it is refused — a store rewritten by someone without the signing key. Repeat it (or
    /// separate keys with commas) while a key is rotated: a signature by any one is enough.
    #[arg(
        long,
        env = "OUTBOX_ARCHIVER_LOG_VERIFIER",
        value_name = "KEY",
        value_delimiter = ','
    )]
    pub log_verifier: Vec<String>,
}

impl LogSigningArgs {
    /// The keys, read and parsed (an error names the setting, never the key).
    pub(crate) fn keys(&self) -> Result<crate::pipeline::log::LogKeys, String> {
        use crate::model::note::{Signer, Verifier};
        let mut signers = Vec::new();
        for path in &self.log_key_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--log-key-file {}: cannot be read: {e}", path.display()))?;
            let signer = Signer::parse(&text)
                .map_err(|e| format!("--log-key-file {}: {e}", path.display()))?;
            signers.push(std::sync::Arc::new(signer));
        }
        let verifiers = self
            .log_verifier
            .iter()
            .map(|text| Verifier::parse(text).map_err(|e| format!("--log-verifier: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(crate::pipeline::log::LogKeys { signers, verifiers })
    }
}
