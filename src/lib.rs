//! outbox-archiver moves old delivered rows of MySQL transactional-outbox tables into S3-compatible
//! object storage, with proof, so that they can later be purged and restored.
//!
//! Where things live — a newcomer's map, bottom to top:
//!
//! * Pure logic, no I/O, unit-tested with fixed vectors:
//!   [`table`] (what an outbox table looks like: its columns and their roles),
//!   [`codec`] (a row ⇄ one NDJSON line), [`digest`] (SHA-256, CRC-64, sizes),
//!   [`format`](mod@format) (batch facts → batch_id, object keys, manifest and `_SUCCESS` bytes),
//!   [`batch`] (rows → a bounded gzip NDJSON batch, and the same facts recomputed from an
//!   object's bytes), [`timespec`] (durations, cutoffs, UTC days), [`protection`] (Object Lock
//!   retention, storage classes, encryption: what a put asks for and a receipt records),
//!   [`appcode`], [`redact`], [`shard`] (`--shard I/N`).
//! * I/O boundaries, each behind a narrow interface:
//!   [`db`] — one repository per owned table ([`db::receipts`], [`db::members`], [`db::runs`],
//!   [`db::drills`]), the receipt + members transaction ([`db::record`]), the source table's
//!   keyset pages ([`db::source`]), purge's delete transactions ([`db::purge`]), restore's target
//!   table ([`db::restore`]), members compaction's transaction ([`db::compact`]), start-up
//!   checks (`db/schema.rs`), doctor's read-only questions ([`db::preflight`]), replicas' lag
//!   ([`db::replica`]) and the per-app advisory lock ([`db::lock`]); [`store`] — the
//!   [`store::ObjectStore`] trait with S3 and local-directory implementations.
//! * [`pipeline`] — the library the commands are thin over: one app driver for every command
//!   ([`pipeline::apps`]: resolve `--app`/`--all-apps`/`--shard`, the gate of safe code and lock,
//!   retries with jitter, the run history), one verifier ([`pipeline::verifier`]: expected facts,
//!   HEAD and bytes → findings) that [`pipeline::publish`], [`pipeline::verify`],
//!   [`pipeline::purge`] and [`pipeline::restore`] share, the replicas' pacing of writes and the
//!   operator's stops ([`pipeline::replicas`], [`pipeline::Stops`]), and each command's per-app
//!   work ([`pipeline::archive`] with its batch builder, [`pipeline::compact`],
//!   [`pipeline::status`], [`pipeline::doctor`]). No clap,
//!   no JSON, no terminal output in here; an [`pipeline::Observer`] sees progress.
//! * [`summary`] — the typed report every command returns (per-command details in
//!   [`summary::details`]), printed as one JSON object on stdout, and the exit status it implies;
//!   [`metrics`] reads its fields into Prometheus gauges for a Pushgateway or a textfile.
//! * [`commands`] — one thin module per subcommand: options in, the pipeline's driver, a summary
//!   out. [`cli`] — the only place that knows clap: arguments and environment → each command's
//!   options, opening and always closing the database and the store, `--print-config`.
//!   [`progress`] is the terminal-only progress line.
//! * [`demo`] — the end-to-end tour `cargo run -- demo` runs; with the default
//!   `local-s3` feature it serves the archive from [`local_s3`], a real S3 server in this process
//!   (the tests use it too). The release image is built with `--no-default-features`, so the
//!   production binary carries no S3 server (its `demo` then writes to a folder).
//! * For tests and benchmarks: [`seed`] generates realistic outbox rows; [`failpoint`] stops a
//!   run at a named point as if it had crashed.
//!
//! The contract lives in `SPEC.md` (§ references in comments point there).

pub mod appcode;
pub mod batch;
pub mod cli;
pub mod codec;
pub mod commands;
pub mod db;
pub mod demo;
pub mod digest;
pub mod failpoint;
pub mod format;
#[cfg(feature = "local-s3")]
pub mod local_s3;
pub mod metrics;
pub mod pipeline;
pub mod profile;
pub mod progress;
pub mod protection;
pub mod record_schema;
pub mod redact;
pub mod seed;
pub mod shard;
pub mod store;
pub mod summary;
pub mod table;
pub mod timespec;
