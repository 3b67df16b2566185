//! The image the CronJobs run (issue 37). `deploy/Dockerfile`'s runtime stage is built with
//! podman on a base made from the Debian packages distroless is made from
//! (`deploy/base-image.sh`, through `.ci/podman`), holding the binary this build made. It is
//! then run as Kubernetes runs the pods of `deploy/kubernetes/`: each container's args and
//! environment from the rendered manifests, uid 65532, a read-only root filesystem, no
//! capabilities, no privilege escalation, the limits, and exactly the volumes they mount
//! (`support/pod.rs`). It runs against the suite's database server (each Secret a role of
//! `deploy/mysql-grants.sql`), moto's S3 server behind HTTPS with a company CA that the pods trust
//! through the image's CA bundle, and a real Pushgateway: migrate, doctor, archive, verify,
//! purge, compact, the sentinel, and the metrics, pushed and written as a node_exporter textfile.
//! A missing library, a CA bundle the TLS stacks do not find, a write outside the mounted
//! volumes, or an entrypoint the manifests' args do not fit fails here.
//! Skipped, saying why, only where no container can start (`.ci/podman setup` found none).

use serde_json::{json, Value};
use sqlx::{AssertSqlSafe, Executor};

use crate::support::moto::{moto_endpoint, Bucket, MotoS3};
use crate::support::pod::{self, Pod, Ran};
use crate::support::pushgateway::{value, Pushgateway};
use crate::support::tls::{TestCa, TlsFront, Validity};
use crate::support::*;

const PASSWORD: &str = "image-role-pw-7";
const DAY: i64 = 86_400_000;

