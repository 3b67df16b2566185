-- What the latest check of a batch found, when it found something (README, "attest").
--
-- last_findings_at_ms, last_findings: when a check last found the batch other than its receipt
-- records — an object missing or written again, its bytes, size or checksums, its content,
-- retention or members disagreeing — and what it found, as verify's summary lists findings:
-- `{"count": n, "first": [the first 20]}`. Written by every verify that finds something on the
-- batch (a metadata-only one included: a missing object needs no full read), and by the check
-- purge and compact make before they act (not in a dry run); never cleared. The batch's latest
-- check is the later of this and its last whole reading (full_verified_at_ms,
-- else verified_at_ms, the archive's read-back): `attest` names a batch whose latest check
-- found something, with what it found, and vouches for it again once a full verify reads it
-- whole after that (a repaired object). attest reads these with the period's receipts: no
-- history of runs is read. NULL until a check finds something.
--
-- Added at the end and NULL: an instant ALTER on MySQL 8.0.29+ and MariaDB 10.3+.
ALTER TABLE wallet_outbox_archive_receipts
    ADD COLUMN last_findings_at_ms BIGINT     NULL,
    ADD COLUMN last_findings       MEDIUMTEXT NULL;
