//! Object versions recorded anew (SPEC §5.17, migration 16): one row per batch whose objects were
//! read in full under another ETag or version id than its receipt recorded and proven to hold the
//! archived bytes — by `relocate` (every batch of the copy, in the transaction that moves the
//! home) or by `verify --batch-id` (an object restored from versioning). The receipt takes the
//! new identity in the same transaction as its row here, which stays as the evidence: old and new
//! identity, what the bytes were held to, the run and when. `history` lists a run's rows.

use sqlx::{AssertSqlSafe, MySql, MySqlPool, QueryBuilder, Transaction};

use super::{Context, DbError};
use crate::model::format::Identity;
use crate::model::receipt::StoredAs;
use crate::model::table::TableSpec;

/// Why a batch's new identity was recorded.
pub(crate) const CAUSE_RELOCATE: &str = "relocate";
pub(crate) const CAUSE_VERIFY: &str = "verify";

/// One batch's objects recorded under a new identity, with the evidence (a row of the table).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct NewVersions {
    pub app_code: String,
    pub batch_id: String,
    pub recorded_at_ms: i64,
    pub run_id: String,
    /// `relocate` or `verify`.
    pub cause: String,
    /// Where the objects were read.
    pub store: String,
    pub old_data_etag: Option<String>,
    pub old_data_version_id: Option<String>,
    pub old_manifest_etag: Option<String>,
    pub old_success_etag: Option<String>,
    pub new_data_etag: Option<String>,
    pub new_data_version_id: Option<String>,
    pub new_manifest_etag: Option<String>,
    pub new_success_etag: Option<String>,
    /// What the bytes read were held to, and matched: the receipt's.
    pub gzip_sha256: String,
    pub ndjson_sha256: String,
    pub manifest_sha256: String,
    pub success_crc64: String,
    pub row_count: i64,
}

impl NewVersions {
    /// The identity the receipt held before.
    pub(crate) fn old(&self) -> StoredAs {
        stored(
            [
                &self.old_data_etag,
                &self.old_manifest_etag,
                &self.old_success_etag,
            ],
            &self.old_data_version_id,
        )
    }

    /// The identity the receipt holds from now on.
    pub(crate) fn new_identity(&self) -> StoredAs {
        stored(
            [
                &self.new_data_etag,
                &self.new_manifest_etag,
                &self.new_success_etag,
            ],
            &self.new_data_version_id,
        )
    }

    /// Whether anything differs between the old identity and the new.
    pub(crate) fn changed(&self) -> bool {
        self.old() != self.new_identity()
    }
}

fn stored(etags: [&Option<String>; 3], data_version: &Option<String>) -> StoredAs {
    StoredAs {
        data: Identity {
            etag: etags[0].clone(),
            version_id: data_version.clone(),
        },
        manifest: Identity {
            etag: etags[1].clone(),
            version_id: None,
        },
        success: Identity {
            etag: etags[2].clone(),
            version_id: None,
        },
    }
}

/// The table's columns, in order, after `id` (what a row is written and read as).
const FIELDS: &[&str] = &[
    "app_code",
    "batch_id",
    "recorded_at_ms",
    "run_id",
    "cause",
    "store",
    "old_data_etag",
    "old_data_version_id",
    "old_manifest_etag",
    "old_success_etag",
    "new_data_etag",
    "new_data_version_id",
    "new_manifest_etag",
    "new_success_etag",
    "gzip_sha256",
    "ndjson_sha256",
    "manifest_sha256",
    "success_crc64",
    "row_count",
];

/// Rows written per INSERT.
const CHUNK: usize = 500;

/// A run's recorded versions read back: how many, and the first few.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RecordedVersions {
    pub count: u64,
    pub first: Vec<NewVersions>,
}

/// The object versions table of one outbox table.
#[derive(Debug, Clone)]
pub(crate) struct ObjectVersions {
    spec: &'static TableSpec,
    pool: MySqlPool,
    /// The batches' receipts: each takes its new identity.
    receipts: super::receipts::Receipts,
}

impl ObjectVersions {
    pub(crate) fn new(pool: &MySqlPool, spec: &'static TableSpec) -> ObjectVersions {
        ObjectVersions {
            pool: pool.clone(),
            spec,
            receipts: super::receipts::Receipts::new(pool, spec),
        }
    }

    fn table(&self) -> String {
        self.spec.object_versions_table()
    }

