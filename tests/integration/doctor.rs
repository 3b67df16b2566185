//! `doctor` through the real binary, against MariaDB and moto's S3 server: a bucket without
//! versioning, an unknown KMS key and a login without INSERT are each a problem with its fix
//! (exit 1); a bucket set up as payment teams run them passes, its probe object removed (exit 0);
//! an unreachable database is exit 2 and the store is still checked. Doctor writes no row.

use serde_json::Value;
use sqlx::{AssertSqlSafe, Executor};

use crate::support::moto::{Bucket, MotoS3};
use crate::support::*;

const PASSWORD: &str = "doctor-pw-9";

/// The check named `name` in a doctor summary.
fn check<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {summary}"))
}

fn statuses(summary: &Value) -> Vec<(String, String)> {
    summary["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["check"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_each_problem_and_its_fix() {
    let db = TestDb::new().await;
    db.insert(&rows("a1", 5)).await;
    let moto = MotoS3::new(Bucket::Plain).await;
    // A login that may read everything and write nothing.
    let user = format!("od_{}", db.name.trim_start_matches("oat_"));
    let mut admin = admin_connection().await;
    for statement in [
        format!("CREATE USER '{user}'@'%' IDENTIFIED BY '{PASSWORD}'"),
        format!("GRANT SELECT ON `{}`.* TO '{user}'@'%'", db.name),
    ] {
        admin.execute(AssertSqlSafe(statement)).await.unwrap();
    }
    let mut url = url::Url::parse(&db.url).unwrap();
    url.set_username(&user).unwrap();
    url.set_password(Some(PASSWORD)).unwrap();
    let unknown_key = "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-0000-0000-000000000000";
    let mut envs = moto.env();
    envs.push(("DATABASE_URL", url.to_string()));
    envs.push(("OUTBOX_ARCHIVER_SSE_KMS_KEY_ID", unknown_key.to_string()));
    let run = run_cli(&["doctor"], &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    let summary = &run.summary;
    assert_eq!(summary["ok"], false);

    let versioning = check(summary, "bucket_versioning");
    assert_eq!(versioning["status"], "problem", "{versioning}");
    assert!(
        versioning["fix"]
            .as_str()
            .unwrap()
            .contains("put-bucket-versioning"),
        "{versioning}"
    );
    let kms = check(summary, "kms_key");
    assert_eq!(kms["status"], "problem", "{kms}");
    assert!(
        kms["detail"].as_str().unwrap().contains(unknown_key),
        "{kms}"
    );
    assert!(
        kms["fix"].as_str().unwrap().contains("--sse-kms-key-id"),
        "{kms}"
    );
    let grants = check(summary, "grants_archive");
    assert_eq!(grants["status"], "problem", "{grants}");
    let detail = grants["detail"].as_str().unwrap();
    assert!(
        detail.contains("INSERT, UPDATE, DELETE on wallet_outbox_archive_members"),
        "{detail}"
    );
    let fix = grants["fix"].as_str().unwrap();
    assert!(
        fix.contains(&format!(
            "GRANT INSERT, UPDATE ON `{}`.`wallet_outbox_archive_receipts` TO '{user}'@",
            db.name
        )),
        "{fix}"
    );
    // What the login may do is not a problem: it can verify and report status.
    assert_eq!(check(summary, "grants_verify")["status"], "ok");
    assert_eq!(check(summary, "grants_status")["status"], "ok");
    assert_eq!(check(summary, "object_lock")["status"], "warning");
    assert_eq!(check(summary, "probe_object")["status"], "ok");
    assert!(
        !run.all_output.contains(PASSWORD),
        "no secret in the output"
    );
    assert!(
        !run.all_output.contains("moto-secret"),
        "no secret in the output"
    );

    // Nothing written: no row, and no object left under the prefix.
    for table in [
        "wallet_outbox_archive_receipts",
        "wallet_outbox_archive_members",
        "wallet_outbox_archive_runs",
    ] {
        assert_eq!(db.count(&format!("SELECT COUNT(*) FROM {table}")).await, 0);
    }
    assert_eq!(db.count("SELECT COUNT(*) FROM wallet_outbox").await, 5);
    assert_eq!(
        keys(moto.store().await.as_ref()).await,
        Vec::<String>::new()
    );

    // The purge role's view: purge needs DELETE on the outbox.
    let run = run_cli(&["doctor", "--grants-for", "purge"], &envs).await;
    let purge = check(&run.summary, "grants_purge");
    assert_eq!(purge["status"], "problem", "{purge}");
    assert!(
        purge["detail"]
            .as_str()
            .unwrap()
            .contains("DELETE on wallet_outbox;"),
        "{purge}"
    );
    admin
        .execute(AssertSqlSafe(format!("DROP USER '{user}'@'%'")))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_passes_a_bucket_set_up_as_payment_teams_run_them() {
    let db = TestDb::new().await;
    let moto = MotoS3::new(Bucket::Locked).await;
    let key = moto.kms_key().await;
    let mut envs = moto.env();
    envs.push(("DATABASE_URL", db.url.clone()));
    let run = run_cli(
        &[
            "doctor",
            "--grants-for",
            "archive,verify,status,purge",
            "--object-lock-mode",
            "compliance",
            "--retention",
            "7y",
            "--s3-storage-class",
            "GLACIER_IR",
            "--sse",
            "aws:kms",
            "--sse-kms-key-id",
            &key,
            "--legal-hold",
        ],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    let summary = &run.summary;
    let not_ok: Vec<_> = statuses(summary)
        .into_iter()
        .filter(|(_, s)| s != "ok")
        .collect();
    assert_eq!(not_ok, vec![], "{summary}");
    for name in [
        "bucket_versioning",
        "object_lock",
        "kms_key",
        "conditional_put",
        "storage_class",
        "retention",
        "legal_hold",
        "encryption",
        "grants_purge",
        "buffer_pool",
        "retention_index",
    ] {
        assert_eq!(check(summary, name)["status"], "ok", "{name}: {summary}");
    }
    assert!(
        check(summary, "retention")["detail"]
            .as_str()
            .unwrap()
            .contains("COMPLIANCE"),
        "{summary}"
    );
    // The probe was held under a two-second compliance retention and a legal hold, then removed.
    assert_eq!(summary["probe_objects_left"], serde_json::json!([]));
    assert_eq!(
        moto.versions_under("archive/_outbox_archiver/doctor-probe")
            .await,
        Vec::<(String, String)>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_refuses_a_retention_weaker_than_the_buckets_default() {
    // A retention named on a put replaces the bucket's default: governance for a day on a
    // bucket that promises compliance for thirty days would weaken every archived object.
    let db = TestDb::new().await;
    let moto = MotoS3::new(Bucket::LockedByDefault {
        compliance: true,
        days: 30,
    })
    .await;
    let mut envs = moto.env();
    envs.push(("DATABASE_URL", db.url.clone()));
    let weaker = ["--object-lock-mode", "governance", "--retention", "1d"];
    let mut args = vec!["doctor"];
    args.extend(weaker);
    let run = run_cli(&args, &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    let lock = check(&run.summary, "object_lock");
    assert_eq!(lock["status"], "problem", "{lock}");
    assert!(
        lock["fix"]
            .as_str()
            .unwrap()
            .contains("--object-lock-mode compliance --retention 30d"),
        "{lock}"
    );
    // The bucket's own default, or a stronger retention, passes.
    for args in [
        vec!["doctor"],
        vec![
            "doctor",
            "--object-lock-mode",
            "compliance",
            "--retention",
            "7y",
        ],
    ] {
        let run = run_cli(&args, &envs).await;
        assert_eq!(
            check(&run.summary, "object_lock")["status"],
            "ok",
            "{args:?}: {}",
            run.summary
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_without_a_database_still_checks_the_store_and_exits_2() {
    let moto = MotoS3::new(Bucket::Versioned).await;
    let mut envs = moto.env();
    envs.push((
        "DATABASE_URL",
        format!("mysql://nobody:{PASSWORD}@127.0.0.1:{}/x", free_port()),
    ));
    let run = run_cli(&["doctor"], &envs).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    assert_eq!(check(&run.summary, "database")["status"], "problem");
    assert_eq!(check(&run.summary, "store")["status"], "ok");
    assert_eq!(check(&run.summary, "bucket_versioning")["status"], "ok");
    assert!(!run.all_output.contains(PASSWORD));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_says_which_region_it_signs_for_and_whether_it_is_the_buckets() {
    let db = TestDb::new().await;
    let moto = MotoS3::new(Bucket::Versioned).await;
    let mut envs = moto.env();
    envs.push(("DATABASE_URL", db.url.clone()));
    // The bucket's own region, from AWS_REGION.
    let run = run_cli(&["doctor"], &envs).await;
    let region = check(&run.summary, "region");
    assert_eq!(region["status"], "ok", "{region}");
    let detail = region["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("us-east-1")
            && detail.contains("AWS_REGION")
            && detail.contains("own region"),
        "{region}"
    );
    // A bucket in eu-west-1, signed for us-east-1: AWS would refuse or redirect every request.
    let elsewhere = format!("{}-eu", moto.bucket);
    moto.admin
        .create_bucket()
        .bucket(&elsewhere)
        .create_bucket_configuration(
            aws_sdk_s3::types::CreateBucketConfiguration::builder()
                .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::EuWest1)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let mut envs = envs.clone();
    envs.retain(|(k, _)| *k != "OUTBOX_ARCHIVER_STORE");
    envs.push(("OUTBOX_ARCHIVER_STORE", format!("s3://{elsewhere}/archive")));
    let run = run_cli(&["doctor"], &envs).await;
    assert_eq!(run.code, 1, "{}", run.all_output);
    let region = check(&run.summary, "region");
    assert_eq!(region["status"], "problem", "{region}");
    assert!(
        region["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("eu-west-1"),
        "{region}"
    );
    assert!(
        region["fix"]
            .as_str()
            .unwrap_or_default()
            .contains("--s3-region")
            && region["fix"]
                .as_str()
                .unwrap_or_default()
                .contains("eu-west-1"),
        "{region}"
    );
}
