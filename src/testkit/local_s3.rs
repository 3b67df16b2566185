//! A real S3 HTTP server in this process — s3s serving a local folder through s3s-fs — for
//! `demo` and the test suite. It speaks the S3 protocol over TCP with SigV4 authentication, so
//! the archiver talks to it exactly as it talks to AWS, MinIO or COS.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// A running server. Dropping it stops accepting connections.
pub struct LocalS3 {
    pub endpoint: String,
    pub access_key: String,
    pub secret_key: String,
    pub root: PathBuf,
    stop: CancellationToken,
}

impl std::fmt::Debug for LocalS3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalS3")
            .field("endpoint", &self.endpoint)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Drop for LocalS3 {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl LocalS3 {
    /// Serves `root` (each top-level folder is a bucket) on 127.0.0.1, on a free port.
    pub async fn start(
        root: &Path,
        access_key: &str,
        secret_key: &str,
    ) -> std::io::Result<LocalS3> {
        Self::start_on(root, access_key, secret_key, 0).await
    }

    /// [`LocalS3::start`] on 127.0.0.1:`port` (0: a free one).
    pub(crate) async fn start_on(
        root: &Path,
        access_key: &str,
        secret_key: &str,
        port: u16,
    ) -> std::io::Result<LocalS3> {
        let fs =
            s3s_fs::FileSystem::new(root).map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?;
        Self::serve(fs, listener, root, access_key, secret_key)
    }

    /// Serves any S3 implementation (tests wrap s3s-fs to misbehave on purpose).
    pub async fn start_with(
        s3: impl s3s::S3,
        root: &Path,
        access_key: &str,
        secret_key: &str,
    ) -> std::io::Result<LocalS3> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        Self::serve(s3, listener, root, access_key, secret_key)
    }

    fn serve(
        s3: impl s3s::S3,
        listener: TcpListener,
        root: &Path,
        access_key: &str,
        secret_key: &str,
    ) -> std::io::Result<LocalS3> {
        let mut builder = s3s::service::S3ServiceBuilder::new(s3);
        builder.set_auth(s3s::auth::SimpleAuth::from_single(access_key, secret_key));
        let service = builder.build();
        let endpoint = format!("http://{}", listener.local_addr()?);
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = stopped.cancelled() => break,
                    accepted = listener.accept() => accepted,
                };
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let service = service.clone();
                tokio::spawn(async move {
                    let _ = ConnBuilder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(LocalS3 {
            endpoint,
            access_key: access_key.to_string(),
            secret_key: secret_key.to_string(),
            root: root.to_path_buf(),
            stop,
        })
    }

    /// Settings for an [`crate::store::S3Store`] that talks to this server.
    pub fn settings(&self) -> crate::store::S3Settings {
        crate::store::S3Settings {
            endpoint: Some(self.endpoint.clone()),
            region: Some("us-east-1".into()),
            force_path_style: Some(true),
            upload_checksum: None,
            conditional_put: None,
            static_credentials: Some((self.access_key.clone(), self.secret_key.clone())),
            ..Default::default()
        }
    }

    /// Creates a bucket (a folder under the root).
    pub fn create_bucket(&self, bucket: &str) -> std::io::Result<()> {
        std::fs::create_dir_all(self.root.join(bucket))
    }
}
