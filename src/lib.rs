//! outbox-archiver moves old delivered rows of MySQL transactional-outbox tables into S3-compatible
//! object storage, with proof, so that they can later be purged and restored.
//!
//! The layers, bottom to top; every import points down, and no two files of one layer import
//! each other (`python3 ../shared/tools/structure.py src`, `inner_cycles.py src`). Where a kind
//! of change goes, file by file:
//!
//! * `model/` — the pure core, no I/O, unit-tested with fixed vectors. What an outbox table is:
//!   `table.rs` (its columns and their roles), `profile.rs` (a table described in a file),
//!   `unarchived.rs` (columns a batch's lines lack, and what purge records of them), `record_schema.rs` (one line's JSON
//!   Schema). Its rows: `codec.rs` (a row ⇄ one NDJSON line), `digest.rs` (SHA-256, CRC-64,
//!   sizes, row fingerprints), `batch.rs` (rows → a bounded gzip batch, and the facts read back
//!   from an object). The archive: `format.rs` (batch ids, every object key built and parsed,
//!   manifest and `_SUCCESS`), `receipt.rs` (the receipt — one noun for every layer — its
//!   columns' names and its members proof), `protection.rs` (Object Lock, storage classes,
//!   encryption), `chain.rs` (an older build's linear chain), `tlog.rs` (RFC 6962 trees, C2SP
//!   tiles, proofs), `note.rs` (signed checkpoints). Words and names: `timespec.rs`, `human.rs`,
//!   `command.rs` (the commands' names), `appcode.rs`, `ident.rs` (the one rule for a name put
//!   into SQL), `shard.rs`, `redact.rs`. `failpoint.rs` beside it: where a test stops a run as
//!   if it crashed.
//! * `db/` — the database, one repository per owned table: `receipts/` (`mod.rs` its queries
//!   and the lifecycle rules as SQL, `row.rs` the receipt as a row: columns, insert, decode),
//!   `members.rs`, `runs.rs`, `drills.rs`, `home.rs`, `object_versions.rs` (objects recorded
//!   under new versions, with the evidence), `chain.rs`, `logs.rs` (each app's log
//!   identity), `added.rs` (what purge recorded of columns a batch's lines lack); `record.rs` (the receipt + members transaction), `source.rs` (the source
//!   table's keyset pages), `purge/` (`mod.rs` the delete transactions, `compare.rs` rows held to
//!   their members), `compact.rs` and `restore.rs` (their transactions and target tables), `owned.rs` and `columns.rs` (the owned tables made from a spec), `schema.rs`
//!   (start-up checks), `preflight.rs` (doctor's read-only questions), `replica.rs` (lag),
//!   `lock.rs` (the per-app advisory lock), `apps.rs` (an app's spellings), `nodelay.rs`
//!   (TCP_NODELAY on every socket). No store, no format I/O.
//! * `store/` — the object store behind one narrow trait (`mod.rs`): `local.rs` (a folder) and
//!   `s3/` (`settings.rs` and the client in `mod.rs`, `error.rs` the SDK's errors in the store's
//!   words, `read.rs` the resumable GET, `intercept.rs` the request interceptors, `inspect.rs` the
//!   bucket's own settings). No database.
//! * `pipeline/` — the work, as a library under the commands; `pipeline/mod.rs` maps its files
//!   (the run context, the app driver, the one verifier, the log of batches, each command's work
//!   per app, the typed reports). No clap, no terminal.
//! * `output/` — everything a person or a program reads, drawn from the typed reports: `mod.rs`
//!   (what stdout gets for `--format`), `text.rs` (the short summary), `tables.rs` (status,
//!   history, doctor), `statement.rs` (attest's canonical JSON and CSV), `progress.rs` (progress
//!   lines and the log's writer), `metrics.rs` (Prometheus).
//! * `commands/` — above the pipeline and the output: `run` (any command's options run with a
//!   progress line for its name), and the commands that are not a pipeline's work: `demo.rs`
//!   (the tour `cargo run -- demo` takes), `schema.rs`, `log_key.rs`, `doctor.rs` (the
//!   preflight printed) and `migrate.rs` (the owned tables, before a run's context can exist).
//!   A command that works on the archive is one module of `pipeline/`: its options, its run
//!   (`pipeline::command::Command`) and its work per app. `cli/` — the only place that knows clap: `command/` (one file per
//!   subcommand — its arguments, its words in help, what it makes of them — and in `mod.rs` the
//!   one list of them), `args.rs` and `groups.rs` (the common options and the shared groups),
//!   `help.rs` (what a command's words are), `line.rs` (as the binary reads it), `parse.rs`
//!   (values), `options.rs` (the shared settings), `print_config.rs`, `logs.rs`,
//!   `process.rs` (the process: runtime, signals, printing), `mod.rs` (opens and always closes
//!   the run's database and store). `main.rs` is the allocator and [`main`].
//! * `testkit/` — for the demo, tests and benchmarks: `seed.rs` (realistic rows), `history.rs`
//!   (years of history in a few statements), `local_s3.rs` (an S3 server in this process, with
//!   the default `local-s3` feature; the release image is built without it).
//!
//! The public surface is the re-exports below, in groups; `pub` inside a private module is the
//! crate's own. The contract lives in `SPEC.md` (§ references in comments point there).

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

