-- What purge compares before it deletes a row (README, "What purge compares").
--
-- row_sha256 (members, superseded): the first 16 bytes of the SHA-256 of the row's archived
-- NDJSON line (without its newline). Purge deletes a row only if the row as it is now encodes
-- to a line with this fingerprint. NULL on member rows recorded before this migration: purge
-- then takes the fingerprints from the data object, read in full.
--
-- members_proof_sha256 (receipts): the SHA-256 of every (event_id, updated_at_ms, row_sha256)
-- of the batch's data object in a fixed, documented encoding. Purge recomputes it from the
-- member and superseded rows it is about to delete by, before the first delete: a member row
-- edited since does not hash to it. NULL on receipts recorded before this migration.
--
-- data_etag, manifest_etag, success_etag, data_version_id: what the store reported for each
-- object when it was read back. Every later HEAD is held to them; where HEAD can vouch for
-- nothing but a size (no ETag, no checksum of its own), purge reads the object instead.
--
-- All columns are added at the end and NULL: an instant ALTER on MySQL 8.0.29+ and MariaDB 10.3+.
ALTER TABLE wallet_outbox_archive_members
    ADD COLUMN row_sha256 BINARY(16) NULL;

ALTER TABLE wallet_outbox_archive_superseded
    ADD COLUMN row_sha256 BINARY(16) NULL;

ALTER TABLE wallet_outbox_archive_receipts
    ADD COLUMN members_proof_sha256 CHAR(64)      CHARACTER SET ascii NULL,
    ADD COLUMN data_etag            VARCHAR(256)  CHARACTER SET ascii NULL,
    ADD COLUMN manifest_etag        VARCHAR(256)  CHARACTER SET ascii NULL,
    ADD COLUMN success_etag         VARCHAR(256)  CHARACTER SET ascii NULL,
    ADD COLUMN data_version_id      VARCHAR(1024) CHARACTER SET ascii NULL;
