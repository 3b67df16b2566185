//! A real S3 server that misbehaves on purpose: s3s-fs behind hooks — `before` may answer any
//! object request with an error (a 5xx, say), `on_get` may alter the bytes a GET returns, and
//! `on_head` what a HEAD reports. The corruption and fault tests use it; everything else goes to
//! s3s-fs unchanged.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use futures_util::TryStreamExt;
use outbox_archiver::testing::LocalS3;
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, S3};

use crate::support::{TestS3, ACCESS_KEY, COUNTER, SECRET_KEY};

type Before = Box<dyn Fn(&str) -> S3Result<()> + Send + Sync>;
type OnGet = Box<dyn Fn(&str, Vec<u8>) -> Vec<u8> + Send + Sync>;
type OnHead = Box<dyn Fn(&mut HeadObjectOutput) + Send + Sync>;
type OnPut = Box<dyn Fn(&mut PutObjectInput) + Send + Sync>;

struct Misbehaving {
    inner: s3s_fs::FileSystem,
    before: Before,
    on_get: OnGet,
    on_head: OnHead,
    on_put: OnPut,
}

#[async_trait::async_trait]
impl S3 for Misbehaving {
    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.inner.head_bucket(req).await
    }
    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.inner.list_objects_v2(req).await
    }
    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        (self.before)(&req.input.key)?;
        let mut resp = self.inner.head_object(req).await?;
        (self.on_head)(&mut resp.output);
        Ok(resp)
    }
    async fn put_object(
        &self,
        mut req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        (self.before)(&req.input.key)?;
        (self.on_put)(&mut req.input);
        self.inner.put_object(req).await
    }
    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        (self.before)(&req.input.key)?;
        self.inner.delete_object(req).await
    }
    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        (self.before)(&req.input.key)?;
        let key = req.input.key.clone();
        let mut resp = self.inner.get_object(req).await?;
        if let Some(body) = resp.output.body.take() {
            let chunks: Vec<Bytes> = body
                .try_collect()
                .await
                .map_err(|e| s3s::s3_error!(InternalError, "{e}"))?;
            let bytes = (self.on_get)(&key, chunks.concat());
            resp.output.content_length = Some(bytes.len() as i64);
            resp.output.body = Some(StreamingBlob::from(s3s::Body::from(bytes)));
        }
        Ok(resp)
    }
}

/// A bucket on an in-process S3 server with the given hooks (HEADs unchanged).
pub async fn misbehaving(
    before: impl Fn(&str) -> S3Result<()> + Send + Sync + 'static,
    on_get: impl Fn(&str, Vec<u8>) -> Vec<u8> + Send + Sync + 'static,
) -> TestS3 {
    with_hooks(
        Box::new(before),
        Box::new(on_get),
        Box::new(|_| {}),
        Box::new(|_| {}),
    )
    .await
}

/// A bucket on an in-process S3 server whose HEADs report what `on_head` makes of them.
pub async fn misreporting(
    on_head: impl Fn(&mut HeadObjectOutput) + Send + Sync + 'static,
) -> TestS3 {
    with_hooks(
        Box::new(|_| Ok(())),
        Box::new(|_, bytes| bytes),
        Box::new(on_head),
        Box::new(|_| {}),
    )
    .await
}

/// A bucket on an in-process S3 server that shows `on_put` every PUT before it is stored (it
/// may hold it there a while).
pub async fn watching_puts(on_put: impl Fn(&mut PutObjectInput) + Send + Sync + 'static) -> TestS3 {
    with_hooks(
        Box::new(|_| Ok(())),
        Box::new(|_, bytes| bytes),
        Box::new(|_| {}),
        Box::new(on_put),
    )
    .await
}

/// A bucket on an in-process S3 server that accepts `If-None-Match: *` and overwrites anyway,
/// as Tencent COS and some self-hosted stores do.
pub async fn ignoring_if_none_match() -> TestS3 {
    with_hooks(
        Box::new(|_| Ok(())),
        Box::new(|_, bytes| bytes),
        Box::new(|_| {}),
        Box::new(|input| input.if_none_match = None),
    )
    .await
}

async fn with_hooks(before: Before, on_get: OnGet, on_head: OnHead, on_put: OnPut) -> TestS3 {
    let dir = tempfile::tempdir().unwrap();
    let s3 = Misbehaving {
        inner: s3s_fs::FileSystem::new(dir.path()).unwrap(),
        before,
        on_get,
        on_head,
        on_put,
    };
    let server = LocalS3::start_with(s3, dir.path(), ACCESS_KEY, SECRET_KEY)
        .await
        .unwrap();
    TestS3::with_server(server, dir, COUNTER.fetch_add(1, Ordering::SeqCst))
}
