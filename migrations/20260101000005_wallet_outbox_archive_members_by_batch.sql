-- The members of a batch with their versions, in one range scan of an index: the receipt
-- transaction reads a batch's members back this way (instead of one primary-key lookup per
-- member), and verify, restore and purge list a batch's members this way. The index covers
-- (app_code, batch_id, updated_at_ms) and, through the primary key, event_id; it replaces the
-- (app_code, batch_id) index, so inserts still maintain two indexes.
--
-- On a large members table this is an online index build (ALGORITHM=INPLACE, LOCK=NONE on MySQL 8
-- and MariaDB): run `migrate` outside the archive window.
ALTER TABLE wallet_outbox_archive_members
    ADD KEY idx_wallet_outbox_archive_members_batch_version (app_code, batch_id, updated_at_ms),
    DROP KEY idx_wallet_outbox_archive_members_batch;
