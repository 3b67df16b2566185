-- Every run told whole (issue 33): `history` answers "why did last night's run do nothing".
--
-- run_id: the run's id, as its JSON summary and every log line of it carry it.
-- store: the archive location the run worked with (`s3://bucket/prefix`, `file:///path`).
-- stop_reason: why the app's run ended (a limit, a signal, the lock held by another process).
-- dry_run: a run that wrote nothing on purpose (`--dry-run`); `status` looks past them.
-- findings: what the run found about the app's batches, as JSON — {"count": n, "first": […]},
--   at most 20 listed — so a failed purge's "see findings" can be read the next morning.
--
-- Lock skips are recorded too (outcome skipped_locked), as are runs that worked no app. All
-- columns are added at the end and NULL or defaulted: an instant ALTER.
ALTER TABLE wallet_outbox_archive_runs
    ADD COLUMN run_id      VARCHAR(32)   CHARACTER SET ascii NULL,
    ADD COLUMN store       VARCHAR(1024) NULL,
    ADD COLUMN stop_reason VARCHAR(255)  NULL,
    ADD COLUMN dry_run     BOOLEAN       NOT NULL DEFAULT FALSE,
    ADD COLUMN findings    MEDIUMTEXT    NULL;
