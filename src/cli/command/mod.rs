//! The subcommands, one file each: its arguments (clap), its words in help ([`Help`]), what it
//! asks of the shared settings, and what it makes of its arguments — a pipeline's command its
//! options (`IntoOptions`, run by [`run_args`]: `work` in the list), any other its own run
//! ([`Runs`]: `own`). The list below is the one place the commands are listed: the `Command`
//! enum clap parses, and every question asked of a command by name or by value, are made from
//! it.

mod archive;
mod attest;
mod compact;
mod demo;
mod doctor;
mod find;
mod history;
mod log_key;
mod migrate;
mod purge;
mod recover;
mod relocate;
mod restore;
mod schema;
mod status;
mod verify;

use tokio_util::sync::CancellationToken;

use super::args::{AppArgs, Common};
use super::help::Help;
use super::options::{Connect, Groups};
use super::run_args;
use crate::pipeline::report::Summary;

/// A subcommand, as the command line knows it.
pub(crate) trait Subcommand: Sized + Send {
    /// Its name and its words in help.
    const HELP: Help;

    /// The shared groups it accepts.
    fn groups(&self) -> Groups<'_> {
        Groups::default()
    }

    /// Its `--app`/`--all-apps`/`--shard`, where they name the apps it works on.
    fn app_args(&self) -> Option<&AppArgs> {
        None
    }

    /// Whether it reads `--store` (`--print-config` says when it is missing).
    fn needs_store(&self) -> bool {
        true
    }

    /// Whether it reads the database (`--print-config` says when none is given).
    fn needs_database(&self, _: &Common) -> bool {
        true
    }

    /// What its own settings would stop on before connecting (`--print-config`).
    fn problems(&self, _: &Common) -> Vec<String> {
        Vec::new()
    }
}

/// A subcommand that is not a pipeline's work (`own` in the list): it runs itself with the
/// settings every command shares. A pipeline's command (`work`) is its arguments made its
/// options ([`IntoOptions`]) and run by [`run_args`].
#[async_trait::async_trait]
pub(crate) trait Runs {
    async fn run(
        self,
        common: &Common,
        connect: &Connect,
        now_ms: i64,
        shutdown: CancellationToken,
    ) -> Summary;
}

/// How the list runs a command of each kind.
macro_rules! run_as {
    (work, $args:expr, $common:expr, $connect:expr, $now_ms:expr, $shutdown:expr) => {
        run_args($common, $connect, $args, $now_ms, $shutdown).await
    };
    (own, $args:expr, $common:expr, $connect:expr, $now_ms:expr, $shutdown:expr) => {
        Runs::run($args, $common, $connect, $now_ms, $shutdown).await
    };
}

