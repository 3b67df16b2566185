//! The command line as the binary reads it: the derived shape with each command's own words
//! (its `--all-apps`, its exit status), environment values never shown in help, a usage error as
//! one JSON summary, and the `OUTBOX_ARCHIVER_*` variables no option reads — a typo refused, any
//! other warned about.

use super::{effective_config, short_help, Cli};
use crate::model::command::CommandName;
use crate::pipeline::report::Summary;

/// The command line as the binary parses it: the derived shape, environment values never shown
/// in help, each command's own words.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    without_unused_common(per_command_help(without_env_values(Cli::command())))
}

/// The common options a command never reads, out of its help (`log-key` touches no database
/// and no store). They are global, so they reach the subcommands when the command is built.
fn without_unused_common(mut command: clap::Command) -> clap::Command {
    command.build();
    command.mut_subcommands(|sub| {
        let Some(name) = CommandName::parse(sub.get_name()) else {
            return sub;
        };
        let unused = super::command::help(name).map_or(&[][..], |h| h.unused_common);
        sub.mut_args(|arg| match arg.get_long() {
            Some(long) if unused.contains(&long) => arg.hide(true),
            _ => arg,
        })
    })
}

/// What each command's help says where one shared option means something of its own, and
/// every command's exit status.
fn per_command_help(command: clap::Command) -> clap::Command {
    command.mut_subcommands(|sub| {
        let Some(name) = CommandName::parse(sub.get_name()) else {
            return sub;
        };
        let Some(help) = super::command::help(name) else {
            return sub;
        };
        let sub = match help.all_apps {
            Some(text) if sub.get_arguments().any(|a| a.get_id() == "all_apps") => {
                sub.mut_arg("all_apps", |a| a.help(text))
            }
            _ => sub,
        };
        sub.after_help(help.exit_status)
    })
}

/// The command with no environment variable's value shown in `--help` (the names stay): a
/// value may hold a password (`OUTBOX_ARCHIVER_METRICS_PUSHGATEWAY=http://user:pw@…`, a
/// replica's URL), and help is printed to terminals and CI logs (SPEC §5.8).
fn without_env_values(command: clap::Command) -> clap::Command {
    command
        .mut_args(|arg| arg.hide_env_values(true))
        .mut_subcommands(without_env_values)
}

/// Bad usage: clap's message on stderr as always, and — as every run ends — one JSON summary on
/// stdout (`ok: false`, the message), for the CronJob's log parser; exit 2. Help and version are
/// printed as they are, exit 0.
fn usage_error(e: clap::Error, subcommands: &[String]) -> ! {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    let _ = e.print();
    // The subcommand the arguments name, if they name one.
    let named = std::env::args()
        .skip(1)
        .find(|a| subcommands.iter().any(|s| s == a));
    let command = named
        .as_deref()
        .and_then(CommandName::parse)
        .unwrap_or(CommandName::None);
    let text = e.render().to_string();
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("bad usage")
        .trim_start_matches("error: ")
        .to_string();
    let summary = Summary::unusable(command, format!("usage: {first} (see --help)"));
    println!("{}", summary.to_json());
    std::process::exit(2);
}

