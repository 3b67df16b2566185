-- The archive holds the whole row (issue 42, SPEC §4, §5.16): every stored column the source row
-- has when it is archived — wallet_outbox's own eighteen, then any column added to the table
-- since, encoded by its SQL type — so purge compares, and restore writes, exactly what the line
-- holds, whatever a column's default is by then.
--
-- wallet_outbox_archive_columns: the columns added to wallet_outbox that archive has written
-- (its own eighteen are always written, and not listed), and the generated columns it has seen
-- (encoding 'generated': derived from the others, never archived, computed again by the server
-- on restore). A listed column removed from the table stops the runs (the batches that hold it
-- could not be restored); a batch recorded before a column was first archived is known to lack it.
CREATE TABLE IF NOT EXISTS wallet_outbox_archive_columns (
    column_name          VARCHAR(64) NOT NULL,
    json_key             VARCHAR(64) NOT NULL,
    encoding             VARCHAR(16) CHARACTER SET ascii NOT NULL,
    first_archived_at_ms BIGINT      NOT NULL,
    PRIMARY KEY (column_name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- wallet_outbox_archive_added_values: per batch, what its rows held in a column its lines lack
-- (one added to the table after the batch was archived) when purge deleted them: one value per
-- column per batch, as a line would encode it (encoding says how), recorded in the transaction of
-- the first delete that relied on it. A row holding anything else is kept; restore writes the
-- value back, so the row comes back exactly as it was deleted.
CREATE TABLE IF NOT EXISTS wallet_outbox_archive_added_values (
    app_code       VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    batch_id       CHAR(32)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    column_name    VARCHAR(64) NOT NULL,
    encoding       VARCHAR(16) CHARACTER SET ascii NOT NULL,
    value_json     MEDIUMTEXT  NOT NULL,
    recorded_at_ms BIGINT      NOT NULL,
    PRIMARY KEY (app_code, batch_id, column_name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
