-- Rows purge kept, to be archived again as they are now (issue 58; README, "What purge
-- compares"). A row whose version is still its member's but whose content is not what its batch
-- holds — changed in place, or holding a value in a column its batch's lines lack (a column
-- added since, filled with a default or a backfill) — is never deleted on the batch's word: the
-- store must hold every value a deleted row held. Purge marks it here, in the transaction that
-- deletes its batch's other rows; the next archive run reads the marked rows as they are now,
-- archives them in a batch of their own (as stragglers are), the older version superseded, and
-- clears the marks in that batch's receipt transaction; purge then deletes them by the new
-- batch. One row per kept member: `reason` is what purge found (`changed`, or `added:<columns>`).
-- Replaces `wallet_outbox_archive_added_values` for what a build of this layout purges (that
-- table stays for the rows older builds purged with it, which restore still reads).
CREATE TABLE IF NOT EXISTS wallet_outbox_archive_kept (
    app_code      VARCHAR(32)  NOT NULL,
    event_id      VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    updated_at_ms BIGINT       NOT NULL,
    batch_id      CHAR(32)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    reason        VARCHAR(255) NOT NULL,
    kept_at_ms    BIGINT       NOT NULL,
    PRIMARY KEY (app_code, event_id, batch_id),
    KEY idx_wallet_outbox_archive_kept_cursor (app_code, updated_at_ms, event_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