/// The apps' rows summed over a summary.
fn total(summary: &Value, field: &str) -> u64 {
    summary["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a[field].as_u64().unwrap_or(0))
        .sum()
}

/// Exit 0, `ok`, and no metrics error (the Pushgateway the ConfigMap names was reached).
fn done(ran: &Ran) -> Value {
    ran.expect_code(0);
    let summary = ran.summary();
    assert_eq!(summary["ok"], true, "{}: {summary}", ran.what);
    assert!(
        summary["metrics_errors"]
            .as_array()
            .is_none_or(|e| e.is_empty()),
        "{}: {summary}",
        ran.what
    );
    summary
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_runs_the_cronjobs_as_kubernetes_runs_them() {
    let Some(image) = tokio::task::spawn_blocking(pod::image).await.unwrap() else {
        return;
    };
    let docs = pod::manifests();

    // The image, as the pods expect it: the binary as its entrypoint (the manifests give only
    // args), a numeric non-root user (runAsNonRoot can be checked), and a CA bundle.
    let inspected = pod::inspect(image);
    let config = &inspected["Config"];
    assert_eq!(
        config["Entrypoint"],
        json!(["/usr/local/bin/outbox-archiver"])
    );
    assert_eq!(config["User"], "65532:65532");
    let stock_bundle =
        String::from_utf8(pod::file_of(image, "/etc/ssl/certs/ca-certificates.crt")).unwrap();
    let roots = stock_bundle.matches("BEGIN CERTIFICATE").count();
    assert!(
        roots >= 100,
        "the image's CA bundle holds {roots} certificates"
    );

    // The servers: a database of the test's own (empty: the image's migrate makes the tables),
    // a versioned bucket on moto behind https:// with a certificate from a company CA, and a
    // Pushgateway.
    let db = TestDb::empty(&server_url().await).await;
    let moto = MotoS3::new(Bucket::Versioned).await;
    let ca = TestCa::new("company");
    let upstream = moto_endpoint().trim_start_matches("http://").to_string();
    let front = TlsFront::start(
        &upstream,
        &ca.issue(&["localhost", "127.0.0.1"], Validity::Current),
    )
    .await;
    let gateway = Pushgateway::start().await;

    // What the cluster holds: the ConfigMap merged with this environment's settings (as an
    // overlay would), the database URLs of the Secrets, S3 keys where IRSA would give a role,
    // and the company CA added to the image's own bundle in a ConfigMap mounted over
    // /etc/ssl/certs (what cert-manager's trust-manager makes of a Bundle).
    let bundle = format!("{stock_bundle}\n{}", ca.pem());
    let role_url = |user: &str| {
        let mut url = url::Url::parse(&db.url).unwrap();
        url.set_username(user).unwrap();
        url.set_password(Some(PASSWORD)).unwrap();
        url.to_string()
    };
    let suffix = db.name.trim_start_matches("oat_").to_string();
    let roles = [
        ("outbox-archiver-archive", format!("ia_{suffix}")),
        ("outbox-archiver-purge", format!("ip_{suffix}")),
        ("outbox-archiver-compact", format!("ic_{suffix}")),
    ];
    let cluster = |pod: Pod, trusted: bool| {
        let settings = [
            ("OUTBOX_ARCHIVER_STORE", moto.store_url()),
            (
                "OUTBOX_ARCHIVER_S3_ENDPOINT",
                format!("https://localhost:{}", front.port),
            ),
            ("OUTBOX_ARCHIVER_METRICS_PUSHGATEWAY", gateway.url()),
            ("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()),
        ];
        let mut pod = pod
            .with_env("AWS_ACCESS_KEY_ID", "moto")
            .with_env("AWS_SECRET_ACCESS_KEY", "moto-secret");
        for (key, value) in settings {
            pod = pod.with_config("outbox-archiver", key, &value);
        }
        for (secret, user) in &roles {
            pod = pod.with_secret(secret, "database-url", &role_url(user));
        }
        if trusted {
            pod = pod
                .with_config("company-ca-bundle", "ca-certificates.crt", &bundle)
                .with_volume(
                    json!({"name": "ca-bundle", "configMap": {"name": "company-ca-bundle"}}),
                    json!({"name": "ca-bundle", "mountPath": "/etc/ssl/certs", "readOnly": true}),
                );
        }
        pod
    };
    let archive = cluster(
        Pod::of(&docs, "CronJob", "outbox-archiver-archive", "archive"),
        true,
    );
    let mut runs: Vec<Ran> = Vec::new();

    // A container starts.
    let ran = archive.clone().with_args(&["--version"]).run(image).await;
    ran.expect_code(0);
    assert!(ran.stdout.starts_with("outbox-archiver "), "{}", ran.stdout);
    let start = ran.elapsed;
    runs.push(ran);

    // migrate, as a one-off run in the archive CronJob's pod, as the schema owner; then the
    // least-privilege roles, one per Secret.
    let migrate = archive
        .clone()
        .with_args(&["migrate", "--with-source-table"])
        .with_secret("outbox-archiver-archive", "database-url", &db.url);
    let ran = migrate.run(image).await;
    done(&ran);
    runs.push(ran);
    let grants = grants_sql(&db, [&roles[0].1, &roles[1].1, &roles[2].1], PASSWORD);
    let mut admin = admin_connection().await;
    for statement in sql_statements(&grants) {
        admin
            .execute(AssertSqlSafe(statement.to_string()))
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }

    // Rows as the demo seeds them (three apps, most delivered), fewer and over 10 days rather
    // than 30: a batch holds one app's day, and each costs moto requests, not the image.
    let now = chrono::Utc::now().timestamp_millis();
    let plan = outbox_archiver::testing::SeedPlan {
        apps: vec!["wallet-cn".into(), "wallet-sg".into(), "fun.games".into()],
        rows: 3_000,
        start_ms: now - 10 * DAY,
        end_ms: now,
        delivered_percent: 86,
        seed: 20261129,
        event_ids: outbox_archiver::testing::EventIds::Sequential,
    };
    outbox_archiver::testing::seed::seed(&db.db.pool, db.spec, &plan)
        .await
        .unwrap();

    // doctor, as the example Job runs it: each role checked as itself, a table on stdout.
    for container in ["archive-role", "purge-role"] {
        let doctor = cluster(
            Pod::of(&docs, "Job", "outbox-archiver-doctor-", container),
            true,
        );
        let ran = doctor.run(image).await;
        ran.expect_code(0);
        assert!(!ran.stdout.contains("PROBLEM"), "{}", ran.all_output());
        runs.push(ran);
    }

    // Without the company CA in the bundle, the store's certificate is not trusted: what
    // trusts it is the bundle the TLS stacks find in the image, nothing else.
    // (One attempt: the job retries a handshake the certificate fails as it would a network
    // error, five times over some 9 s.)
    let untrusted = cluster(
        Pod::of(&docs, "CronJob", "outbox-archiver-archive", "archive"),
        false,
    )
    .with_config("outbox-archiver", "OUTBOX_ARCHIVER_S3_MAX_ATTEMPTS", "1");
    let ran = untrusted.run(image).await;
    ran.expect_code(2);
    let error = ran.summary()["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(error.contains("does not trust"), "{error}");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_receipts")
            .await,
        0
    );
    runs.push(ran);

    // The sentinel, through the optional ConfigMap every CronJob mounts: the run stops before
    // its first batch.
    let mut stopped = archive
        .clone()
        .with_config("outbox-archiver-stop", "now", "1");
    stopped.what += ", ConfigMap outbox-archiver-stop holding `now`";
    let ran = stopped.run(image).await;
    let summary = done(&ran);
    assert!(
        summary["stop_reason"]
            .as_str()
            .is_some_and(|r| r.contains("sentinel file /etc/outbox-archiver/stop/now exists")),
        "{summary}"
    );
    assert_eq!(total(&summary, "rows"), 0, "{summary}");
    runs.push(ran);

    // archive: every delivered row older than the ConfigMap's 7 days.
    let delivered_before = |cutoff: i64| {
        let sql = format!(
            "SELECT COUNT(*) FROM wallet_outbox WHERE status = 'DELIVERED' AND updated_at_ms < {cutoff}"
        );
        let db = &db;
        async move { db.count(&sql).await as u64 }
    };
    let at_least = delivered_before(chrono::Utc::now().timestamp_millis() - 7 * DAY).await;
    let ran = archive.run(image).await;
    let at_most = delivered_before(chrono::Utc::now().timestamp_millis() - 7 * DAY).await;
    let summary = done(&ran);
    let archived = total(&summary, "rows");
    assert!(
        (at_least..=at_most).contains(&archived) && archived > 500,
        "{archived} rows archived, {at_least}..={at_most} expected: {summary}"
    );
    let archive_time = ran.elapsed;
    runs.push(ran);

    // verify, as its CronJob samples.
    let verify = cluster(
        Pod::of(&docs, "CronJob", "outbox-archiver-verify", "verify"),
        true,
    );
    let ran = verify.run(image).await;
    done(&ran);
    runs.push(ran);

    // purge, past its 24 h grace (the receipts moved two days back, as if recorded then):
    // exactly the archived rows go.
    db.exec(&format!(
        "UPDATE wallet_outbox_archive_receipts SET verified_at_ms = verified_at_ms - {}",
        2 * DAY
    ))
    .await;
    let rows_before = db.count("SELECT COUNT(*) FROM wallet_outbox").await as u64;
    let purge = cluster(
        Pod::of(&docs, "CronJob", "outbox-archiver-purge", "purge"),
        true,
    );
    let ran = purge.run(image).await;
    let summary = done(&ran);
    assert_eq!(total(&summary, "purged_rows"), archived, "{summary}");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox").await as u64,
        rows_before - archived
    );
    runs.push(ran);

    // compact, as its role (nothing is 90 days old).
    let compact = cluster(
        Pod::of(&docs, "CronJob", "outbox-archiver-compact", "compact"),
        true,
    );
    let ran = compact.run(image).await;
    done(&ran);
    runs.push(ran);

    // The metrics each CronJob pushed from its container.
    let pushed = gateway.scrape().await;
    for command in ["archive", "verify", "purge", "compact"] {
        assert_eq!(
            value(&pushed, "outbox_archiver_run_ok", &[("command", command)]),
            Some(1.0),
            "{command}: {pushed:?}"
        );
    }

    // The metrics as a node_exporter textfile, in the collector's directory on the node
    // (a hostPath the nonroot user may write): written there, and nowhere else.
    let node = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(node.path(), Some(65532), Some(65532)).unwrap();
    let collector = "/var/lib/node_exporter/textfile";
    let ran = archive
        .clone()
        .with_volume(
            json!({"name": "textfile", "hostPath": {"path": collector, "type": "Directory"}}),
            json!({"name": "textfile", "mountPath": collector}),
        )
        .with_host_path(collector, node.path())
        .with_env(
            "OUTBOX_ARCHIVER_METRICS_TEXTFILE",
            &format!("{collector}/outbox_archiver_archive.prom"),
        )
        .run(image)
        .await;
    done(&ran);
    runs.push(ran);
    let files: Vec<String> = std::fs::read_dir(node.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files, ["outbox_archiver_archive.prom"]);
    let text = std::fs::read_to_string(node.path().join("outbox_archiver_archive.prom")).unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("outbox_archiver_run_ok{") && l.ends_with(" 1")),
        "{text}"
    );

    // No password and no key in anything a container printed.
    for ran in &runs {
        let output = ran.all_output();
        assert!(!output.contains(PASSWORD), "{}: {output}", ran.what);
        assert!(!output.contains("moto-secret"), "{}: {output}", ran.what);
    }
    let size = inspected["Size"].as_u64().unwrap_or_default();
    eprintln!(
        "image {:.1} MB; a container ran --version in {:.2}s; archive of {archived} rows in a container: {:.2}s",
        size as f64 / 1e6,
        start.as_secs_f64(),
        archive_time.as_secs_f64()
    );
    for ran in &runs {
        eprintln!("  {:.2}s {}", ran.elapsed.as_secs_f64(), ran.what);
    }

    for (_, user) in &roles {
        admin
            .execute(AssertSqlSafe(format!("DROP USER '{user}'@'%'")))
            .await
            .unwrap();
    }
}
