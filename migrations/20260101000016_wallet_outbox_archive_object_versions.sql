-- Object versions recorded anew (issue 42, SPEC §5.17; README, "Recovering from a finding" and
-- "Moving an archive"): a batch's objects whose ETag or version id is not the one its receipt
-- recorded at read-back, but whose bytes were read in full and proven the archived ones — a copy
-- to a new home (`relocate`, every batch), or an object restored from the bucket's versioning
-- (`verify --batch-id`). Each row is the evidence of one such step; the receipt's data_etag,
-- data_version_id, manifest_etag and success_etag take the new identity in the same transaction,
-- and verify and purge hold the objects to it from then on.
--
-- cause: relocate | verify. store: where the objects were read. run_id: the run that read them
--   (`history` lists a run's rows by it).
-- old_*: the identity the receipt held before; new_*: the one the store reported before and after
--   the bytes were read (a HEAD of each object again after the read: the bytes read are that
--   version's).
-- gzip_sha256, ndjson_sha256, manifest_sha256, success_crc64, row_count: what the bytes read
--   were held to and matched (the receipt's): the data object's SHA-256 (its CRC-64 and size too),
--   its NDJSON's SHA-256, lines, totals and members; the manifest and _SUCCESS byte for byte.
CREATE TABLE IF NOT EXISTS wallet_outbox_archive_object_versions (
    id                  BIGINT        NOT NULL AUTO_INCREMENT,
    app_code            VARCHAR(32)   NOT NULL,
    batch_id            CHAR(32)      CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    recorded_at_ms      BIGINT        NOT NULL,
    run_id              VARCHAR(32)   CHARACTER SET ascii NOT NULL,
    cause               VARCHAR(16)   CHARACTER SET ascii NOT NULL,
    store               VARCHAR(1024) NOT NULL,
    old_data_etag       VARCHAR(256)  CHARACTER SET ascii NULL,
    old_data_version_id VARCHAR(1024) CHARACTER SET ascii NULL,
    old_manifest_etag   VARCHAR(256)  CHARACTER SET ascii NULL,
    old_success_etag    VARCHAR(256)  CHARACTER SET ascii NULL,
    new_data_etag       VARCHAR(256)  CHARACTER SET ascii NULL,
    new_data_version_id VARCHAR(1024) CHARACTER SET ascii NULL,
    new_manifest_etag   VARCHAR(256)  CHARACTER SET ascii NULL,
    new_success_etag    VARCHAR(256)  CHARACTER SET ascii NULL,
    gzip_sha256         CHAR(64)      CHARACTER SET ascii NOT NULL,
    ndjson_sha256       CHAR(64)      CHARACTER SET ascii NOT NULL,
    manifest_sha256     CHAR(64)      CHARACTER SET ascii NOT NULL,
    success_crc64       VARCHAR(20)   CHARACTER SET ascii NOT NULL,
    row_count           BIGINT        NOT NULL,
    PRIMARY KEY (id),
    KEY idx_wallet_outbox_archive_object_versions_batch (app_code, batch_id, id),
    KEY idx_wallet_outbox_archive_object_versions_run (run_id, app_code, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
