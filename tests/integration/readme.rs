//! README's recipes, run as README shows them (issue 33): every shell snippet of "Quickstart",
//! "An operator's first hour" and "Recipes" runs through the built binary against the test
//! servers, in order, with README's URLs replaced by the test's, so a recipe README shows and the
//! tool refuses fails the suite. The data is README's: the rows its examples name (event ids,
//! a transaction id, apps wallet-sg and pay-sg) are the ones [`readme_rows`] seeds.
//!
//! How snippets are read:
//! - a ```sh block is one command a line (`\` continues a line; `# …` ends it);
//! - in any other fenced block, a line `$ command` is a command (what follows is its output);
//! - a command ends with exit status 0 unless its comment says `# exit N`;
//! - `cargo run [--release] --` is the built binary, `export DATABASE_URL=…` and
//!   `export OUTBOX_ARCHIVER_STORE=…` are replaced by the test's settings, `.ci/test` (the suite
//!   itself) is not run;
//! - every inline `outbox-archiver …` in those sections is a command line too: it must parse and
//!   hold no setting a run would refuse (`--print-config`, exit 0), placeholders and all.

use std::collections::BTreeMap;

use outbox_archiver::testing::{seed, EventIds, SeedPlan};

use crate::support::moto::{Bucket, MotoS3};
use crate::support::*;

/// README's sections whose snippets run.
const SECTIONS: [&str; 3] = ["## Quickstart", "## An operator's first hour", "## Recipes"];

/// The rows README's examples name: three apps over October and November 2026.
pub fn readme_plan() -> SeedPlan {
    SeedPlan {
        apps: vec!["wallet-sg".into(), "wallet-cn".into(), "pay-sg".into()],
        rows: 6_000,
        start_ms: 1_792_540_800_000, // 2026-10-21T00:00:00Z
        end_ms: 1_795_219_200_000,   // 2026-11-21T00:00:00Z
        delivered_percent: 90,
        seed: 20261202,
        event_ids: EventIds::Sequential,
    }
}

/// One command of a snippet: its text and the exit status it must end with.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Command {
    line: String,
    exit: i32,
}

/// The commands of README's recipe sections, in order, and the inline command lines.
fn snippets(readme: &str) -> (Vec<Command>, Vec<String>) {
    let mut commands = Vec::new();
    let mut inline = Vec::new();
    let mut in_section = false;
    let mut fence: Option<String> = None;
    let mut pending = String::new();
    for line in readme.lines() {
        if fence.is_none() && line.starts_with("## ") {
            in_section = SECTIONS.contains(&line.trim());
            continue;
        }
        if !in_section {
            continue;
        }
        if let Some(rest) = line.trim_start().strip_prefix("```") {
            fence = match fence {
                None => Some(rest.trim().to_string()),
                Some(_) => None,
            };
            continue;
        }
        match fence.as_deref() {
            Some("sh") => {
                let text = line.trim_end();
                if let Some(part) = text.strip_suffix('\\') {
                    pending.push_str(part);
                    continue;
                }
                pending.push_str(text);
                if let Some(command) = parse(&std::mem::take(&mut pending)) {
                    commands.push(command);
                }
            }
            Some(_) => {
                if let Some(command) = line.strip_prefix("$ ").and_then(parse) {
                    commands.push(command);
                }
            }
            None => {
                for span in line.split('`').skip(1).step_by(2) {
                    if span.starts_with("outbox-archiver ") {
                        inline.push(span.to_string());
                    }
                }
            }
        }
    }
    (commands, inline)
}

