-- Each batch describes itself (issue 58; SPEC §4; README, "The archive"): layout 2. A batch's
-- manifest names its columns after the fixed keys — name, key, SQL type, encoding, nullable —
-- so that verify, purge and restore read a batch by its own columns whatever the table became,
-- and a reader knows each field's type. The receipt rebuilds its manifest byte for byte, so it
-- names its batch's column list by its SHA-256 (`columns_sha256`; NULL: a manifest written
-- before the list), and the lists themselves are kept once each in
-- `wallet_outbox_archive_column_sets` (a table's few shapes over its years), inserted in the
-- transaction that records the receipt. `wallet_outbox_archive_columns.dropped_at_ms`: when
-- archive first found a column earlier batches hold gone from the table (a column dropped:
-- recorded and logged once, no command stops).
--
-- Layout 2: a build of layout 1 would rebuild these receipts' manifests without their columns
-- and find every new batch inconsistent; raised first, so that it refuses before the tables
-- change (it reads the layout in every transaction that writes).
UPDATE wallet_outbox_archive_layout SET version = 2, migrated_by = 'migration 20' WHERE id = 1 AND version < 2;

CREATE TABLE IF NOT EXISTS wallet_outbox_archive_column_sets (
    sha256         CHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    columns_json   MEDIUMTEXT NOT NULL,
    recorded_at_ms BIGINT     NOT NULL,
    PRIMARY KEY (sha256)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Added at the end and NULL: instant ALTERs on MySQL 8.0.29+ and MariaDB 10.3+.
ALTER TABLE wallet_outbox_archive_receipts
    ADD COLUMN columns_sha256 CHAR(64) CHARACTER SET ascii NULL;

ALTER TABLE wallet_outbox_archive_columns
    ADD COLUMN dropped_at_ms BIGINT NULL;
