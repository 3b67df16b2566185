-- One archive, one home (issue 33, SPEC §5.13): the store wallet_outbox's archive was bound to
-- when its first batch was archived, and every explicit move since (`outbox-archiver relocate`).
-- The newest row is the archive's home; every command refuses a --store that disagrees with it.
--
-- store: the location as the archiver prints it (s3://bucket/prefix, file:///path).
-- archive_id: 32 random hex digits, also written once into the store's marker object
--   ({prefix}/wallet_outbox/_archive.json): a store that holds another marker, or none and none
--   of the archive's batches, is another archive's or another service's (wrong endpoint).
-- moved_from, reason: a relocation's old home and the operator's words (NULL: the first home).
-- run_id: the run that bound or moved it.
-- id: 1 for the first home, one more for each move: two runs binding or moving at once cannot
--   both commit (the second meets the first's id and reads what it bound).
CREATE TABLE IF NOT EXISTS wallet_outbox_archive_home (
    id          BIGINT        NOT NULL,
    store       VARCHAR(1024) NOT NULL,
    archive_id  CHAR(32)      CHARACTER SET ascii NOT NULL,
    marker_key  VARCHAR(1024) NOT NULL,
    bound_at_ms BIGINT        NOT NULL,
    moved_from  VARCHAR(1024) NULL,
    reason      TEXT          NULL,
    run_id      VARCHAR(32)   CHARACTER SET ascii NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
