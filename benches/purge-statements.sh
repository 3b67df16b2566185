#!/usr/bin/env bash
# What each of purge's statements costs the primary per deleted row (BENCHMARKS.md, "Purge's
# statements one by one"), against pt-archiver deleting the same rows. A seeded source table; the
# delivered rows of its oldest tenth (random event ids, spread over the whole key, as a CronJob's
# purge finds them) deleted from a fresh copy per variant, app by app in cursor order, in chunks of
# 500, each chunk one READ COMMITTED transaction — the statements as purge sends them on MariaDB
# (src/db/purge): the locking read by the chunk's ids, the table's definition, the ids joined to
# the unique key and deleted, and the re-read that proves them gone. The receipt's statements and
# the member rows are left out. The server's CPU from /proc/<pid>/stat around each variant (its
# background work included: the run waits until the server is idle). MariaDB on this machine: root
# through the socket makes a user of the script's own for the binary and pt-archiver over TCP.
#   ROWS=1000000 BIN=target/release/outbox-archiver benches/purge-statements.sh
set -euo pipefail
BIN=${BIN:-target/release/outbox-archiver}
ROWS=${ROWS:-1000000}
DB=oa_purge_statements
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PID=$(pgrep -x mariadbd)
TICKS=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
sql() { mariadb -uroot -N "$DB" "$@"; }
# Until the server's CPU stands still for a second (InnoDB's purge of deleted rows, its flushing).
settle() {
  for _ in $(seq 120); do
    local a b
    a=$(cpu); sleep 1; b=$(cpu)
    [ $((b - a)) -lt 5 ] && return
  done
}

mariadb -uroot -e "DROP DATABASE IF EXISTS $DB; CREATE DATABASE $DB;
  CREATE USER IF NOT EXISTS '$DB'@'127.0.0.1' IDENTIFIED BY '$DB';
  GRANT ALL PRIVILEGES ON $DB.* TO '$DB'@'127.0.0.1'"
DATABASE_URL="mysql://$DB:$DB@127.0.0.1:3306/$DB" \
  "$BIN" migrate --with-source-table --seed-rows "$ROWS" >/dev/null 2>&1
upto=$(sql -e "SELECT updated_at_ms FROM wallet_outbox ORDER BY updated_at_ms LIMIT 1 OFFSET $((ROWS / 10))")
where="status = 'DELIVERED' AND updated_at_ms < $upto"
sql -e "SELECT app_code, event_id FROM wallet_outbox FORCE INDEX (idx_wallet_outbox_retention)
        WHERE $where ORDER BY app_code, status, updated_at_ms, event_id" > "$WORK/ids.tsv"
rows=$(wc -l < "$WORK/ids.tsv")
echo "rows deleted per variant: $rows of $ROWS (updated_at_ms < $upto)"

# One variant's statements for the table `t`, chunk by chunk.
statements() {
  python3 - "$1" "$2" "$WORK/ids.tsv" <<'EOF'
import sys
variant, t, ids = sys.argv[1], sys.argv[2], sys.argv[3]
by_app = {}
for line in open(ids):
    app, event_id = line.rstrip("\n").split("\t")
    by_app.setdefault(app, []).append(event_id)
lit = lambda v: "_utf8mb4 X'" + v.encode().hex() + "'"
print("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;")
for app, ids in by_app.items():
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        listed = ", ".join(lit(v) for v in chunk)
        key = f"{t} FORCE INDEX (PRIMARY) WHERE app_code = {lit(app)} AND event_id IN ({listed})"
        lock = f"SELECT * FROM {key} FOR UPDATE SKIP LOCKED;"
        reread = f"SELECT * FROM {key} LOCK IN SHARE MODE NOWAIT;"
        named = [f"{lit(v)} COLLATE utf8mb4_bin" for v in chunk]
        derived = f"SELECT {named[0]} AS id" + (
            " UNION ALL VALUES " + ", ".join(f"({v})" for v in named[1:]) if len(named) > 1 else "")
        delete = (f"SET STATEMENT innodb_lock_wait_timeout = 0 FOR DELETE {t} FROM ({derived}) AS purge_ids "
                  f"STRAIGHT_JOIN {t} FORCE INDEX (PRIMARY) ON {t}.app_code = {lit(app)} AND {t}.event_id = purge_ids.id;")
        show = f"SHOW CREATE TABLE {t};"
        print("\n".join({
            "purge": ["BEGIN;", lock, show, delete, "COMMIT;", "BEGIN;", reread, "COMMIT;"],
            "purge-without-re-read": ["BEGIN;", lock, show, delete, "COMMIT;"],
            "joined-delete-alone": ["BEGIN;", delete, "COMMIT;"],
            "locking-read-alone": ["BEGIN;", lock, "COMMIT;"],
        }[variant]))
EOF
}

for variant in pt-archiver purge purge-without-re-read joined-delete-alone locking-read-alone; do
  t="copy_${variant//-/_}"
  sql -e "DROP TABLE IF EXISTS $t; CREATE TABLE $t LIKE wallet_outbox; INSERT INTO $t SELECT * FROM wallet_outbox"
  [ "$variant" = pt-archiver ] || statements "$variant" "$t" > "$WORK/$variant.sql"
  settle
  c0=$(cpu); s0=$(date +%s.%N)
  if [ "$variant" = pt-archiver ]; then
    pt-archiver --source "h=127.0.0.1,P=3306,u=$DB,p=$DB,D=$DB,t=$t,i=idx_wallet_outbox_retention" \
      --where "$where" --limit 500 --txn-size 500 --purge --bulk-delete --no-check-charset
  else
    sql < "$WORK/$variant.sql" > /dev/null
  fi
  s1=$(date +%s.%N); settle; c1=$(cpu)
  left=$(sql -e "SELECT COUNT(*) FROM $t WHERE $where")
  printf '%-24s %6.2f us of the server per row (%.1f s wall), %s of the rows left\n' "$variant" \
    "$(echo "($c1 - $c0) / $TICKS * 1000000 / $rows" | bc -l)" "$(echo "$s1 - $s0" | bc)" "$left"
  sql -e "DROP TABLE $t"
done
mariadb -uroot -e "DROP DATABASE $DB"
