//! Integration tests against a real MariaDB/MySQL server and a real S3 HTTP server (see
//! `support/`); one binary so the suite links once.

mod archive_e2e;
mod bad_input;
mod bounded;
mod compact;
mod compliance;
mod contention;
mod corruption;
mod crash;
mod cursor_safety;
mod db_restart;
mod doctor;
mod exit_codes;
mod faults;
mod fresh_proof;
mod golden;
mod grants;
mod hostile;
mod lock;
mod metrics;
mod purge_restore;
mod receipts;
mod relay;
mod replicas;
mod restore_guard;
mod resume;
mod shard;
mod signals;
mod status;
mod stops;
mod store_contract;
mod support;
mod tables;
mod tls;
mod verify;
mod write_once;
