-- The archiver's own tables for wallet_outbox (SPEC §3).
--
-- Receipts: one row per batch whose three objects were read back and verified. The resume
-- cursor is the greatest (last_updated_at_ms, last_event_id) among an app's VERIFIED receipts,
-- found on idx_wallet_outbox_archive_cursor. Event ids are compared in binary, as in the source.
CREATE TABLE IF NOT EXISTS wallet_outbox_archive_receipts (
    app_code              VARCHAR(32)  NOT NULL,
    batch_id              CHAR(32)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    state                 VARCHAR(16)  NOT NULL,
    data_object_key       VARCHAR(512) NOT NULL,
    manifest_object_key   VARCHAR(512) NOT NULL,
    success_object_key    VARCHAR(512) NOT NULL,
    schema_version        INT          NOT NULL,
    row_count             BIGINT       NOT NULL,
    first_updated_at_ms   BIGINT       NOT NULL,
    first_event_id        VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    last_updated_at_ms    BIGINT       NOT NULL,
    last_event_id         VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    min_created_at_ms     BIGINT       NOT NULL,
    max_created_at_ms     BIGINT       NOT NULL,
    available_delta_total VARCHAR(40)  NOT NULL,
    frozen_delta_total    VARCHAR(40)  NOT NULL,
    ndjson_sha256         CHAR(64)     CHARACTER SET ascii NOT NULL,
    gzip_sha256           CHAR(64)     CHARACTER SET ascii NOT NULL,
    data_crc64            VARCHAR(20)  CHARACTER SET ascii NOT NULL,
    manifest_crc64        VARCHAR(20)  CHARACTER SET ascii NOT NULL,
    success_crc64         VARCHAR(20)  CHARACTER SET ascii NOT NULL,
    manifest_sha256       CHAR(64)     CHARACTER SET ascii NOT NULL,
    uncompressed_bytes    BIGINT       NOT NULL,
    compressed_bytes      BIGINT       NOT NULL,
    verified_at_ms        BIGINT       NOT NULL,
    created_at_ms         BIGINT       NOT NULL,
    updated_at_ms         BIGINT       NOT NULL,
    PRIMARY KEY (app_code, batch_id),
    KEY idx_wallet_outbox_archive_cursor (app_code, state, last_updated_at_ms, last_event_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Members: one row per archived source row; a source row belongs to at most one batch, ever.
-- purge deletes exactly these rows, and only while status and updated_at_ms are unchanged.
CREATE TABLE IF NOT EXISTS wallet_outbox_archive_members (
    app_code               VARCHAR(32) NOT NULL,
    event_id               VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    updated_at_ms          BIGINT      NOT NULL,
    batch_id               CHAR(32)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    manifest_sha256        CHAR(64)    CHARACTER SET ascii NOT NULL,
    receipt_verified_at_ms BIGINT      NOT NULL,
    PRIMARY KEY (app_code, event_id),
    KEY idx_wallet_outbox_archive_members_batch (app_code, batch_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
