//! Prometheus metrics of a finished run, from its summary: pushed to a Pushgateway
//! (`--metrics-pushgateway`) and/or written as a node_exporter textfile (`--metrics-textfile`).
//!
//! Everything is a gauge describing the last run. Per app (labels `command`, `table`, `app`): rows,
//! batches, bytes written, whether it went well, and `last_success_timestamp_seconds`, which
//! survives a failed run — the Pushgateway groups per app are pushed with POST, which replaces
//! only the metrics pushed; the textfile carries the previous value over. Per run (labels
//! `command`, `table`, and `shard` when sharded): ok, exit code, duration, end time, verify
//! findings, and the S3 requests' attempts and failures by kind. `archive` and `status` add backlog
//! figures.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use crate::model::redact;
use crate::pipeline::report::details::Figures;
use crate::pipeline::report::{AppReport, Outcome, Summary};
use crate::store::StoreStats;

/// Where metrics go; both may be set.
#[derive(Debug, Clone, Default)]
pub(crate) struct MetricsTarget {
    /// The Pushgateway's base URL, e.g. `http://pushgateway.monitoring:9091`.
    pub pushgateway: Option<String>,
    /// A `.prom` file for node_exporter's textfile collector, replaced atomically.
    pub textfile: Option<PathBuf>,
}

impl MetricsTarget {
    pub(crate) fn is_empty(&self) -> bool {
        self.pushgateway.is_none() && self.textfile.is_none()
    }
}

/// The job label every push uses.
const JOB: &str = "outbox_archiver";

/// One run as metrics see it.
pub(crate) struct Run<'a> {
    pub summary: &'a Summary,
    pub table: &'a str,
    pub shard: Option<String>,
    pub finished_at_ms: i64,
    pub duration: Duration,
}

