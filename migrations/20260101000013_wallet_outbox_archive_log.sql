-- The log of batches (README, "The log of batches"; src/model/tlog.rs has the encoding): each
-- app's batches as the leaves of a Merkle tree kept in the store as write-once tiles.
--
-- log_index: the receipt's leaf in its app's log — 0, 1, 2, … in chain_seq order, set by the
-- archive run that appends the batch to the log, after the store holds the tiles and the
-- checkpoint that carry it. NULL until then (a receipt recorded before this migration, or one
-- whose run ended before appending: the next `archive` of the app appends it). The unique key
-- keeps two receipts from ever claiming one leaf, and is what purge and verify read a leaf's
-- receipt by.
--
-- The recorded key: `attest` of a day reads that day's receipts, not the app's whole history.
--
-- app_code_bytes and the spellings key: the app code's bytes beside it, so that the spellings
-- an app's receipts are recorded under (SPEC §5.4: an older build took the spelling typed) are
-- found with one index dive each, not by reading every receipt of the app on every run.
--
-- The column is added at the end and NULL (an instant ALTER); the keys are built in place.
ALTER TABLE wallet_outbox_archive_receipts
    ADD COLUMN log_index BIGINT NULL,
    ADD COLUMN app_code_bytes VARBINARY(128) AS (CAST(app_code AS BINARY)) VIRTUAL;

ALTER TABLE wallet_outbox_archive_receipts
    ADD UNIQUE KEY idx_wallet_outbox_archive_log (app_code, log_index),
    ADD KEY idx_wallet_outbox_archive_recorded (app_code, verified_at_ms),
    ADD KEY idx_wallet_outbox_archive_spellings (app_code, app_code_bytes);
