//! The three overlapping stages of one app's batches: the builder reads and compresses batch
//! N+2 while batch N+1 is published and read back and batch N is recorded. Receipts are recorded
//! one at a time, in cursor order; a stop starts no new batch but records the one already
//! published, and a commit that fails (its lock lost, say) ends the next batch where it is.

use std::time::{Duration, Instant};

use super::record::Recorded;
use super::{AppError, Archiver, Batches};
use crate::db::record::Cut;
use crate::model::batch::Superseded;
use crate::model::format::ContentFacts;
use crate::model::receipt::STATE_VERIFIED;
use crate::pipeline::apps::Access;
use crate::pipeline::builder::Built;
use crate::pipeline::publish::Published;
use crate::pipeline::report::details::ArchiveApp;
use crate::pipeline::report::{AppReport, BatchReport, Outcome, Stop};
use crate::pipeline::verifier::Expected;

/// A batch between its stages: built, and published (or planned, or found recorded already).
struct Staged {
    built: Built,
    /// When its first stage started.
    started: Instant,
    step: Step,
}

/// How far a staged batch got.
enum Step {
    /// A dry run's: its keys, as they would be written.
    Planned(Box<Expected>),
    /// Written and read back, in this long.
    Published(Box<Published>, Duration),
    /// Stragglers that are exactly batch `0`, recorded already.
    Remember(String),
}

/// A batch done: what it came to, and where its time went (ms).
struct Done {
    /// What the batch held (its rows, cursors, totals); the batch itself is gone.
    content: ContentFacts,
    read_ms: u64,
    /// The share of the budget it held, for the debug log.
    memory_held: u64,
    recorded: Recorded,
    /// From its first stage to its receipt.
    millis: u64,
    publish_ms: u64,
    record_ms: u64,
}