/// Metrics that share labels: what one Pushgateway push carries.
#[derive(Debug, Clone, PartialEq)]
struct Group {
    pub labels: Vec<(&'static str, String)>,
    pub samples: Vec<Sample>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub name: &'static str,
    pub help: &'static str,
    /// Labels beyond the group's (e.g. `kind`).
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

fn sample(name: &'static str, help: &'static str, value: f64) -> Sample {
    Sample {
        name,
        help,
        labels: Vec::new(),
        value,
    }
}

const LAST_SUCCESS: &str = "outbox_archiver_last_success_timestamp_seconds";
const LAST_SUCCESS_HELP: &str = "When the command last succeeded for the app (Unix time).";

/// Whether an app's outcome counts as a success: it did its work, or had none, or stopped on a
/// limit with its progress recorded. An app skipped because another process held its lock is
/// not this run's success (that process reports its own).
fn succeeded(app: &AppReport) -> bool {
    matches!(
        app.outcome,
        Outcome::Archived | Outcome::Planned | Outcome::UpToDate | Outcome::Done | Outcome::Stopped
    )
}

/// The run's metrics: one group for the run, one per app.
fn groups(run: &Run) -> Vec<Group> {
    let summary = run.summary;
    let seconds = run.finished_at_ms as f64 / 1000.0;
    let mut base = vec![
        ("command", summary.command.to_string()),
        ("table", run.table.to_string()),
    ];
    let mut run_labels = base.clone();
    if let Some(shard) = &run.shard {
        run_labels.push(("shard", shard.replace('/', "_of_")));
    }
    let mut samples = run_samples(run, seconds);
    if let Some(store) = &summary.store_requests {
        samples.extend(store_samples(store));
    }
    let mut groups = vec![Group {
        labels: run_labels,
        samples,
    }];
    for app in &summary.apps {
        base.truncate(2);
        base.push(("app", app.app_code.clone()));
        groups.push(Group {
            labels: base.clone(),
            samples: app_samples(app, seconds),
        });
    }
    groups
}

/// The run's own samples: outcome, exit status, timing and verify's findings.
fn run_samples(run: &Run, seconds: f64) -> Vec<Sample> {
    let summary = run.summary;
    let mut samples = vec![
        sample(
            "outbox_archiver_run_ok",
            "1 if the last run succeeded, 0 if it failed or could not start.",
            f64::from(u8::from(summary.ok)),
        ),
        sample(
            "outbox_archiver_run_exit_code",
            "Exit status of the last run (0 done, 1 failed or found problems, 2 could not start: configuration, or the apps could not be listed).",
            f64::from(summary.exit_code),
        ),
        sample(
            "outbox_archiver_run_duration_seconds",
            "How long the last run took.",
            run.duration.as_secs_f64(),
        ),
        sample(
            "outbox_archiver_run_timestamp_seconds",
            "When the last run ended (Unix time).",
            seconds,
        ),
    ];
    if summary.ok {
        samples.push(sample(
            "outbox_archiver_run_last_success_timestamp_seconds",
            "When a run last ended successfully (Unix time).",
            seconds,
        ));
    }
    if let Some(crate::pipeline::report::RunDetails::Verify(verify)) = &summary.details {
        let findings = &verify.findings;
        samples.push(sample(
            "outbox_archiver_verify_findings",
            "Problems the last verify found (missing or damaged objects, member mismatches, stragglers).",
            findings.len() as f64,
        ));
        samples.push(sample(
            "outbox_archiver_verify_pending_thaw_objects",
            "Objects the last verify could check by metadata only, because their storage class (GLACIER, DEEP_ARCHIVE) cannot be read until restored; with --thaw it asked for them.",
            verify.pending_thaw.len() as f64,
        ));
    }
    if let Some(crate::pipeline::report::RunDetails::Doctor(doctor)) = &summary.details {
        use crate::pipeline::doctor::Status;
        for (status, name) in [(Status::Problem, "problem"), (Status::Warning, "warning")] {
            samples.push(Sample {
                labels: vec![("status", name.to_string())],
                ..sample(
                    "outbox_archiver_doctor_checks",
                    "Lines of the last doctor run by verdict.",
                    doctor.checks.iter().filter(|c| c.status == status).count() as f64,
                )
            });
        }
    }
    samples
}

/// S3 request counters: attempts, transient failures by kind, resumed reads.
fn store_samples(store: &StoreStats) -> Vec<Sample> {
    let mut samples = Vec::new();
    samples.push(sample(
        "outbox_archiver_store_attempts",
        "S3 request attempts in the last run, retries included.",
        store.attempts as f64,
    ));
    for (kind, value) in [
        ("server_error", store.server_errors),
        ("timeout", store.timeouts),
        ("connection_error", store.connection_errors),
    ] {
        samples.push(Sample {
            labels: vec![("kind", kind.to_string())],
            ..sample(
                "outbox_archiver_store_failed_attempts",
                "S3 request attempts that failed transiently in the last run (and were retried while attempts remained).",
                value as f64,
            )
        });
    }
    samples.push(sample(
        "outbox_archiver_store_resumed_reads",
        "S3 downloads that broke off and were resumed in the last run.",
        store.resumed_reads as f64,
    ));
    samples
}

fn app_samples(app: &AppReport, seconds: f64) -> Vec<Sample> {
    let mut samples = vec![
        sample(
            "outbox_archiver_app_ok",
            "1 if the app's part of the last run went well (or was skipped because another run held its lock), 0 if it failed or was refused.",
            f64::from(u8::from(!app.outcome.is_failure())),
        ),
        sample(
            "outbox_archiver_rows",
            "Rows the last run archived, purged, verified or restored for the app.",
            app.rows as f64,
        ),
        sample(
            "outbox_archiver_batches",
            "Batches the last run handled for the app.",
            app.batches as f64,
        ),
        sample(
            "outbox_archiver_bytes",
            "Compressed bytes the last run wrote for the app.",
            app.batch_list
                .iter()
                .map(|b| b.compressed_bytes as f64)
                .sum(),
        ),
    ];
    if succeeded(app) {
        samples.push(sample(LAST_SUCCESS, LAST_SUCCESS_HELP, seconds));
    }
    if let Some(details) = &app.details {
        samples.extend(figure_samples(&details.figures()));
    }
    samples
}

/// Where the app stands, as far as its command reports it: its backlog, what awaits purge, its
/// cursor's age, rows left locked, time spent waiting for replicas. A figure that is there but
/// null (no backlog, so no oldest row) is exported as 0: left out, the Pushgateway would keep
/// serving the previous run's value to the alert.
fn figure_samples(figures: &Figures) -> Vec<Sample> {
    let mut samples = Vec::new();
    let present = |figure: Option<i64>| figure.map(|v| v as f64);
    let or_zero = |figure: Option<Option<i64>>| figure.map(|v| v.unwrap_or(0) as f64);
    for (value, name, help, scale) in [
        (
            present(figures.backlog_rows),
            "outbox_archiver_backlog_rows",
            "Delivered rows below the cutoff not yet archived (after an archive run, or from status).",
            1.0,
        ),
        (
            or_zero(figures.oldest_backlog_age_ms),
            "outbox_archiver_oldest_backlog_age_seconds",
            "Age of the oldest delivered row below the cutoff not yet archived (after an archive run, or from status).",
            1000.0,
        ),
        (
            present(figures.awaiting_purge_rows),
            "outbox_archiver_awaiting_purge_rows",
            "Archived rows not yet purged from the source table (status).",
            1.0,
        ),
        (
            or_zero(figures.cursor_age_ms),
            "outbox_archiver_cursor_age_seconds",
            "Age of the newest archived row (status).",
            1000.0,
        ),
        (
            figures.left_locked_rows.map(|n| n as f64),
            "outbox_archiver_purge_left_locked_rows",
            "Rows the last purge skipped because another transaction held them (their batches stay unfinished; the next purge takes them).",
            1.0,
        ),
        (
            figures.replica_wait_ms.map(|ms| ms as f64),
            "outbox_archiver_replica_wait_seconds",
            "Time the last archive or purge run's writes waited for lagging replicas (--replica).",
            1000.0,
        ),
    ] {
        if let Some(value) = value {
            samples.push(sample(name, help, value / scale));
        }
    }
    samples
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn format_value(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

/// One metric's lines in the text exposition format, under one HELP and TYPE.
struct Family {
    name: &'static str,
    help: &'static str,
    lines: Vec<String>,
}

/// Groups `samples`, each with `labels` first, into families in order of first appearance.
fn families<'a>(
    samples: impl IntoIterator<Item = (&'a [(&'static str, String)], &'a Sample)>,
) -> Vec<Family> {
    let mut families: Vec<Family> = Vec::new();
    for (labels, s) in samples {
        let all: Vec<String> = labels
            .iter()
            .chain(&s.labels)
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect();
        let line = if all.is_empty() {
            format!("{} {}", s.name, format_value(s.value))
        } else {
            format!("{}{{{}}} {}", s.name, all.join(","), format_value(s.value))
        };
        match families.iter_mut().find(|f| f.name == s.name) {
            Some(family) => family.lines.push(line),
            None => families.push(Family {
                name: s.name,
                help: s.help,
                lines: vec![line],
            }),
        }
    }
    families
}

fn format_families(families: &[Family]) -> String {
    let mut out = String::new();
    for Family { name, help, lines } in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// The text exposition format of `samples`, each with `labels` first; HELP and TYPE once per name.
pub(crate) fn render<'a>(
    samples: impl IntoIterator<Item = (&'a [(&'static str, String)], &'a Sample)>,
) -> String {
    format_families(&families(samples))
}

/// Sends the run's metrics where `target` says. Returns what went wrong, in the operator's
/// words; a metrics failure never changes what the run did.
pub(crate) async fn publish(target: &MetricsTarget, run: &Run<'_>) -> Vec<String> {
    let groups = groups(run);
    let mut errors = Vec::new();
    if let Some(gateway) = &target.pushgateway {
        let client = match http_client() {
            Ok(client) => client,
            Err(e) => return vec![format!("pushing metrics: {e}")],
        };
        for (i, group) in groups.iter().enumerate() {
            // The run group is replaced whole; app groups keep a last success a failed run omits.
            let method = if i == 0 {
                hyper::Method::PUT
            } else {
                hyper::Method::POST
            };
            if let Err(e) = push(&client, gateway, method, group).await {
                errors.push(format!(
                    "pushing metrics to --metrics-pushgateway {}: {e}",
                    redact::url(gateway)
                ));
                break;
            }
        }
    }
    if let Some(path) = &target.textfile {
        if let Err(e) = write_textfile(path, &groups) {
            errors.push(format!(
                "writing --metrics-textfile {}: {e}",
                path.display()
            ));
        }
    }
    errors
}

/// The Pushgateway path of a group: `/metrics/job/outbox_archiver/<label>@base64/<value>…`
/// (base64url, so any app code or table name is safe in a path).
fn group_path(labels: &[(&'static str, String)]) -> String {
    let mut path = format!("/metrics/job/{JOB}");
    for (k, v) in labels {
        let encoded = if v.is_empty() {
            "=".to_string()
        } else {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v)
        };
        let _ = write!(path, "/{k}@base64/{encoded}");
    }
    path
}

type HttpClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

/// An HTTP(S) client with the system's root certificates.
fn http_client() -> Result<HttpClient, String> {
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| format!("no TLS root certificates: {e}"))?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(connector),
    )
}

