//! `doctor` on the command line: its arguments, its words in help, and what they make of it.

use clap::{Args, ValueEnum};
use tokio_util::sync::CancellationToken;

use super::{Runs, Subcommand};
use crate::cli::args::{Common, MetricsArgs, ProtectionArgs, S3Args, UploadArgs};
use crate::cli::help::{Help, ENDPOINT};
use crate::cli::options::{write_policy, Connect, Groups};
use crate::commands::doctor;
use crate::model::command::CommandName;
use crate::model::protection::WritePolicy;
use crate::pipeline::doctor::{DoctorOptions, GrantsFor, OpenedStore};
use crate::pipeline::report::Summary;
use crate::store::Location;

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// The commands this login is meant to run, whose grants are checked (archive, verify,
    /// status, purge, restore, restore-into-source, compact): the archive role runs archive,
    /// verify and status, the purge role purge, the compaction role compact
    /// (deploy/mysql-grants.sql).
    #[arg(
        long,
        value_name = "COMMANDS",
        env = "OUTBOX_ARCHIVER_DOCTOR_GRANTS_FOR",
        value_delimiter = ',',
        value_enum,
        default_value = "archive,verify,status"
    )]
    pub grants_for: Vec<CommandArg>,
    #[command(flatten)]
    pub s3: S3Args,
    #[command(flatten)]
    pub upload: UploadArgs,
    #[command(flatten)]
    pub protection: ProtectionArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

/// A command, for `doctor --grants-for`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CommandArg {
    Archive,
    Verify,
    Status,
    Purge,
    Restore,
    // `restore --into-source`: INSERT on the live table, UPDATE on the receipts (a plain
    // comment: see UploadChecksumArg).
    RestoreIntoSource,
    Compact,
}

impl DoctorArgs {
    pub(crate) fn options(&self, policy: WritePolicy) -> DoctorOptions {
        let mut grants_for: Vec<GrantsFor> = self
            .grants_for
            .iter()
            .map(|c| match c {
                CommandArg::Archive => GrantsFor::Archive,
                CommandArg::Verify => GrantsFor::Verify,
                CommandArg::Status => GrantsFor::Status,
                CommandArg::Purge => GrantsFor::Purge,
                CommandArg::Restore => GrantsFor::Restore,
                CommandArg::RestoreIntoSource => GrantsFor::RestoreIntoSource,
                CommandArg::Compact => GrantsFor::Compact,
            })
            .collect();
        grants_for.sort();
        grants_for.dedup();
        DoctorOptions { grants_for, policy }
    }
}

impl Subcommand for DoctorArgs {
    const HELP: Help = Help {
        name: CommandName::Doctor,
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

    fn groups(&self) -> Groups<'_> {
        Groups {
            s3: Some(&self.s3),
            upload: Some(&self.upload),
            protection: Some(&self.protection),
            metrics: Some(&self.metrics),
            ..Groups::default()
        }
    }

    fn problems(&self, common: &Common) -> Vec<String> {
        write_policy(common.store.as_deref(), &self.upload, &self.protection)
            .err()
            .into_iter()
            .collect()
    }
}

#[async_trait::async_trait]
impl Runs for DoctorArgs {
    /// `doctor` opens the database and the store itself: that one cannot be reached is a finding it
    /// reports (with exit status 2), not a reason to stop before looking at the other.
    async fn run(self, common: &Common, _: &Connect, now_ms: i64, _: CancellationToken) -> Summary {
        let policy = write_policy(common.store.as_deref(), &self.upload, &self.protection);
        let (profile, policy) = match (common.profile(), policy) {
            (Ok(profile), Ok(policy)) => (profile, policy),
            (Err(e), _) | (_, Err(e)) => return Summary::unusable(CommandName::Doctor, e),
        };
        // A built-in table's spec now; a profile's once the database describes it.
        let spec = match profile {
            Some(_) => None,
            None => match common.spec() {
                Ok(spec) => Some(spec),
                Err(e) => return Summary::unusable(CommandName::Doctor, e),
            },
        };
        let s3_settings = Groups {
            s3: Some(&self.s3),
            upload: Some(&self.upload),
            protection: Some(&self.protection),
            ..Groups::default()
        }
        .s3_settings();
        let location = match common.store.as_deref().map(Location::parse) {
            Some(Ok(location)) => location,
            Some(Err(e)) => return Summary::unusable(CommandName::Doctor, e),
            None => {
                return Summary::unusable(CommandName::Doctor,
                    "no archive location given: set --store or OUTBOX_ARCHIVER_STORE (s3://bucket/prefix or file:///path)".into(),
                )
            }
        };
        let options = self.options(policy);
        let db = common.database().await;
        // A profile's table is known once the database describes it: a profile that does not fit
        // is doctor's answer (exit 2), like a command's start-up refusal.
        let spec = match (spec, &db) {
            (Some(spec), _) => spec,
            (None, Ok(db)) => match common.spec_on(db).await {
                Ok(spec) => spec,
                Err(e) => {
                    db.close().await;
                    return Summary::unusable(CommandName::Doctor, e);
                }
            },
            (None, Err(e)) => return Summary::unusable(CommandName::Doctor, e.clone()),
        };
        let opened = OpenedStore::open(location, &s3_settings).await;
        let handle = opened
            .as_ref()
            .map(OpenedStore::handle)
            .map_err(Clone::clone);
        let summary = doctor::run(
            spec,
            db.as_ref().map_err(Clone::clone),
            handle,
            &options,
            now_ms,
        )
        .await;
        if let Ok(db) = db {
            db.close().await;
        }
        summary
    }
}
