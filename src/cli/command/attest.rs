//! `attest` on the command line: its arguments, its words in help, and what they make of it.

use clap::Args;

use super::Subcommand;
use crate::cli::args::{AnyAppArgs, Common, FormatArg, LogSigningArgs, MetricsArgs, S3Args};
use crate::cli::help::{Help, APP, ENDPOINT, VERIFIER};
use crate::cli::options::{Groups, IntoOptions};
use crate::cli::parse::parse_day;
use crate::model::command::CommandName;
use crate::pipeline::attest;

#[derive(Debug, Args)]
pub(crate) struct AttestArgs {
    #[command(flatten)]
    pub apps: AnyAppArgs,
    /// The period's first UTC day: 2026-11-01 (or RFC 3339 / epoch ms of its midnight, UTC).
    #[arg(long, value_name = "DAY", value_parser = parse_day)]
    pub from: i64,
    /// The period's last UTC day, included: 2026-11-30 (or RFC 3339 / epoch ms of its midnight).
    /// It must be over: a day still being archived would be stated otherwise tomorrow.
    #[arg(long, value_name = "DAY", value_parser = parse_day)]
    pub to: i64,
    /// The previous statement (a file attest printed before): each app's log must have grown
    /// from the checkpoint it saw — a smaller or other tree is log_rollback, not attested —
    /// and this statement carries the consistency proof from it, which
    /// `deploy/verify-log.go -previous` checks.
    #[arg(long, value_name = "FILE")]
    pub previous: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub s3: S3Args,
    #[command(flatten)]
    pub log_keys: LogSigningArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

/// The statement is printed as `--format` asks ([`Common::output_format`]): canonical JSON or
/// CSV; a table is not a statement.
impl IntoOptions for AttestArgs {
    type Options = attest::AttestOptions;
    fn into_options(self, common: &Common, _: i64) -> Result<attest::AttestOptions, String> {
        if common.log.format == Some(FormatArg::Table) && !common.log.format_from_environment {
            return Err("attest prints the auditor's statement: --format json (the default, canonical) or csv, not table".into());
        }
        Ok(attest::AttestOptions {
            apps: self.apps.apps(),
            from: crate::model::timespec::utc_date(self.from),
            to: crate::model::timespec::utc_date(self.to),
            previous: self.previous,
        })
    }
}

impl Subcommand for AttestArgs {
    const HELP: Help = Help {
        name: CommandName::Attest,
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

    fn groups(&self) -> Groups<'_> {
        Groups {
            s3: Some(&self.s3),
            log_keys: Some(&self.log_keys),
            metrics: Some(&self.metrics),
            ..Groups::default()
        }
    }
}
