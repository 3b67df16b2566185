//! `-h`: a command's summary on one screen — what it does in a line, its usage, the options an
//! operator reaches for first (most used first, one line each), the common ones, and where the
//! rest is. `--help` stays the whole text of every option, grouped, with the exit status (the
//! convention of clap, git and cargo).
//!
//! The summary is a second shape of the same command line: [`shorten`] keeps the options listed
//! here with their one-line summaries and hides the others, so both shapes parse alike.

use crate::model::command::CommandName;

/// Whether the command line asks for the short help: a bare `-h` (clap reads `-h` as the help
/// flag wherever it stands, so this is what clap itself would act on).
pub(super) fn asked() -> bool {
    std::env::args_os().skip(1).any(|a| a == "-h")
}

/// What a command does, in one line.
fn about(name: CommandName) -> &'static str {
    match name {
        CommandName::Migrate => {
            "Create or update the archiver's tables (as a role that may CREATE)"
        }
        CommandName::Archive => "Archive delivered rows below the cutoff (the CronJob)",
        CommandName::Verify => {
            "Re-read archived batches and check them against their receipts; find gaps"
        }
        CommandName::Status => {
            "Per app: cursor, archived rows, backlog, rows awaiting purge, last runs"
        }
        CommandName::Find => "Where an archived event is and what it said",
        CommandName::History => "The last runs, newest first, with their outcome and error",
        CommandName::Purge => "Delete the source rows of VERIFIED receipts older than the grace",
        CommandName::Restore => {
            "Load archived batches back into a table, verifying every object first"
        }
        CommandName::Compact => "Replace old purged receipts' member rows by a digest",
        CommandName::Attest => "The auditor's statement of whole UTC days (canonical JSON or CSV)",
        CommandName::Demo => "A throwaway database and archive, seeded, archived and shown",
        CommandName::Schema => "Print the JSON Schema of the table's NDJSON record",
        CommandName::Doctor => {
            "Preflight: the database, the grants and the store, each with its fix"
        }
        CommandName::Relocate => "Move the archive's home to where it was copied whole",
        CommandName::LogKey => "Make a signing key for the log's checkpoints",
        CommandName::None => "",
    }
}

const APP: (&str, &str) = ("app", "An app code (repeatable)");
const BATCH: (&str, &str) = ("batch-id", "Only this batch (repeatable)");
const FROM: (&str, &str) = (
    "from",
    "Only batches with rows at or after this instant (2026-11-01)",
);
const TO: (&str, &str) = (
    "to",
    "Only batches with rows before this instant (not included)",
);
const VERIFIER: (&str, &str) = (
    "log-verifier",
    "The log's verifier key (repeatable while a key rotates)",
);
const ENDPOINT: (&str, &str) = (
    "s3-endpoint",
    "S3 endpoint of a store other than AWS (MinIO, Ceph, COS)",
);

const MIGRATE: &[(&str, &str)] = &[
    (
        "with-source-table",
        "Also create the reference source table (a trial database)",
    ),
    (
        "seed-rows",
        "Then put this many realistic rows in it (a trial's first hour)",
    ),
];

const ARCHIVE: &[(&str, &str)] = &[
    APP,
    ("all-apps", "Every app with rows in the source table"),
    (
        "older-than",
        "Rows delivered longer ago than this (7d, 24h)",
    ),
    ("dry-run", "List the batches it would write; write nothing"),
    ("max-batches", "Stop each app after this many batches"),
    ("max-runtime", "Start no new batch after this long (2h)"),
    ("parallel-apps", "Apps archived at once: 1 to 8, or auto"),
    ("stragglers", "Archive the stragglers verify reports"),
    (
        "log-key-file",
        "The log's signing key (repeatable while a key rotates)",
    ),
    (
        "object-lock-mode",
        "Object Lock on every object: governance or compliance",
    ),
    (
        "retention",
        "How long each batch's objects stay locked (7y, 30d)",
    ),
    ENDPOINT,
];

const VERIFY: &[(&str, &str)] = &[
    APP,
    BATCH,
    FROM,
    TO,
    (
        "metadata-only",
        "HEAD only: sizes, checksums and the log; no download",
    ),
    (
        "sample-percent",
        "Check about this percent of the batches in scope",
    ),
    ("parallel", "Batches checked at once"),
    VERIFIER,
    ENDPOINT,
];

