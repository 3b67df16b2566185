//! outbox-archiver moves old delivered rows of MySQL transactional-outbox tables into S3-compatible
//! object storage, with proof, so that they can later be purged and restored.
//!
//! The layers, bottom to top; every import points down (`python3 ../shared/tools/structure.py src`
//! checks that no two top-level modules import each other):
//!
//! * [`model`] — the pure core, no I/O, unit-tested with fixed vectors: [`model::table`] (what an
//!   outbox table looks like: its columns and their roles) and [`model::profile`] (a table
//!   described in a file), [`model::codec`] (a row ⇄ one NDJSON line), [`model::digest`]
//!   (SHA-256, CRC-64, sizes, row fingerprints), [`model::format`] (batch facts → batch_id, object
//!   keys and their parsing, manifest and `_SUCCESS` bytes, members proof), [`model::batch`]
//!   (rows → a bounded gzip NDJSON batch, and the same facts recomputed from an object's bytes),
//!   [`model::protection`] (Object Lock retention, storage classes, encryption),
//!   [`model::ident`] (the one rule for a name put into SQL), [`model::command`] (the commands'
//!   names), [`model::timespec`], [`model::human`] (numbers and durations for people),
//!   [`model::appcode`], [`model::redact`], [`model::shard`], [`model::record_schema`].
//!   [`failpoint`] (a named point at which a test stops a run as if it crashed) is the one leaf
//!   beside it.
//! * The two I/O boundaries, each behind a narrow interface: [`db`] — one repository per owned
//!   table ([`db::receipts`], [`db::members`], [`db::runs`], [`db::drills`], [`db::home`]), the receipt +
//!   members transaction ([`db::record`]), the source table's keyset pages ([`db::source`]),
//!   purge's delete transactions ([`db::purge`]), restore's target table ([`db::restore`]),
//!   compaction's transaction ([`db::compact`]), start-up checks (`db/schema.rs`), doctor's
//!   read-only questions ([`db::preflight`]), replicas' discovery and lag ([`db::replica`]) and
//!   the per-app advisory lock ([`db::lock`]); [`store`] — the [`store::ObjectStore`] trait with
//!   a local-directory implementation ([`store::local`]) and S3's ([`store::s3`]: settings and
//!   the client, the SDK's errors in the store's words, the resumable GET, the request
//!   interceptors, the bucket's own settings).
//! * [`pipeline`] — the library the commands are thin over: one app driver for every command
//!   ([`pipeline::apps`]: resolve `--app`/`--all-apps`/`--shard`, the gate of safe code and lock,
//!   retries with jitter, the run history), one verifier ([`pipeline::verifier`]: its findings,
//!   what a receipt expects, the comparisons, cold objects) that [`pipeline::publish`],
//!   [`pipeline::verify`], [`pipeline::purge`], [`pipeline::restore`], [`pipeline::compact`]
//!   and [`pipeline::find`] share, the replicas' pacing of writes ([`pipeline::replicas`]), the
//!   archive's home — `--store` held to the store the archive is bound to, and its moves
//!   ([`pipeline::home`]) — the log of batches, a transparency log of each app's batches in the
//!   store ([`pipeline::log`]: appended by archive, proven from by purge and attest, audited
//!   whole by verify; its tree math in [`model::tlog`], its checkpoints in [`model::note`]) —
//!   each command's per-app work, the preflight ([`pipeline::doctor`]: the database, the bucket, the
//!   write probe), and the typed report every command returns ([`pipeline::report`],
//!   per-command details in [`pipeline::report::details`]) with the exit status it implies,
//!   decided in one place ([`pipeline::report::Summary::settle`]). No clap, no terminal in here;
//!   an [`pipeline::Observer`] sees progress.
//! * [`output`] — what a run shows, read from its report: the short summary for a terminal
//!   ([`output::text`]), progress and the log's writer ([`output::progress`]), Prometheus metrics
//!   ([`output::metrics`]).
//! * [`commands`] — one thin module per subcommand: options in, the pipeline's driver, a report
//!   out; [`commands::demo`] is the end-to-end tour `cargo run -- demo` runs. [`cli`] — the only
//!   place that knows clap: arguments and environment → each command's options, logging
//!   ([`cli::logs`]), opening and always closing the database and the store, `--print-config`.
//! * [`testkit`] — for the demo, tests and benchmarks: [`testkit::seed`] generates realistic
//!   outbox rows, [`testkit::history`] years of history in a few statements; with the default `local-s3` feature, `testkit::local_s3` is a real S3 server in
//!   this process. The release image is built with `--no-default-features`, so the production
//!   binary carries no S3 server (its `demo` then writes to a folder).
//!
//! The contract lives in `SPEC.md` (§ references in comments point there).

#![warn(unreachable_pub)]

mod cli;
mod commands;
mod db;
mod failpoint;
mod model;
mod output;
mod pipeline;
mod store;
mod testkit;

