-- How each batch's objects are protected and stored, as the store reported it when the batch was
-- recorded (README, "Compliance and cost"); verify holds the objects to it.
--
-- object_lock_mode / retain_until_ms: the weakest Object Lock retention of the batch's three
-- objects (NULL: none). legal_hold: all three carry a legal hold. storage_class: the data
-- object's (NULL: STANDARD). sse_algorithm / sse_kms_key_id: the data object's encryption as the
-- store reports it. verified_by: read_back (every object read back in full, SPEC §5.1), or
-- store_checksum (a data object in a class that cannot be read at once: its bytes as uploaded were
-- scanned and the store's own checksum of the stored object matched them).
ALTER TABLE wallet_outbox_archive_receipts
    ADD COLUMN object_lock_mode VARCHAR(16)   CHARACTER SET ascii NULL,
    ADD COLUMN retain_until_ms  BIGINT        NULL,
    ADD COLUMN legal_hold       BOOLEAN       NOT NULL DEFAULT FALSE,
    ADD COLUMN storage_class    VARCHAR(32)   CHARACTER SET ascii NULL,
    ADD COLUMN sse_algorithm    VARCHAR(16)   CHARACTER SET ascii NULL,
    ADD COLUMN sse_kms_key_id   VARCHAR(2048) CHARACTER SET ascii NULL,
    ADD COLUMN verified_by      VARCHAR(16)   CHARACTER SET ascii NOT NULL DEFAULT 'read_back';
