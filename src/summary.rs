//! The one JSON object every command prints on stdout when it ends (SPEC §6), and the exit status
//! it implies: 0 done, 1 something failed (or was refused, or found), 2 bad usage or configuration.

use std::sync::OnceLock;

use serde::Serialize;

use crate::format::Cursor;

/// How one app's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Archived,
    UpToDate,
    Done,
    SkippedLocked,
    Refused,
    Failed,
    Stopped,
}

impl Outcome {
    pub fn is_failure(self) -> bool {
        matches!(self, Outcome::Refused | Outcome::Failed)
    }
}

/// One batch as the summary lists it.
#[derive(Debug, Clone, Serialize)]
pub struct BatchReport {
    pub batch_id: String,
    pub rows: u64,
    pub first_cursor: Cursor,
    pub last_cursor: Cursor,
    pub data_object_key: String,
    pub uncompressed_bytes: u64,
    pub compressed_bytes: u64,
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
    pub stop_reason: Option<String>,
    /// Times the app was tried again after a transient database error.
    #[serde(skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// The failure was transient (a restart, a failover, a killed connection): worth a retry.
    #[serde(skip)]
    pub transient: bool,
    /// The failure was the app's lock found lost before a commit.
    #[serde(skip)]
    pub lost_lock: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub batch_list: Vec<BatchReport>,
    /// Command-specific fields (status figures, verify counts), flattened into the app object.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Map<String, serde_json::Value>>,
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
        if let (Some(before), Some(after)) = (self.details, next.details.as_mut()) {
            for (key, value) in before {
                match (after.get_mut(&key), value) {
                    (Some(serde_json::Value::Number(a)), serde_json::Value::Number(b)) => {
                        if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
                            *a = (x + y).into();
                        }
                    }
                    (Some(serde_json::Value::Array(a)), serde_json::Value::Array(mut b)) => {
                        b.append(a);
                        *a = b;
                    }
                    (None, value) => {
                        after.insert(key, value);
                    }
                    _ => {}
                }
            }
        }
        next
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
            transient: false,
            lost_lock: false,
            batch_list: Vec::new(),
            details: None,
        }
    }
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
pub fn app_span(app: &str) -> tracing::Span {
    tracing::info_span!("app", run_id = run_id(), app)
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub command: &'static str,
    pub run_id: &'static str,
    pub ok: bool,
    /// Why the command could not run at all (configuration, connectivity); null otherwise.
    pub error: Option<String>,
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
    /// Command-specific fields (verify: checked_batches, findings, orphans, sample seed).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(skip)]
    pub exit_code: i32,
    /// A human rendering printed instead of the JSON (`status --format table`).
    #[serde(skip)]
    pub text: Option<String>,
}

impl Summary {
    pub fn new(command: &'static str) -> Summary {
        Summary {
            command,
            run_id: run_id(),
            ok: true,
            error: None,
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
            text: None,
        }
    }

    /// A command that could not start: exit status 2.
    pub fn unusable(command: &'static str, error: String) -> Summary {
        let mut s = Summary::new(command);
        s.error = Some(error);
        s.exit_code = 2;
        s.ok = false;
        s
    }

    /// Sets `ok` and the exit status from the apps' outcomes.
    pub fn settle(mut self) -> Summary {
        if self.exit_code == 0
            && (self.error.is_some() || self.apps.iter().any(|a| a.outcome.is_failure()))
        {
            self.exit_code = 1;
        }
        self.ok = self.exit_code == 0;
        self
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a summary always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn details(value: serde_json::Value) -> Option<serde_json::Map<String, serde_json::Value>> {
        value.as_object().cloned()
    }

    #[test]
    fn attempts_add_up() {
        let mut first = AppReport::new("a1", Outcome::Failed);
        first.rows = 20;
        first.batches = 2;
        first.transient = true;
        first.cursor_before = Some(Cursor {
            updated_at_ms: 1,
            event_id: "e1".into(),
        });
        first.replaced_objects = vec!["k1".into()];
        first.details = details(json!({"purged_rows": 7, "kept_changed": ["x"], "first_only": 1}));
        let mut second = AppReport::new("a1", Outcome::Archived);
        second.rows = 5;
        second.batches = 1;
        second.cursor_before = Some(Cursor {
            updated_at_ms: 9,
            event_id: "e9".into(),
        });
        second.replaced_objects = vec!["k2".into()];
        second.details =
            details(json!({"purged_rows": 3, "kept_changed": ["y"], "backlog_rows": 0}));
        let both = first.then(second);
        assert_eq!(
            (both.rows, both.batches, both.outcome),
            (25, 3, Outcome::Archived)
        );
        assert!(!both.transient, "the last attempt decides");
        assert_eq!(both.cursor_before.unwrap().event_id, "e1");
        assert_eq!(both.replaced_objects, vec!["k1", "k2"]);
        assert_eq!(
            serde_json::Value::Object(both.details.unwrap()),
            json!({"purged_rows": 10, "kept_changed": ["x", "y"], "backlog_rows": 0, "first_only": 1})
        );
    }
}
