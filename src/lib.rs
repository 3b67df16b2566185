//! outbox-archiver moves old delivered rows of MySQL transactional-outbox tables into S3-compatible
//! object storage, with proof, so that they can later be purged and restored.
//!
//! Where things live — a newcomer's map:
//!
//! * Pure logic, no I/O, unit-tested with fixed vectors:
//!   [`table`] (what an outbox table looks like: its columns and their roles),
//!   [`codec`] (a row ⇄ one NDJSON line), [`digest`] (SHA-256, CRC-64, sizes),
//!   [`format`](mod@format) (batch facts → batch_id, object keys, manifest and `_SUCCESS` bytes),
//!   [`batch`] (rows → a bounded gzip NDJSON batch, and the same facts recomputed from an
//!   object's bytes), [`timespec`] (durations, cutoffs, UTC days), [`appcode`], [`redact`].
//! * I/O boundaries, each behind a narrow interface:
//!   [`db`] (the MySQL pool, migrations, keyset pages of the source table, the per-app advisory
//!   lock, the receipt + members transaction) and [`store`] (the [`store::ObjectStore`] trait with
//!   S3 and local-directory implementations).
//! * Workflows built from the two: [`publish`] (write-once puts and read-back verification of one
//!   batch's three objects).
//! * Commands — one module each with an options struct and one `run`: [`commands`].
//! * [`summary`] is the JSON object every command prints on stdout, and the exit status it
//!   implies (and the run id on every log line); [`metrics`] turns it into Prometheus gauges for
//!   a Pushgateway or a textfile; [`progress`] is the terminal-only progress line; [`shard`] is
//!   `--shard I/N`; [`failpoint`] lets tests stop a run at a named point as if it had crashed.
//! * [`seed`] generates realistic outbox rows for the demo, the benchmarks and the tests;
//!   [`local_s3`] runs a real S3 server in-process for the demo and the tests.
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
pub mod progress;
pub mod redact;
pub mod seed;
pub mod shard;
pub mod store;
pub mod summary;
pub mod table;
pub mod timespec;