const STATUS: &[(&str, &str)] = &[
    APP,
    ("grace", "Purge's grace, to tell what its next run takes"),
    (
        "older-than",
        "Rows delivered longer ago than this count as backlog",
    ),
];

const FIND: &[(&str, &str)] = &[
    ("event-id", "An event id to find (repeatable)"),
    (
        "event-ids-from",
        "A file of event ids, one a line (- for standard input)",
    ),
    (
        "where",
        "Rows whose COLUMN holds VALUE (with --from/--to or --batch-id)",
    ),
    FROM,
    TO,
    APP,
    BATCH,
];

const HISTORY: &[(&str, &str)] = &[
    ("app", "Only this app's runs"),
    ("command", "Only this command's runs"),
    (
        "since",
        "Only runs started at or after this instant (2026-11-01, 12h)",
    ),
    ("until", "Only runs started before this instant"),
    ("last", "How many runs"),
];

const PURGE: &[(&str, &str)] = &[
    APP,
    ("all-apps", "Every app with receipts not purged yet"),
    ("dry-run", "List the batches it would purge; delete nothing"),
    ("grace", "Only batches verified longer ago than this"),
    (
        "max-rows-per-second",
        "Delete at most this many rows per second",
    ),
    ("max-runtime", "Start no new chunk after this long (2h)"),
    (
        "reverify",
        "Read each batch in full right before deleting its rows",
    ),
    VERIFIER,
    ENDPOINT,
];

const RESTORE: &[(&str, &str)] = &[
    APP,
    BATCH,
    FROM,
    TO,
    ("into", "Target table (default {table}_restored)"),
    (
        "into-source",
        "Into the live source table (no row is overwritten)",
    ),
    (
        "drill",
        "Restore into a scratch table, compare, record, drop",
    ),
    (
        "thaw",
        "Ask the store to thaw GLACIER / DEEP_ARCHIVE objects",
    ),
    ENDPOINT,
];

const COMPACT: &[(&str, &str)] = &[
    APP,
    ("all-apps", "Every app with receipts"),
    ("older-than", "Receipts purged longer ago than this (90d)"),
    (
        "dry-run",
        "Read every batch, count what would go; delete nothing",
    ),
    ("max-runtime", "Start no new batch after this long"),
    ENDPOINT,
];

const ATTEST: &[(&str, &str)] = &[
    ("from", "The period's first UTC day (2026-11-01)"),
    (
        "to",
        "The period's last UTC day, included (it must be over)",
    ),
    (
        "previous",
        "The previous statement: each log must have grown from it",
    ),
    APP,
    VERIFIER,
    ENDPOINT,
];

const DOCTOR: &[(&str, &str)] = &[
    ("grants-for", "The commands whose grants are checked"),
    ENDPOINT,
    ("object-lock-mode", "The Object Lock mode archive will put"),
    ("retention", "The retention archive will put (7y)"),
    ("sse-kms-key-id", "The KMS key archive will use"),
];

const RELOCATE: &[(&str, &str)] = &[
    (
        "to",
        "The archive's new home: s3://bucket/prefix or file:///path",
    ),
    ("reason", "Why it moves (kept with the move)"),
    ("parallel", "Batches re-read at the new home at once"),
    ENDPOINT,
];

const DEMO: &[(&str, &str)] = &[
    ("rows", "How many rows to seed"),
    (
        "file-store",
        "A file:// folder instead of the in-process S3 server",
    ),
    ("database", "The throwaway database to (re)create"),
    ("dir", "Where the archive's objects go"),
    ("serve", "Serve the last demo's folder as S3 again"),
    ("force", "Drop and empty even what the demo did not make"),
];

const LOG_KEY: &[(&str, &str)] = &[
    ("name", "The key's name, as signatures carry it"),
    ("out", "Where the signing key is written (a new file)"),
];

/// The options `-h` shows for a command, most used first, each with its one-line summary.
fn shown(name: CommandName) -> &'static [(&'static str, &'static str)] {
    match name {
        CommandName::Migrate => MIGRATE,
        CommandName::Archive => ARCHIVE,
        CommandName::Verify => VERIFY,
        CommandName::Status => STATUS,
        CommandName::Find => FIND,
        CommandName::History => HISTORY,
        CommandName::Purge => PURGE,
        CommandName::Restore => RESTORE,
        CommandName::Compact => COMPACT,
        CommandName::Attest => ATTEST,
        CommandName::Doctor => DOCTOR,
        CommandName::Relocate => RELOCATE,
        CommandName::Demo => DEMO,
        CommandName::LogKey => LOG_KEY,
        CommandName::Schema | CommandName::None => &[],
    }
}

