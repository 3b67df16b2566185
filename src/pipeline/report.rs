//! The one JSON object every command prints on stdout when it ends (SPEC §6), and the exit status
//! it implies: 0 done, 1 something failed (or was refused, or found), 2 bad usage or configuration
//! — or a command that could not tell which apps to work on (nothing was done).
//!
//! Each command's own fields are typed ([`details`]) and flattened into the app objects and the
//! summary.

pub(crate) mod details;
pub(crate) mod log_fields;
pub(crate) mod statement;

use std::sync::OnceLock;

use serde::Serialize;

pub use crate::model::ending::{Ending, Moved, Outcome, Signal, Stop};
pub use details::{AppDetails, RunDetails};

pub(crate) use crate::model::command::CommandName;
use crate::model::format::Cursor;
use crate::pipeline::doctor::Status as CheckStatus;

/// One batch as the summary lists it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BatchReport {
    pub batch_id: String,
    pub rows: u64,
    pub first_cursor: Cursor,
    pub last_cursor: Cursor,
    pub data_object_key: String,
    pub uncompressed_bytes: u64,
    pub compressed_bytes: u64,
}

impl BatchReport {
    /// One batch as the summary lists it: its id, rows, range, key and sizes.
    pub fn of(
        batch_id: String,
        data_object_key: String,
        batch: &crate::model::batch::EncodedBatch,
        compressed_bytes: u64,
    ) -> BatchReport {
        let c = &batch.content;
        BatchReport {
            batch_id,
            rows: c.row_count,
            first_cursor: c.first.clone(),
            last_cursor: c.last.clone(),
            data_object_key,
            uncompressed_bytes: c.uncompressed_bytes,
            compressed_bytes,
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize)]
pub struct AppReport {
    pub app_code: String,
    pub outcome: Outcome,
    pub batches: u64,
    pub rows: u64,
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replaced_objects: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub adopted_objects: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor_before: Option<Cursor>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor_after: Option<Cursor>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<Ending>,
    /// Times the app was tried again after a transient database error.
    #[serde(skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// How the error the app failed on ends the attempt (worth a retry, the lock lost, …);
    /// `None` unless [`AppReport::fail`] noted one.
    #[serde(skip)]
    pub(crate) failure: Option<super::failure::Kind>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub batch_list: Vec<BatchReport>,
    /// The command's own fields (status figures, verify counts), flattened into the app object.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub details: Option<AppDetails>,
}

impl AppReport {
    /// This attempt's report followed by `next`'s: the work of both, where `next` ended, and
    /// its outcome. Counts in the details add up, lists concatenate.
    pub fn then(self, mut next: AppReport) -> AppReport {
        next.batches += self.batches;
        next.rows += self.rows;
        let mut list = self.batch_list;
        list.append(&mut next.batch_list);
        next.batch_list = list;
        let mut replaced = self.replaced_objects;
        replaced.append(&mut next.replaced_objects);
        next.replaced_objects = replaced;
        let mut adopted = self.adopted_objects;
        adopted.append(&mut next.adopted_objects);
        next.adopted_objects = adopted;
        next.cursor_before = self.cursor_before.or(next.cursor_before);
        next.cursor_after = next.cursor_after.or(self.cursor_after);
        next.details = match (self.details, next.details) {
            (Some(before), Some(after)) => Some(before.then(after)),
            (before, after) => after.or(before),
        };
        next
    }

    /// The app's work ended in `error`: failed, said, how (whether another attempt may help,
    /// whether the lock was what was lost), and why the run ended if the error says more than
    /// "error".
    pub(crate) fn fail(&mut self, error: &(impl std::fmt::Display + super::failure::Classify)) {
        self.outcome = Outcome::Failed;
        self.error = Some(error.to_string());
        self.failure = Some(error.kind());
        if let Some(stop) = error.stop_reason() {
            self.stop_reason = Some(stop.into());
        }
    }

