-- The tree heads each app's log of batches was published at (issue 43; README, "What each party
-- keeps"): one row per checkpoint an archive run wrote — its size and base64 root — inserted in
-- the run that wrote it, never updated. The largest is the head the log is held to: a store's
-- checkpoint smaller than it, or not a tree it grew into (a consistency proof from it fails),
-- is `chain_rollback`, and archive appends nothing, purge deletes nothing, verify and attest
-- report it. The store keeps the same heads write-once (`_log/app_code={app}/heads/`): one
-- place rolled back is found by the other.
CREATE TABLE IF NOT EXISTS wallet_outbox_archive_log_heads (
    app_code       VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    size           BIGINT      NOT NULL,
    root           CHAR(44)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    recorded_at_ms BIGINT      NOT NULL,
    PRIMARY KEY (app_code, size)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
