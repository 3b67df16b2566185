//! `verify` on the command line: its arguments, its words in help, and what they make of it.

use clap::Args;

use super::Subcommand;
use crate::cli::args::{
    BatchScopeArgs, Common, CutoffArgs, LogSigningArgs, MetricsArgs, S3Args, SourceArgs, StopArgs,
    ThawArgs,
};
use crate::cli::help::{Help, APP, BATCH, ENDPOINT, FROM, TO, VERIFIER};
use crate::cli::options::{failpoints_from_env, Groups, IntoOptions};
use crate::cli::parse::parse_percent;
use crate::model::command::CommandName;
use crate::pipeline::verify;

#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    pub scope: BatchScopeArgs,
    /// Check a random sample of about this percent of the batches in scope.
    #[arg(long, env = "OUTBOX_ARCHIVER_SAMPLE_PERCENT", value_parser = parse_percent)]
    pub sample_percent: Option<f64>,
    /// Seed of the sample, to repeat it [default: chosen and printed]
    #[arg(long, env = "OUTBOX_ARCHIVER_SEED")]
    pub seed: Option<u64>,
    /// HEAD only: existence, sizes, store checksums and member counts; no download.
    #[arg(long, env = "OUTBOX_ARCHIVER_METADATA_ONLY")]
    pub metadata_only: bool,
    /// Batches checked at once.
    #[arg(long, env = "OUTBOX_ARCHIVER_PARALLEL", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub parallel: u32,
    /// List at most this many stragglers per app.
    #[arg(long, env = "OUTBOX_ARCHIVER_MAX_STRAGGLERS", default_value_t = 1000)]
    pub max_stragglers: usize,
    #[command(flatten)]
    pub cutoff: CutoffArgs,
    #[command(flatten)]
    pub thaw: ThawArgs,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub s3: S3Args,
    #[command(flatten)]
    pub stops: StopArgs,
    #[command(flatten)]
    pub log_keys: LogSigningArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

impl IntoOptions for VerifyArgs {
    type Options = verify::VerifyOptions;
    fn into_options(self, common: &Common, now_ms: i64) -> Result<verify::VerifyOptions, String> {
        Ok(verify::VerifyOptions {
            selection: self.scope.selection(),
            sample_percent: self.sample_percent,
            seed: self.seed.unwrap_or(now_ms as u64),
            metadata_only: self.metadata_only,
            parallel: self.parallel as usize,
            cutoff_ms: self.cutoff.cutoff_ms(now_ms),
            delivered_status: common.delivered_status(&self.source),
            max_stragglers: self.max_stragglers,
            thaw: self.thaw.thaw(),
            failpoints: failpoints_from_env(),
        })
    }
}

impl Subcommand for VerifyArgs {
    const HELP: Help = Help {
        name: CommandName::Verify,
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

    fn groups(&self) -> Groups<'_> {
        Groups {
            s3: Some(&self.s3),
            stops: Some(&self.stops),
            log_keys: Some(&self.log_keys),
            metrics: Some(&self.metrics),
            ..Groups::default()
        }
    }
}