    /// Ends the app's report on how its work ended — the one rule archive, purge, compact and
    /// restore end an app by: an error that stopped it (shutdown while waiting for the
    /// replicas) is a clean stop with its reason; any other error fails the app (logged, with
    /// whether another attempt may help); work that ended without an error fails the app if it
    /// left batches unfinished ([`Unfinished::failed`]), else stops it if it stopped short
    /// ([`Unfinished::stopped`]), else keeps the outcome the work set. `doing` names the work in
    /// the log line of an error (`purge`).
    pub(crate) fn end<E>(&mut self, doing: &str, result: Result<(), E>, left: Unfinished)
    where
        E: std::fmt::Display + super::failure::Classify,
    {
        use super::failure::Kind;
        match result {
            Err(e) if e.kind() == Kind::Stopped => {
                self.outcome = Outcome::Stopped;
                self.stop_reason = e.stop_reason().map(Ending::from);
            }
            Err(e) => {
                tracing::error!(app = self.app_code.as_str(), error = %e, "{doing} failed");
                self.fail(&e);
            }
            Ok(()) => match left {
                Unfinished {
                    failed: Some(why), ..
                } => {
                    self.outcome = Outcome::Failed;
                    self.error = Some(why);
                }
                Unfinished {
                    stopped: Some(stop),
                    ..
                } => {
                    self.outcome = Outcome::Stopped;
                    self.stop_reason = Some(stop.into());
                }
                _ => {}
            },
        }
    }

    /// What the app's run found about its batches (purge, compact and verify find; the
    /// others say so in their errors).
    pub fn findings(&self) -> &[crate::pipeline::verifier::Finding] {
        match &self.details {
            Some(AppDetails::Purge(p)) => &p.findings,
            Some(AppDetails::Compact(c)) => &c.findings,
            Some(AppDetails::Verify(v)) => &v.findings,
            _ => &[],
        }
    }

    pub fn new(app_code: &str, outcome: Outcome) -> AppReport {
        AppReport {
            app_code: app_code.to_string(),
            outcome,
            batches: 0,
            rows: 0,
            error: None,
            replaced_objects: Vec::new(),
            adopted_objects: Vec::new(),
            cursor_before: None,
            cursor_after: None,
            stop_reason: None,
            retries: 0,
            failure: None,
            batch_list: Vec::new(),
            details: None,
        }
    }
}

/// What an app's work left when it ended without an error ([`AppReport::end`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Unfinished {
    /// Why the app failed though no error ended its work: the batches it could not finish, said
    /// in full (`2 batch(es) not purged: …`), or the first batch's error (restore goes on past one).
    pub failed: Option<String>,
    /// Why it stopped short of its work: a limit, a signal, rows left locked, objects being
    /// restored from cold storage.
    pub stopped: Option<Stop>,
}

/// This process's run id: 16 hex digits, on every log line and in the summary, so one run's
/// lines, summary and metrics can be found together.
pub fn run_id() -> &'static str {
    static RUN_ID: OnceLock<String> = OnceLock::new();
    RUN_ID.get_or_init(|| {
        use sha2::Digest as _;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let seed = format!("{nanos}:{}:{:p}", std::process::id(), &nanos);
        hex::encode(&sha2::Sha256::digest(seed.as_bytes())[..8])
    })
}

/// The span every app's work runs in: its lines carry the run id and the app code.
pub(crate) fn app_span(app: &str) -> tracing::Span {
    tracing::info_span!("app", run_id = run_id(), app)
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub command: CommandName,
    pub run_id: &'static str,
    pub ok: bool,
    /// Why the command could not run at all (configuration, connectivity); null otherwise.
    pub error: Option<String>,
    /// Why the run ended, as a whole (each app says its own): `done`, `nothing to do`, the
    /// first stopped app's reason, `error`, `could not start`, `could not list the apps`.
    pub stop_reason: Option<Ending>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cutoff_ms: Option<i64>,
    pub apps: Vec<AppReport>,
    /// What the S3 requests went through: attempts, retried failures by kind, resumed reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_requests: Option<crate::store::StoreStats>,
    /// Whether create-only puts were refused at existing keys (probed once per writing run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditional_put: Option<crate::store::ConditionalPut>,
    /// Metrics that could not be pushed or written (the run's work stands regardless).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub metrics_errors: Vec<String>,
    /// The command's own fields (verify: checked_batches, findings, orphans, sample seed).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub details: Option<RunDetails>,
    #[serde(skip)]
    pub exit_code: i32,
    /// A document the command printed instead of its summary (`output::render`).
    #[serde(skip)]
    pub document: Option<Document>,
}

/// A document a command prints instead of its summary.
#[derive(Debug, Clone)]
pub enum Document {
    /// `attest`'s statement: canonical JSON, or CSV, as `--format` asks.
    Statement(Box<statement::Statement>),
    /// Text printed as it is: `schema`'s record schema.
    Text(String),
}

impl Summary {
    pub fn new(command: CommandName) -> Summary {
        Summary {
            command,
            run_id: run_id(),
            ok: true,
            error: None,
            stop_reason: None,
            table: None,
            store: None,
            dry_run: None,
            cutoff_ms: None,
            apps: Vec::new(),
            store_requests: None,
            conditional_put: None,
            metrics_errors: Vec::new(),
            details: None,
            exit_code: 0,
            document: None,
        }
    }

