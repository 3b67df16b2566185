//! One memory budget for every batch a run holds, whichever app it belongs to (`--memory-budget`).
//!
//! A batch holds its share from before it is built until it is recorded: its compressed data
//! object and its member list, and the copies its read-back and its receipt transaction make of
//! the members. A builder waits for its share before it starts a batch, so apps at work together
//! — and the stages of one app, which overlap — never hold more than the budget between them.
//!
//! What a batch will hold is known only once it is built (its rows' sizes, how well they
//! compress), so a builder asks for what its app's last batch held (the first: what the limits
//! allow), then keeps what the batch turned out to hold: any surplus goes back at once; any
//! shortfall is taken if it is free, and otherwise carried over budget until the batch is recorded
//! — never waited for while holding a share, which could leave every builder waiting on the others.
//! Batch boundaries never depend on the budget: the same rows always make the same batches.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::model::batch::{EncodedBatch, Limits};

/// The budget is counted in KiB (a semaphore's permits are a `u32`).
const UNIT: u64 = 1024;

/// The memory budget of a run's batches.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    permits: Arc<Semaphore>,
    units: u32,
}

impl Budget {
    pub(crate) fn new(bytes: u64) -> Budget {
        let units = (bytes / UNIT).clamp(1, u64::from(u32::MAX >> 4)) as u32;
        Budget {
            permits: Arc::new(Semaphore::new(units as usize)),
            units,
        }
    }

    /// Waits until `bytes` (at most the whole budget, so one batch always fits) are free, and
    /// holds them.
    pub(crate) async fn hold(&self, bytes: u64) -> Held {
        let units = self.units_of(bytes);
        let permit = self
            .permits
            .clone()
            .acquire_many_owned(units)
            .await
            .expect("the budget's semaphore is never closed");
        Held {
            permit: Some(permit),
            budget: self.clone(),
        }
    }

    fn units_of(&self, bytes: u64) -> u32 {
        bytes.div_ceil(UNIT).clamp(1, u64::from(self.units)) as u32
    }

    /// What is free now, in bytes.
    #[cfg(test)]
    pub(crate) fn free(&self) -> u64 {
        self.permits.available_permits() as u64 * UNIT
    }
}

/// A share of the budget, given back when dropped (with the batch it was held for).
#[derive(Debug)]
pub(crate) struct Held {
    permit: Option<OwnedSemaphorePermit>,
    budget: Budget,
}

impl Held {
    /// The bytes held.
    pub(crate) fn bytes(&self) -> u64 {
        self.permit
            .as_ref()
            .map_or(0, |p| p.num_permits() as u64 * UNIT)
    }

    /// Holds `bytes` from now on (at most the whole budget): gives back any surplus at once;
    /// takes a shortfall only if it is free now (see the module's note).
    pub(crate) fn settle(&mut self, bytes: u64) {
        let want = self.budget.units_of(bytes) as usize;
        let Some(permit) = self.permit.as_mut() else {
            return;
        };
        let have = permit.num_permits();
        if want < have {
            drop(permit.split(have - want));
        } else if want > have {
            if let Ok(more) = self
                .budget
                .permits
                .clone()
                .try_acquire_many_owned((want - have) as u32)
            {
                permit.merge(more);
            }
        }
    }
}

/// What a batch holds while it is in flight, in bytes: its compressed data object, and its member
/// list three times over (the batch's own, the one its read-back recomputes from the data
/// object, and the rows its receipt transaction reads back).
pub(crate) fn footprint(batch: &EncodedBatch) -> u64 {
    let members: u64 = batch
        .members
        .iter()
        .map(|m| (std::mem::size_of_val(m) + m.event_id.capacity()) as u64 + MEMBER_OVERHEAD)
        .sum();
    batch.gzip.len() as u64 + 3 * members
}

/// Bytes an allocation and a protocol row add to a member beyond its own fields.
const MEMBER_OVERHEAD: u64 = 32;

/// What a first batch is assumed to hold before any is built: half its NDJSON bytes as
/// compressed data (rows that hardly compress) and its rows as members, within the budget.
pub(crate) fn first_guess(limits: &Limits) -> u64 {
    limits.max_bytes / 2 + limits.max_rows.saturating_mul(3 * (72 + MEMBER_OVERHEAD))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shares_wait_for_each_other_and_come_back_when_dropped() {
        let budget = Budget::new(100 * UNIT);
        let a = budget.hold(60 * UNIT).await;
        assert_eq!(a.bytes(), 60 * UNIT);
        assert_eq!(budget.free(), 40 * UNIT);
        // More than is free waits until `a` goes.
        let waiting = budget.hold(50 * UNIT);
        tokio::pin!(waiting);
        assert!(futures_util::poll!(waiting.as_mut()).is_pending());
        drop(a);
        let b = waiting.await;
        assert_eq!(b.bytes(), 50 * UNIT);
        // More than the whole budget is the whole budget: one batch always fits.
        drop(b);
        let all = budget.hold(1_000 * UNIT).await;
        assert_eq!(all.bytes(), 100 * UNIT);
        assert_eq!(budget.free(), 0);
    }

    #[tokio::test]
    async fn settling_gives_back_a_surplus_and_takes_only_a_free_shortfall() {
        let budget = Budget::new(100 * UNIT);
        let mut a = budget.hold(60 * UNIT).await;
        a.settle(10 * UNIT);
        assert_eq!((a.bytes(), budget.free()), (10 * UNIT, 90 * UNIT));
        let b = budget.hold(80 * UNIT).await;
        // 30 more wanted, 10 free: none taken (carried over budget), never waited for.
        a.settle(40 * UNIT);
        assert_eq!((a.bytes(), budget.free()), (10 * UNIT, 10 * UNIT));
        drop(b);
        a.settle(40 * UNIT);
        assert_eq!((a.bytes(), budget.free()), (40 * UNIT, 60 * UNIT));
        // A byte is a whole unit.
        a.settle(1);
        assert_eq!(a.bytes(), UNIT);
    }
}
