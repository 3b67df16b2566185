//! `recover` on the command line: its arguments, its words in help, and what they make of it.

use clap::Args;

use super::Subcommand;
use crate::cli::args::{AppArgs, Common, LockArgs, RetryArgs, S3Args};
use crate::cli::help::{Help, APP, ENDPOINT};
use crate::cli::options::{failpoints_from_env, Groups, IntoOptions};
use crate::model::command::CommandName;
use crate::pipeline::recover;

#[derive(Debug, Args)]
pub(crate) struct RecoverArgs {
    #[command(flatten)]
    pub apps: AppArgs,
    /// Why the database is carried on from the store (the backup it was restored from, the
    /// incident): kept with the run and, write-once, in the store beside the app's log.
    #[arg(long, value_name = "TEXT", env = "OUTBOX_ARCHIVER_RECOVER_REASON")]
    pub reason: String,
    #[command(flatten)]
    pub lock: LockArgs,
    #[command(flatten)]
    pub retry: RetryArgs,
    #[command(flatten)]
    pub s3: S3Args,
}

impl IntoOptions for RecoverArgs {
    type Options = recover::RecoverOptions;
    fn into_options(self, _: &Common, _: i64) -> Result<recover::RecoverOptions, String> {
        Ok(recover::RecoverOptions {
            apps: self.apps.apps()?,
            reason: self.reason,
            lock_prefix: self.lock.lock_prefix.clone(),
            db_retries: self.retry.db_retries,
            failpoints: failpoints_from_env(),
        })
    }
}

impl Subcommand for RecoverArgs {
    const HELP: Help = Help {
        name: CommandName::Recover,
        about: "Carry a database restored from a backup on from the store's log",
        shown: &[
            APP,
            ("all-apps", "Every app with rows, receipts or a log in the store"),
            ("reason", "Why (kept with the run and in the store)"),
            ENDPOINT,
        ],
        exit_status: "Exit status: 0 every batch the store's log holds is recorded in the database (none was missing, or each was read in full and recorded again); 1 a batch could not be (its objects missing or not the ones its leaf binds, a store written back, a receipt that disagrees with the log) or an app failed; 2 bad usage or configuration; 130 Ctrl-C.",
        all_apps: Some("Every app with rows, receipts or a log in the store"),
        unused_common: &[],
    };

    fn groups(&self) -> Groups<'_> {
        Groups {
            s3: Some(&self.s3),
            ..Groups::default()
        }
    }

    fn app_args(&self) -> Option<&AppArgs> {
        Some(&self.apps)
    }
}
