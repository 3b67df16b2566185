-- The fence (issue 58; SPEC §20; README, "Upgrading"): the layout of the archiver's tables has a
-- version, one row, and every build knows the version it was made for. Every transaction that
-- writes what the archive holds reads the row first with a shared lock and refuses a version
-- newer than its own; start-up does the same, so an older build stops before any work, naming
-- the version it met and the build that wrote it (`migrated_by`, which `migrate` sets after its
-- migrations ran). A later migration that changes what older builds would misread raises the
-- version in its first statement — it waits for the transactions that read the old version to
-- end, and every one after it reads the new — and only then changes the tables.
--
-- Builds released before this migration do not read the row. Every one of them since 19c6e13
-- holds the runs table to its columns at start-up, among them `command`: renamed here to
-- `command_name`, so that such a build stops at start-up ("has no column command") instead of
-- writing to a layout it does not know; its `migrate` refuses too (this migration is not one it
-- knows). A pod of such a build that started before this migration runs to its end.
CREATE TABLE IF NOT EXISTS wallet_outbox_archive_layout (
    id             TINYINT      NOT NULL,
    version        INT          NOT NULL,
    migrated_by    VARCHAR(255) NOT NULL,
    migrated_at_ms BIGINT       NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

INSERT IGNORE INTO wallet_outbox_archive_layout (id, version, migrated_by, migrated_at_ms)
VALUES (1, 1, 'migration 19', CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));

ALTER TABLE wallet_outbox_archive_runs RENAME COLUMN command TO command_name;