/// A command line without its comment, and the exit status the comment asks for.
fn parse(line: &str) -> Option<Command> {
    let (command, comment) = match line.find(" #") {
        Some(at) => (&line[..at], &line[at + 2..]),
        None => (line, ""),
    };
    let command = command.trim();
    if command.is_empty() || command.starts_with('#') {
        return None;
    }
    let exit = comment
        .trim()
        .strip_prefix("exit ")
        .map(|rest| {
            rest.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Some(Command {
        line: command.to_string(),
        exit,
    })
}

/// What README's examples name, from [`readme_plan`] (`cargo test --test integration
/// readme::names -- --nocapture --ignored` prints them after a change to the seed).
#[test]
#[ignore]
fn names() {
    let plan = readme_plan();
    let mut rng = outbox_archiver::testing::Rng::new(plan.seed);
    for index in 0..plan.rows {
        let row = seed::row(&plan, index, &mut rng);
        if index == 357 || (2300..2320).contains(&index) {
            println!(
                "{index} {:?} {:?} {:?} {:?} {:?}",
                row[0], row[1], row[3], row[10], row[17]
            );
        }
    }
}

#[test]
fn snippets_are_read_as_the_module_says() {
    let readme = "## Quickstart\n```sh\ncargo run -- demo   # build, then\n.ci/test\n```\n\
                  ## An operator's first hour\nrun `outbox-archiver migrate` once\n```sh\n\
                  outbox-archiver archive --app a \\\n  --dry-run\n```\n## Recipes\n```\n\
                  $ outbox-archiver find --event-id x   # exit 1: not archived\nfound x\n```\n\
                  ## Commands\n```sh\noutbox-archiver never\n```\n";
    let (commands, inline) = snippets(readme);
    let lines: Vec<(&str, i32)> = commands.iter().map(|c| (c.line.as_str(), c.exit)).collect();
    assert_eq!(
        lines,
        [
            ("cargo run -- demo", 0),
            (".ci/test", 0),
            ("outbox-archiver archive --app a   --dry-run", 0),
            ("outbox-archiver find --event-id x", 1),
        ]
    );
    assert_eq!(inline, ["outbox-archiver migrate"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_recipes_run_as_written() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let (commands, inline) = snippets(&readme);
    assert!(commands.len() > 15, "{commands:?}");
    // The binary on PATH as `outbox-archiver`, as an operator has it.
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(binary(), bin.path().join("outbox-archiver")).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let db = TestDb::empty(&server_url().await).await;
    let moto = MotoS3::new(Bucket::Versioned).await;
    let demo_dir = tempfile::tempdir().unwrap();
    let mut env: BTreeMap<&str, String> = moto.env().into_iter().collect();
    for (k, v) in [
        ("PATH", path),
        ("DATABASE_URL", db.url.clone()),
        ("PURGE_DATABASE_URL", db.url.clone()),
        ("OUTBOX_ARCHIVER_STORE", moto.location.to_string()),
        ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
        ("OUTBOX_ARCHIVER_DEMO_DATABASE", format!("{}_demo", db.name)),
        (
            "OUTBOX_ARCHIVER_DEMO_DIR",
            demo_dir.path().display().to_string(),
        ),
        ("OUTBOX_ARCHIVER_DEMO_ROWS", "2000".into()),
        ("OUTBOX_ARCHIVER_DEMO_PORT", free_port().to_string()),
        ("OUTBOX_ARCHIVER_FORMAT", "json".into()),
        ("AWS_CONFIG_FILE", "/nonexistent".into()),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent".into()),
        ("AWS_EC2_METADATA_DISABLED", "true".into()),
    ] {
        env.insert(k, v);
    }
    // The operator's database holds the outbox before the first hour: README's rows.
    outbox_archiver::create_source_table(&db.db.pool, db.spec)
        .await
        .unwrap();
    seed::seed(&db.db.pool, db.spec, &readme_plan())
        .await
        .unwrap();
    for command in &commands {
        let line = command.line.as_str();
        if line == ".ci/test" {
            continue; // the suite itself
        }
        if line.starts_with("export DATABASE_URL=")
            || line.starts_with("export PURGE_DATABASE_URL=")
            || line.starts_with("export OUTBOX_ARCHIVER_STORE=")
        {
            continue; // README's placeholders; the test's settings stand in
        }
        let line = line
            .replace("cargo run --release -- ", "outbox-archiver ")
            .replace("cargo run -- ", "outbox-archiver ");
        let out = run_shell(&line, &env).await;
        assert_eq!(
            out.0, command.exit,
            "README: `{}` ended with exit status {} (README expects {}):\n{}",
            command.line, out.0, command.exit, out.1
        );
    }
    for line in &inline {
        let checked = format!("{line} --print-config");
        let out = run_shell(&checked, &env).await;
        assert_eq!(
            out.0, 0,
            "README: `{line}` is not a command line the tool takes:\n{}",
            out.1
        );
    }
    db.exec(&format!("DROP DATABASE IF EXISTS `{}_demo`", db.name))
        .await;
}

/// Runs `line` with bash in a clean environment of `env`: its exit status and all it printed.
async fn run_shell(line: &str, env: &BTreeMap<&str, String>) -> (i32, String) {
    let out = tokio::process::Command::new("bash")
        .args(["-c", line])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}
