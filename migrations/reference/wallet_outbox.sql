-- Reference DDL of the service-owned source table (SPEC §2). Not a migration: the service owns
-- this table. `outbox-archiver migrate --with-source-table` applies it for demos and tests.
-- Character columns take the server's default utf8mb4 collation, as a service's own DDL would
-- (MySQL 8+: utf8mb4_0900_ai_ci, NO PAD; MariaDB 10.11: utf8mb4_general_ci); event_id is binary.
CREATE TABLE IF NOT EXISTS wallet_outbox (
    app_code         VARCHAR(32)  NOT NULL,
    event_id         VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    event_type       VARCHAR(64)  NOT NULL,
    transaction_id   VARCHAR(64)  NOT NULL,
    command_id       VARCHAR(64)  NOT NULL,
    user_id          BIGINT       NOT NULL,
    asset_type       VARCHAR(32)  NOT NULL,
    available_delta  BIGINT       NOT NULL,
    frozen_delta     BIGINT       NOT NULL,
    payload          JSON         NOT NULL,
    status           VARCHAR(16)  NOT NULL,
    worker_id        VARCHAR(64)  NOT NULL DEFAULT '',
    lock_until_ms    BIGINT       NULL,
    retry_count      INT          NOT NULL DEFAULT 0,
    next_retry_at_ms BIGINT       NULL,
    last_error       TEXT         NULL,
    created_at_ms    BIGINT       NOT NULL,
    updated_at_ms    BIGINT       NOT NULL,
    PRIMARY KEY (app_code, event_id),
    KEY idx_wallet_outbox_retention (app_code, status, updated_at_ms, event_id),
    KEY idx_wallet_outbox_claim (app_code, status, lock_until_ms, created_at_ms, event_id),
    KEY idx_wallet_outbox_pending (app_code, status, next_retry_at_ms, created_at_ms, event_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4
