//! The work itself, as a library under the thin commands: functions over a [`RunContext`] (the
//! table, the database, the store, the clock, the shutdown signal) and options, returning typed
//! reports. No clap, no JSON printing, no terminal output here: progress goes to an
//! [`Observer`] the caller passes in. Its files:
//!
//! * `mod.rs` — the run's context ([`DbContext`], [`RunContext`]), its clock and its stops.
//! * `apps.rs` — which apps a run works on, and the one driver every command runs them through:
//!   the gate (a safe code; the app's lock where the command writes), retries after transient
//!   database errors (with jitter), the run noted for `history` and `status`.
//! * `failure.rs` — how a failure ends an app's attempt (transient, lost lock, stopped, final),
//!   decided once per error type; `report.rs` ends an app's report on it ([`report::AppReport::end`]).
//! * `report.rs` — the summary every command returns and the exit status it implies, decided in
//!   one place; `report/details.rs` each command's own fields; `report/statement.rs` the auditor's
//!   statement.
//! * `replicas.rs` — writes paced by the replicas' lag; `budget.rs` — the memory every batch in
//!   flight holds, all apps together; `home.rs` — `--store` held to the archive's home, and its
//!   moves (every batch re-read at the new home first).
//! * `archive/` — one app's batches (`mod.rs`): the run prepared once (`prepare.rs`), the three
//!   overlapping stages (`stages.rs`: built by `builder.rs`, written and read back by
//!   `publish.rs`), a batch's receipt and members recorded (`record.rs`).
//! * `verifier/` — the one comparison of a batch's expected facts with what the store holds
//!   (`mod.rs`): what a receipt or a batch just written expects (`expected.rs`), the comparisons
//!   (`compare.rs`), objects in cold storage (`cold.rs`), what a finding is (`finding.rs`),
//!   what a check found noted on the batch's receipt for attest (`noted.rs`). Publish treats a
//!   finding as an error; verify, purge, restore, compact and find report it.
//! * `log/` — the log of batches in the store (`mod.rs`: its keys read and written): appended by
//!   archive (`append.rs`), audited whole by verify (`audit.rs`), proven from by purge and attest
//!   (`proof.rs`), walked past the database's leaves by recover (`recovery.rs`); where each app's
//!   log is — its recorded identity, found or begun (`identity.rs`).
//! * `versions.rs` — objects written again with the archived bytes (a copy, a restore from
//!   versioning): recorded under their new identity by `relocate` (every batch re-read at the
//!   new home) and by `verify --batch-id`; reported by verify and left by purge until then.
//! * `command.rs` — a command as the pipeline runs it ([`command::Command`]: its name, the apps
//!   it lists, whether it writes, its run), what every run checks before it starts, and the
//!   run recorded when no app of it was.
//! * Each command, one module: its options, its run over the apps ([`command::Command`]) and its
//!   work per app — `archive/`, `verify.rs`, `purge/` (`mod.rs` the deletes, `proof.rs` what
//!   they rest on), `restore.rs`, `compact.rs`, `find.rs`, `status.rs`, `attest.rs`,
//!   `history.rs` (the runs recorded), `relocate.rs` (the home moved: `home.rs` does it),
//!   `recover.rs` (a database restored from a backup carried on from the store's log); and
//!   `migrate.rs` (the owned tables), `doctor/` the preflight (`database.rs`, `bucket.rs`,
//!   `probe.rs` the write probe), line by line.

pub(crate) mod apps;
pub(crate) mod archive;
pub(crate) mod attest;
pub(crate) mod budget;
mod builder;
pub(crate) mod command;
pub(crate) mod compact;
pub(crate) mod doctor;
pub(crate) mod failure;
pub(crate) mod find;
pub(crate) mod history;
pub(crate) mod home;
pub(crate) mod log;
pub(crate) mod migrate;
pub(crate) mod publish;
pub(crate) mod purge;
pub(crate) mod recover;
pub(crate) mod relocate;
pub(crate) mod replicas;
pub(crate) mod report;
pub(crate) mod restore;
pub(crate) mod status;
pub(crate) mod verifier;
pub(crate) mod verify;
pub(crate) mod versions;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::db::tables::Tables;
use crate::db::Db;
use crate::model::table::TableSpec;
use crate::store::{ObjectStore, StoreStats};
use report::{Signal, Stop};

