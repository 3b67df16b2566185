#!/usr/bin/env bash
# What the member rows cost the primary per archived row (docs/members-design.md, "Measured"):
# archive's database CPU in all, today's member rows written again alone, the event index alone
# ((app_code, event_id) primary key), and pt-archiver's copy of the same rows — the server's CPU
# from /proc/<pid>/stat around each step. MariaDB on this machine (root through the socket, the
# test user outbox_test over TCP, as the test suite makes it); a built binary (BIN).
#   ROWS=300000 BIN=target/debug/outbox-archiver benches/members-ceiling.sh
set -euo pipefail
BIN=${BIN:-target/debug/outbox-archiver}
ROWS=${ROWS:-300000}
DB=oa_members_ceiling
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PID=$(pgrep -x mariadbd)
TICKS=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
per_row() { echo "scale=2; ($2 - $1) / $TICKS * 1000000 / $3" | bc; }
sql() { mariadb -uroot -N "$DB" "$@"; }

mariadb -uroot -e "DROP DATABASE IF EXISTS $DB; CREATE DATABASE $DB"
export DATABASE_URL="mysql://outbox_test:outbox_test@127.0.0.1:3306/$DB"
export OUTBOX_ARCHIVER_STORE="file://$WORK/store" OUTBOX_ARCHIVER_LOCK_PREFIX="$DB:"
export OUTBOX_ARCHIVER_LOG_FORMAT=json
mkdir -p "$WORK/store"
"$BIN" migrate --with-source-table --seed-rows "$ROWS" >/dev/null 2>&1

c0=$(cpu); "$BIN" archive --all-apps --older-than 1d >/dev/null 2>&1; c1=$(cpu)
members=$(sql -e "SELECT COUNT(*) FROM wallet_outbox_archive_members")
echo "archived rows: $members"
echo "archive, database CPU per row: $(per_row "$c0" "$c1" "$members") us"

# The same member rows as archive writes them: 500 a statement, in primary-key order.
sql -e "CREATE TABLE again LIKE wallet_outbox_archive_members;
        CREATE TABLE events (app_code VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
          event_id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
          updated_at_ms BIGINT NOT NULL, batch_no BIGINT NOT NULL,
          PRIMARY KEY (app_code, event_id)) ENGINE = InnoDB"
chunks="FROM (SELECT m.*, DENSE_RANK() OVER (ORDER BY app_code, batch_id) AS batch_no,
  FLOOR((ROW_NUMBER() OVER (ORDER BY app_code, batch_id, updated_at_ms, event_id) - 1) / 500) AS chunk
  FROM wallet_outbox_archive_members m) x GROUP BY chunk ORDER BY chunk"
sql -e "SELECT CONCAT('INSERT INTO again (app_code, event_id, updated_at_ms, batch_id, row_sha256) VALUES ',
  GROUP_CONCAT(CONCAT('(', QUOTE(app_code), ',', QUOTE(event_id), ',', updated_at_ms, ',', QUOTE(batch_id), ',',
  IF(row_sha256 IS NULL, 'NULL', CONCAT('X', QUOTE(HEX(row_sha256)))), ')') SEPARATOR ','), ';') $chunks" >"$WORK/again.sql"
sql -e "SELECT CONCAT('INSERT INTO events (app_code, event_id, updated_at_ms, batch_no) VALUES ',
  GROUP_CONCAT(CONCAT('(', QUOTE(app_code), ',', QUOTE(event_id), ',', updated_at_ms, ',', batch_no, ')') SEPARATOR ','), ';') $chunks" >"$WORK/events.sql"
c0=$(cpu); sql <"$WORK/again.sql"; c1=$(cpu)
echo "today's member rows alone, database CPU per row: $(per_row "$c0" "$c1" "$members") us"
c0=$(cpu); sql <"$WORK/events.sql"; c1=$(cpu)
echo "the event index alone, database CPU per row: $(per_row "$c0" "$c1" "$members") us"

cutoff=$(( ($(date +%s) - 86400) * 1000 ))
c0=$(cpu)
pt-archiver --source "h=127.0.0.1,P=3306,u=outbox_test,p=outbox_test,D=$DB,t=wallet_outbox,i=idx_wallet_outbox_retention" \
  --where "status = 'DELIVERED' AND updated_at_ms < $cutoff" --limit 500 --txn-size 500 \
  --no-delete --no-check-charset --file "$WORK/pt.out"
c1=$(cpu)
copied=$(wc -l <"$WORK/pt.out")
echo "pt-archiver --no-delete --file ($copied rows), database CPU per row: $(per_row "$c0" "$c1" "$copied") us"
mariadb -uroot -e "DROP DATABASE $DB"
