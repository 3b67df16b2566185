-- An app's log identity (issue 42, SPEC §5.16; README, "The log of batches"): the folder its log
-- of batches is kept under in the store (`{prefix}/wallet_outbox/_log/app_code={folder}/`), and
-- so its checkpoints' origin line and the app line of every entry. Recorded once, when the
-- app's log begins — before the log's first object is written — and never derived again: a
-- collation of `app_code` changed later (made case-sensitive, or back) moves no log.
--
-- app_code: the app's spelling (SPEC §5.4), compared byte for byte: `Pay` and `pay` are two rows
--   whatever the source's collation says today.
-- folder: the app's code as the collation of the day its log began told apps apart (in
--   lowercase where codes compared case-insensitively, exactly where they compared
--   case-sensitively), or `{that}~{n}` when an older app's log already held that folder (a new
--   app `pay` after `Pay`'s log began in `pay/`). The unique key keeps two apps from ever
--   sharing a log.
-- how: `begun` (the log began with this row) or `found` (a log an older build began, found in
--   the store the first time a command needed it: the folder its checkpoint is in).
-- recorded_at_ms: when the row was written.
CREATE TABLE IF NOT EXISTS wallet_outbox_archive_logs (
    app_code       VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    folder         VARCHAR(48) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    how            VARCHAR(8)  CHARACTER SET ascii NOT NULL,
    recorded_at_ms BIGINT      NOT NULL,
    PRIMARY KEY (app_code),
    UNIQUE KEY idx_wallet_outbox_archive_logs_folder (folder)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
