//! `-h`: a command's summary on one screen — what it does in a line, its usage, the options an
//! operator reaches for first (most used first, one line each), the common ones, and where the
//! rest is. `--help` stays the whole text of every option, grouped, with the exit status (the
//! convention of clap, git and cargo).
//!
//! The summary is a second shape of the same command line: [`shorten`] keeps the options listed
//! here with their one-line summaries and hides the others, so both shapes parse alike.

use crate::model::command::CommandName;

/// Whether the command line asks for the short help: a bare `-h` (clap reads `-h` as the help
/// flag wherever it stands, so this is what clap itself would act on).
pub(super) fn asked() -> bool {
    std::env::args_os().skip(1).any(|a| a == "-h")
}

/// The common options `-h` shows (the rest are in `--help`), for the commands that use them.
const COMMON: [(&str, &str); 4] = [
    ("database-url", "mysql://user:password@host:3306/database"),
    (
        "store",
        "Archive location: s3://bucket/prefix or file:///path",
    ),
    ("table", "The outbox table (wallet_outbox, room_outbox)"),
    ("format", "The summary on stdout: table, json or csv"),
];

/// The command line's short shape: each subcommand's listed options with their summaries,
/// under "Options" in the order listed, every other option hidden, and a last line saying
/// where the rest is.
pub(super) fn shorten(command: clap::Command) -> clap::Command {
    // The common options are global: built, the command holds them in every subcommand too.
    let command = command
        .term_width(0)
        .mut_args(|arg| match common_kind(&arg) {
            Common::Kept => arg,
            Common::Shown(i) => one_line(arg, COMMON[i].1).display_order(1000 + i),
            Common::Hidden | Common::Own => arg.hide_short_help(true),
        });
    command.mut_subcommands(|sub| {
        let Some(name) = CommandName::parse(sub.get_name()) else {
            return sub;
        };
        let Some(help) = super::command::help(name) else {
            return sub;
        };
        let list = help.shown;
        let rest = format!(
            "Every option, and what each exit status means: outbox-archiver {} --help",
            sub.get_name()
        );
        // One line an option, however long its name: clap would otherwise put a summary under
        // its option when the names take much of the width.
        let sub = sub
            .about(help.about)
            .long_about(None)
            .after_help(rest)
            .term_width(0);
        sub.mut_args(|arg| match common_kind(&arg) {
            Common::Kept => arg,
            Common::Shown(i) => one_line(arg, COMMON[i].1).display_order(1000 + i),
            Common::Hidden => arg.hide(true),
            Common::Own => {
                let long = arg.get_long().unwrap_or_default().to_string();
                match list.iter().position(|(l, _)| *l == long) {
                    Some(i) => one_line(arg, list[i].1).help_heading(None).display_order(i),
                    None if arg.get_long().is_some() => arg.hide(true),
                    None => arg,
                }
            }
        })
    })
}

/// What `-h` does with an option of the command line as a whole.
enum Common {
    /// `--help` and `--version`, as they are.
    Kept,
    /// One of [`COMMON`], by its place there.
    Shown(usize),
    /// Another global option: only in `--help`.
    Hidden,
    /// An option of the subcommand's own.
    Own,
}

fn common_kind(arg: &clap::Arg) -> Common {
    let long = arg.get_long().unwrap_or_default();
    if long == "help" || long == "version" || arg.is_hide_set() {
        return Common::Kept;
    }
    match COMMON.iter().position(|(l, _)| *l == long) {
        Some(i) => Common::Shown(i),
        None if arg.is_global_set() => Common::Hidden,
        None => Common::Own,
    }
}

/// An option as `-h` shows it: its summary, its default, nothing else.
fn one_line(arg: clap::Arg, summary: &'static str) -> clap::Arg {
    arg.help(summary)
        .long_help(None)
        .hide_env(true)
        .hide_possible_values(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every option named here exists on its command: a renamed option would otherwise drop out
    /// of `-h` without a word.
    #[test]
    fn every_listed_option_is_one_of_the_commands() {
        use clap::CommandFactory;
        let command = super::super::Cli::command();
        for sub in command.get_subcommands() {
            let name = CommandName::parse(sub.get_name()).expect("a command");
            let help = super::super::command::help(name).expect("a command's words");
            assert!(!help.about.is_empty(), "{name:?}");
            for (long, summary) in help.shown {
                assert!(
                    sub.get_arguments().any(|a| a.get_long() == Some(*long)),
                    "{}: -h lists --{long}, which it does not have",
                    sub.get_name()
                );
                assert!(summary.len() <= 70, "--{long}: {summary}");
            }
        }
        for (long, _) in COMMON {
            assert!(
                command.get_arguments().any(|a| a.get_long() == Some(long)),
                "--{long}"
            );
        }
    }
}
