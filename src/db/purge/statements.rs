//! The statements purge runs on the source table, held to its unique key (SPEC §5.14), and how
//! the server plans each (`EXPLAIN`): a chunk's rows read (locked, or not for a dry run),
//! counted, deleted — on MariaDB in one statement joined to the key, or one row a statement.

use sqlx::{AssertSqlSafe, MySql, QueryBuilder};

use super::PurgeQueries;
use crate::db::preflight::Flavour;
use crate::db::{Context, DbError};

/// A statement purge runs on the source table, and how the server plans it (`EXPLAIN`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Plan {
    /// What the statement does (`lock and read`, `delete`, …).
    pub statement: &'static str,
    /// Per table the plan touches: its access type (`range`, `ref`, `ALL`…), its index, the rows
    /// it estimates.
    pub access: Vec<(String, Option<String>, Option<i64>)>,
}

/// What a statement over a chunk's rows does with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Over {
    /// Read them, locking those no other transaction holds.
    Lock,
    /// Read them as they are (the dry run).
    Read,
    /// Count those that exist.
    Count,
    /// Delete them.
    Delete,
}

impl PurgeQueries {
    /// A statement over the rows of `ids` of `app`, as purge runs it on a `flavour` server
    /// (`explain`: prefixed with it, for [`PurgeQueries::plans`]).
    pub(super) fn over_rows<'q>(
        &self,
        over: Over,
        flavour: Flavour,
        app: &'q str,
        ids: impl IntoIterator<Item = &'q str>,
        explain: Option<&str>,
    ) -> QueryBuilder<MySql> {
        self.selecting_over_rows(&self.spec.select_list(), over, flavour, app, ids, explain)
    }

    /// [`PurgeQueries::over_rows`], reading `list` (a lock or a read).
    pub(super) fn selecting_over_rows<'q>(
        &self,
        list: &str,
        over: Over,
        flavour: Flavour,
        app: &'q str,
        ids: impl IntoIterator<Item = &'q str>,
        explain: Option<&str>,
    ) -> QueryBuilder<MySql> {
        let s = self.spec;
        // Held to the unique key: on a small table, or for a chunk that is a large share of it,
        // the optimizer would scan the whole table, locking and waiting for other apps' rows.
        // A single-table DELETE takes no index hint: on MySQL (8.0.20 and later) it takes an
        // optimizer hint. (MariaDB takes no hint there: [`PurgeQueries::joined_delete`].)
        let (name, key) = (s.name, s.event_key);
        let table = format!("{name} FORCE INDEX ({key})");
        let head = match (over, flavour) {
            (Over::Lock | Over::Read, _) => format!("SELECT {list} FROM {table}"),
            (Over::Count, _) => format!("SELECT COUNT(*) FROM {table}"),
            (Over::Delete, _) => format!("DELETE /*+ INDEX({name} {key}) */ FROM {name}"),
        };
        let mut qb = QueryBuilder::<MySql>::new(format!(
            "{}{head} WHERE {} = ",
            explain.unwrap_or_default(),
            s.app_code
        ));
        qb.push_bind(app).push(format!(" AND {} IN (", s.event_id));
        let mut listed = qb.separated(", ");
        for id in ids {
            listed.push_bind(id);
        }
        // SKIP LOCKED: purge never waits for a row the relay (or anyone) holds, so it can never
        // be one side of a deadlock with it; such rows are counted and left for the next run.
        qb.push(match over {
            Over::Lock => ") FOR UPDATE SKIP LOCKED",
            _ => ")",
        });
        qb
    }

    /// MariaDB's delete of a chunk's rows in one statement: the ids as a derived table (a table
    /// value constructor, in the event id column's `collation`) read first and joined to the
    /// unique key — an `eq_ref` read of each named row and of no other row. MariaDB's
    /// single-table `DELETE … IN (…)` takes no index hint and plans a scan of the table (or of the
    /// app's rows by the key's first column) when the chunk is a large share of it, and so reads
    /// — and waits for — a row the relay holds beside the ones purge deletes (seen: 50 s, the
    /// server's lock timeout). It runs with `innodb_lock_wait_timeout = 0` for that statement
    /// alone: were it ever to meet a row lock, it fails at once instead of waiting, and the chunk
    /// is done again with [`PurgeQueries::point_deletes`]. `explain`: the statement `EXPLAIN`ed.
    /// The values are hexadecimal string literals: nothing in an event id can change the
    /// statement. (Measured on 200,000 rows: a third of the point deletes' database CPU, as
    /// pt-archiver's `IN` delete.)
    pub(super) fn joined_delete(
        &self,
        app: &str,
        ids: &[String],
        collation: &str,
        explain: bool,
    ) -> String {
        let s = self.spec;
        let (name, key) = (s.name, s.event_key);
        let id = |v: &str| format!("{} COLLATE {collation}", literal(v));
        let Some((first, rest)) = ids.split_first() else {
            unreachable!("a delete of no rows is never sent")
        };
        let mut listed = format!("SELECT {} AS id", id(first));
        if !rest.is_empty() {
            let values: Vec<String> = rest.iter().map(|v| format!("({})", id(v))).collect();
            listed.push_str(" UNION ALL VALUES ");
            listed.push_str(&values.join(", "));
        }
        format!(
            "{head}DELETE {name} FROM ({listed}) AS purge_ids STRAIGHT_JOIN {name} FORCE INDEX ({key}) \
             ON {name}.{} = {} AND {name}.{} = purge_ids.id",
            s.app_code,
            literal(app),
            s.event_id,
            head = match explain {
                true => "EXPLAIN ",
                false => "SET STATEMENT innodb_lock_wait_timeout = 0 FOR ",
            },
        )
    }

    /// MariaDB's deletes of a chunk's rows one statement per row, by its full unique key, sent
    /// together (one round trip): a point delete reads the one row it names. For an event id
    /// column [`PurgeQueries::joined_delete`] cannot name the collation of, and a chunk its
    /// one statement met a lock in. (On MySQL, its hinted multi-row delete reads no other row —
    /// and MySQL's multi-table form deadlocked two apps purged side by side in 3 of 3 runs.) The
    /// values are hexadecimal string literals in the columns' character set: nothing in an event
    /// id can change the statement.
    pub(super) fn point_deletes(&self, app: &str, ids: &[String]) -> String {
        let s = self.spec;
        let app = literal(app);
        ids.iter()
            .map(|id| {
                format!(
                    "DELETE FROM {} WHERE {} = {app} AND {} = {};",
                    s.name,
                    s.app_code,
                    s.event_id,
                    literal(id)
                )
            })
            .collect()
    }

    /// How the server plans each statement purge runs on the source for `ids` of `app` (what
    /// SPEC §5.14 holds them to: the rows named, by the unique key, and no other): per statement,
    /// its access to the source table (a derived table of the ids, read first, is not listed).
    pub async fn plans(&self, app: &str, ids: &[String]) -> Result<Vec<Plan>, DbError> {
        use sqlx::Row;
        let flavour = self.flavour().await?;
        let live = self.live().await?;
        let mut plans = Vec::new();
        for (statement, over) in [
            ("lock and read", Over::Lock),
            ("read (dry run)", Over::Read),
            ("count", Over::Count),
            ("delete", Over::Delete),
        ] {
            let rows = match (over, flavour, live.joinable.as_deref()) {
                (Over::Delete, Flavour::MariaDb, Some(collation)) if !ids.is_empty() => {
                    let sql = self.joined_delete(app, ids, collation, true);
                    sqlx::raw_sql(AssertSqlSafe(sql))
                        .fetch_all(&self.pool)
                        .await
                        .context(|| format!("explaining purge's {statement}"))?
                }
                // MariaDB deletes one row a statement then: the plan of a delete of one id.
                (Over::Delete, Flavour::MariaDb, None) => {
                    self.explain(over, flavour, app, &ids[..ids.len().min(1)], statement)
                        .await?
                }
                _ => self.explain(over, flavour, app, ids, statement).await?,
            };
            let access = rows
                .iter()
                .filter(|r| {
                    r.try_get_unchecked::<Option<Vec<u8>>, _>("table")
                        .ok()
                        .flatten()
                        .is_some_and(|t| t == self.spec.name.as_bytes())
                })
                .map(|r| {
                    // The servers type EXPLAIN's columns each their own way: read as text.
                    let text = |name: &str| {
                        r.try_get_unchecked::<Option<Vec<u8>>, _>(name)
                            .ok()
                            .flatten()
                            .map(|b: Vec<u8>| String::from_utf8_lossy(&b).into_owned())
                    };
                    let estimated = r
                        .try_get_unchecked::<Option<i64>, _>("rows")
                        .ok()
                        .flatten()
                        .or_else(|| text("rows").and_then(|n| n.parse::<i64>().ok()));
                    (text("type").unwrap_or_default(), text("key"), estimated)
                })
                .collect();
            plans.push(Plan { statement, access });
        }
        Ok(plans)
    }

    /// The server's `EXPLAIN` of a statement over `ids` as [`PurgeQueries::over_rows`] builds
    /// it. MySQL 9 explains as a tree unless asked for the table; MariaDB knows no `FORMAT=` but
    /// that table.
    pub(super) async fn explain(
        &self,
        over: Over,
        flavour: Flavour,
        app: &str,
        ids: &[String],
        statement: &str,
    ) -> Result<Vec<sqlx::mysql::MySqlRow>, DbError> {
        for how in ["EXPLAIN FORMAT=TRADITIONAL ", "EXPLAIN "] {
            let mut qb = self.over_rows(
                over,
                flavour,
                app,
                ids.iter().map(String::as_str),
                Some(how),
            );
            match qb.build().fetch_all(&self.pool).await {
                Ok(found) if !found.is_empty() => return Ok(found),
                Ok(_) => {}
                Err(e) if how == "EXPLAIN " => {
                    return Err(e).context(|| format!("explaining purge's {statement}"))
                }
                Err(_) => {}
            }
        }
        Ok(Vec::new())
    }
}

/// A value as a hexadecimal string literal in `utf8mb4`: nothing in it can change the statement
/// it is spliced into.
fn literal(v: &str) -> String {
    format!("_utf8mb4 X'{}'", hex::encode(v.as_bytes()))
}
