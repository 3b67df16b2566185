//! The store side: a bucket of its own per test on a real S3 HTTP server (s3s-fs in this
//! process, or the endpoint in `OUTBOX_ARCHIVER_TEST_S3_ENDPOINT` with a per-test prefix).

use outbox_archiver::format::Key;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures_util::TryStreamExt;
use outbox_archiver::testing::LocalS3;
use outbox_archiver::Row;
use outbox_archiver::{Location, ObjectStore, S3Settings};

use super::{TestDb, COUNTER};

/// A bucket of its own on a real S3 HTTP server.
pub struct TestS3 {
    pub server: Option<LocalS3>,
    pub settings: S3Settings,
    pub location: Location,
    _dir: tempfile::TempDir,
}

pub const ACCESS_KEY: &str = "test-access-key";
pub const SECRET_KEY: &str = "test-secret-key-do-not-print";

impl TestS3 {
    pub async fn new() -> TestS3 {
        let dir = tempfile::tempdir().unwrap();
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        if let Ok(endpoint) = std::env::var("OUTBOX_ARCHIVER_TEST_S3_ENDPOINT") {
            let bucket = std::env::var("OUTBOX_ARCHIVER_TEST_S3_BUCKET")
                .expect("OUTBOX_ARCHIVER_TEST_S3_BUCKET with the endpoint");
            let settings = S3Settings {
                endpoint: Some(endpoint),
                region: std::env::var("AWS_REGION").ok(),
                force_path_style: Some(true),
                upload_checksum: None,
                conditional_put: None,
                static_credentials: None,
                ..Default::default()
            };
            let prefix = format!(
                "outbox-archiver-tests/{}-{n}-{}",
                std::process::id(),
                chrono::Utc::now().timestamp_millis()
            );
            return TestS3 {
                server: None,
                settings,
                location: Location::S3 {
                    bucket,
                    prefix: outbox_archiver::format::Prefix::parse(&prefix).unwrap(),
                },
                _dir: dir,
            };
        }
        Self::in_process_in(dir, n).await
    }

    /// A bucket on an S3 server in this process, whatever `OUTBOX_ARCHIVER_TEST_S3_ENDPOINT`
    /// says: for a test that needs the server's credentials and buckets in its hands.
    pub async fn in_process() -> TestS3 {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        Self::in_process_in(tempfile::tempdir().unwrap(), n).await
    }

    async fn in_process_in(dir: tempfile::TempDir, n: u32) -> TestS3 {
        let server = LocalS3::start(dir.path(), ACCESS_KEY, SECRET_KEY)
            .await
            .unwrap();
        Self::with_server(server, dir, n)
    }

    /// A bucket on a server the test started itself (to misbehave on purpose).
    pub fn with_server(server: LocalS3, dir: tempfile::TempDir, n: u32) -> TestS3 {
        let bucket = format!("bucket{n}");
        server.create_bucket(&bucket).unwrap();
        let settings = server.settings();
        TestS3 {
            server: Some(server),
            settings,
            location: Location::S3 {
                bucket,
                prefix: outbox_archiver::format::Prefix::parse("archive").unwrap(),
            },
            _dir: dir,
        }
    }

    /// The environment the binary needs to reach this bucket (`--store` included).
    pub fn binary_env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![("OUTBOX_ARCHIVER_STORE", self.location.to_string())];
        if let Some(endpoint) = &self.settings.endpoint {
            env.push(("OUTBOX_ARCHIVER_S3_ENDPOINT", endpoint.clone()));
        }
        match &self.settings.static_credentials {
            Some((key, secret)) => {
                env.push(("AWS_ACCESS_KEY_ID", key.clone()));
                env.push(("AWS_SECRET_ACCESS_KEY", secret.clone()));
            }
            None => {
                for var in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
                    if let Ok(value) = std::env::var(var) {
                        env.push((var, value));
                    }
                }
            }
        }
        env
    }

    pub async fn store(&self) -> Arc<dyn ObjectStore> {
        outbox_archiver::open_store(self.location.clone(), &self.settings)
            .await
            .unwrap()
    }
}

/// Every row in every data object the receipts of `app` reference, in receipt cursor order.
pub async fn archived_rows(db: &TestDb, store: &dyn ObjectStore, app: &str) -> Vec<Row> {
    let sql = format!(
        "SELECT data_object_key FROM {} WHERE app_code = ? ORDER BY last_updated_at_ms, last_event_id",
        db.spec.receipts_table()
    );
    let keys: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(app)
        .fetch_all(&db.db.pool)
        .await
        .unwrap();
    let mut rows = Vec::new();
    for key in keys {
        let text = ndjson_of(store, &key).await;
        for (i, line) in text
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .enumerate()
        {
            rows.push(outbox_archiver::decode_line(db.spec, line, i as u64 + 1).unwrap());
        }
    }
    rows
}

/// The NDJSON a data object holds, decompressed.
pub async fn ndjson_of(store: &dyn ObjectStore, key: &str) -> Vec<u8> {
    let bytes = outbox_archiver::get_all(store, &Key::stored(key))
        .await
        .unwrap()
        .expect("data object exists");
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut text).unwrap();
    text
}

/// Every key in the test's store, sorted.
pub async fn keys(store: &dyn ObjectStore) -> Vec<String> {
    store
        .list(store.location().prefix())
        .await
        .unwrap()
        .into_iter()
        .map(String::from)
        .collect()
}

/// Every key of the batches' objects: [`keys`] without the apps' logs (and the linear chains
/// of older builds) and the archive's marker.
pub async fn batch_keys(store: &dyn ObjectStore) -> Vec<String> {
    keys(store)
        .await
        .into_iter()
        .filter(|k| !is_log_key(k) && !is_home_marker(k))
        .collect()
}

/// Whether `key` is an archive's marker (`{prefix}/{table}/_archive.json`), the one object not
/// a batch's nor a chain's.
pub fn is_home_marker(key: &str) -> bool {
    key.ends_with("/_archive.json")
}

/// Whether `key` is an object of an app's log (or of an older build's linear chain).
pub fn is_log_key(key: &str) -> bool {
    key.contains("/_log/") || key.contains("/_chain/")
}

/// The apps' logs' checkpoints (their tree heads).
pub async fn checkpoint_keys(store: &dyn ObjectStore) -> Vec<String> {
    keys(store)
        .await
        .into_iter()
        .filter(|k| k.contains("/_log/") && k.ends_with("/checkpoint"))
        .collect()
}

/// The tree size of the app's log in the store (0: none).
pub async fn log_size(store: &dyn ObjectStore, folder: &str) -> u64 {
    let table = outbox_archiver::format::table_prefix(store.location().prefix(), "wallet_outbox");
    let key = format!("{table}_log/app_code={folder}/checkpoint");
    match store.get(&Key::stored(key.clone())).await.unwrap() {
        None => 0,
        Some(_) => {
            let text = String::from_utf8(read(store, &key).await).unwrap();
            text.lines().nth(1).unwrap().parse().unwrap()
        }
    }
}

/// Reads a whole object.
pub async fn read(store: &dyn ObjectStore, key: &str) -> Vec<u8> {
    let mut body = store
        .get(&Key::stored(key))
        .await
        .unwrap()
        .expect("object exists");
    let mut out = Vec::new();
    while let Some(chunk) = body.try_next().await.unwrap() {
        out.extend_from_slice(&chunk);
    }
    out
}
