-- SPEC §5.9–5.10 bookkeeping.
--
-- data_crc64nvme: the data object's CRC-64/NVME (AWS S3's own full-object checksum), so that
-- purge's HEAD check compares it where the store reports one. NULL on receipts recorded before.
-- restored_at_ms: set when the batch was restored into the source table; purge never deletes its
-- rows again on this receipt (see README, "restore").
-- superseded_rows: members of this batch whose row came back delivered with a newer
-- updated_at_ms and was archived again by a later batch (see README, "Redelivered rows").
-- idx_wallet_outbox_archive_unpurged: purge lists an app's receipts it has not finished (and not
-- restored), in cursor order, without walking every receipt the app ever had.
ALTER TABLE wallet_outbox_archive_receipts
    ADD COLUMN data_crc64nvme VARCHAR(20) CHARACTER SET ascii NULL,
    ADD COLUMN restored_at_ms BIGINT NULL,
    ADD COLUMN superseded_rows BIGINT NOT NULL DEFAULT 0,
    ADD KEY idx_wallet_outbox_archive_unpurged (app_code, state, purged_at_ms, restored_at_ms, last_updated_at_ms, last_event_id);

-- Superseded members: an older version of a source row, archived in batch_id, whose member row
-- (one per source row: the version purge may delete) now belongs to the later batch
-- superseded_by. verify and restore count these rows as their batch's own. One row per event and
-- batch: a version that comes back once more (a source restored from a backup) may be archived
-- and superseded again by another batch.
CREATE TABLE IF NOT EXISTS wallet_outbox_archive_superseded (
    app_code         VARCHAR(32) NOT NULL,
    event_id         VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    updated_at_ms    BIGINT      NOT NULL,
    batch_id         CHAR(32)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    superseded_by    CHAR(32)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    superseded_at_ms BIGINT      NOT NULL,
    PRIMARY KEY (app_code, event_id, batch_id),
    KEY idx_wallet_outbox_archive_superseded_batch (app_code, batch_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
