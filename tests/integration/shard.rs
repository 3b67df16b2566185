//! `--all-apps --shard I/N` through the binary: N shards together archive every app exactly once,
//! each app in one shard only; a shard outside 0..N, or a shard without --all-apps, is refused.

use std::collections::BTreeSet;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_cover_every_app_exactly_once() {
    let db = TestDb::new().await;
    let apps: Vec<String> = (0..20).map(|n| format!("app-{n:02}")).collect();
    for app in &apps {
        db.insert(&rows(app, 3)).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let envs = [
        ("DATABASE_URL", db.url.clone()),
        (
            "OUTBOX_ARCHIVER_STORE",
            format!("file://{}", dir.path().display()),
        ),
        ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
        ("OUTBOX_ARCHIVER_CUTOFF", "2026-01-02T00:00:00Z".to_string()),
    ];
    let mut seen: Vec<String> = Vec::new();
    for index in 0..3 {
        let shard = format!("{index}/3");
        let run = run_cli(&["archive", "--all-apps", "--shard", &shard], &envs).await;
        assert_eq!(run.code, 0, "{}", run.all_output);
        let taken: Vec<String> = run.summary["apps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|app| {
                assert_eq!(app["outcome"], "archived", "{shard}: {app}");
                app["app_code"].as_str().unwrap().to_string()
            })
            .collect();
        assert!(
            !taken.is_empty(),
            "shard {shard} has apps (2, 8 and 10 of these 20)"
        );
        seen.extend(taken);
    }
    assert_eq!(seen.len(), apps.len(), "no app in two shards: {seen:?}");
    assert_eq!(
        seen.iter().cloned().collect::<BTreeSet<_>>(),
        apps.iter().cloned().collect::<BTreeSet<_>>(),
        "every app in some shard"
    );
    for app in &apps {
        assert_eq!(db.members(app).await.len(), 3, "{app} archived once");
    }

    for bad in [
        vec!["archive", "--all-apps", "--shard", "3/3"],
        vec!["archive", "--app", "app-00", "--shard", "0/3"],
    ] {
        let out = tokio::process::Command::new(binary())
            .args(&bad)
            .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--shard")
                || String::from_utf8_lossy(&out.stdout).contains("--shard"),
            "{bad:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
