//! A store that damages what it returns (one flipped byte on every GET of a chosen object kind)
//! makes the batch fail at read-back; nothing is recorded (SPEC §5.1).

use bytes::Bytes;
use futures_util::TryStreamExt;
use outbox_archiver::local_s3::LocalS3;
use outbox_archiver::summary::Outcome;
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, S3};

use crate::support::*;

/// s3s-fs, but GETs of keys ending in `suffix` come back with one byte flipped.
struct FlipOnRead {
    inner: s3s_fs::FileSystem,
    suffix: &'static str,
}

#[async_trait::async_trait]
impl S3 for FlipOnRead {
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
        self.inner.head_object(req).await
    }
    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        self.inner.put_object(req).await
    }
    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.inner.list_objects_v2(req).await
    }
    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let flip = req.input.key.ends_with(self.suffix);
        let mut resp = self.inner.get_object(req).await?;
        if flip {
            if let Some(body) = resp.output.body.take() {
                let chunks: Vec<Bytes> = body
                    .try_collect()
                    .await
                    .map_err(|e| s3s::s3_error!(InternalError, "{e}"))?;
                let mut bytes = chunks.concat();
                let middle = bytes.len() / 2;
                bytes[middle] ^= 0x20;
                resp.output.body = Some(StreamingBlob::from(s3s::Body::from(bytes)));
            }
        }
        Ok(resp)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_on_read_back_fails_the_batch_and_records_nothing() {
    for suffix in ["data.ndjson.gz", "manifest.json", "_SUCCESS"] {
        let dir = tempfile::tempdir().unwrap();
        let inner = s3s_fs::FileSystem::new(dir.path()).unwrap();
        let server = LocalS3::start_with(
            FlipOnRead { inner, suffix },
            dir.path(),
            ACCESS_KEY,
            SECRET_KEY,
        )
        .await
        .unwrap();
        let s3 = TestS3::with_server(
            server,
            dir,
            COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst),
        );
        let store = s3.store().await;
        let db = TestDb::new().await;
        db.insert(&rows("a1", 20)).await;
        db.insert(&[row("a2", "other-app", T0)]).await;
        let summary = archive(
            &env(&db, store.clone(), T0 + DAY),
            &options(&db, &["a1"], T0 + DAY),
        )
        .await;
        let a1 = &summary.apps[0];
        assert_eq!(
            a1.outcome,
            Outcome::Failed,
            "{suffix}: {}",
            summary.to_json()
        );
        let error = a1.error.clone().unwrap();
        assert!(
            error.contains("read-back of") && error.contains(suffix),
            "{suffix}: {error}"
        );
        assert_eq!(summary.exit_code, 1);
        assert!(
            db.receipts("a1").await.is_empty(),
            "{suffix}: nothing recorded"
        );
        assert!(db.members("a1").await.is_empty());
        db.drop().await;
    }
}
