//! What the screen shows, through the binary: on a pseudo-terminal (`script`), progress lines —
//! one per app in flight and a total — that never end up inside a log line and are gone when
//! the command ends, every command with progress, JSON logs that stay JSON, and a short summary;
//! off a terminal, a progress log line now and then (`--progress-every`) for every long command.

use crate::support::*;

fn binary_envs(db: &TestDb, s3: &TestS3) -> Vec<(&'static str, String)> {
    let mut envs = cli_envs(db, s3);
    envs.push(("AWS_REGION", "us-east-1".into()));
    envs.push(("AWS_EC2_METADATA_DISABLED", "true".into()));
    envs
}

/// Runs the binary on a pseudo-terminal (util-linux `script`): its exit status and everything
/// the terminal received, stdout and stderr together, control sequences and all.
async fn run_on_terminal(args: &[&str], envs: &[(&str, String)]) -> (i32, String) {
    let binary = binary();
    let quoted: Vec<String> = std::iter::once(binary.as_str())
        .chain(args.iter().copied())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    let out = tokio::process::Command::new("script")
        .args([
            "--quiet",
            "--return",
            "--command",
            &quoted.join(" "),
            "/dev/null",
        ])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TERM", "xterm")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("util-linux `script` runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// What a terminal shows after receiving `raw`: the few control sequences the archiver writes
/// (carriage return, erase line, cursor up; colours ignored) applied to a grid of lines.
fn screen(raw: &str) -> Vec<String> {
    let mut lines = vec![String::new()];
    let (mut row, mut col) = (0usize, 0usize);
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' if chars.peek() == Some(&'[') => {
                chars.next();
                let mut arg = String::new();
                let mut command = ' ';
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        command = c;
                        break;
                    }
                    arg.push(c);
                }
                match command {
                    'K' => lines[row].clear(),
                    'A' => row = row.saturating_sub(arg.parse().unwrap_or(1)),
                    _ => {}
                }
            }
            '\r' => col = 0,
            '\n' => {
                row += 1;
                col = 0;
                if row == lines.len() {
                    lines.push(String::new());
                }
            }
            c => {
                let line = &mut lines[row];
                let mut cells: Vec<char> = line.chars().collect();
                if cells.len() < col {
                    cells.resize(col, ' ');
                }
                if col < cells.len() {
                    cells[col] = c;
                } else {
                    cells.push(c);
                }
                *line = cells.into_iter().collect();
                col += 1;
            }
        }
    }
    lines
}

/// The progress lines drawn for `label` (`archive a1`): (done, total) of each.
fn drawn(raw: &str, label: &str) -> Vec<(u64, Option<u64>)> {
    let number = |s: &str| s.replace(',', "").parse::<u64>().unwrap();
    raw.split(['\r', '\n'])
        .filter_map(|piece| {
            let text = piece
                .trim_start_matches("\x1b[2K")
                .trim_start_matches("\x1b[1A");
            let rest = text.split(&format!("{label}: ")).nth(1)?;
            let counts = rest.split(' ').next()?;
            Some(match counts.split_once('/') {
                Some((done, total)) => (number(done), Some(number(total))),
                None => (number(counts), None),
            })
        })
        .collect()
}

