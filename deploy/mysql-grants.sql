-- Least-privilege MySQL 8 / MariaDB roles for outbox-archiver, for database `wallet` and the
-- outbox table `wallet_outbox`. Replace the names and passwords; keep the shape. The test suite
-- applies this file to a real server and runs each command as its role (tests/integration/grants.rs).
--
-- `migrate` runs as a schema owner (your DBA or migration role), not as these users: it needs
-- CREATE and ALTER on the database. GET_LOCK/RELEASE_LOCK need no privilege.
--
-- Every role reads the layout table (`_layout`, README "Upgrading") in each transaction that
-- writes, with a shared lock (`LOCK IN SHARE MODE`), which MySQL 8.0.22 and later allow only to
-- a login that also holds UPDATE, DELETE or LOCK TABLES on the table: hence UPDATE on that one
-- row's table. No command updates it; `migrate` (the schema owner) does.

-- archive (the hourly CronJob), verify and status: read the outbox, write receipts, members and
-- run records. No DELETE on the outbox: this role cannot remove a row from it. UPDATE on the
-- receipts and members is for the idempotent `INSERT … ON DUPLICATE KEY UPDATE key = key` of a
-- rerun (the server asks for UPDATE on every inserted column; a column grant is not enough);
-- verify uses the receipts' UPDATE to note on each batch's receipt when it read it whole and what
-- it found (full_verified_*, last_findings*: attest's statements say it; without the grant verify
-- still verifies, and says once that it could not note). purge and compact note their findings
-- the same way, with the UPDATE they have.
-- DELETE on the members (only) is for a row delivered again after it was archived: its member
-- row moves to the batch that archived the new version, and the old version is kept in
-- `_superseded` (README, "Redelivered rows"). INSERT on the home records the store the first
-- batch binds the archive to (DELETE takes back a binding whose marker could not be written);
-- moving it later (`relocate`) is an operator's job, with the same grant, by hand. INSERT on the
-- logs records an app's log identity when its log begins, or — a log an older build began — at
-- the app's next archive (README, "The log of batches"); every other role only reads them.
-- INSERT on the log heads records each tree head an archive run publishes (README, "What each
-- party keeps"): the head no later checkpoint may fall behind; every other role reads it. The
-- columns table records the columns added to the outbox that archive has written (DELETE takes
-- back the entry of a generated column made a stored one; UPDATE marks one dropped from the
-- outbox since, once); every role reads it at start-up. The column sets table keeps each
-- batch's column list once (INSERT in the receipt transaction); every role reads it. DELETE on
-- the kept rows clears the marks of rows purge kept, in the receipt transaction of the batch that
-- archives them again as they are now (README, "What purge compares").
-- INSERT on the object versions is for `verify --batch-id` (and `relocate`): a batch's objects written again
-- with the archived bytes (a restore from versioning, a copy) are recorded under their new
-- identity, with the evidence, and the receipt takes it (UPDATE on the receipts, above).
CREATE USER IF NOT EXISTS 'outbox_archiver'@'%' IDENTIFIED BY 'CHANGE-ME';
GRANT SELECT ON `wallet`.`wallet_outbox` TO 'outbox_archiver'@'%';
GRANT SELECT ON `wallet`.`_sqlx_migrations` TO 'outbox_archiver'@'%';
GRANT SELECT, UPDATE ON `wallet`.`wallet_outbox_archive_layout` TO 'outbox_archiver'@'%';
GRANT SELECT, INSERT, UPDATE ON `wallet`.`wallet_outbox_archive_receipts` TO 'outbox_archiver'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE ON `wallet`.`wallet_outbox_archive_members` TO 'outbox_archiver'@'%';
GRANT SELECT, INSERT ON `wallet`.`wallet_outbox_archive_superseded` TO 'outbox_archiver'@'%';
GRANT SELECT, INSERT ON `wallet`.`wallet_outbox_archive_runs` TO 'outbox_archiver'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_drills` TO 'outbox_archiver'@'%';
GRANT SELECT, INSERT, DELETE ON `wallet`.`wallet_outbox_archive_home` TO 'outbox_archiver'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE ON `wallet`.`wallet_outbox_archive_columns` TO 'outbox_archiver'@'%';
GRANT SELECT, INSERT ON `wallet`.`wallet_outbox_archive_column_sets` TO 'outbox_archiver'@'%';
GRANT SELECT, DELETE ON `wallet`.`wallet_outbox_archive_kept` TO 'outbox_archiver'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_added_values` TO 'outbox_archiver'@'%';
GRANT SELECT, INSERT ON `wallet`.`wallet_outbox_archive_logs` TO 'outbox_archiver'@'%';
GRANT SELECT, INSERT ON `wallet`.`wallet_outbox_archive_log_heads` TO 'outbox_archiver'@'%';
GRANT SELECT, INSERT ON `wallet`.`wallet_outbox_archive_object_versions` TO 'outbox_archiver'@'%';

-- purge (the daily CronJob): delete exactly the archived members from the outbox and record it;
-- a row its batch does not hold whole (changed in place, or holding a column added to the outbox
-- after it was archived) is kept and marked in `_kept` (INSERT), for archive to archive again.
-- `_added_values` is what builds before layout 2 recorded instead: purge only reads it now.
CREATE USER IF NOT EXISTS 'outbox_purger'@'%' IDENTIFIED BY 'CHANGE-ME';
GRANT SELECT, DELETE ON `wallet`.`wallet_outbox` TO 'outbox_purger'@'%';
GRANT SELECT ON `wallet`.`_sqlx_migrations` TO 'outbox_purger'@'%';
GRANT SELECT, UPDATE ON `wallet`.`wallet_outbox_archive_layout` TO 'outbox_purger'@'%';
GRANT SELECT, UPDATE ON `wallet`.`wallet_outbox_archive_receipts` TO 'outbox_purger'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_members` TO 'outbox_purger'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_superseded` TO 'outbox_purger'@'%';
GRANT SELECT, INSERT ON `wallet`.`wallet_outbox_archive_runs` TO 'outbox_purger'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_drills` TO 'outbox_purger'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_home` TO 'outbox_purger'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_columns` TO 'outbox_purger'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_column_sets` TO 'outbox_purger'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_added_values` TO 'outbox_purger'@'%';
GRANT SELECT, INSERT ON `wallet`.`wallet_outbox_archive_kept` TO 'outbox_purger'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_logs` TO 'outbox_purger'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_log_heads` TO 'outbox_purger'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_object_versions` TO 'outbox_purger'@'%';

-- restore and restore drills (by hand, by on-call): a separate role again, because it creates
-- tables. Restoring into the live table (--into-source) additionally needs INSERT on it and
-- UPDATE on the receipts (the batch is marked restored, so purge never deletes its rows again),
-- and, for a batch `compact` compacted, INSERT and UPDATE on the members (the rows put back get
-- their member rows again), and UPDATE on the layout table (the shared lock above); grant that
-- for the duration of an incident only.
-- CREATE USER IF NOT EXISTS 'outbox_restorer'@'%' IDENTIFIED BY 'CHANGE-ME';
-- GRANT SELECT, CREATE, DROP, INSERT ON `wallet`.* TO 'outbox_restorer'@'%';

-- compact (the weekly CronJob, README "Compaction"): replaces the member rows of long-purged
-- receipts by a digest. DELETE on the members table is the one power it has that purge does not:
-- the purge role can delete outbox rows but never the proof of what it deleted. It reads the
-- outbox only to keep the members of rows still there.
CREATE USER IF NOT EXISTS 'outbox_compactor'@'%' IDENTIFIED BY 'CHANGE-ME';
GRANT SELECT ON `wallet`.`wallet_outbox` TO 'outbox_compactor'@'%';
GRANT SELECT ON `wallet`.`_sqlx_migrations` TO 'outbox_compactor'@'%';
GRANT SELECT, UPDATE ON `wallet`.`wallet_outbox_archive_layout` TO 'outbox_compactor'@'%';
GRANT SELECT, UPDATE ON `wallet`.`wallet_outbox_archive_receipts` TO 'outbox_compactor'@'%';
GRANT SELECT, DELETE ON `wallet`.`wallet_outbox_archive_members` TO 'outbox_compactor'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_superseded` TO 'outbox_compactor'@'%';
GRANT SELECT, INSERT ON `wallet`.`wallet_outbox_archive_runs` TO 'outbox_compactor'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_drills` TO 'outbox_compactor'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_home` TO 'outbox_compactor'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_columns` TO 'outbox_compactor'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_column_sets` TO 'outbox_compactor'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_kept` TO 'outbox_compactor'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_added_values` TO 'outbox_compactor'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_logs` TO 'outbox_compactor'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_log_heads` TO 'outbox_compactor'@'%';
GRANT SELECT ON `wallet`.`wallet_outbox_archive_object_versions` TO 'outbox_compactor'@'%';

-- Replica lag (--replica, --replicas-from; README "Replica lag"): on each replica, the roles that
-- write (archive, purge, compact) read its replication status. The privilege's name depends on
-- the server, so run the line for yours on the primary (it replicates):
--   MariaDB 10.5.9 and later:   GRANT SLAVE MONITOR ON *.* TO 'outbox_archiver'@'%', 'outbox_purger'@'%', 'outbox_compactor'@'%';
--   MySQL 8 (and older MariaDB): GRANT REPLICATION CLIENT ON *.* TO 'outbox_archiver'@'%', 'outbox_purger'@'%', 'outbox_compactor'@'%';
-- With --heartbeat-table instead, SELECT on that table is enough:
--   GRANT SELECT ON `percona`.`heartbeat` TO 'outbox_archiver'@'%', 'outbox_purger'@'%', 'outbox_compactor'@'%';
-- Finding the replicas on the primary: --replicas-from hosts (SHOW REPLICA HOSTS) needs
-- REPLICATION MASTER ADMIN on MariaDB 10.5.2+ or REPLICATION SLAVE on MySQL 8;
-- --replicas-from processlist needs PROCESS (to see the replicas' Binlog Dump threads).