// The public surface: what the binary, the tests and the benchmarks use, and nothing else. Every
// other item is the crate's own (`pub` inside a private module is `pub(crate)` in effect, and the
// `unreachable_pub` lint holds that to what is re-exported here).

// ── The binary: the command line, run as a process (src/main.rs), and its shape.
pub use cli::{command as command_line, main};

// ── The commands as a library: each module's options and its `run` (tests, benchmarks).
pub use commands::{archive, attest, compact, demo, migrate, purge, restore, status, verify};

// ── What a command runs with: the table, the database, the store, the clock and the stops.
pub use pipeline::apps::{Apps, Selection};
pub use pipeline::home::{check as check_home, Binding, Checked as HomeChecked, HomeError};
pub use pipeline::replicas::ReplicaGate;
pub use pipeline::{note_signal, DbContext, RunContext, Stops};

// ── What a command reports: the summary, each command's fields, the statement, the findings.
pub use db::restore::{Conflict, ConflictReason};
pub use db::runs::Run;
pub use model::command::CommandName;
pub use pipeline::doctor::{Check, DoctorRun, Status as CheckStatus};
pub use pipeline::report::details::{
    ArchiveApp, Backlog, CompactApp, Drill, FindRun, FoundRow, GoodDrill, HistoryRun, InSource,
    MigrateRun, ObjectCheck, PlannedPurge, PurgeApp, PurgeRun, RelocateRun, ReplicaWait,
    RestoreApp, RestoreRun, Sample, StatusApp, VerifyApp, VerifyRun,
};
pub use pipeline::report::statement::{
    AcceptedBreak, AppStatement, BatchStatement, DayStatement, FullVerification, LogStatement,
    RetentionStatement, Statement, TreeHead,
};
pub use pipeline::report::{
    run_id, AppDetails, AppReport, BatchReport, Document, Outcome, RunDetails, Summary,
};
pub use pipeline::verifier::{ColdObject, Finding, FindingKind};

// ── What a person or a program reads of it: the summary, a command's table, a document.
pub use output::{render, Format};

// ── The pure core: the table and its rows, batches, the archive's format, the log's math.
pub use model::batch::{
    BatchEncoder, EncodeError, EncodedBatch, EncodedRow, Limits, Member, Superseded,
};
pub use model::codec::{decode_line, encode_line, DecodeError, Row, Value, ValueRef};
pub use model::digest::{crc64nvme, sha256_hex, ObjectDigest, RowFingerprint};
pub use model::note::{KeyError, Signer};
pub use model::profile::Profile;
pub use model::protection::{
    LockMode, ObjectLock, Protection, RestoreStatus, Retention, Sse, SseAlgorithm, Thaw, ThawTier,
    VerifiedBy, WritePolicy,
};
pub use model::receipt::{Compaction, Lifecycle, Objects, Receipt, StoredAs};
pub use model::record_schema::to_text as record_schema;
pub use model::shard::Shard;
pub use model::table::{
    Column, Kind as ColumnKind, Layout, TableSpec, Total, TotalKind, ROOM_OUTBOX, WALLET_OUTBOX,
};
pub use model::timespec::utc_date;
pub use model::unarchived::{Unarchived, UnarchivedColumn};
pub use model::{chain, format, tlog};

// ── The database: the connection, the owned tables, the repositories tests hold to their plans.
pub use db::chain::ChainTable;
pub use db::compact::{CompactError, CompactQueries, Compacted};
pub use db::home::Home;
pub use db::lock::{database_lock_name, lock_name, AppLock, Doing, LockLost};
pub use db::owned::{create_owned_tables, owned_tables, OwnedTable};
pub use db::purge::PurgeQueries;
pub use db::receipts::{ReceiptScope, Receipts};
pub use db::record::{Cut, RecordError, Recorder};
pub use db::replica::{Lag, Replica};
pub use db::source::{decode_row, SourceTable};
pub use db::{
    create_source_table, insert_rows, migrate as migrate_database, Db, DbError, IfPresent,
};
pub use pipeline::log::{ChainError, LogKeys};

// ── The object store.
pub use store::{
    get_all, open as open_store, ConditionalPut, ConditionalPutSetting, LocalStore, Location,
    ObjectMeta, ObjectStore, Operations, PutMode, PutOptions, S3Settings, StoreError, StoreStats,
    ThawState, UploadChecksum,
};

/// For tests, benchmarks and the demo: fail points, the sockets' hook, generated rows and
/// history, and (with the `local-s3` feature) an S3 server in this process.
pub mod testing {
    pub use crate::db::nodelay::{sockets_to, Socket};
    pub use crate::failpoint::{FailPoints, Tripped, ARCHIVE as ARCHIVE_FAIL_POINTS};
    pub use crate::testkit::history::synthesize;
    #[cfg(feature = "local-s3")]
    pub use crate::testkit::local_s3::LocalS3;
    pub use crate::testkit::seed::{self, insert_rows, EventIds, Rng, SeedPlan};
}