async fn push(
    client: &HttpClient,
    gateway: &str,
    method: hyper::Method,
    group: &Group,
) -> Result<(), String> {
    let url = format!(
        "{}{}",
        gateway.trim_end_matches('/'),
        group_path(&group.labels)
    );
    let body = render(group.samples.iter().map(|s| (&[][..], s)));
    let request = hyper::Request::builder()
        .method(method)
        .uri(&url)
        .header("content-type", "text/plain; version=0.0.4")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("invalid URL: {e}"))?;
    let response = tokio::time::timeout(Duration::from_secs(15), client.request(request))
        .await
        .map_err(|_| "no answer within 15 s".to_string())?
        .map_err(|e| format!("{e}"))?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let text = response
        .into_body()
        .collect()
        .await
        .map(|b| String::from_utf8_lossy(&b.to_bytes()).trim().to_string())
        .unwrap_or_default();
    Err(format!(
        "HTTP {status}: {}",
        text.chars().take(300).collect::<String>()
    ))
}

/// Writes every group to `path` atomically (a temporary file renamed over it), carrying over the
/// last-success lines of apps this run did not succeed for.
fn write_textfile(path: &Path, groups: &[Group]) -> std::io::Result<()> {
    let mut families = families(
        groups
            .iter()
            .flat_map(|g| g.samples.iter().map(move |s| (g.labels.as_slice(), s))),
    );
    if let Ok(previous) = std::fs::read_to_string(path) {
        let series = |line: &str| line.split_once('}').map(|(series, _)| series.to_string());
        let at = match families.iter().position(|f| f.name == LAST_SUCCESS) {
            Some(at) => at,
            None => {
                families.push(Family {
                    name: LAST_SUCCESS,
                    help: LAST_SUCCESS_HELP,
                    lines: Vec::new(),
                });
                families.len() - 1
            }
        };
        let fresh: Vec<String> = families[at]
            .lines
            .iter()
            .filter_map(|l| series(l))
            .collect();
        let prefix = format!("{LAST_SUCCESS}{{");
        families[at].lines.extend(
            previous
                .lines()
                .filter(|l| l.starts_with(&prefix))
                .filter(|l| series(l).is_some_and(|s| !fresh.contains(&s)))
                .map(str::to_string),
        );
    }
    let text = format_families(&families);
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::report::{AppReport, Outcome, Summary};

    fn run_of(summary: &Summary) -> Run<'_> {
        Run {
            summary,
            table: "wallet_outbox",
            shard: Some("1/4".into()),
            finished_at_ms: 1_767_225_600_500,
            duration: Duration::from_millis(2_250),
        }
    }

    fn summary() -> Summary {
        let mut ok = AppReport::new("a1", Outcome::Archived);
        ok.rows = 10;
        ok.batches = 2;
        let failed = AppReport::new("a\"2", Outcome::Failed);
        let mut summary = Summary::new(crate::model::command::CommandName::Archive);
        summary.apps = vec![ok, failed];
        summary.settle()
    }

    #[test]
    fn renders_the_exposition_format() {
        let summary = summary();
        let groups = groups(&run_of(&summary));
        let text = render(
            groups
                .iter()
                .flat_map(|g| g.samples.iter().map(move |s| (g.labels.as_slice(), s))),
        );
        for line in [
            "# TYPE outbox_archiver_run_ok gauge",
            r#"outbox_archiver_run_ok{command="archive",table="wallet_outbox",shard="1_of_4"} 0"#,
            r#"outbox_archiver_run_exit_code{command="archive",table="wallet_outbox",shard="1_of_4"} 1"#,
            r#"outbox_archiver_run_duration_seconds{command="archive",table="wallet_outbox",shard="1_of_4"} 2.25"#,
            r#"outbox_archiver_run_timestamp_seconds{command="archive",table="wallet_outbox",shard="1_of_4"} 1767225600.5"#,
            r#"outbox_archiver_rows{command="archive",table="wallet_outbox",app="a1"} 10"#,
            r#"outbox_archiver_app_ok{command="archive",table="wallet_outbox",app="a\"2"} 0"#,
            r#"outbox_archiver_last_success_timestamp_seconds{command="archive",table="wallet_outbox",app="a1"} 1767225600.5"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n---\n{text}");
        }
        assert!(!text.contains(
            r#"last_success_timestamp_seconds{command="archive",table="wallet_outbox",app="a\"2"}"#
        ));
        assert!(
            !text.contains("run_last_success"),
            "a failed run is no success"
        );
        assert_eq!(text.matches("# TYPE outbox_archiver_rows gauge").count(), 1);
    }

    #[test]
    fn group_paths_are_base64url() {
        assert_eq!(
            group_path(&[("command", "archive".into()), ("app", "a/b".into())]),
            "/metrics/job/outbox_archiver/command@base64/YXJjaGl2ZQ/app@base64/YS9i"
        );
    }

    #[test]
    fn the_textfile_keeps_a_last_success_a_failed_run_omits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("outbox.prom");
        let mut first = summary();
        first.apps[1].outcome = Outcome::Archived;
        write_textfile(&path, &groups(&run_of(&first))).unwrap();
        let second = summary();
        let mut later = run_of(&second);
        later.finished_at_ms += 60_000;
        write_textfile(&path, &groups(&later)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(r#"app="a1"} 1767225660.5"#), "{text}");
        assert!(text.contains(r#"app="a\"2"} 1767225600.5"#), "{text}");
        assert_eq!(
            text.matches(&format!("# TYPE {LAST_SUCCESS} gauge"))
                .count(),
            1
        );
    }
}