    /// Records one batch's new identity (`verify --batch-id`): the receipt takes it only if it
    /// still holds the old one (another run may have recorded meanwhile), and the row is written
    /// in the same transaction. `Ok(false)`: the receipt held another identity; nothing written.
    pub(crate) async fn record_one(&self, v: &NewVersions) -> Result<bool, DbError> {
        let pool = &self.pool;
        let context = || format!("recording the new versions of batch {}", v.batch_id);
        let mut tx = pool.begin().await.context(context)?;
        crate::db::layout::hold(&mut tx, self.spec).await?;
        if !self.receipts.take_versions(&mut tx, v).await? {
            tx.rollback().await.context(context)?;
            return Ok(false);
        }
        self.insert(&mut tx, std::slice::from_ref(v)).await?;
        tx.commit().await.context(context)?;
        Ok(true)
    }

    /// Records a relocation's re-read batches in `tx` (the transaction that moves the home): a
    /// row each, and every receipt takes its row's new identity (one statement).
    pub(crate) async fn record_move(
        &self,
        tx: &mut Transaction<'_, MySql>,
        rows: &[NewVersions],
        run_id: &str,
    ) -> Result<(), DbError> {
        for chunk in rows.chunks(CHUNK) {
            self.insert(tx, chunk).await?;
        }
        self.receipts
            .take_recorded_versions(tx, &self.table(), run_id, CAUSE_RELOCATE)
            .await
    }

    async fn insert(
        &self,
        tx: &mut Transaction<'_, MySql>,
        rows: &[NewVersions],
    ) -> Result<(), DbError> {
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "INSERT INTO {} ({}) ",
            self.table(),
            FIELDS.join(", ")
        ));
        qb.push_values(rows, |mut b, v| {
            b.push_bind(&v.app_code)
                .push_bind(&v.batch_id)
                .push_bind(v.recorded_at_ms)
                .push_bind(&v.run_id)
                .push_bind(&v.cause)
                .push_bind(&v.store)
                .push_bind(&v.old_data_etag)
                .push_bind(&v.old_data_version_id)
                .push_bind(&v.old_manifest_etag)
                .push_bind(&v.old_success_etag)
                .push_bind(&v.new_data_etag)
                .push_bind(&v.new_data_version_id)
                .push_bind(&v.new_manifest_etag)
                .push_bind(&v.new_success_etag)
                .push_bind(&v.gzip_sha256)
                .push_bind(&v.ndjson_sha256)
                .push_bind(&v.manifest_sha256)
                .push_bind(&v.success_crc64)
                .push_bind(v.row_count);
        });
        qb.build()
            .execute(&mut **tx)
            .await
            .context(|| format!("recording object versions in {}", self.table()))?;
        Ok(())
    }

    /// What run `run_id` recorded (of `app`, where given): how many rows, and the first `limit`.
    /// Two dives into the run key, whatever the table's size.
    pub(crate) async fn of_run(
        &self,
        run_id: &str,
        app: Option<&str>,
        limit: u32,
    ) -> Result<RecordedVersions, DbError> {
        let pool = &self.pool;
        let context = || format!("reading the object versions run {run_id} recorded");
        let filter = match app {
            Some(_) => "run_id = ? AND app_code = ?",
            None => "run_id = ?",
        };
        let count_sql = format!("SELECT COUNT(*) FROM {} WHERE {filter}", self.table());
        let mut count = sqlx::query_scalar::<_, i64>(AssertSqlSafe(count_sql)).bind(run_id);
        if let Some(app) = app {
            count = count.bind(app);
        }
        let count = count.fetch_one(pool).await.context(context)?;
        if count == 0 {
            return Ok(RecordedVersions::default());
        }
        let select: Vec<String> = FIELDS
            .iter()
            .map(|f| match *f {
                "recorded_at_ms" | "row_count" => f.to_string(),
                _ => format!("CAST({f} AS CHAR) AS {f}"),
            })
            .collect();
        let sql = format!(
            "SELECT {} FROM {} WHERE {filter} ORDER BY id LIMIT ?",
            select.join(", "),
            self.table()
        );
        let mut rows = sqlx::query_as::<_, NewVersions>(AssertSqlSafe(sql)).bind(run_id);
        if let Some(app) = app {
            rows = rows.bind(app);
        }
        let first = rows.bind(limit).fetch_all(pool).await.context(context)?;
        Ok(RecordedVersions {
            count: count.max(0) as u64,
            first,
        })
    }
}