impl Archiver<'_> {
    /// Takes the app's batches through their stages until none is left or a stop ends it;
    /// returns how the app's run ended (caught up, or stopped with work left).
    pub(super) async fn overlap(
        &self,
        app: &str,
        access: Access<'_>,
        mut batches: Batches,
        cut: Cut,
        report: &mut AppReport,
        details: &mut ArchiveApp,
    ) -> Result<Outcome, AppError> {
        let mut staged: Option<Staged> = None;
        let outcome = loop {
            let started = report.batches + u64::from(staged.is_some());
            let stop = self.stop_reason(started);
            let batches = &mut batches;
            let more = stop.is_none();
            let shutdown = &self.ctx.shutdown;
            let take_next = async {
                match more {
                    // A shutdown while the next batch is built ends the wait, and a batch
                    // built as it came is not written: a stop starts no new batch (the next
                    // run builds it again).
                    true => tokio::select! {
                        built = batches.recv() => match shutdown.is_cancelled() {
                            true => Ok(None),
                            false => built.transpose(),
                        },
                        _ = shutdown.cancelled() => Ok(None),
                    },
                    false => Ok(None),
                }
            };
            let Some(ready) = staged.take() else {
                match take_next.await? {
                    Some(built) => staged = Some(self.stage(app, access, built, cut).await?),
                    None => {
                        let stop = stop.or_else(|| self.ctx.stop_reason(None));
                        break self.ended(app, stop, batches, cut, report).await?;
                    }
                }
                continue;
            };
            // The staged batch is recorded while the next one is taken and published — and a
            // commit that fails (its lock lost, say) ends the next one where it is: a process
            // that lost the lock must not go on writing a batch another archiver now writes.
            let next = async {
                match take_next.await? {
                    Some(built) => self.stage(app, access, built, cut).await.map(Some),
                    None => Ok(None),
                }
            };
            let commit = self.commit(app, access, ready, cut);
            tokio::pin!(commit, next);
            let mut taken = None;
            let done = loop {
                tokio::select! {
                    done = &mut commit => break done,
                    n = &mut next, if taken.is_none() => taken = Some(n),
                }
            };
            let superseded = self.account(app, done?, cut, report, details);
            details.note_superseded(superseded);
            staged = match taken {
                Some(n) => n?,
                None => next.await?,
            };
        };
        Ok(outcome)
    }

    /// How a run that takes no more batches ends: stopped with work left (a stop said so, and
    /// there are rows it did not take), or caught up. Whether rows are left is never found by
    /// waiting for the builder to finish another batch — a shutdown must end within the
    /// termination grace period: a batch it finished already says so, else one index dive.
    async fn ended(
        &self,
        app: &str,
        stop: Option<Stop>,
        batches: &mut Batches,
        cut: Cut,
        report: &mut AppReport,
    ) -> Result<Outcome, AppError> {
        use tokio::sync::mpsc::error::TryRecvError;
        let Some(reason) = stop else {
            return Ok(Outcome::UpToDate);
        };
        let left = match batches.try_recv() {
            Ok(built) => built.map(|_| true)?,
            Err(TryRecvError::Disconnected) => false,
            // The builder is on a batch: are there rows after the last one recorded?
            Err(TryRecvError::Empty) => match cut {
                Cut::Stragglers => true,
                Cut::AfterCursor => self
                    .pages
                    .oldest(
                        app,
                        &self.opts.delivered_status,
                        report.cursor_after.as_ref(),
                        self.opts.cutoff_ms,
                    )
                    .await?
                    .is_some(),
            },
        };
        if !left {
            return Ok(Outcome::UpToDate);
        }
        tracing::info!(app, reason = %reason, "stopping with work left");
        report.stop_reason = Some(reason.into());
        Ok(Outcome::Stopped)
    }

    /// A batch's first steps after it is built: its objects written and read back (planned, in
    /// a dry run), or — stragglers that form a batch already recorded — nothing to write.
    async fn stage(
        &self,
        app: &str,
        access: Access<'_>,
        built: Built,
        cut: Cut,
    ) -> Result<Staged, AppError> {
        let started = Instant::now();
        let lock = match access {
            Access::Locked(lock) => Some(lock),
            Access::DryRun | Access::Reading => None,
        };
        let publisher = self.publisher(app, lock);
        let planned = publisher.plan(&built.batch);
        if matches!(access, Access::DryRun | Access::Reading) {
            return Ok(Staged {
                built,
                started,
                step: Step::Planned(Box::new(planned)),
            });
        }
        if let Some(state) = self
            .receipts
            .state_of(app, &planned.receipt.batch_id)
            .await?
        {
            if state != STATE_VERIFIED {
                return Err(AppError::NotVerified {
                    batch_id: planned.receipt.batch_id,
                    state,
                });
            }
            if cut == Cut::Stragglers {
                // The stragglers are exactly a batch already recorded (its member rows went,
                // as compaction deletes them, and its rows came back as they were): its objects
                // stay as they are, and its member rows are recorded again.
                return Ok(Staged {
                    built,
                    started,
                    step: Step::Remember(planned.receipt.batch_id),
                });
            }
            return Err(AppError::AlreadyRecorded(planned.receipt.batch_id));
        }
        // The archive's first batch binds it to this store (its home); every later one finds
        // it bound.
        self.ctx.binding.ensure(self.ctx, &self.opts.policy).await?;
        let published = publisher
            .publish(&built.batch, planned, self.ctx.now())
            .await?;
        Ok(Staged {
            built,
            started,
            step: Step::Published(Box::new(published), started.elapsed()),
        })
    }

    /// A staged batch's last step: its receipt and members recorded (nothing, in a dry run).
    async fn commit(
        &self,
        app: &str,
        access: Access<'_>,
        staged: Staged,
        cut: Cut,
    ) -> Result<Done, AppError> {
        let Staged {
            built,
            started,
            step,
        } = staged;
        let batch = &built.batch;
        let (recorded, publish, record) = match (step, access) {
            (Step::Planned(planned), _) => {
                let report = BatchReport::of(
                    planned.receipt.batch_id,
                    planned.receipt.keys.data.to_string(),
                    batch,
                    batch.gzip_digest.size,
                );
                (
                    Recorded {
                        batch_report: report,
                        ..Recorded::default()
                    },
                    Duration::ZERO,
                    Duration::ZERO,
                )
            }
            (Step::Remember(batch_id), Access::Locked(lock)) => {
                let phase = Instant::now();
                let recorded = self.remember(app, lock, batch, &batch_id).await?;
                (recorded, Duration::ZERO, phase.elapsed())
            }
            (Step::Published(published, publish), Access::Locked(lock)) => {
                let phase = Instant::now();
                let recorded = self.record(app, lock, batch, *published, cut).await?;
                (recorded, publish, phase.elapsed())
            }
            (_, Access::DryRun | Access::Reading) => {
                unreachable!("only a dry run's batches are planned, and only planned")
            }
        };
        // The batch — its data, its members and its share of the budget — goes now, not when
        // the report is written: the next batch of this app may be waiting for that share, and
        // the report waits for the next batch (a whole-budget first batch of another app ahead
        // of it in the queue would otherwise wait for this one forever).
        let Built {
            batch,
            read_ms,
            held,
        } = built;
        let memory_held = held.bytes();
        drop(held);
        Ok(Done {
            content: batch.content,
            read_ms,
            memory_held,
            recorded,
            millis: started.elapsed().as_millis() as u64,
            publish_ms: publish.as_millis() as u64,
            record_ms: record.as_millis() as u64,
        })
    }

    /// Notes a finished batch in the report and the progress; returns the older versions of
    /// rows it superseded.
    fn account(
        &self,
        app: &str,
        done: Done,
        cut: Cut,
        report: &mut AppReport,
        details: &mut ArchiveApp,
    ) -> Vec<Superseded> {
        let Done {
            content,
            read_ms,
            memory_held,
            recorded,
            millis,
            publish_ms,
            record_ms,
        } = done;
        let c = &content;
        // One short line per batch; its cursors and where the time went at debug level.
        tracing::info!(
            app,
            batch_id = recorded.batch_report.batch_id,
            rows = c.row_count,
            from = crate::model::timespec::rfc3339(c.first.updated_at_ms),
            to = crate::model::timespec::rfc3339(c.last.updated_at_ms),
            compressed_bytes = recorded.batch_report.compressed_bytes,
            millis = millis + read_ms,
            "{}",
            if self.opts.dry_run {
                "batch planned"
            } else {
                "batch archived"
            }
        );
        tracing::debug!(
            app,
            batch_id = recorded.batch_report.batch_id,
            first = %c.first,
            last = %c.last,
            uncompressed_bytes = c.uncompressed_bytes,
            read_ms,
            publish_ms,
            record_ms,
            memory_held,
            "batch timings"
        );
        report.batches += 1;
        report.rows += c.row_count;
        self.observer
            .advance(app, c.row_count, &format!(", {} batches", report.batches));
        if cut == Cut::AfterCursor {
            report.cursor_after = Some(c.last.clone());
        }
        report.replaced_objects.extend(recorded.replaced);
        report.adopted_objects.extend(recorded.adopted);
        report.batch_list.push(recorded.batch_report);
        details.replica_wait.add(recorded.replica_wait);
        recorded.superseded
    }
}
