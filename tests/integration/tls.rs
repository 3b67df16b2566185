//! TLS as production connects, verified — to the database (a private server of the suite's
//! flavour with a certificate from a CA the test makes) and to the object store (the in-process
//! S3 server behind https:// with a certificate from a company CA). What the operator asks for
//! is what is checked: `ssl-mode=VERIFY_IDENTITY` / `VERIFY_CA` with `ssl-ca=`, and
//! `--store-ca-bundle` / `AWS_CA_BUNDLE`; every way it can be wrong stops the command at
//! start-up with exit 2 and a message naming the setting.

use crate::support::tls::{TestCa, TlsFront, Validity};
use crate::support::*;

/// `DATABASE_URL` of database `name` on `server` with these query parameters.
fn url_with(server: &PrivateServer, host: &str, name: &str, query: &str) -> String {
    format!(
        "mysql://archiver:{}@{host}:{}/{name}?{query}",
        crate::support::private_server::PASSWORD,
        server.port()
    )
}

async fn status(url: &str) -> Run {
    run_cli(
        &["status", "--all-apps", "--format", "json"],
        &[("DATABASE_URL", url.to_string())],
    )
    .await
}

/// Exit 2, the summary's error containing every one of `words`, and no password anywhere.
fn refused(run: &Run, words: &[&str]) {
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap_or_default();
    for word in words {
        assert!(error.contains(word), "{word:?} in: {error}");
    }
    assert!(
        !run.all_output
            .contains(crate::support::private_server::PASSWORD),
        "no secret: {}",
        run.all_output
    );
}

