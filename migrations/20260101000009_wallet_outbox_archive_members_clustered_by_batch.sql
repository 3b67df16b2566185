-- Member rows clustered by batch (README, "The members table"; issue 26: the primary's cost).
--
-- Before: the primary key was (app_code, event_id), so every member row went in at a random
-- place of the table's largest index (event ids are random in most services), with a second
-- index by batch beside it; each row repeated the receipt's manifest hash (64 characters) and
-- verification time; and app_code compared under utf8mb4_unicode_ci, whose every comparison and
-- every sort key (MySQL's binary log hashes each unique key of each row it writes) walks
-- Unicode collation weights.
--
-- After: the primary key is the order a batch's rows are archived in — (app_code, batch_id,
-- updated_at_ms, event_id) — so a batch's member rows are appended together at the end of the
-- app's range, and its read-back inside the receipt transaction (and every list of a batch's
-- members: verify, purge, restore, compact) is one sequential range of the table itself,
-- covering every column. The rule that a source row belongs to at most one batch, ever, stays
-- the database's: a unique key on (app_code, event_id), whose entries also carry batch_id and
-- updated_at_ms (InnoDB appends the primary key), so a lookup by event id reads no row.
-- manifest_sha256 and receipt_verified_at_ms are gone: the receipt of batch_id holds them.
-- app_code is ascii_bin: app codes are [A-Za-z0-9_.-] (others are never archived), every
-- command writes and reads an app under its one spelling, and binary comparison tells apart at
-- least what the source's collation does. Measured on MySQL 9.7 (binary log on): 21 µs of the
-- server's CPU per member row before, 15 after.
--
-- Member rows written under another spelling of their app than its first (an archiver from before
-- apps had one spelling took the spelling typed) are given the first, as the receipts' lookups
-- use it, before the comparison becomes binary.
UPDATE wallet_outbox_archive_members m
  JOIN (SELECT app_code AS spelling, MIN(CAST(app_code AS BINARY)) AS first
          FROM wallet_outbox_archive_receipts GROUP BY app_code) c
    ON c.spelling = m.app_code
   SET m.app_code = CAST(c.first AS CHAR CHARACTER SET utf8mb4)
 WHERE CAST(m.app_code AS BINARY) <> c.first;

-- One ALTER: a copy of the table (a column's collation cannot change in place on MySQL or
-- MariaDB). While it runs, reads go on (verify, status, find, purge's checks) and the archiver's
-- writes to this table wait for it (archive's receipt transactions, compact); the source table
-- and the services are not touched. About a minute per 10 million member rows on a small server:
-- on a large members table run `migrate` outside the archive window (replicas apply the copy in
-- turn: expect lag of about the time it takes on the primary). The services' own archiver (which
-- writes the two dropped columns) must be stopped first: its receipt transactions would fail and
-- record nothing.
ALTER TABLE wallet_outbox_archive_members
    MODIFY app_code VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    DROP PRIMARY KEY,
    ADD PRIMARY KEY (app_code, batch_id, updated_at_ms, event_id),
    ADD UNIQUE KEY idx_wallet_outbox_archive_members_event (app_code, event_id),
    DROP KEY idx_wallet_outbox_archive_members_batch_version,
    DROP COLUMN manifest_sha256,
    DROP COLUMN receipt_verified_at_ms,
    ALGORITHM = COPY, LOCK = SHARED;