    /// A command that could not start: exit status 2.
    pub(crate) fn unusable(command: CommandName, error: String) -> Summary {
        Summary::new(command).could_not_start(error)
    }

    /// A command refused before any work on what it was asked (an `attest` period not over):
    /// nothing was done, exit status 2, the summary naming its table and store as usual.
    pub(crate) fn could_not_start(mut self, error: impl std::fmt::Display) -> Summary {
        self.error = Some(error.to_string());
        self.stop_reason = Some(Ending::CouldNotStart);
        self.exit_code = 2;
        self.ok = false;
        self
    }

    /// A command that started but could not tell which apps to work on: nothing was done,
    /// exit status 2 (every command, one rule).
    pub(crate) fn without_apps(mut self, error: impl std::fmt::Display) -> Summary {
        self.error = Some(format!("could not list the apps to work on: {error}"));
        self.stop_reason = Some(Ending::CouldNotListApps);
        self.exit_code = 2;
        self.ok = false;
        self
    }

    /// Decides the exit status from the report — the one place it is decided (rustic's
    /// `CheckResults::is_ok`) — then `ok` and the run's stop reason. An exit status set before
    /// (2: could not start, could not list the apps) stands.
    pub fn settle(mut self) -> Summary {
        if self.exit_code == 0 {
            self.exit_code = self.implied_exit_code();
        }
        self.ok = self.exit_code == 0;
        if self.stop_reason.is_none() {
            self.stop_reason = Some(self.implied_stop_reason());
        }
        self
    }

    /// 2 a command that looks (verify, find, doctor) could not look, or an app met a layout newer
    /// than this build's; 1 it found a problem, an
    /// app failed, a restore met conflicts, or the run had an error; 130 a Ctrl-C (SIGINT)
    /// stopped an app of an otherwise clean run, so that `archive && purge` does not go on
    /// (SIGTERM, a CronJob being stopped, stays a clean stop).
    fn implied_exit_code(&self) -> i32 {
        // A layout newer than this build's (SPEC §20) is the configuration's, whatever the command.
        if self
            .apps
            .iter()
            .any(|a| a.failure == Some(super::failure::Kind::Fenced))
        {
            return 2;
        }
        let app_errors = self.apps.iter().any(|a| a.error.is_some());
        let looked = match &self.details {
            Some(RunDetails::Verify(run)) if self.error.is_some() || app_errors => Some(2),
            Some(RunDetails::Verify(run)) if !run.findings.is_empty() => Some(1),
            Some(RunDetails::Find(_)) if self.error.is_some() => Some(2),
            Some(RunDetails::Find(run)) if !run.found_all() => Some(1),
            Some(RunDetails::Doctor(run)) if run.unreachable => Some(2),
            Some(RunDetails::Doctor(run)) if run.worst() == CheckStatus::Problem => Some(1),
            _ => None,
        };
        let conflicted = self
            .apps
            .iter()
            .any(|a| matches!(&a.details, Some(AppDetails::Restore(r)) if !r.conflicts.is_empty()));
        let failed = self.error.is_some() || conflicted;
        match looked {
            Some(code) => code,
            None if failed || self.apps.iter().any(|a| a.outcome.is_failure()) => 1,
            None if self.stopped_by() == Some(Signal::Interrupt) => 130,
            None => 0,
        }
    }

    /// The signal that stopped the run or one of its apps, if one did.
    fn stopped_by(&self) -> Option<Signal> {
        let apps = self.apps.iter().filter_map(|a| a.stop_reason.as_ref());
        self.stop_reason.iter().chain(apps).find_map(Ending::signal)
    }

    /// A run the process was interrupted in (Ctrl-C) after its work had ended cleanly: exit
    /// status 130 all the same, so that `archive && purge` does not go on.
    pub fn interrupted(mut self, signal: Option<Signal>) -> Summary {
        if self.exit_code == 0 && signal == Some(Signal::Interrupt) {
            self.exit_code = 130;
            self.ok = false;
        }
        self
    }

