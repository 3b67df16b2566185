//! The resumable GET: an object body that survives a connection breaking off or going silent,
//! by resuming with a `Range` request pinned to the object's ETag, up to the attempt limit.

use std::time::Duration;

use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::operation::get_object::GetObjectOutput;
use aws_sdk_s3::primitives::ByteStream as SdkByteStream;
use bytes::Bytes;
use futures_util::StreamExt;

use super::Fetch;
use crate::store::{ByteStream, Counters, StoreError};

impl Fetch {
    /// The body of `key`, read as a [`Read`] (`None`: no such object).
    pub(super) async fn read(&self, key: &str) -> Result<Option<ByteStream>, StoreError> {
        let Some(out) = self.object(key, 0, None).await? else {
            return Ok(None);
        };
        let read = Read {
            fetch: self.clone(),
            key: key.to_string(),
            etag: out.e_tag().map(str::to_string),
            size: out.content_length().map(|n| n.max(0) as u64),
            body: out.body,
            offset: 0,
            skip: 0,
            resumes: 0,
        };
        Ok(Some(futures_util::stream::unfold(read, Read::next).boxed()))
    }

    /// GETs `key` from byte `offset` on (the whole object at 0), pinned to `etag` when given.
    async fn object(
        &self,
        key: &str,
        offset: u64,
        etag: Option<&str>,
    ) -> Result<Option<GetObjectOutput>, StoreError> {
        let mut request = self.client.get_object().bucket(&self.bucket).key(key);
        if offset > 0 {
            request = request.range(format!("bytes={offset}-"));
        }
        if let Some(etag) = etag {
            request = request.if_match(etag);
        }
        match request.send().await {
            Ok(out) => Ok(Some(out)),
            Err(e) if e.code() == Some("NoSuchKey") => Ok(None),
            Err(e) => Err(self.error("get", key, e)),
        }
    }
}

/// An object body being read. A connection that breaks off, or a body that stays silent for the
/// read timeout, does not fail the read: it resumes where it stopped with a `Range` request
/// pinned to the object's ETag, up to the attempt limit, so a long read survives what the SDK's
/// own retries (which end when the headers arrive) cannot see. A store that ignores `Range`
/// sends the whole object again and the bytes already delivered are skipped.
struct Read {
    fetch: Fetch,
    key: String,
    etag: Option<String>,
    size: Option<u64>,
    body: SdkByteStream,
    /// Bytes delivered to the caller so far.
    offset: u64,
    /// Bytes of the current body to drop before delivering (a resumed read the store served whole).
    skip: u64,
    resumes: u32,
}

impl Read {
    async fn next(mut self) -> Option<(Result<Bytes, StoreError>, Read)> {
        loop {
            let problem =
                match tokio::time::timeout(self.fetch.read_timeout, self.body.next()).await {
                    Ok(Some(Ok(mut chunk))) => {
                        if self.skip > 0 {
                            let drop = self.skip.min(chunk.len() as u64);
                            self.skip -= drop;
                            chunk = chunk.slice(drop as usize..);
                            if chunk.is_empty() {
                                continue;
                            }
                        }
                        self.offset += chunk.len() as u64;
                        return Some((Ok(chunk), self));
                    }
                    Ok(None) if self.size.is_none_or(|size| self.offset >= size) => return None,
                    Ok(None) => format!(
                        "the body ended at byte {} of {}",
                        self.offset,
                        self.size.unwrap_or_default()
                    ),
                    Ok(Some(Err(e))) => super::error::in_words(&e),
                    Err(_) => format!(
                        "no bytes for {} ms (--s3-read-timeout)",
                        self.fetch.read_timeout.as_millis()
                    ),
                };
            if self.resumes + 1 >= self.fetch.max_attempts {
                let error = StoreError::Unreachable {
                    endpoint: self.fetch.endpoint.clone(),
                    detail: format!(
                        "reading {} broke off at byte {} after {} attempts: {problem}",
                        self.key,
                        self.offset,
                        self.resumes + 1
                    ),
                };
                return self.fail(error);
            }
            self.resumes += 1;
            Counters::bump(&self.fetch.counters.resumed_reads);
            tracing::warn!(
                key = %self.key,
                offset = self.offset,
                attempt = self.resumes + 1,
                "S3 read broke off ({problem}); resuming from where it stopped"
            );
            tokio::time::sleep(backoff(self.resumes)).await;
            if let Err(error) = self.reopen().await {
                return self.fail(error);
            }
        }
    }

    /// GETs the rest of the object, from the first byte not yet delivered, pinned to its ETag.
    async fn reopen(&mut self) -> Result<(), StoreError> {
        let gone = |detail: &str| StoreError::Other {
            op: "get",
            key: self.key.clone(),
            detail: detail.into(),
        };
        let out = match self
            .fetch
            .object(&self.key, self.offset, self.etag.as_deref())
            .await
        {
            Ok(Some(out)) => out,
            Ok(None) => return Err(gone("the object disappeared while it was being read")),
            // 412 on If-Match: the object is not the one this read began.
            Err(StoreError::AlreadyExists { .. }) => {
                return Err(gone(
                    "the object changed while it was being read (ETag no longer matches)",
                ))
            }
            Err(error) => return Err(error),
        };
        let ranged = out.content_range().is_some() || self.offset == 0;
        self.skip = if ranged { 0 } else { self.offset };
        self.body = out.body;
        Ok(())
    }

    /// Yields `error`, after which the read yields nothing more.
    fn fail(mut self, error: StoreError) -> Option<(Result<Bytes, StoreError>, Read)> {
        self.body = SdkByteStream::from_static(b"");
        self.size = None;
        Some((Err(error), self))
    }
}

/// Waits before the `n`th resume: 100 ms doubling, capped at 5 s, with up to 50 % jitter.
fn backoff(n: u32) -> Duration {
    let base = Duration::from_millis(100)
        .saturating_mul(1 << n.min(6))
        .min(Duration::from_secs(5));
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() % 500);
    base + base * jitter / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resumes_back_off_from_100_ms_doubling_to_5_s_with_at_most_half_again_of_jitter() {
        let ms = |n| backoff(n).as_millis();
        for (n, base) in [
            (0, 100),
            (1, 200),
            (2, 400),
            (5, 3_200),
            (6, 5_000),
            (30, 5_000),
        ] {
            assert!(
                (base..base + base / 2).contains(&ms(n)),
                "resume {n}: {} ms",
                ms(n)
            );
        }
    }
}
