//! Each command's own words, in one place: what `-h` says it does in a line and which options
//! it lists first ([`super::short_help`]), what `--help` says of its exit status and of its
//! `--all-apps`, and the common options it never reads. Its options' own words are their doc
//! comments (`args.rs`).

use crate::model::command::CommandName;

/// What a command's help says of it beside its options' doc comments.
pub(super) struct Help {
    /// What it does, in one line (`-h`).
    pub about: &'static str,
    /// The options `-h` shows, most used first, each with its one-line summary.
    pub shown: &'static [(&'static str, &'static str)],
    /// The "Exit status" paragraph of `--help`.
    pub exit_status: &'static str,
    /// What `--all-apps` means for it, where it takes one.
    pub all_apps: Option<&'static str>,
    /// The common options it never reads (hidden from both helps).
    pub unused_common: &'static [&'static str],
}

/// A command's words.
pub(super) fn of(name: CommandName) -> Option<&'static Help> {
    Some(match name {
        CommandName::Migrate => &MIGRATE,
        CommandName::Archive => &ARCHIVE,
        CommandName::Verify => &VERIFY,
        CommandName::Status => &STATUS,
        CommandName::Find => &FIND,
        CommandName::History => &HISTORY,
        CommandName::Purge => &PURGE,
        CommandName::Restore => &RESTORE,
        CommandName::Compact => &COMPACT,
        CommandName::Attest => &ATTEST,
        CommandName::Doctor => &DOCTOR,
        CommandName::Schema => &SCHEMA,
        CommandName::Demo => &DEMO,
        CommandName::Relocate => &RELOCATE,
        CommandName::LogKey => &LOG_KEY,
        CommandName::None => return None,
    })
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

const MIGRATE: Help = Help {
    about: "Create or update the archiver's tables (as a role that may CREATE)",
    shown: &[
    (
        "with-source-table",
        "Also create the reference source table (a trial database)",
    ),
    (
        "seed-rows",
        "Then put this many realistic rows in it (a trial's first hour)",
    ),
],
    exit_status: "Exit status: 0 the schema is up to date (what was applied is in the summary); 2 the database could not be reached or a migration failed.",
    all_apps: None,
    unused_common: &[],
};

const ARCHIVE: Help = Help {
    about: "Archive delivered rows below the cutoff (the CronJob)",
    shown: &[
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
],
    exit_status: "Exit status: 0 every app archived, up to date, skipped because another archiver holds its lock, or stopped by a limit or SIGTERM; 1 an app failed or was refused (the others still ran); 2 bad usage or configuration, an --app that matches nothing, or the apps could not be listed (nothing was done); 130 stopped by Ctrl-C (SIGINT) between batches.",
    all_apps: Some("Every app code with rows in the source table"),
    unused_common: &[],
};

const VERIFY: Help = Help {
    about: "Re-read archived batches and check them against their receipts; find gaps",
    shown: &[
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
],
    exit_status: "Exit status: 0 clean (orphans are listed, not failed); 1 a finding (README, \"Recovering from a finding\", says what to do for each kind); 2 could not look (the store or database unreachable, --store pointing elsewhere, a --batch-id or --app that matches nothing); 130 Ctrl-C.",
    all_apps: None,
    unused_common: &[],
};

const STATUS: Help = Help {
    about: "Per app: cursor, archived rows, backlog, rows awaiting purge, last runs",
    shown: &[
    APP,
    ("grace", "Purge's grace, to tell what its next run takes"),
    (
        "older-than",
        "Rows delivered longer ago than this count as backlog",
    ),
],
    exit_status: "Exit status: 0 the figures were read; 2 the database could not be reached or an --app matches nothing.",
    all_apps: None,
    unused_common: &[],
};

const FIND: Help = Help {
    about: "Where an archived event is and what it said",
    shown: &[
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
],
    exit_status: "Exit status: 0 every event asked for was found (or, with --where, at least one row); 1 not found; 2 could not look (bad usage, the store or database unreachable, a --batch-id that matches nothing).",
    all_apps: None,
    unused_common: &[],
};

const HISTORY: Help = Help {
    about: "The last runs, newest first, with their outcome and error",
    shown: &[
    ("app", "Only this app's runs"),
    ("command", "Only this command's runs"),
    (
        "since",
        "Only runs started at or after this instant (2026-11-01, 12h)",
    ),
    ("until", "Only runs started before this instant"),
    ("last", "How many runs"),
],
    exit_status: "Exit status: 0 the runs were read (also when there is none yet); 2 the database could not be reached.",
    all_apps: None,
    unused_common: &[],
};