    fn implied_stop_reason(&self) -> Ending {
        let looked = |found: Ending, problem: Ending, could_not: Ending| match self.exit_code {
            0 => found,
            1 => problem,
            _ => could_not,
        };
        match &self.details {
            Some(RunDetails::Find(_)) => {
                return looked(Ending::Found, Ending::NotFound, Ending::CouldNotLook)
            }
            Some(RunDetails::Doctor(_)) => {
                return looked(Ending::Done, Ending::ProblemsFound, Ending::Unreachable)
            }
            Some(RunDetails::Relocate(_)) if self.error.is_none() => return Ending::Done,
            // A migrate works on no app: whether it applied something is what it says.
            Some(RunDetails::Migrate(run)) if self.error.is_none() => {
                return match run.changed() {
                    true => Ending::Done,
                    false => Ending::SchemaUpToDate,
                }
            }
            _ => {}
        }
        let stopped = self
            .apps
            .iter()
            .find(|a| a.outcome == Outcome::Stopped)
            .and_then(|a| a.stop_reason.clone());
        match (&self.error, stopped) {
            (Some(_), _) => Ending::Error,
            (None, Some(reason)) => reason,
            (None, None) if self.exit_code != 0 => Ending::Error,
            (None, None) if self.apps.is_empty() => Ending::NothingToDo,
            (None, None) => Ending::Done,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a summary always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::details::{ArchiveApp, Backlog, PurgeApp};
    use super::*;
    use crate::model::batch::Superseded;
    use crate::pipeline::failure::Kind;
    use serde_json::json;

    fn superseded(id: &str) -> Superseded {
        Superseded {
            event_id: id.into(),
            updated_at_ms: 1,
            batch_id: "b".into(),
            fingerprint: None,
        }
    }

    #[test]
    fn attempts_add_up() {
        let mut first = AppReport::new("a1", Outcome::Failed);
        first.rows = 20;
        first.batches = 2;
        first.failure = Some(Kind::Transient);
        first.cursor_before = Some(Cursor {
            updated_at_ms: 1,
            event_id: "e1".into(),
        });
        first.replaced_objects = vec!["k1".into()];
        let mut archived = ArchiveApp::default();
        archived.note_superseded(vec![superseded("x")]);
        first.details = Some(AppDetails::Archive(archived));
        let mut second = AppReport::new("a1", Outcome::Archived);
        second.rows = 5;
        second.batches = 1;
        second.cursor_before = Some(Cursor {
            updated_at_ms: 9,
            event_id: "e9".into(),
        });
        second.replaced_objects = vec!["k2".into()];
        let mut archived = ArchiveApp {
            backlog: Some(Backlog {
                backlog_rows: 0,
                oldest_backlog_age_ms: None,
            }),
            ..ArchiveApp::default()
        };
        archived.note_superseded(vec![superseded("y")]);
        second.details = Some(AppDetails::Archive(archived));
        let both = first.then(second);
        assert_eq!(
            (both.rows, both.batches, both.outcome),
            (25, 3, Outcome::Archived)
        );
        assert_eq!(both.failure, None, "the last attempt decides");
        assert_eq!(both.cursor_before.unwrap().event_id, "e1");
        assert_eq!(both.replaced_objects, vec!["k1", "k2"]);
        let json = serde_json::to_value(both.details.unwrap()).unwrap();
        assert_eq!(
            json,
            json!({"backlog_rows": 0, "oldest_backlog_age_ms": null, "superseded_rows": 2,
                   "superseded": [{"event_id": "x", "updated_at_ms": 1, "batch_id": "b"},
                                  {"event_id": "y", "updated_at_ms": 1, "batch_id": "b"}]})
        );
    }

    #[test]
    fn purge_attempts_add_up_and_dry_runs_stay_apart() {
        let first = AppDetails::Purge(PurgeApp {
            purged_rows: 7,
            kept_changed: vec!["x".into()],
            ..PurgeApp::default()
        });
        let second = AppDetails::Purge(PurgeApp {
            purged_rows: 3,
            kept_changed: vec!["y".into()],
            restored_batches_left: Some(1),
            ..PurgeApp::default()
        });
        let json = serde_json::to_value(first.then(second)).unwrap();
        assert_eq!(
            json,
            json!({"purged_rows": 10, "kept_changed": ["x", "y"], "failed_batches": [],
                   "findings": [], "restored_batches_left": 1, "in_grace_rows": 0})
        );
    }

    /// A retried purge attempt keeps the batches the first one found waiting for the log.
    #[test]
    fn purge_attempts_keep_every_batch_waiting_for_the_log() {
        let attempt = |batch: &str| {
            AppDetails::Purge(PurgeApp {
                waiting_for_log: vec![batch.into()],
                ..PurgeApp::default()
            })
        };
        let json = serde_json::to_value(attempt("a").then(attempt("b"))).unwrap();
        assert_eq!(json["waiting_for_log"], json!(["a", "b"]));
    }
}