/// Where the work reports its progress: a terminal's progress line, or periodic log lines (`output::progress`).
pub trait Observer: Sync {
    /// Whether a total is worth counting first (a progress display would show it).
    fn wants_totals(&self) -> bool {
        false
    }
    /// A new piece of work, `key` (an app), counted in `unit`s towards `total` if known. Pieces
    /// of work of one command may be in flight at once (`--parallel-apps`).
    fn start(&self, _key: &str, _unit: &'static str, _total: Option<u64>) {}
    fn advance(&self, _key: &str, _n: u64, _note: &str) {}
    fn finish(&self, _key: &str) {}
}

/// Milliseconds since the Unix epoch, from whatever clock the caller chose.
pub(crate) type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The wall clock.
pub(crate) fn system_clock() -> Clock {
    Arc::new(|| chrono::Utc::now().timestamp_millis())
}

/// What a run works with on the database side: the table, the database, the clock and the
/// shutdown signal — all passed in, never reached for — and the operator's stops (the sentinel
/// file, the replicas whose lag paces writes). `status` needs no more.
#[derive(Clone)]
pub struct DbContext {
    pub spec: &'static TableSpec,
    pub db: Db,
    /// The table's repositories on `db`, built once.
    pub(crate) tables: Tables,
    /// Cancelled on SIGTERM/SIGINT; loops check it between batches.
    pub shutdown: CancellationToken,
    /// The run's clock: [`DbContext::now`] reads it.
    pub clock: Clock,
    pub stops: Stops,
    /// The archive location the run works with, as the runs table records it (`None`: a run
    /// of the database side only).
    pub store_label: Option<String>,
    /// Whether the source's app codes compare case-sensitively (`Pay` and `pay` two apps), read
    /// once.
    case_matters: Arc<tokio::sync::OnceCell<bool>>,
}

/// What an operator can stop or pace a run with, besides SIGTERM and the limits.
#[derive(Clone, Default)]
pub struct Stops {
    /// `--sentinel`: while this file exists, no batch or chunk starts (pt-archiver's sentinel).
    pub sentinel: Option<PathBuf>,
    /// `--replica`: writes wait while a replica lags (SPEC §5.6's bound, for replicas too).
    pub replicas: Option<Arc<replicas::ReplicaGate>>,
}

impl DbContext {
    pub fn new(
        spec: &'static TableSpec,
        db: Db,
        shutdown: CancellationToken,
        clock: Clock,
    ) -> Self {
        DbContext {
            spec,
            tables: Tables::new(&db.pool, spec),
            db,
            shutdown,
            clock,
            stops: Stops::default(),
            store_label: None,
            case_matters: Arc::default(),
        }
    }

    /// Whether the source table's app codes compare case-sensitively: two codes that differ
    /// only in case are two apps, with two logs (one query, the first time).
    pub(crate) async fn app_case_matters(&self) -> Result<bool, crate::db::DbError> {
        self.case_matters
            .get_or_try_init(|| self.db.app_codes_tell_case_apart(self.spec))
            .await
            .copied()
    }

    /// Milliseconds since the Unix epoch, by the run's clock.
    pub fn now(&self) -> i64 {
        (self.clock)()
    }

    /// Whether a loop over batches (or chunks) must stop now, and why: shutdown, the sentinel
    /// file, or the run's deadline.
    pub fn stop_reason(&self, deadline: Option<Instant>) -> Option<Stop> {
        if self.shutdown.is_cancelled() {
            Some(shutdown_reason())
        } else if let Some(path) = self.stops.sentinel.as_ref().filter(|p| p.exists()) {
            Some(Stop::Sentinel(path.clone()))
        } else if deadline.is_some_and(|d| Instant::now() >= d) {
            Some(Stop::MaxRuntime)
        } else {
            None
        }
    }
}

/// Which signal asked the run to stop (the binary notes it; a library caller that cancels the
/// shutdown token itself stops as SIGTERM would).
static SIGNAL: std::sync::OnceLock<Signal> = std::sync::OnceLock::new();

/// Notes the signal that asked for the shutdown.
pub fn note_signal(signal: Signal) {
    let _ = SIGNAL.set(signal);
}

/// The signal that asked for the shutdown, if one did.
pub(crate) fn signal() -> Option<Signal> {
    SIGNAL.get().copied()
}

/// The stop of a run stopped by a signal: SIGTERM unless a Ctrl-C was noted.
pub(crate) fn shutdown_reason() -> Stop {
    Stop::Signal(signal().unwrap_or(Signal::Terminate))
}

/// What a run that touches the archive works with: the database side and the store, and
/// whether the store is the archive's home yet ([`home`]).
#[derive(Clone)]
pub struct RunContext {
    pub base: DbContext,
    pub store: Arc<dyn ObjectStore>,
    pub binding: home::Binding,
    /// The log key checkpoints are signed with and held to (`--log-key`, `--log-verifier`).
    pub log_keys: log::LogKeys,
}

impl std::ops::Deref for RunContext {
    type Target = DbContext;

    fn deref(&self) -> &DbContext {
        &self.base
    }
}

impl RunContext {
    pub fn new(
        spec: &'static TableSpec,
        db: Db,
        store: Arc<dyn ObjectStore>,
        shutdown: CancellationToken,
        now_ms: Clock,
    ) -> RunContext {
        let mut base = DbContext::new(spec, db, shutdown, now_ms);
        base.store_label = Some(store.location().to_string());
        RunContext {
            base,
            store,
            binding: home::Binding::default(),
            log_keys: log::LogKeys::default(),
        }
    }

    /// The same run, with the operator's stops.
    pub fn with_stops(mut self, stops: Stops) -> RunContext {
        self.base.stops = stops;
        self
    }

    /// The store's request counters now; [`RunContext::store_activity`] turns them into a
    /// run's share.
    pub(crate) fn store_stats(&self) -> StoreStats {
        self.store.stats().unwrap_or_default()
    }

    /// What the store's requests went through since `before`, for the summary (S3 stores only).
    pub(crate) fn store_activity(&self, before: &StoreStats) -> Option<StoreStats> {
        self.store.stats().map(|now| now.since(before))
    }
}