/// The common options `-h` shows (the rest are in `--help`), for the commands that use them.
const COMMON: [(&str, &str); 4] = [
    ("database-url", "mysql://user:password@host:3306/database"),
    (
        "store",
        "Archive location: s3://bucket/prefix or file:///path",
    ),
    ("table", "The outbox table (wallet_outbox, room_outbox)"),
    ("format", "The summary on stdout: table, json or csv"),
];

/// The common options a command never reads (hidden from both helps).
pub(super) fn unused_common(name: CommandName) -> &'static [&'static str] {
    match name {
        CommandName::LogKey => &["database-url", "store", "table", "table-profile"],
        _ => &[],
    }
}

/// The command line's short shape: each subcommand's listed options with their summaries,
/// under "Options" in the order listed, every other option hidden, and a last line saying
/// where the rest is.
pub(super) fn shorten(command: clap::Command) -> clap::Command {
    // The common options are global: built, the command holds them in every subcommand too.
    let command = command
        .term_width(0)
        .mut_args(|arg| match common_kind(&arg) {
            Common::Kept => arg,
            Common::Shown(i) => one_line(arg, COMMON[i].1).display_order(1000 + i),
            Common::Hidden | Common::Own => arg.hide_short_help(true),
        });
    command.mut_subcommands(|sub| {
        let Some(name) = CommandName::parse(sub.get_name()) else {
            return sub;
        };
        let list = shown(name);
        let rest = format!(
            "Every option, and what each exit status means: outbox-archiver {} --help",
            sub.get_name()
        );
        // One line an option, however long its name: clap would otherwise put a summary under
        // its option when the names take much of the width.
        let sub = sub
            .about(about(name))
            .long_about(None)
            .after_help(rest)
            .term_width(0);
        sub.mut_args(|arg| match common_kind(&arg) {
            Common::Kept => arg,
            Common::Shown(i) => one_line(arg, COMMON[i].1).display_order(1000 + i),
            Common::Hidden => arg.hide(true),
            Common::Own => {
                let long = arg.get_long().unwrap_or_default().to_string();
                match list.iter().position(|(l, _)| *l == long) {
                    Some(i) => one_line(arg, list[i].1).help_heading(None).display_order(i),
                    None if arg.get_long().is_some() => arg.hide(true),
                    None => arg,
                }
            }
        })
    })
}

/// What `-h` does with an option of the command line as a whole.
enum Common {
    /// `--help` and `--version`, as they are.
    Kept,
    /// One of [`COMMON`], by its place there.
    Shown(usize),
    /// Another global option: only in `--help`.
    Hidden,
    /// An option of the subcommand's own.
    Own,
}

fn common_kind(arg: &clap::Arg) -> Common {
    let long = arg.get_long().unwrap_or_default();
    if long == "help" || long == "version" || arg.is_hide_set() {
        return Common::Kept;
    }
    match COMMON.iter().position(|(l, _)| *l == long) {
        Some(i) => Common::Shown(i),
        None if arg.is_global_set() => Common::Hidden,
        None => Common::Own,
    }
}

/// An option as `-h` shows it: its summary, its default, nothing else.
fn one_line(arg: clap::Arg, summary: &'static str) -> clap::Arg {
    arg.help(summary)
        .long_help(None)
        .hide_env(true)
        .hide_possible_values(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every option named here exists on its command: a renamed option would otherwise drop out
    /// of `-h` without a word.
    #[test]
    fn every_listed_option_is_one_of_the_commands() {
        use clap::CommandFactory;
        let command = super::super::Cli::command();
        for sub in command.get_subcommands() {
            let name = CommandName::parse(sub.get_name()).expect("a command");
            assert!(!about(name).is_empty(), "{name:?}");
            for (long, summary) in shown(name) {
                assert!(
                    sub.get_arguments().any(|a| a.get_long() == Some(*long)),
                    "{}: -h lists --{long}, which it does not have",
                    sub.get_name()
                );
                assert!(summary.len() <= 70, "--{long}: {summary}");
            }
        }
        for (long, _) in COMMON {
            assert!(
                command.get_arguments().any(|a| a.get_long() == Some(long)),
                "--{long}"
            );
        }
    }
}