/// The `Command` enum and what is asked of a command, from one list of `Variant(file::Args)`.
macro_rules! subcommands {
    ($($(#[$doc:meta])* $variant:ident($args:ty) $kind:ident,)*) => {
        #[derive(Debug, clap::Subcommand)]
        pub(crate) enum Command {
            $($(#[$doc])* $variant($args),)*
        }

        impl Command {
            /// Its name.
            pub(crate) fn name(&self) -> crate::model::command::CommandName {
                self.help().name
            }

            /// Its name and its words in help.
            pub(crate) fn help(&self) -> &'static Help {
                match self {
                    $(Command::$variant(_) => &<$args as Subcommand>::HELP,)*
                }
            }

            /// The shared groups it accepts.
            pub(crate) fn groups(&self) -> Groups<'_> {
                match self {
                    $(Command::$variant(args) => args.groups(),)*
                }
            }

            /// Its `--app`/`--all-apps`/`--shard`, where they name the apps it works on.
            pub(crate) fn app_args(&self) -> Option<&AppArgs> {
                match self {
                    $(Command::$variant(args) => args.app_args(),)*
                }
            }

            /// Whether it reads `--store`.
            pub(crate) fn needs_store(&self) -> bool {
                match self {
                    $(Command::$variant(args) => args.needs_store(),)*
                }
            }

            /// Whether it reads the database.
            pub(crate) fn needs_database(&self, common: &Common) -> bool {
                match self {
                    $(Command::$variant(args) => args.needs_database(common),)*
                }
            }

            /// What its own settings would stop on before connecting.
            pub(crate) fn problems(&self, common: &Common) -> Vec<String> {
                match self {
                    $(Command::$variant(args) => args.problems(common),)*
                }
            }

            /// Runs it.
            pub(crate) async fn run(
                self,
                common: &Common,
                connect: &Connect,
                now_ms: i64,
                shutdown: CancellationToken,
            ) -> Summary {
                match self {
                    $(Command::$variant(args) => run_as!($kind, args, common, connect, now_ms, shutdown),)*
                }
            }
        }

        /// The words of the command named `name`.
        pub(super) fn help(name: crate::model::command::CommandName) -> Option<&'static Help> {
            [$(&<$args as Subcommand>::HELP,)*]
                .into_iter()
                .find(|help| help.name == name)
        }
    };
}

subcommands! {
    /// Apply migrations/ (receipts and members tables).
    Migrate(migrate::MigrateArgs) own,
    /// Archive delivered rows below the cutoff (the CronJob).
    Archive(archive::ArchiveArgs) work,
    /// Re-read archived batches and check them against receipts and members; find gaps. With
    /// --batch-id, a batch read in full whose objects were written again with the archived bytes
    /// (restored from versioning) is recorded under their new versions, with the evidence.
    Verify(verify::VerifyArgs) work,
    /// Per app: cursor, receipts, archived rows, backlog, rows awaiting purge, last run.
    Status(status::StatusArgs) work,
    /// Where an archived event is and what it said: by --event-id (or --event-ids-from), or by
    /// --where COLUMN=VALUE over --from/--to or --batch-id. Prints each row found with its app,
    /// batch, object key and line, and whether it is still in the source, purged or restored.
    Find(find::FindArgs) work,
    /// The last runs, newest first: command, app, outcome, rows, batches, how long, and the error
    /// of a failed one (every command's runs per app, and runs that could not start).
    History(history::HistoryArgs) work,
    /// Delete source rows that are exact members of VERIFIED receipts older than the grace period.
    Purge(purge::PurgeArgs) work,
    /// Load archived batches back into a table, verifying every object first.
    Restore(restore::RestoreArgs) work,
    /// Replace the member rows of receipts purged longer ago than --older-than by a digest on the
    /// receipt, after reading each batch back in full.
    Compact(compact::CompactArgs) work,
    /// The auditor's statement for UTC days --from..=--to, days that are over (--to before
    /// today, UTC): per app and day the rows, batches, control totals, first and last cursor,
    /// the log's tree heads at the period's start and end with the consistency proofs between
    /// them and to the checkpoint, each batch's inclusion proof, last full verification,
    /// retention and storage class — canonical JSON (hash and sign it) or CSV; refused when an
    /// app's log does not prove its period. A batch whose latest check found it damaged is
    /// named with the findings, not vouched for (exit 1).
    Attest(attest::AttestArgs) work,
    /// Set up a throwaway database and archive location, seed rows, archive them, show the result.
    Demo(demo::DemoArgs) own,
    /// Move the archive's home to another bucket (or folder) under the same prefix, where it was
    /// copied whole (its marker included): every batch is read there in full first (a copy
    /// lacking or changing one is refused, nothing moved), then the move is recorded with the
    /// reason and each batch's object versions there. The old home need not be reachable.
    Relocate(relocate::RelocateArgs) own,
    /// After the database was restored from a backup: every batch the store's log holds that
    /// the database has no receipt of is read in full from the store and recorded again, in the
    /// log's order, its rows already gone from the source marked purged (--reason is kept).
    Recover(recover::RecoverArgs) work,
    /// Print the JSON Schema of the table's NDJSON record (--table, or --table-profile: then
    /// the database describes the table's columns).
    Schema(schema::SchemaArgs) own,
    /// Preflight: check the database (grants, tables, collations, buffer pool) and the store
    /// (versioning, Object Lock, encryption, KMS key, create-only puts, a probe put with the
    /// configured class and retention) without writing a row; each line ok / warning / problem,
    /// with the fix.
    Doctor(doctor::DoctorArgs) own,
    /// Make a signing key for the log's checkpoints (C2SP signed-note, Ed25519; the text form
    /// of Go's golang.org/x/mod/sumdb/note): the signing key goes to --out (mode 0600, for a
    /// Kubernetes secret and --log-key-file), its verifier is printed (for --log-verifier and
    /// the auditors). Touches no database and no store.
    LogKey(log_key::LogKeyArgs) own,
}
