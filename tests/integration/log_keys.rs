//! The log's keys over the years, through the binary (issue 43; README, "Keys over the years"):
//! a log begun unsigned starts being signed at the first archive run given a key, a signed log
//! refuses a run without one, and a key is rotated — the old one's verifier still given, or both
//! keys signing — and retired; each verifier set proves what it should, Go's note package too.

use outbox_archiver::format::Key;
use outbox_archiver::PutMode;

use crate::log::{go_verifier, log_key, recorded_days_ago, run_cli_stdout};
use crate::support::*;

use crate::log_rollback::{binary_env, ARCHIVE, VERIFY};

/// A new key named as the log's, made by `log-key` in `dir/file`: its file and its verifier.
pub(crate) async fn new_key(dir: &std::path::Path, file: &str) -> (String, String) {
    let path = dir.join(file);
    let (code, verifier) = run_cli_stdout(
        &[
            "log-key",
            "--name",
            "archive.example.com/wallet",
            "--out",
            path.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{verifier}");
    (path.to_str().unwrap().to_string(), verifier_of(&verifier))
}

/// The verifier in `log-key`'s stdout: off a terminal, one JSON summary (as every command's
/// end) with the verifier in it.
pub(crate) fn verifier_of(stdout: &str) -> String {
    let summary: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("log-key prints one JSON object ({e}): {stdout}"));
    assert_eq!(summary["command"], "log-key", "{stdout}");
    summary["verifier"].as_str().expect("verifier").to_string()
}

fn with(
    envs: &[(&'static str, String)],
    more: &[(&'static str, &str)],
) -> Vec<(&'static str, String)> {
    let mut out = envs.to_vec();
    out.extend(more.iter().map(|(k, v)| (*k, v.to_string())));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_begun_unsigned_is_signed_then_its_key_rotated_and_retired() {
    let db = TestDb::new().await;
    let s3 = TestS3::new().await;
    let store = s3.store().await;
    let dir = tempfile::tempdir().unwrap();
    let envs = binary_env(&db, &s3);
    let archive = ARCHIVE;
    let verify = VERIFY;
    const KEY: &str = "OUTBOX_ARCHIVER_LOG_KEY_FILE";
    const VERIFIER: &str = "OUTBOX_ARCHIVER_LOG_VERIFIER";
    let checkpoint = log_key(store.as_ref(), "a1", "checkpoint");
    let signatures = |note: &[u8]| {
        String::from_utf8_lossy(note)
            .matches("\n\u{2014} archive.example.com/wallet ")
            .count()
    };

    // Two batches, unsigned.
    db.insert(&rows("a1", 20)).await;
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let unsigned = read(store.as_ref(), &checkpoint).await;
    assert_eq!(signatures(&unsigned), 0);

    // A key added: the next run (nothing to archive) signs the same tree and records it.
    let (old_key, old) = new_key(dir.path(), "old.key").await;
    let run = run_cli(&archive, &with(&envs, &[(KEY, &old_key)])).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(signatures(&read(store.as_ref(), &checkpoint).await), 1);
    let record: serde_json::Value = serde_json::from_slice(
        &read(
            store.as_ref(),
            &log_key(store.as_ref(), "a1", "keys/00000000000000000002.json"),
        )
        .await,
    )
    .unwrap();
    assert_eq!(record["from_size"], 2, "{record}");
    assert_eq!(record["signed_by"][0], old.as_str(), "{record}");
    assert_eq!(record["before"], serde_json::json!([]), "{record}");
    let run = run_cli(&verify, &with(&envs, &[(VERIFIER, &old)])).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    // Held to it from then on: a run without the key appends nothing, and the unsigned
    // checkpoint put back is not taken for a log that was never signed.
    db.insert(&[row("a1", "k1", T0 + 900)]).await;
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output.contains("its checkpoint is signed (by archive.example.com/wallet), and this run has no --log-key-file"),
        "{}",
        run.all_output
    );
    let signed = read(store.as_ref(), &checkpoint).await;
    store
        .put(
            &Key::stored(checkpoint.clone()),
            unsigned.clone().into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let run = run_cli(&archive, &with(&envs, &[(KEY, &old_key)])).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(
        run.all_output
            .contains("carries no valid signature by archive.example.com/wallet"),
        "{}",
        run.all_output
    );
    store
        .put(
            &Key::stored(checkpoint.clone()),
            signed.into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let run = run_cli(&archive, &with(&envs, &[(KEY, &old_key)])).await;
    assert_eq!(run.code, 0, "{}", run.all_output);

    // Rotation with the old key lost or compromised: the new key signs, the old one's verifier
    // vouches for the checkpoint it reads. Recorded; the old verifier alone no longer proves it.
    let (new_key_file, new) = new_key(dir.path(), "new.key").await;
    db.insert(&[row("a1", "k2", T0 + 901)]).await;
    let rotating = with(&envs, &[(KEY, &new_key_file), (VERIFIER, &old)]);
    let run = run_cli(&archive, &rotating).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert!(
        keys(store.as_ref())
            .await
            .iter()
            .any(|k| k.ends_with("/keys/00000000000000000003.json")),
        "the change recorded at the leaf it took effect"
    );
    let run = run_cli(&verify, &with(&envs, &[(VERIFIER, &new)])).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let both = format!("{old},{new}");
    let run = run_cli(&verify, &with(&envs, &[(VERIFIER, &both)])).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let run = run_cli(&verify, &with(&envs, &[(VERIFIER, &old)])).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    assert!(run.all_output.contains("log_fork"), "{}", run.all_output);
    let repeated = [
        &verify[..],
        &["--log-verifier", &old, "--log-verifier", &new],
    ]
    .concat();
    let run = run_cli(&repeated, &envs).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let purge = ["purge", "--app", "a1", "--grace", "0s"];
    let run = run_cli(&purge, &with(&envs, &[(VERIFIER, &new)])).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 0);

    // Both keys sign (a rotation with the old key at hand): either verifier proves it, and so
    // does Go's note package given either or both.
    let two = format!("{old_key},{new_key_file}");
    let run = run_cli(&archive, &with(&envs, &[(KEY, &two)])).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(signatures(&read(store.as_ref(), &checkpoint).await), 2);
    for v in [&old, &new] {
        let run = run_cli(&verify, &with(&envs, &[(VERIFIER, v)])).await;
        assert_eq!(run.code, 0, "{}", run.all_output);
    }
    recorded_days_ago(&db, 1).await;
    let day = outbox_archiver::utc_date(chrono::Utc::now().timestamp_millis() - DAY);
    let (code, statement) = run_cli_stdout(
        &["attest", "--app", "a1", "--from", &day, "--to", &day],
        &with(&envs, &[(VERIFIER, &new)]),
    )
    .await;
    assert_eq!(code, 0, "{statement}");
    let path = dir.path().join("statement.json");
    std::fs::write(&path, &statement).unwrap();
    for v in [old.as_str(), new.as_str(), both.as_str()] {
        let (code, out) = go_verifier(&path, &["-verifier", v]);
        assert_eq!(code, 0, "{out}");
        assert!(
            out.contains("its signature by archive.example.com/wallet"),
            "{out}"
        );
    }

    // The old key retired: the new one alone signs from the next run; the old verifier is
    // refused again, by this tool and by Go's.
    let run = run_cli(&archive, &with(&envs, &[(KEY, &new_key_file)])).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(signatures(&read(store.as_ref(), &checkpoint).await), 1);
    let run = run_cli(&verify, &with(&envs, &[(VERIFIER, &old)])).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    let run = run_cli(&verify, &with(&envs, &[(VERIFIER, &new)])).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
}
