//! The real binary, run as an operator would: a clean environment, its exit status, its JSON
//! summary and everything it printed; and the ports of servers a test starts beside it.

use super::database::TestDb;
use super::s3::TestS3;

/// The binary under test: the one this build made, or `OUTBOX_ARCHIVER_TEST_BINARY` — another
/// build's, to see a new test fail on the old code (`OUTBOX_ARCHIVER_TEST_BINARY=/tmp/old-build
/// cargo test --test integration NAME`).
pub fn binary() -> String {
    std::env::var("OUTBOX_ARCHIVER_TEST_BINARY")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_outbox-archiver").to_string())
}

/// One run of the real binary: its exit status, its JSON summary, and everything it printed.
pub struct Run {
    pub code: i32,
    pub summary: serde_json::Value,
    pub all_output: String,
}

/// Runs the binary as [`run_cli`] does and returns its exit status and everything it printed
/// (stdout, then stderr), for output that is not a summary (`--help`).
pub async fn run_cli_text(args: &[&str], envs: &[(&str, String)]) -> (i32, String) {
    let out = run_cli_output(args, envs).await;
    (
        out.status.code().unwrap(),
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Runs the binary with a clean environment plus `envs`, and returns what it left: its exit
/// status, stdout and stderr apart (a statement on stdout, whatever the exit status).
pub async fn run_cli_output(args: &[&str], envs: &[(&str, String)]) -> std::process::Output {
    tokio::process::Command::new(binary())
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .await
        .unwrap()
}

/// Runs the binary with a clean environment (no AWS config of the machine) plus `envs`.
pub async fn run_cli(args: &[&str], envs: &[(&str, String)]) -> Run {
    run_binary(&binary(), args, envs).await
}

/// [`run_cli`] of the binary at `path` (another build's: [`older_build`]).
pub async fn run_binary(path: &str, args: &[&str], envs: &[(&str, String)]) -> Run {
    let mut cmd = tokio::process::Command::new(path);
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1")
        .env("OUTBOX_ARCHIVER_LOG_FORMAT", "json");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let std::process::Output {
        status,
        stdout,
        stderr,
    } = cmd.output().await.unwrap();
    let stdout = String::from_utf8_lossy(&stdout).to_string();
    let stderr = String::from_utf8_lossy(&stderr).to_string();
    let summary: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is one JSON summary ({e}): {stdout}\nstderr: {stderr}"));
    Run {
        code: status.code().unwrap(),
        summary,
        all_output: format!("{stdout}\n{stderr}"),
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago, for a server the test starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something listens on 127.0.0.1:`port`; panics naming `what` after `limit`.
pub async fn wait_for_port(port: u16, what: &str, limit: std::time::Duration) {
    let deadline = std::time::Instant::now() + limit;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(std::time::Instant::now() < deadline, "{what} did not start");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The binary's `archive` of every app below 2026-01-02 in two-row batches into `store_url`: many
/// small batches, so a run can be interrupted at many moments.
pub fn archive_in_two_row_batches(store_url: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(binary());
    command.args([
        "archive",
        "--all-apps",
        "--batch-rows",
        "2",
        "--cutoff",
        "2026-01-02T00:00:00Z",
        "--store",
        store_url,
    ]);
    command
}

/// How many migrations `migrations/` holds (what a first `migrate` applies).
pub fn migrations() -> usize {
    std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "sql"))
        })
        .count()
}

/// The binary of `commit`, an older commit of this repository, built by `.ci/old-build` (once
/// per machine: kept under target/old-builds/; the tests that ask for one build take turns).
/// What an upgrade meets: a pod of the older build still running, an image rolled back.
pub async fn older_build(commit: &'static str) -> String {
    static BUILDING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = BUILDING.lock().await;
    let out = tokio::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/old-build"))
        .arg(commit)
        .output()
        .await
        .expect(".ci/old-build runs");
    assert!(
        out.status.success(),
        ".ci/old-build {commit} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// What the binary needs to work on `db`'s tables and `s3`'s bucket, under `db`'s own lock
/// prefix (parallel tests never share an advisory lock): the environment a CronJob sets.
pub fn cli_envs(db: &TestDb, s3: &TestS3) -> Vec<(&'static str, String)> {
    let mut envs = s3.binary_env();
    envs.push(("DATABASE_URL", db.url.clone()));
    envs.push(("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()));
    envs
}
