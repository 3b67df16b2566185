//! Objects as files under a directory (`file:///path`): for demos and air-gapped backfills.
//!
//! A put writes a temporary file beside the target, syncs it, then links it into place
//! (create-only: `link` fails if the name exists) or renames it over the target (overwrite), so a
//! reader never sees a partial object.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;

use super::{ByteStream, Key, Location, ObjectMeta, ObjectStore, PutMode, PutOptions, StoreError};

#[derive(Debug)]
pub struct LocalStore {
    location: Location,
    root: PathBuf,
}

impl LocalStore {
    pub fn new(location: Location) -> LocalStore {
        let root = match &location {
            Location::Local { root } => root.clone(),
            Location::S3 { .. } => panic!("LocalStore needs a file:// location"),
        };
        LocalStore { location, root }
    }

    fn path(&self, key: &str) -> Result<PathBuf, StoreError> {
        if key.is_empty()
            || key.starts_with('/')
            || key
                .split('/')
                .any(|s| s.is_empty() || s == "." || s == "..")
        {
            return Err(StoreError::Other {
                op: "resolve",
                key: key.into(),
                detail: "unsafe key".into(),
            });
        }
        Ok(self.root.join(key))
    }
}

fn io_error(op: &'static str, key: &str, e: std::io::Error) -> StoreError {
    if e.kind() == ErrorKind::PermissionDenied {
        return StoreError::AccessDenied {
            detail: format!("{op} {key}: {e}"),
        };
    }
    StoreError::Other {
        op,
        key: key.to_string(),
        detail: e.to_string(),
    }
}

fn write_synced(path: &Path, body: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::File::create(path)?;
    file.write_all(body)?;
    file.sync_all()
}

#[async_trait]
impl ObjectStore for LocalStore {
    fn location(&self) -> &Location {
        &self.location
    }

    async fn confirm_access(&self) -> Result<(), StoreError> {
        match tokio::fs::metadata(&self.root).await {
            Ok(m) if m.is_dir() => Ok(()),
            _ => Err(StoreError::NoSuchBucket {
                bucket: self.root.display().to_string(),
            }),
        }
    }

    async fn head(&self, key: &Key) -> Result<Option<ObjectMeta>, StoreError> {
        let key = key.as_str();
        match tokio::fs::metadata(self.path(key)?).await {
            Ok(m) if m.is_file() => Ok(Some(ObjectMeta {
                size: m.len(),
                ..ObjectMeta::default()
            })),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error("head", key, e)),
        }
    }

    async fn get(&self, key: &Key) -> Result<Option<ByteStream>, StoreError> {
        let key = key.as_str();
        let file = match tokio::fs::File::open(self.path(key)?).await {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error("get", key, e)),
        };
        let key = key.to_string();
        let stream = tokio_util::io::ReaderStream::with_capacity(file, 256 * 1024)
            .map(move |chunk| chunk.map_err(|e| io_error("get", &key, e)));
        Ok(Some(stream.boxed()))
    }

    async fn put_with(
        &self,
        key: &Key,
        body: Bytes,
        mode: PutMode,
        options: &PutOptions,
    ) -> Result<(), StoreError> {
        let key = key.as_str();
        if *options != PutOptions::default() {
            return Err(StoreError::Unsupported {
                store: "file://",
                what: "keep storage classes, Object Lock retention or legal holds".into(),
            });
        }
        let path = self.path(key)?;
        let key = key.to_string();
        tokio::task::spawn_blocking(move || {
            let dir = path.parent().expect("a key has a parent");
            std::fs::create_dir_all(dir).map_err(|e| io_error("put", &key, e))?;
            let tmp = dir.join(format!(
                ".{}.tmp-{}",
                path.file_name().unwrap().to_string_lossy(),
                std::process::id()
            ));
            write_synced(&tmp, &body).map_err(|e| io_error("put", &key, e))?;
            let placed = match mode {
                PutMode::Create => std::fs::hard_link(&tmp, &path),
                PutMode::Overwrite => std::fs::rename(&tmp, &path),
            };
            let _ = std::fs::remove_file(&tmp);
            match placed {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    return Err(StoreError::AlreadyExists { key })
                }
                Err(e) => return Err(io_error("put", &key, e)),
            }
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io_error("put", &key, e))
        })
        .await
        .map_err(|e| StoreError::Other {
            op: "put",
            key: String::new(),
            detail: e.to_string(),
        })?
    }

    async fn list_starting(&self, prefix: &str) -> Result<Vec<Key>, StoreError> {
        let root = self.root.clone();
        let prefix = prefix.to_string();
        tokio::task::spawn_blocking(move || {
            let mut keys = Vec::new();
            let mut stack = vec![root.clone()];
            while let Some(dir) = stack.pop() {
                let entries = match std::fs::read_dir(&dir) {
                    Ok(e) => e,
                    Err(e) if e.kind() == ErrorKind::NotFound => continue,
                    Err(e) => return Err(io_error("list", &prefix, e)),
                };
                for entry in entries {
                    let entry = entry.map_err(|e| io_error("list", &prefix, e))?;
                    let path = entry.path();
                    let name = entry.file_name().to_string_lossy().to_string();
                    if path.is_dir() {
                        stack.push(path);
                    } else if !(name.starts_with('.') && name.contains(".tmp-")) {
                        let key = path
                            .strip_prefix(&root)
                            .expect("under root")
                            .to_string_lossy()
                            .to_string();
                        if key.starts_with(&prefix) {
                            keys.push(Key::stored(key));
                        }
                    }
                }
            }
            keys.sort();
            Ok(keys)
        })
        .await
        .map_err(|e| StoreError::Other {
            op: "list",
            key: String::new(),
            detail: e.to_string(),
        })?
    }

    async fn delete(&self, key: &Key) -> Result<(), StoreError> {
        let key = key.as_str();
        match tokio::fs::remove_file(self.path(key)?).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error("delete", key, e)),
        }
    }
}
