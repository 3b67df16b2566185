//! `relocate` on the command line: its arguments, its words in help, and what they make of it.

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::{Runs, Subcommand};
use crate::cli::args::{Common, S3Args, StopArgs};
use crate::cli::help::{Help, ENDPOINT};
use crate::cli::options::{Connect, Groups};
use crate::cli::Opens;
use crate::model::command::CommandName;
use crate::pipeline::report::Summary;
use crate::pipeline::{DbContext, RunContext};
use crate::store;
use crate::store::Location;

#[derive(Debug, Args)]
pub(crate) struct RelocateArgs {
    /// The archive's new home: s3://bucket/prefix or file:///path, the same prefix as now.
    #[arg(long, value_name = "URL")]
    pub to: String,
    /// Why it moves, kept with the move (history and doctor show it).
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    /// Batches re-read at the new home at once (every batch is read there in full before the
    /// home moves: the cost of one full verify).
    #[arg(long, env = "OUTBOX_ARCHIVER_PARALLEL", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub parallel: u32,
    #[command(flatten)]
    pub s3: S3Args,
    #[command(flatten)]
    pub stops: StopArgs,
}

impl Subcommand for RelocateArgs {
    const HELP: Help = Help {
        name: CommandName::Relocate,
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

    fn groups(&self) -> Groups<'_> {
        Groups {
            s3: Some(&self.s3),
            stops: Some(&self.stops),
            ..Groups::default()
        }
    }

    fn needs_store(&self) -> bool {
        false
    }

    fn problems(&self, _common: &Common) -> Vec<String> {
        Location::parse(&self.to)
            .err()
            .map(|e| e.replace("--store", "--to"))
            .into_iter()
            .collect()
    }
}

#[async_trait::async_trait]
impl Runs for RelocateArgs {
    /// `relocate` opens the database and the archive's new home (`--to`), not `--store`: the old
    /// home need not be reachable, and the new one is checked by the move itself.
    async fn run(
        self,
        common: &Common,
        connect: &Connect,
        _: i64,
        shutdown: CancellationToken,
    ) -> Summary {
        let name = CommandName::Relocate;
        let location = match Location::parse(&self.to) {
            Ok(location) => location,
            Err(e) => return Summary::unusable(name, e.replace("--store", "--to")),
        };
        let base = match <DbContext as Opens>::open(common, connect, None, false, shutdown).await {
            Ok(base) => base,
            Err(e) => return Summary::unusable(name, e),
        };
        let opened = async {
            let store = store::open(location, &connect.s3)
                .await
                .map_err(|e| e.to_string())?;
            store
                .confirm_access()
                .await
                .map_err(|e| format!("{e} (--to {})", store.location()))?;
            Ok::<_, String>(store)
        };
        let summary = match opened.await {
            Ok(store) => {
                // `--sentinel` stops the re-read before the next batch (nothing moves).
                let stops = crate::pipeline::Stops {
                    sentinel: connect.sentinel.clone(),
                    replicas: None,
                };
                let ctx =
                    RunContext::new(base.spec, base.db.clone(), store, base.shutdown, base.clock)
                        .with_stops(stops);
                let options = crate::pipeline::relocate::RelocateOptions {
                    reason: self.reason.clone(),
                    parallel: self.parallel as usize,
                    failpoints: crate::cli::options::failpoints_from_env(),
                };
                // A progress line (a terminal) or log lines (`--progress-every`) while every batch
                // is re-read at the new home: a large archive's move takes a while.
                let progress = crate::output::progress::Progress::new(name);
                crate::pipeline::relocate::run(&ctx, &options, &progress).await
            }
            Err(e) => Summary::unusable(name, e),
        };
        base.db.close().await;
        summary
    }
}
