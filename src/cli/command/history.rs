//! `history` on the command line: its arguments, its words in help, and what they make of it.

use clap::Args;

use super::Subcommand;
use crate::cli::args::Common;
use crate::cli::help::Help;
use crate::cli::options::IntoOptions;
use crate::cli::parse::{parse_recorded_command, parse_since};
use crate::model::command::CommandName;
use crate::pipeline::history;

#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// Only this app's runs (an app no run and no row names is an error).
    #[arg(long)]
    pub app: Option<String>,
    /// Only this command's runs.
    #[arg(long, value_parser = parse_recorded_command)]
    pub command: Option<String>,
    /// How many runs.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub last: u32,
    /// Only runs started at or after this instant: a UTC day (2026-11-01, its midnight), RFC
    /// 3339, epoch ms, or a duration ago (12h, 7d).
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    pub since: Option<i64>,
    /// Only runs started before this instant (as --since: 2026-11-02, 6h).
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    pub until: Option<i64>,
}

impl IntoOptions for HistoryArgs {
    type Options = history::HistoryOptions;
    fn into_options(self, _: &Common, _: i64) -> Result<history::HistoryOptions, String> {
        Ok(history::HistoryOptions {
            app: self.app,
            command: self.command,
            last: self.last,
            since_ms: self.since,
            until_ms: self.until,
        })
    }
}

impl Subcommand for HistoryArgs {
    const HELP: Help = Help {
        name: CommandName::History,
        about: "The last runs, newest first, with their outcome and error",
        shown: &[
            ("app", "Only this app's runs"),
            ("command", "Only this command's runs"),
            (
                "since",
                "Only runs started at or after this instant (2026-11-01, 12h)",
            ),
            ("until", "Only runs started before this instant"),
            ("last", "How many runs"),
        ],
        exit_status: "Exit status: 0 the runs were read (also when there is none yet); 2 the database could not be reached.",
        all_apps: None,
        unused_common: &[],
    };

    fn needs_store(&self) -> bool {
        false
    }
}
