//! Cuts an app's rows into batches one batch ahead of the archiver, so reading and compressing
//! batch N+1 overlaps publishing and recording batch N. Memory: at most the batch being built,
//! one waiting, and the one being published. Dropping the receiver stops it.

use std::time::Instant;

use tokio::sync::mpsc;
use tracing::Instrument;

use crate::db::source::RowStream;
use crate::db::DbError;
use crate::model::batch::{BatchEncoder, EncodedBatch, Limits};
use crate::model::table::TableSpec;

/// Why a batch could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("encoding batch: {0}")]
    Encode(String),
}

/// A batch and how long reading and encoding it took.
pub struct Built {
    pub batch: EncodedBatch,
    pub read_ms: u64,
}

/// Starts building `rows` (of one app) into batches; they arrive on the receiver, `None` at the end.
pub fn spawn(
    mut rows: RowStream,
    spec: &'static TableSpec,
    limits: Limits,
    gzip_level: u32,
) -> mpsc::Receiver<Result<Built, BuildError>> {
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(
        async move {
            loop {
                let started = Instant::now();
                let built = build(&mut rows, spec, limits, gzip_level).await;
                let done = !matches!(built, Ok(Some(_)));
                let item = built.transpose().map(|r| {
                    r.map(|batch| Built {
                        batch,
                        read_ms: started.elapsed().as_millis() as u64,
                    })
                });
                if let Some(item) = item {
                    if tx.send(item).await.is_err() {
                        return;
                    }
                }
                if done {
                    return;
                }
            }
        }
        .in_current_span(),
    );
    rx
}

/// Takes rows until the batch is full or the app is caught up; `None` when there were none.
async fn build(
    rows: &mut RowStream,
    spec: &'static TableSpec,
    limits: Limits,
    gzip_level: u32,
) -> Result<Option<EncodedBatch>, BuildError> {
    let mut encoder = BatchEncoder::new(spec, limits, gzip_level);
    while !encoder.is_full() {
        match rows.peek().await? {
            Some(row) if encoder.fits(row) => {}
            _ => break,
        }
        let row = rows.take().expect("a row was peeked");
        encoder.push(row).map_err(BuildError::Encode)?;
    }
    encoder.finish().map_err(BuildError::Encode)
}
