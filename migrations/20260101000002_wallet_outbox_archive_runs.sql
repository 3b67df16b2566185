-- Bookkeeping for `status`: how many rows of each batch `purge` has deleted so far, and the
-- outcome of each app's last runs.
ALTER TABLE wallet_outbox_archive_receipts
    ADD COLUMN purged_rows BIGINT NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS wallet_outbox_archive_runs (
    id             BIGINT       NOT NULL AUTO_INCREMENT,
    app_code       VARCHAR(32)  NOT NULL,
    command        VARCHAR(16)  NOT NULL,
    started_at_ms  BIGINT       NOT NULL,
    finished_at_ms BIGINT       NOT NULL,
    outcome        VARCHAR(16)  NOT NULL,
    batches        BIGINT       NOT NULL,
    row_count      BIGINT       NOT NULL,
    error          TEXT         NULL,
    PRIMARY KEY (id),
    KEY idx_wallet_outbox_archive_runs_app (app_code, command, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
