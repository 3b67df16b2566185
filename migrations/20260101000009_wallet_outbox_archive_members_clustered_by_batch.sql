-- Member rows clustered by batch (README, "The members table"; issue 26: the primary's cost).
--
-- Before: the primary key was (app_code, event_id), so every member row went in at a random
-- place of the table's largest index (event ids are random in most services), with a second
-- index by batch beside it, and each row repeated the receipt's manifest hash (64 characters,
-- converted from the connection's character set on every insert) and verification time.
--
-- After: the primary key is the order a batch's rows are archived in — (app_code, batch_id,
-- updated_at_ms, event_id) — so a batch's member rows are appended together at the end of the
-- app's range, and its read-back inside the receipt transaction (and every list of a batch's
-- members: verify, purge, restore, compact) is one sequential range of the table itself,
-- covering every column. The rule that a source row belongs to at most one batch, ever, stays
-- the database's: a unique key on (app_code, event_id), whose entries also carry batch_id and
-- updated_at_ms (InnoDB appends the primary key), so a lookup by event id reads no row.
-- manifest_sha256 and receipt_verified_at_ms are gone: the receipt of batch_id holds them.
--
-- One ALTER, online (ALGORITHM=INPLACE, LOCK=NONE on MySQL 8.0+ and MariaDB 10.6+): it rebuilds
-- the table while archive, purge and verify go on, and fails rather than lock the table where the
-- server cannot do it online. On a large members table run `migrate` outside the archive window
-- (replicas apply the rebuild in turn: expect lag of about the time it takes on the primary).
-- The services' own archiver (which writes the two dropped columns) must be stopped first: its
-- receipt transactions would fail and record nothing.
ALTER TABLE wallet_outbox_archive_members
    DROP PRIMARY KEY,
    ADD PRIMARY KEY (app_code, batch_id, updated_at_ms, event_id),
    ADD UNIQUE KEY idx_wallet_outbox_archive_members_event (app_code, event_id),
    DROP KEY idx_wallet_outbox_archive_members_batch_version,
    DROP COLUMN manifest_sha256,
    DROP COLUMN receipt_verified_at_ms,
    ALGORITHM = INPLACE, LOCK = NONE;