/// Parses the process's arguments and environment, exiting with clap's message on bad usage.
/// With `--print-config` it prints every setting and exits (0, or 2 when a setting is wrong)
/// without connecting to anything. Returns the command line and the subcommand's name.
pub(crate) fn parse_or_exit() -> (Cli, String) {
    use clap::FromArgMatches;
    // `-h` is the short summary (`short_help`); `--help` every option.
    let line = if short_help::asked() {
        short_help::shorten(command())
    } else {
        command()
    };
    let names: Vec<String> = line
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let matches = line
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|_| m))
        .unwrap_or_else(|e| usage_error(e, &names));
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| usage_error(e, &names));
    cli.common.log.format_from_environment = matches!(
        matches.value_source("format"),
        Some(clap::parser::ValueSource::EnvVariable)
    );
    let (mistyped, unknown) = unknown_variables(&command(), std::env::vars().map(|(k, _)| k));
    if cli.common.print_config {
        let (mut config, ok) = effective_config(&cli, &matches);
        if let Some(problems) = config["problems"].as_array_mut() {
            problems.extend(mistyped.iter().map(|m| serde_json::Value::from(m.as_str())));
        }
        config["unknown_variables"] = serde_json::json!(unknown);
        println!("{}", serde_json::to_string_pretty(&config).expect("JSON"));
        std::process::exit(if ok && mistyped.is_empty() { 0 } else { 2 });
    }
    // A setting whose name is one or two letters off is a typo that would be ignored without a
    // word (a retention not applied, a store not read): refused, naming the one meant.
    if let Some(first) = mistyped.first() {
        eprintln!("error: {first}");
        let name = matches
            .subcommand_name()
            .and_then(CommandName::parse)
            .unwrap_or(CommandName::None);
        println!("{}", Summary::unusable(name, first.clone()).to_json());
        std::process::exit(2);
    }
    cli.common.unknown_variables = unknown;
    let name = matches.subcommand_name().unwrap_or_default().to_string();
    (cli, name)
}

/// Variables the binary reads besides its options' (`OUTBOX_ARCHIVER_TEST_*` are the test
/// suite's).
const OTHER_VARIABLES: [&str; 1] = ["OUTBOX_ARCHIVER_FAILPOINT"];