const PURGE: Help = Help {
    about: "Delete the source rows of VERIFIED receipts older than the grace",
    shown: &[
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
],
    exit_status: "Exit status: 0 every eligible batch purged (nothing eligible yet — rows in --grace — is 0 too; the summary says when they become eligible), or stopped by a limit or SIGTERM; 1 a batch was not purged because its objects or member rows disagree with its receipt (see findings), or an app failed; 2 bad usage or configuration, an --app that matches nothing; 130 Ctrl-C.",
    all_apps: Some("Every app with VERIFIED receipts not purged yet (its rows may already be gone from the source)"),
    unused_common: &[],
};

const RESTORE: Help = Help {
    about: "Load archived batches back into a table, verifying every object first",
    shown: &[
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
],
    exit_status: "Exit status: 0 every batch restored (or drilled and matching); 1 a batch failed verification or loading, or a drill did not match; 2 bad usage or configuration, a --batch-id or --app that matches nothing; 130 Ctrl-C.",
    all_apps: None,
    unused_common: &[],
};

const COMPACT: Help = Help {
    about: "Replace old purged receipts' member rows by a digest",
    shown: &[
    APP,
    ("all-apps", "Every app with receipts"),
    ("older-than", "Receipts purged longer ago than this (90d)"),
    ("max-batches", "Stop each app after this many batches"),
    (
        "dry-run",
        "Read every batch, count what would go; delete nothing",
    ),
    ("max-runtime", "Start no new batch after this long"),
    ENDPOINT,
],
    exit_status: "Exit status: 0 every eligible receipt compacted, or stopped by a limit or SIGTERM; 1 a batch was not compacted (its objects or member rows disagree with its receipt) or an app failed; 2 bad usage or configuration; 130 Ctrl-C.",
    all_apps: Some("Every app with receipts"),
    unused_common: &[],
};

const ATTEST: Help = Help {
    about: "The auditor's statement of whole UTC days (canonical JSON or CSV)",
    shown: &[
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
],
    exit_status: "Exit status: 0 the statement was printed (every app's period proven in its log up to the period's end, every batch found whole by its latest check); 1 the statement was printed but names batches whose latest check found them other than recorded (unresolved_findings), or an app's period is not attested (its log has a gap, a disagreement or a fork, or a batch is not appended to it yet: the summary names the finding) or could not be read; 2 bad usage or configuration, an --app that matches nothing, or a period not over yet (--to today or later).",
    all_apps: None,
    unused_common: &[],
};

const DOCTOR: Help = Help {
    about: "Preflight: the database, the grants and the store, each with its fix",
    shown: &[
    ("grants-for", "The commands whose grants are checked"),
    ENDPOINT,
    ("object-lock-mode", "The Object Lock mode archive will put"),
    ("retention", "The retention archive will put (7y)"),
    ("sse-kms-key-id", "The KMS key archive will use"),
],
    exit_status: "Exit status: 0 no line is a problem (warnings allowed); 1 a line is a problem (each says the fix); 2 the database or the store could not be reached at all (the other lines are still printed).",
    all_apps: None,
    unused_common: &[],
};

const SCHEMA: Help = Help {
    about: "Print the JSON Schema of the table's NDJSON record",
    shown: &[],
    exit_status:
        "Exit status: 0 the schema was printed; 2 the table or profile could not be described.",
    all_apps: None,
    unused_common: &[],
};

const DEMO: Help = Help {
    about: "A throwaway database and archive, seeded, archived and shown",
    shown: &[
    ("rows", "How many rows to seed"),
    (
        "file-store",
        "A file:// folder instead of the in-process S3 server",
    ),
    ("database", "The throwaway database to (re)create"),
    ("dir", "Where the archive's objects go"),
    ("serve", "Serve the last demo's folder as S3 again"),
    ("force", "Drop and empty even what the demo did not make"),
],
    exit_status: "Exit status: 0 the demo ran end to end; 2 a step failed (the message says which), it would drop a database or empty a folder it did not make (--force), or the database could not be reached.",
    all_apps: None,
    unused_common: &[],
};

const RELOCATE: Help = Help {
    about: "Move the archive's home to where it was copied whole",
    shown: &[
    (
        "to",
        "The archive's new home: s3://bucket/prefix or file:///path",
    ),
    ("reason", "Why it moves (kept with the move)"),
    ("parallel", "Batches re-read at the new home at once"),
    ENDPOINT,
],
    exit_status: "Exit status: 0 the archive's home moved (the move is recorded with its reason); 2 nothing moved: the archive has no home yet, --to has another prefix, or the new home lacks the archive's marker or batches (copy it whole first), or the database or the store could not be reached.",
    all_apps: None,
    unused_common: &[],
};

const LOG_KEY: Help = Help {
    about: "Make a signing key for the log's checkpoints",
    shown: &[
    ("name", "The key's name, as signatures carry it"),
    ("out", "Where the signing key is written (a new file)"),
],
    exit_status: "Exit status: 0 the key was written (its verifier printed); 2 the name is not a key name, or the file exists already or cannot be written.",
    all_apps: None,
    unused_common: &["database-url", "store", "table", "table-profile"],
};
