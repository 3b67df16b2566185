-- Every run told whole (issue 33): `history` answers "why did last night's run do nothing".
--
-- run_id: the run's id, as its JSON summary and every log line of it carry it.
-- store: the archive location the run worked with (`s3://bucket/prefix`, `file:///path`).
-- stop_reason: why the app's run ended (a limit, a signal, the lock held by another process).
-- dry_run: a run that wrote nothing on purpose (`--dry-run`).
-- worked: neither a dry run nor a skip (the app's lock held elsewhere): `status` shows an app's
--   last run that worked it, found by the index on (app_code, command, worked, id) however many
--   skips a cut-over recorded.
-- findings: what the run found about the app's batches, as JSON — {"count": n, "first": […]},
--   at most 20 listed — so a failed purge's "see findings" can be read the next morning.
--
-- Lock skips are recorded too (outcome skipped_locked), as are runs that worked no app. The
-- columns are added at the end, NULL or defaulted; the key is built in place.
ALTER TABLE wallet_outbox_archive_runs
    ADD COLUMN run_id      VARCHAR(32)   CHARACTER SET ascii NULL,
    ADD COLUMN store       VARCHAR(1024) NULL,
    ADD COLUMN stop_reason VARCHAR(255)  NULL,
    ADD COLUMN dry_run     BOOLEAN       NOT NULL DEFAULT FALSE,
    ADD COLUMN worked      BOOLEAN       NOT NULL DEFAULT TRUE,
    ADD COLUMN findings    MEDIUMTEXT    NULL,
    ADD KEY idx_wallet_outbox_archive_runs_worked (app_code, command, worked, id);