/// The check named `name` in a doctor summary.
fn doctor_check<'a>(run: &'a Run, name: &str) -> &'a serde_json::Value {
    run.summary["checks"]
        .as_array()
        .unwrap_or_else(|| panic!("checks in {}", run.all_output))
        .iter()
        .find(|c| c["check"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {}", run.all_output))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_tls_is_verified_as_the_url_asks() {
    let ca = TestCa::new("database");
    let other_ca = TestCa::new("someone else");
    let mut server = PrivateServer::start().await;
    let dir = server.dir().to_path_buf();
    ca.write(&dir, "ca.pem");
    ca.issue(&["127.0.0.1", "localhost"], Validity::Current)
        .write(&dir);
    server.stop(libc::SIGTERM).await;
    server.set_options(server.tls_options());
    server.run().await;
    let db = TestDb::on(&server.url()).await;
    db.insert(&rows("a1", 3)).await;
    let ca_file = dir.join("ca.pem");
    let wrong_ca = other_ca.write(&dir, "other-ca.pem");
    let verify = |host: &str, mode: &str, ca: &std::path::Path| {
        url_with(
            &server,
            host,
            &db.name,
            &format!("ssl-mode={mode}&ssl-ca={}", ca.display()),
        )
    };

    // The certificate names 127.0.0.1 and localhost, and chains to the CA given.
    for host in ["127.0.0.1", "localhost"] {
        let run = status(&verify(host, "VERIFY_IDENTITY", &ca_file)).await;
        assert_eq!(run.code, 0, "{host}: {}", run.all_output);
    }
    let run = status(&verify("127.0.0.1", "VERIFY_CA", &ca_file)).await;
    assert_eq!(run.code, 0, "{}", run.all_output);

    // doctor says which server it is and how the connection is protected.
    let store = format!("file://{}", dir.display());
    let doctor = |url: String| {
        let store = store.clone();
        async move { run_cli(&["doctor", "--store", &store], &[("DATABASE_URL", url)]).await }
    };
    let run = doctor(verify("127.0.0.1", "VERIFY_IDENTITY", &ca_file)).await;
    let database = doctor_check(&run, "database");
    let flavour_name = match flavour() {
        Flavour::MariaDb => "MariaDB 10.11",
        Flavour::MySql => "MySQL 9.7",
    };
    assert!(
        database["detail"]
            .as_str()
            .unwrap()
            .starts_with(flavour_name),
        "{database}"
    );
    let tls = doctor_check(&run, "tls");
    assert_eq!(tls["status"], "ok", "{tls}");
    assert!(
        tls["detail"].as_str().unwrap().contains("TLSv1.")
            && tls["detail"].as_str().unwrap().contains("VERIFY_IDENTITY"),
        "{tls}"
    );
    assert_eq!(doctor_check(&run, "max_allowed_packet")["status"], "ok");
    let run = doctor(verify("127.0.0.1", "VERIFY_CA", &ca_file)).await;
    let tls = doctor_check(&run, "tls");
    assert_eq!(tls["status"], "warning", "{tls}");
    assert!(
        tls["fix"].as_str().unwrap().contains("VERIFY_IDENTITY"),
        "{tls}"
    );
    let run = doctor(url_with(
        &server,
        "127.0.0.1",
        &db.name,
        "ssl-mode=DISABLED",
    ))
    .await;
    assert_eq!(
        doctor_check(&run, "tls")["detail"],
        "no TLS: 127.0.0.1 is this machine"
    );

    // Another CA's file: the server is not trusted.
    let run = status(&verify("127.0.0.1", "VERIFY_IDENTITY", &wrong_ca)).await;
    refused(&run, &["not signed by a CA this job trusts", "ssl-ca"]);
    // A CA file that does not exist.
    let run = status(&verify(
        "127.0.0.1",
        "VERIFY_IDENTITY",
        &dir.join("missing.pem"),
    ))
    .await;
    refused(&run, &["ssl-ca", "missing.pem"]);
    // A parameter sqlx would ignore without a word (connecting unverified) is refused.
    let run = status(&url_with(
        &server,
        "127.0.0.1",
        &db.name,
        "sslmode=VERIFY_IDENTITY&ssl_ca=/etc/ca.pem",
    ))
    .await;
    refused(&run, &["unknown parameter \"ssl_ca\"", "DATABASE_URL"]);

    // A certificate for another host: VERIFY_IDENTITY refuses it, VERIFY_CA (the CA only) not.
    ca.issue(&["db.example.internal"], Validity::Current)
        .write(&dir);
    server.reload_tls().await;
    let run = status(&verify("127.0.0.1", "VERIFY_IDENTITY", &ca_file)).await;
    refused(&run, &["does not name the host", "VERIFY_CA", "ssl-mode"]);
    let run = status(&verify("127.0.0.1", "VERIFY_CA", &ca_file)).await;
    assert_eq!(run.code, 0, "{}", run.all_output);

    // An expired certificate. Only MariaDB serves one: MySQL refuses to load it (ALTER INSTANCE
    // RELOAD TLS fails with error 3888, "Invalid certificates"), so a MySQL server never
    // presents an expired certificate to be refused.
    if flavour() == Flavour::MariaDb {
        ca.issue(&["127.0.0.1", "localhost"], Validity::Expired)
            .write(&dir);
        server.reload_tls().await;
        let run = status(&verify("127.0.0.1", "VERIFY_CA", &ca_file)).await;
        refused(&run, &["expired", "ssl-mode"]);
    }

    // A server that takes only TLS refuses a plain connection, and the message says to use TLS
    // (MySQL names require_secure_transport; MariaDB refuses it as a login, error 1045, and the
    // message adds what else it may be).
    ca.issue(&["127.0.0.1", "localhost"], Validity::Current)
        .write(&dir);
    server.reload_tls().await;
    let mut root = server.root().await;
    sqlx::Executor::execute(&mut root, "SET GLOBAL require_secure_transport = ON")
        .await
        .unwrap();
    let run = status(&url_with(
        &server,
        "127.0.0.1",
        &db.name,
        "ssl-mode=DISABLED",
    ))
    .await;
    refused(
        &run,
        &["require_secure_transport", "ssl-mode=VERIFY_IDENTITY"],
    );
    let run = status(&verify("127.0.0.1", "VERIFY_IDENTITY", &ca_file)).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    sqlx::Executor::execute(&mut root, "SET GLOBAL require_secure_transport = OFF")
        .await
        .unwrap();
    drop(root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_store_with_a_company_ca_is_trusted_only_when_given_the_ca() {
    let db = TestDb::new().await;
    db.insert(&rows("a1", 20)).await;
    let s3 = TestS3::new().await;
    let ca = TestCa::new("company");
    let dir = tempfile::tempdir().unwrap();
    let bundle = ca.write(dir.path(), "company-ca.pem");
    let upstream = s3
        .settings
        .endpoint
        .clone()
        .unwrap()
        .trim_start_matches("http://")
        .to_string();
    let front = TlsFront::start(
        &upstream,
        &ca.issue(&["127.0.0.1", "localhost"], Validity::Current),
    )
    .await;
    let mut envs: Vec<(&str, String)> = s3
        .binary_env()
        .into_iter()
        .filter(|(k, _)| *k != "OUTBOX_ARCHIVER_S3_ENDPOINT")
        .collect();
    envs.push((
        "OUTBOX_ARCHIVER_S3_ENDPOINT",
        format!("https://localhost:{}", front.port),
    ));
    envs.push(("DATABASE_URL", db.url.clone()));
    envs.push(("OUTBOX_ARCHIVER_LOCK_PREFIX", db.lock_prefix()));
    let archive = ["archive", "--app", "a1", "--cutoff", "2026-01-02T00:00:00Z"];

    // Without the CA the store's certificate is not trusted: exit 2, naming the setting, and
    // nothing recorded.
    let run = run_cli(&archive, &envs).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("does not trust") && error.contains("--store-ca-bundle"),
        "{error}"
    );
    assert!(!run.all_output.contains(SECRET_KEY), "no secret");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM wallet_outbox_archive_receipts")
            .await,
        0
    );

    // A bundle that is not one: exit 2, naming the setting.
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    let mut with_junk = envs.clone();
    with_junk.push((
        "OUTBOX_ARCHIVER_STORE_CA_BUNDLE",
        junk.display().to_string(),
    ));
    let run = run_cli(&archive, &with_junk).await;
    assert_eq!(run.code, 2, "{}", run.all_output);
    let error = run.summary["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("--store-ca-bundle") && error.contains("no PEM certificate"),
        "{error}"
    );

    // The operators' variable (AWS_CA_BUNDLE) and the flag both work; verify reads it all back.
    let mut with_env = envs.clone();
    with_env.push(("AWS_CA_BUNDLE", bundle.display().to_string()));
    let run = run_cli(&archive, &with_env).await;
    assert_eq!(run.code, 0, "{}", run.all_output);
    assert_eq!(run.summary["apps"][0]["rows"], 20, "{}", run.all_output);
    let bundle_arg = bundle.display().to_string();
    let run = run_cli(
        &["verify", "--all-apps", "--store-ca-bundle", &bundle_arg],
        &envs,
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.all_output);
}

/// Every connection to the database sends at once (`TCP_NODELAY`), pooled and dedicated (the
/// lock's), over TLS: sqlx 0.9.0 no longer sets it, and a statement longer than one TLS record
/// (500 member rows) then waited 40 ms for the server's delayed acknowledgement, every time.
/// On a server of its own, so the sockets to its port are this test's alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_database_connection_sends_at_once_over_tls_too() {
    let ca = TestCa::new("database");
    let mut server = PrivateServer::start().await;
    let dir = server.dir().to_path_buf();
    ca.write(&dir, "ca.pem");
    ca.issue(&["127.0.0.1", "localhost"], Validity::Current)
        .write(&dir);
    server.stop(libc::SIGTERM).await;
    server.set_options(server.tls_options());
    server.run().await;
    let db = TestDb::on(&server.url()).await;
    let url = url_with(&server, "127.0.0.1", &db.name, "ssl-mode=REQUIRED");
    let tls = outbox_archiver::Db::connect(&url, 4).await.unwrap();
    // Three pooled connections at once, and a dedicated one.
    let (a, b, c) = tokio::join!(tls.pool.acquire(), tls.pool.acquire(), tls.pool.acquire());
    let (mut a, _b, _c) = (a.unwrap(), b.unwrap(), c.unwrap());
    let cipher: (String, String) = sqlx::query_as("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        .fetch_one(&mut *a)
        .await
        .unwrap();
    assert!(!cipher.1.is_empty(), "the connection is TLS: {cipher:?}");
    let _dedicated = tls.dedicated().await.unwrap();
    let sockets = outbox_archiver::testing::sockets_to(server.port());
    assert!(sockets.len() >= 4, "{sockets:?}");
    assert!(
        sockets.iter().all(|s| s.nodelay),
        "every socket to the database sends at once: {sockets:?}"
    );
}
