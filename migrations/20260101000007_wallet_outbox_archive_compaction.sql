-- Members compaction (README, "Compaction"): a receipt purged longer ago than `compact
-- --older-than` keeps its member list as a digest — the number of (event_id, updated_at_ms)
-- pairs its data object holds and their SHA-256 in a fixed encoding — and the member rows of
-- rows no longer in the source table are deleted, in the same transaction that writes the digest.
-- compacted_member_rows: how many member rows went. NULL digest: not compacted.
ALTER TABLE wallet_outbox_archive_receipts
    ADD COLUMN members_digest_sha256 CHAR(64) CHARACTER SET ascii NULL,
    ADD COLUMN members_digest_rows   BIGINT   NULL,
    ADD COLUMN compacted_at_ms       BIGINT   NULL,
    ADD COLUMN compacted_member_rows BIGINT   NOT NULL DEFAULT 0;
