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

pub mod cli;
pub mod commands;
pub mod db;
pub mod failpoint;
pub mod model;
pub mod output;
pub mod pipeline;
pub mod store;
pub mod testkit;
