-- purge bookkeeping: a receipt is done once every member was deleted or kept (changed since it
-- was archived); a rerun skips done receipts. Members are kept forever as the proof of what was
-- archived and purged (see README, "purge").
ALTER TABLE wallet_outbox_archive_receipts
    ADD COLUMN kept_rows BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN purged_at_ms BIGINT NULL;

-- restore --drill results: one row per drilled batch.
CREATE TABLE IF NOT EXISTS wallet_outbox_archive_drills (
    id            BIGINT      NOT NULL AUTO_INCREMENT,
    app_code      VARCHAR(32) NOT NULL,
    batch_id      CHAR(32)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    drilled_at_ms BIGINT      NOT NULL,
    ok            BOOLEAN     NOT NULL,
    detail        TEXT        NULL,
    PRIMARY KEY (id),
    KEY idx_wallet_outbox_archive_drills_app (app_code, ok, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