/// Of the `OUTBOX_ARCHIVER_*` variables in `names` that no option of any command reads: those
/// within two letters of one that does (a typo: the message names it), and the rest (a setting
/// of another version, say: warned about).
fn unknown_variables(
    command: &clap::Command,
    names: impl Iterator<Item = String>,
) -> (Vec<String>, Vec<String>) {
    fn known(command: &clap::Command, out: &mut Vec<String>) {
        out.extend(
            command
                .get_arguments()
                .filter_map(|a| a.get_env())
                .map(|e| e.to_string_lossy().into_owned()),
        );
        for sub in command.get_subcommands() {
            known(sub, out);
        }
    }
    let mut read = Vec::new();
    known(command, &mut read);
    read.extend(OTHER_VARIABLES.map(str::to_string));
    read.sort();
    read.dedup();
    let (mut mistyped, mut unknown) = (Vec::new(), Vec::new());
    for name in names {
        if !name.starts_with("OUTBOX_ARCHIVER_")
            || name.starts_with("OUTBOX_ARCHIVER_TEST_")
            || read.contains(&name)
        {
            continue;
        }
        let closest = read
            .iter()
            .map(|k| (crate::model::appcode::distance(&name, k), k))
            .min();
        match closest {
            Some((d, meant)) if d <= 2 => mistyped.push(format!(
                "{name} is not a setting of outbox-archiver: did you mean {meant}? (as it is, it would be ignored)"
            )),
            _ => unknown.push(name),
        }
    }
    mistyped.sort();
    unknown.sort();
    (mistyped, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn cli_is_well_formed_and_hides_the_database_url() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("DATABASE_URL"));
        // The value a variable would have is never rendered: hide_env_values on the argument.
        let database_url = Cli::command()
            .get_arguments()
            .find(|a| a.get_id() == "database_url")
            .map(|a| a.is_hide_env_values_set());
        assert_eq!(database_url, Some(true));
    }

    /// The smallest command line of each subcommand. Parsing it runs clap's `FromArgMatches`,
    /// which is where a shared option and a command's own one under the same id clash (attest's
    /// `--format` did: every `attest` panicked) — `debug_assert` does not look there.
    const SMALLEST: &[&[&str]] = &[
        &["migrate"],
        &["archive", "--all-apps"],
        &["verify"],
        &["status"],
        &["find", "--event-id", "e1"],
        &["history"],
        &["purge", "--all-apps"],
        &["restore"],
        &["compact", "--all-apps"],
        &["attest", "--from", "2026-11-01", "--to", "2026-11-02"],
        &[
            "attest",
            "--from",
            "2026-11-01",
            "--to",
            "2026-11-02",
            "--format",
            "csv",
        ],
        &["demo"],
        &["schema"],
        &["doctor"],
        &["relocate", "--to", "s3://b/p", "--reason", "moved"],
        &["recover", "--all-apps", "--reason", "restored"],
        &[
            "log-key",
            "--name",
            "archive.example.com/wallet",
            "--out",
            "key",
        ],
    ];

    #[test]
    fn every_subcommand_parses_into_its_arguments() {
        use clap::FromArgMatches;
        // Built, the command holds clap's own `help` subcommand too.
        let names: Vec<String> = command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .filter(|name| name != "help")
            .collect();
        for name in &names {
            assert!(
                SMALLEST.iter().any(|args| args[0] == name),
                "no smallest command line for {name}: add one to SMALLEST"
            );
        }
        for args in SMALLEST {
            let argv = std::iter::once("outbox-archiver").chain(args.iter().copied());
            let matches = command()
                .try_get_matches_from(argv)
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            Cli::from_arg_matches(&matches).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
    }

    #[test]
    fn a_commands_help_shows_its_own_options_first_and_only_what_applies() {
        let mut command = command();
        command.build();
        let help = |name: &str, command: &mut clap::Command| {
            command
                .find_subcommand_mut(name)
                .unwrap()
                .render_help()
                .to_string()
        };
        let history = help("history", &mut command);
        for absent in [
            "--replica",
            "--sse-kms-key-id",
            "--object-lock-mode",
            "--s3-endpoint",
        ] {
            assert!(
                !history.contains(absent),
                "history --help lists {absent}:\n{history}"
            );
        }
        assert!(history.lines().count() < 40, "{history}");
        let archive = help("archive", &mut command);
        let own = archive.find("--batch-rows").unwrap();
        let shared = archive.find("--s3-endpoint").unwrap();
        let common = archive.find("Common options:").unwrap();
        assert!(own < shared && shared < common, "{archive}");
        assert!(archive.contains("--object-lock-mode"));
        // An option of another command is refused, not ignored.
        let refused = command.try_get_matches_from_mut(["x", "history", "--retention", "7y"]);
        assert!(refused.is_err());
    }

    #[test]
    fn a_variable_a_letter_or_two_off_a_setting_is_a_typo() {
        let names = [
            "OUTBOX_ARCHIVER_RETENTON",
            "OUTBOX_ARCHIVER_RETENTION",
            "OUTBOX_ARCHIVER_STOR",
            "OUTBOX_ARCHIVER_SOMETHING_NEWER",
            "OUTBOX_ARCHIVER_TEST_SERVER",
            "OUTBOX_ARCHIVER_FAILPOINT",
            "PATH",
        ]
        .map(str::to_string);
        let (mistyped, unknown) = unknown_variables(&command(), names.into_iter());
        assert_eq!(mistyped.len(), 2, "{mistyped:?}");
        assert!(
            mistyped[0].contains("did you mean OUTBOX_ARCHIVER_RETENTION?"),
            "{mistyped:?}"
        );
        assert!(
            mistyped[1].contains("did you mean OUTBOX_ARCHIVER_STORE?"),
            "{mistyped:?}"
        );
        assert_eq!(unknown, ["OUTBOX_ARCHIVER_SOMETHING_NEWER"]);
    }

    #[test]
    fn options_go_before_or_after_the_subcommand() {
        let a =
            Cli::try_parse_from(["x", "--store", "file:///a", "archive", "--app", "a1"]).unwrap();
        let b =
            Cli::try_parse_from(["x", "archive", "--app", "a1", "--store", "file:///a"]).unwrap();
        assert_eq!(a.common.store, b.common.store);
        assert!(
            Cli::try_parse_from(["x", "archive"]).is_err(),
            "--app or --all-apps is required"
        );
        assert!(Cli::try_parse_from(["x", "archive", "--app", "a", "--all-apps"]).is_err());
    }
}
