//! Transient S3 faults (issue 5, in part): a store that answers every third request with HTTP 503
//! or 500 — the run succeeds through the SDK's retries with backoff, and records exactly the rows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use outbox_archiver::local_s3::LocalS3;
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, S3};

use crate::support::*;

/// s3s-fs, but every third object request fails with 503 SlowDown or 500 InternalError.
struct Flaky {
    inner: s3s_fs::FileSystem,
    calls: Arc<AtomicU64>,
    faults: Arc<AtomicU64>,
}

impl Flaky {
    fn fault(&self) -> S3Result<()> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n % 3 != 2 {
            return Ok(());
        }
        self.faults.fetch_add(1, Ordering::SeqCst);
        if n % 2 == 0 {
            Err(s3s::s3_error!(SlowDown, "injected 503"))
        } else {
            Err(s3s::s3_error!(InternalError, "injected 500"))
        }
    }
}

#[async_trait::async_trait]
impl S3 for Flaky {
    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.inner.head_bucket(req).await
    }
    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        self.fault()?;
        self.inner.head_object(req).await
    }
    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        self.fault()?;
        self.inner.put_object(req).await
    }
    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        self.fault()?;
        self.inner.get_object(req).await
    }
    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.inner.list_objects_v2(req).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_5xx_faults_are_retried_and_the_run_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicU64::new(0));
    let faults = Arc::new(AtomicU64::new(0));
    let flaky = Flaky {
        inner: s3s_fs::FileSystem::new(dir.path()).unwrap(),
        calls: calls.clone(),
        faults: faults.clone(),
    };
    let server = LocalS3::start_with(flaky, dir.path(), ACCESS_KEY, SECRET_KEY)
        .await
        .unwrap();
    let s3 = TestS3::with_server(server, dir, COUNTER.fetch_add(1, Ordering::SeqCst));
    let store = s3.store().await;
    let db = TestDb::new().await;
    db.insert(&rows("a1", 60)).await;
    let mut opts = options(&db, &["a1"], T0 + DAY);
    opts.limits.max_rows = 10;
    let summary = archive(&env(&db, store.clone(), T0 + DAY), &opts).await;
    assert!(summary.ok, "{}", summary.to_json());
    assert!(
        faults.load(Ordering::SeqCst) >= 10,
        "faults were injected: {}",
        faults.load(Ordering::SeqCst)
    );
    assert_eq!(
        archived_rows(&db, store.as_ref(), "a1").await,
        db.expected_rows("a1", T0 + DAY).await
    );
    assert_eq!(db.receipts("a1").await.len(), 6);
    eprintln!(
        "faults: {} of {} object requests failed with 5xx and were retried",
        faults.load(Ordering::SeqCst),
        calls.load(Ordering::SeqCst)
    );
    db.drop().await;
}
