-- Reference DDL of room-service's outbox (the room seed). Not a migration: the service owns this
-- table. `outbox-archiver migrate --with-source-table --table room_outbox` applies it for demos
-- and tests. The envelope is a protobuf message; LONGBLOB holds envelopes of 16 MiB and more
-- (a MEDIUMBLOB stops one byte short of 16 MiB). idx_room_outbox_retention is the archiver's
-- (app_code, status, updated_at_ms, event_id); the claim and pending indexes are the relay's.
-- Character columns take the server's default utf8mb4 collation; event_id is binary.
CREATE TABLE IF NOT EXISTS room_outbox (
    app_code         VARCHAR(32)  NOT NULL,
    event_id         VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    event_type       VARCHAR(64)  NOT NULL,
    room_id          BIGINT       NOT NULL,
    status           VARCHAR(16)  NOT NULL,
    worker_id        VARCHAR(64)  NOT NULL DEFAULT '',
    lock_until_ms    BIGINT       NULL,
    envelope         LONGBLOB     NOT NULL,
    created_at_ms    BIGINT       NOT NULL,
    retry_count      INT          NOT NULL DEFAULT 0,
    next_retry_at_ms BIGINT       NOT NULL DEFAULT 0,
    last_error       TEXT         NULL,
    updated_at_ms    BIGINT       NOT NULL,
    PRIMARY KEY (app_code, event_id),
    KEY idx_room_outbox_retention (app_code, status, updated_at_ms, event_id),
    KEY idx_room_outbox_claim (app_code, status, lock_until_ms, created_at_ms, event_id),
    KEY idx_room_outbox_pending (app_code, status, next_retry_at_ms, created_at_ms, event_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4
