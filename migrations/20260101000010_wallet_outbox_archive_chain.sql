-- The chain of an app's batches (README, "The chain of batches"; src/model/chain.rs has the
-- encoding and its test vector).
--
-- chain_seq, chain_link: the receipt's place in its app's chain — 1, 2, 3, … in the order the
-- app's receipts were recorded under its lock — and the link, the SHA-256 over the link before
-- it and the batch's manifest hash. Set in the transaction that records the receipt; never
-- changed after. NULL on receipts recorded before this migration: the next `archive` of the app
-- (or `migrate`) links them, in the order they were recorded, from the genesis. The unique key
-- is what keeps two writers from ever giving one seq twice: a fork cannot commit.
--
-- full_verified_at_ms, full_verified_how: when `verify` last read the batch's objects in full and
-- found them whole, and how (read_back, store_checksum, cold_restore) — for `attest`. NULL until
-- a verify after this migration; the receipt's verified_at_ms/verified_by is the first.
--
-- All columns are added at the end and NULL (an instant ALTER on MySQL 8.0.29+ and MariaDB 10.3+);
-- the unique key is built in place, reads and writes going on.
ALTER TABLE wallet_outbox_archive_receipts
    ADD COLUMN chain_seq           BIGINT      NULL,
    ADD COLUMN chain_link          CHAR(64)    CHARACTER SET ascii NULL,
    ADD COLUMN full_verified_at_ms BIGINT      NULL,
    ADD COLUMN full_verified_how   VARCHAR(16) CHARACTER SET ascii NULL;

ALTER TABLE wallet_outbox_archive_receipts
    ADD UNIQUE KEY idx_wallet_outbox_archive_chain (app_code, chain_seq);