// ── The commands as a library: each command's options, run by [`run`] (tests, benchmarks).
pub use commands::{demo, run};
pub use pipeline::command::Command;
pub use pipeline::Observer;

/// `archive`'s options.
pub mod archive {
    pub use crate::commands::run;
    pub use crate::pipeline::archive::ArchiveOptions;
}
/// `attest`'s options, and the canonical JSON its statement is printed as.
pub mod attest {
    pub use crate::commands::run;
    pub use crate::output::statement::canonical;
    pub use crate::pipeline::attest::AttestOptions;
}
/// `compact`'s options.
pub mod compact {
    pub use crate::commands::run;
    pub use crate::pipeline::compact::CompactOptions;
}
/// `migrate`'s options and its run (on the database alone: the tables may not exist yet).
pub mod migrate {
    pub use crate::commands::migrate::{run, MigrateOptions};
}
/// `purge`'s options.
pub mod purge {
    pub use crate::commands::run;
    pub use crate::pipeline::purge::PurgeOptions;
    pub use crate::pipeline::report::details::ObjectCheck;
}
/// `recover`'s options.
pub mod recover {
    pub use crate::commands::run;
    pub use crate::pipeline::recover::RecoverOptions;
}
/// `restore`'s options.
pub mod restore {
    pub use crate::commands::run;
    pub use crate::pipeline::restore::RestoreOptions;
}
/// `status`'s options.
pub mod status {
    pub use crate::commands::run;
    pub use crate::pipeline::status::StatusOptions;
}
/// `verify`'s options.
pub mod verify {
    pub use crate::commands::run;
    pub use crate::pipeline::verify::VerifyOptions;
}

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
    MigrateRun, ObjectCheck, PlannedPurge, PurgeApp, PurgeRun, RecoverApp, RelocateRun,
    ReplicaWait, RestoreApp, RestoreRun, Sample, StatusApp, VerifyApp, VerifyRun,
};
pub use pipeline::report::statement::{
    AcceptedBreak, AppStatement, BatchStatement, DayStatement, FullVerification, LogStatement,
    RetentionStatement, Statement, TreeHead, UnresolvedBatch, UnresolvedFindings,
};
pub use pipeline::report::{
    run_id, AppDetails, AppReport, BatchReport, Document, Ending, Moved, Outcome, RunDetails,
    Signal, Stop, Summary,
};
pub use pipeline::verifier::{ColdObject, Finding, FindingKind};

// ── What a person or a program reads of it: the summary, a command's table, a document.
pub use output::{render, Format};

// ── The pure core: the table and its rows, batches, the archive's format, the log's math.
pub use model::batch::{
    BatchEncoder, EncodeError, EncodedBatch, EncodedRow, Limits, Member, Superseded,
};
pub use model::batch_columns::{BatchColumn, BatchColumns, SharedColumns};
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
pub use db::compact::{CompactError, CompactQueries, Compacted};
pub use db::home::Home;
pub use db::lock::{database_lock_name, lock_name, AppLock, Doing, LockLost};
pub use db::object_versions::{NewVersions, RecordedVersions};
pub use db::owned::{create_owned_tables, owned_tables, OwnedTable};
pub use db::purge::PurgeQueries;
pub use db::receipts::{ReceiptScope, Receipts};
pub use db::record::{Cut, RecordError, Recorder};
pub use db::replica::{Lag, Replica};
pub use db::source::{decode_row, SourceTable};
pub use db::{
    create_source_table, insert_rows, migrate as migrate_database, Db, DbError, IfPresent,
};
pub use pipeline::log::{LogError, LogKeys};

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
    pub use crate::failpoint::{
        FailPoints, Tripped, ARCHIVE as ARCHIVE_FAIL_POINTS, RECOVER as RECOVER_FAIL_POINTS,
    };
    pub use crate::testkit::history::synthesize;
    #[cfg(feature = "local-s3")]
    pub use crate::testkit::local_s3::LocalS3;
    pub use crate::testkit::seed::{self, insert_rows, EventIds, Rng, SeedPlan};
}
