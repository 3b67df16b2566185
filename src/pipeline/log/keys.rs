//! The keys a log's checkpoints are signed by, over the years (README, "Keys over the years"):
//! a log begun unsigned starts being signed at the first archive run given a key, a key is
//! rotated by signing with the old and the new (or with the new, the old one's verifier still
//! given), and each change is recorded write-once under `keys/` at the leaf it takes effect. A
//! log that is signed is held to its keys from then on: an archive run without a key, or whose
//! keys and verifiers none signed the checkpoint, appends nothing.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::{Log, LogError};
use crate::model::format;
use crate::model::note::{Checkpoint, NoteError};
use crate::model::protection::PutOptions;
use crate::store::{self, PutMode, StoreError};

/// The schema of a key change record.
pub(crate) const KEYS_SCHEMA: &str = "outbox-archive-log-keys/v1";

/// A change of the keys a log's checkpoints are signed by, from the checkpoint of `from_size`
/// leaves on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KeyChange {
    pub schema: String,
    pub table: String,
    pub app_code: String,
    pub from_size: u64,
    /// The verifier keys (public) of the keys that sign from then on.
    pub signed_by: Vec<String>,
    /// The names on the signatures of the checkpoint before (none: it was unsigned).
    pub before: Vec<String>,
    pub at_ms: i64,
}

impl Log<'_> {
    /// The checkpoint an append goes on from, held to the run's keys, and the change of keys the
    /// run makes, if any. An unsigned checkpoint is taken from a run with a key only where the
    /// log was never signed (no change recorded, its largest head kept unsigned): signing
    /// begins there.
    pub(super) async fn head_to_append(
        &self,
    ) -> Result<(Option<Checkpoint>, Option<KeyChange>), LogError> {
        let key = self.key(format::LOG_CHECKPOINT);
        let keys = &self.ctx.log_keys;
        let bytes = store::get_all(self.ctx.store.as_ref(), &key).await?;
        let before = bytes
            .as_deref()
            .map(Checkpoint::signature_names)
            .unwrap_or_default();
        // Signed by exactly the run's keys already (compared by key, not name: a rotated key
        // often keeps its name).
        let unchanged = bytes.as_deref().is_some_and(|b| {
            before.len() == keys.signers.len()
                && keys.signers.iter().all(|s| {
                    Checkpoint::open(b, &self.origin, std::slice::from_ref(&s.verifier())).is_ok()
                })
        });
        let head = match bytes {
            None => None,
            Some(bytes) => match Checkpoint::open(&bytes, &self.origin, &keys.verifiers()) {
                Ok(c) => Some(c),
                Err(NoteError::Unsigned(_))
                    if before.is_empty()
                        && !keys.signers.is_empty()
                        && self.never_signed().await? =>
                {
                    Checkpoint::open(&bytes, &self.origin, &[]).ok()
                }
                Err(e) => return Err(self.refused(format!("{key}: {e}"))),
            },
        };
        if keys.signers.is_empty() && !before.is_empty() {
            return Err(self.refused(format!(
                "its checkpoint is signed (by {}), and this run has no --log-key-file: a signed log is held to its keys from then on, and an unsigned checkpoint would not be the log's; give the run the log's signing key",
                before.join(", ")
            )));
        }
        let change = (!keys.signers.is_empty() && !unchanged).then(|| KeyChange {
            schema: KEYS_SCHEMA.into(),
            table: self.ctx.spec.name.into(),
            app_code: self.folder.clone(),
            from_size: head.as_ref().map_or(0, |h| h.size),
            signed_by: keys.signers.iter().map(|s| s.verifier().text()).collect(),
            before,
            at_ms: self.ctx.now(),
        });
        Ok((head, change))
    }

    /// Whether no checkpoint of the log was ever signed, as far as the store tells: no key
    /// change recorded, and its largest head kept unsigned.
    async fn never_signed(&self) -> Result<bool, LogError> {
        let recorded = self.key_changes().await?;
        if !recorded.is_empty() {
            return Ok(false);
        }
        match self.largest_head_key().await? {
            None => Ok(true),
            Some(k) => Ok(store::get_all(self.ctx.store.as_ref(), &k)
                .await?
                .is_none_or(|b| Checkpoint::signature_names(&b).is_empty())),
        }
    }

    /// The key changes recorded for the log, in order.
    pub(crate) async fn key_changes(&self) -> Result<Vec<KeyChange>, LogError> {
        let mut out = Vec::new();
        for key in self.ctx.store.list(&self.folder(format::LOG_KEYS)).await? {
            let bytes = store::get_all(self.ctx.store.as_ref(), &key).await?;
            match bytes.map(|b| serde_json::from_slice::<KeyChange>(&b)) {
                Some(Ok(c)) if c.schema == KEYS_SCHEMA => out.push(c),
                _ => return Err(self.refused(format!("key change record {key} cannot be read"))),
            }
        }
        Ok(out)
    }

    /// Records `change` write-once (a record already there for that leaf — a retry — stays),
    /// under the batches' retention, and logs it.
    pub(super) async fn record_key_change(
        &self,
        change: &KeyChange,
        options: &PutOptions,
    ) -> Result<(), LogError> {
        self.begin().await?;
        let key = self.key(&format::log_keys_path(change.from_size));
        let bytes = serde_json::to_vec(change).expect("a record always serialises");
        match self
            .ctx
            .store
            .put_with(&key, Bytes::from(bytes), PutMode::Create, options)
            .await
        {
            Ok(()) | Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        let names: Vec<&str> = change
            .signed_by
            .iter()
            .map(|v| v.split('+').next().unwrap_or(""))
            .collect();
        tracing::warn!(
            app = self.app,
            key = %key,
            from_leaf = change.from_size,
            signed_by = names.join(", "),
            before = change.before.join(", "),
            "the log's checkpoints are signed by other keys from here on (recorded)"
        );
        Ok(())
    }
}
