//! What a run shows the world, read from its typed report ([`crate::pipeline::report`]) — every
//! table, summary and document a command prints is drawn here: the short summary for a terminal ([`text`]),
//! the tables of `status`, `history` and `doctor` ([`tables`]), the auditor's statement as
//! canonical JSON or CSV ([`statement`]), the progress lines and log writer ([`progress`]),
//! and the Prometheus metrics ([`metrics`]). Nothing here decides anything about the archive.

pub(crate) mod metrics;
pub(crate) mod progress;
pub(crate) mod statement;
pub(crate) mod tables;
pub(crate) mod text;

use std::time::Duration;

use crate::model::command::CommandName;
use crate::pipeline::report::{Document, RunDetails, Summary};

/// How a run's end is printed: `--format`, or what the terminal implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// For a person: the command's table, or the summary in a few lines.
    Table,
    /// For a program: the JSON summary (a statement: its canonical JSON).
    Json,
    /// `attest`'s statement as CSV.
    Csv,
}

/// What `summary` prints on stdout in `format`: a document where the command made one (the
/// statement, the record schema, a verifier key), else the command's table or the short
/// summary for a person, or the JSON summary. `elapsed` is how long the command took, `now_ms`
/// the instant ages are counted to.
pub fn render(summary: &Summary, format: Format, elapsed: Duration, now_ms: i64) -> String {
    match (&summary.document, format) {
        (Some(Document::Statement(s)), Format::Csv) => statement::csv(s),
        (Some(Document::Statement(s)), _) => statement::json(s),
        (Some(Document::Text(text)), _) => text.clone(),
        (None, Format::Table) => match (&summary.details, summary.command) {
            (Some(RunDetails::History(run)), _) => tables::history(&run.runs, now_ms),
            (Some(RunDetails::Doctor(run)), _) => tables::doctor(run),
            (Some(RunDetails::LogKey(run)), _) => format!("{}\n", run.verifier),
            (_, CommandName::Status) if summary.error.is_none() => {
                tables::status(&summary.apps, now_ms)
            }
            _ => text::render(summary, elapsed),
        },
        (None, _) => format!("{}\n", summary.to_json()),
    }
}
