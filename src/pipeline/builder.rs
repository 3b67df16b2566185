//! Cuts an app's rows into batches ahead of the archiver, so reading and compressing the next
//! batch overlaps publishing and recording the ones before it. A batch is started only when the
//! slot it will wait in is free and its share of the run's memory [`Budget`] is held: an app
//! holds at most three batches (one built or waiting, one being published, one being recorded),
//! and all apps together no more than the budget. Dropping the receiver stops it.

use std::time::Instant;

use tokio::sync::mpsc;
use tracing::Instrument;

use super::budget::{self, Budget, Held};
use crate::db::source::RowStream;
use crate::db::DbError;
use crate::model::batch::{BatchEncoder, EncodeError, EncodedBatch, Limits};
use crate::model::table::TableSpec;

/// Why a batch could not be built.
#[derive(Debug, thiserror::Error)]
pub(super) enum BuildError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("encoding batch: {0}")]
    Encode(#[from] EncodeError),
}

/// A batch, how long reading and encoding it took, and its share of the memory budget (given
/// back when it is dropped, once recorded).
pub(super) struct Built {
    pub batch: EncodedBatch,
    pub read_ms: u64,
    pub held: Held,
}

/// Starts building `rows` (of one app) into batches; they arrive on the receiver, `None` at the end.
pub(super) fn spawn(
    mut rows: RowStream,
    spec: &'static TableSpec,
    limits: Limits,
    gzip_level: u32,
    budget: Budget,
) -> mpsc::Receiver<Result<Built, BuildError>> {
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(
        async move {
            let mut guess = budget::first_guess(&limits);
            loop {
                let Ok(slot) = tx.reserve().await else {
                    return;
                };
                let mut held = budget.hold(guess).await;
                let started = Instant::now();
                match build(&mut rows, spec, limits, gzip_level).await {
                    Ok(Some(batch)) => {
                        guess = budget::footprint(&batch);
                        held.settle(guess);
                        slot.send(Ok(Built {
                            batch,
                            read_ms: started.elapsed().as_millis() as u64,
                            held,
                        }));
                    }
                    Ok(None) => return,
                    Err(e) => {
                        slot.send(Err(e));
                        return;
                    }
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
        encoder.push(row)?;
    }
    Ok(encoder.finish()?)
}