fn is_log_line(line: &str) -> bool {
    [" INFO ", " WARN ", " ERROR "]
        .iter()
        .any(|level| line.contains(level))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_progress_lines_stay_out_of_the_log_and_go_at_the_end() {
    let (db, s3, _store) = fixture().await;
    for app in ["a1", "a2", "a3"] {
        db.insert(&rows(app, 120)).await;
    }
    let mut envs = binary_envs(&db, &s3);
    envs.push(("OUTBOX_ARCHIVER_LOG_FORMAT", "text".into()));
    let (code, raw) = run_on_terminal(
        &[
            "archive",
            "--all-apps",
            "--parallel-apps",
            "3",
            "--batch-rows",
            "10",
            "--cutoff",
            "2026-01-02T00:00:00Z",
        ],
        &envs,
    )
    .await;
    assert_eq!(code, 0, "{raw}");
    // A line per app, each counting its own rows towards its own backlog, and a total.
    for app in ["a1", "a2", "a3"] {
        let lines = drawn(&raw, &format!("archive {app}"));
        assert!(!lines.is_empty(), "no progress drawn for {app}: {raw}");
        for (done, total) in &lines {
            assert_eq!(*total, Some(120), "{app}'s own backlog: {lines:?}");
            assert!(done <= &120, "{app}: {done} of its 120 rows: {lines:?}");
        }
    }
    let total = drawn(&raw, "archive (all)");
    assert!(
        total.iter().any(|(done, _)| *done > 120),
        "the total line counts every app: {total:?}"
    );
    // What the terminal shows at the end: every log line whole, from its first column, no
    // progress text left anywhere, and the short summary.
    let shown = screen(&raw);
    let logs: Vec<&String> = shown.iter().filter(|l| is_log_line(l)).collect();
    assert!(logs.len() >= 36, "a line per batch: {shown:#?}");
    for line in &logs {
        let time = line.get(..5).unwrap_or_default();
        assert!(
            time.len() == 5 && time[..4].bytes().all(|b| b.is_ascii_digit()) && time.ends_with('-'),
            "a log line starts with its time, not after progress text: {line:?}"
        );
        assert!(
            !line.contains("rows/s"),
            "progress inside a log line: {line:?}"
        );
        assert!(
            !line.contains("run_id") && !line.contains("app="),
            "text log lines say the app once and leave the run id to the summary: {line:?}"
        );
    }
    assert!(
        !shown.iter().any(|l| l.contains("rows/s")),
        "progress lines are cleared at the end: {shown:#?}"
    );
    let summary = shown
        .iter()
        .position(|l| l.starts_with("archive: ok in "))
        .unwrap_or_else(|| panic!("a short summary: {shown:#?}"));
    for app in ["a1", "a2", "a3"] {
        assert!(
            shown[summary..]
                .iter()
                .any(|l| l.contains(app) && l.contains("archived") && l.contains("120")),
            "{shown:#?}"
        );
    }
    assert!(
        !raw.contains("\"run_id\""),
        "no JSON summary on a terminal unless asked for"
    );

    // verify, purge, restore --drill and compact draw progress too, and clear it: a line per
    // app with its own total, and the total line counting the apps done.
    for (command, args) in [
        ("verify", &["verify", "--all-apps"][..]),
        ("purge", &["purge", "--all-apps", "--grace", "0s"]),
        ("restore", &["restore", "--all-apps", "--drill"]),
        ("compact", &["compact", "--all-apps", "--older-than", "0s"]),
    ] {
        let (code, raw) = run_on_terminal(args, &envs).await;
        assert_eq!(code, 0, "{command}: {raw}");
        for app in ["a1", "a2", "a3"] {
            let lines = drawn(&raw, &format!("{command} {app}"));
            assert!(
                lines.iter().any(|(_, total)| *total == Some(12)),
                "{command} shows {app}'s 12 batches: {lines:?}\n{raw}"
            );
            assert!(lines.iter().all(|(done, _)| *done <= 12), "{lines:?}");
        }
        let total = drawn(&raw, &format!("{command} (all)"));
        assert!(
            total.iter().any(|(done, _)| *done >= 24),
            "{command}: the total counts the apps done: {total:?}\n{raw}"
        );
        let shown = screen(&raw);
        assert!(
            !shown.iter().any(|l| l.contains("batches/s")),
            "{command}: progress cleared at the end: {shown:#?}"
        );
        assert!(
            shown
                .iter()
                .any(|l| l.starts_with(&format!("{command}: ok"))),
            "{command}: {shown:#?}"
        );
    }
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_on_a_terminal_are_json_and_nothing_else() {
    let (db, s3, _store) = fixture().await;
    for app in ["a1", "a2"] {
        db.insert(&rows(app, 60)).await;
    }
    let mut envs = binary_envs(&db, &s3);
    envs.push(("OUTBOX_ARCHIVER_LOG_FORMAT", "json".into()));
    for args in [
        &[
            "archive",
            "--all-apps",
            "--parallel-apps",
            "2",
            "--batch-rows",
            "10",
            "--cutoff",
            "2026-01-02T00:00:00Z",
            "--format",
            "json",
        ][..],
        // No --format: --log-format json alone makes everything JSON, the summary too.
        &["verify", "--all-apps"],
    ] {
        let (code, raw) = run_on_terminal(args, &envs).await;
        assert_eq!(code, 0, "{raw}");
        let lines: Vec<&str> = raw.split("\r\n").filter(|l| !l.is_empty()).collect();
        // archive logs a line per batch; verify only its summary at info level.
        assert!(lines.len() > 3 || args[0] == "verify", "{raw}");
        for line in lines {
            let parsed: Result<serde_json::Value, _> = serde_json::from_str(line);
            assert!(
                parsed.is_ok(),
                "{args:?}: not JSON on a terminal: {:?}",
                line.get(..300).unwrap_or(line)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_a_terminal_every_long_command_logs_its_progress() {
    let (db, s3, _store) = fixture().await;
    db.insert(&rows("a1", 60)).await;
    let envs = binary_envs(&db, &s3);
    let every = ["--progress-every", "1ms"];
    for (command, unit, args) in [
        (
            "archive",
            "rows",
            &[
                "archive",
                "--app",
                "a1",
                "--batch-rows",
                "10",
                "--cutoff",
                "2026-01-02T00:00:00Z",
            ][..],
        ),
        ("verify", "batches", &["verify", "--app", "a1"]),
        ("restore", "batches", &["restore", "--app", "a1", "--drill"]),
        (
            "purge",
            "batches",
            &["purge", "--app", "a1", "--grace", "0s"],
        ),
    ] {
        let args: Vec<&str> = args.iter().chain(every.iter()).copied().collect();
        let run = run_cli(&args, &envs).await;
        assert_eq!(run.code, 0, "{command}: {}", run.all_output);
        let progress: Vec<serde_json::Value> = run
            .all_output
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|l| l.get("done").is_some())
            .collect();
        assert!(!progress.is_empty(), "{command}: {}", run.all_output);
        for line in &progress {
            assert_eq!(line["app"], "a1", "{line}");
            assert_eq!(line["unit"], unit, "{line}");
            let message = line["message"].as_str().unwrap_or_default();
            assert!(message.starts_with(&format!("{command} a1: ")), "{line}");
            // The total is counted first, as on a terminal: N/M, and how long is left.
            assert!(line["total"].as_u64().is_some(), "{command}: {line}");
            assert!(message.contains('/') && message.contains('%'), "{line}");
        }
        assert!(
            progress
                .iter()
                .any(|l| l["message"].as_str().unwrap_or_default().contains("ETA")),
            "{command}: {progress:?}"
        );
        assert!(
            !run.all_output.contains("\x1b["),
            "{command}: no terminal codes off a terminal"
        );
    }
    // The default (every 30 s) logs none in a run this short, and 0 logs none at all.
    let run = run_cli(&["verify", "--app", "a1", "--progress-every", "0s"], &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert!(
        !run.all_output.lines().any(|l| l.contains("\"done\":")),
        "{}",
        run.all_output
    );
}
