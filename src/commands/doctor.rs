//! `doctor` — the preflight ([`crate::pipeline::doctor`]): connects to the database and the
//! store and reports, line by line, what they allow and do — without writing a row. Exit 0 when
//! nothing is a problem (warnings included), 1 when something is, 2 when the database or the
//! store cannot be reached at all (as every command would stop there).

use crate::db::Db;
use crate::model::command::CommandName;
use crate::model::table::TableSpec;
use crate::pipeline::doctor::{check_database, check_store, DoctorOptions, DoctorRun, DoctorStore};
use crate::pipeline::report::{RunDetails, Summary};

pub(crate) async fn run(
    spec: &'static TableSpec,
    db: Result<&Db, String>,
    store: Result<DoctorStore<'_>, String>,
    opts: &DoctorOptions,
    now_ms: i64,
) -> Summary {
    let mut summary = Summary::new(CommandName::Doctor);
    summary.table = Some(spec.name.to_string());
    let mut run = DoctorRun::default();
    check_database(db.as_deref().map_err(String::as_str), spec, opts, &mut run).await;
    if let Ok(store) = &store {
        summary.store = Some(store.location().to_string());
    }
    let store = store.as_ref().map(|s| *s).map_err(String::as_str);
    check_store(store, opts, now_ms, &mut run).await;
    if let (Ok(db), Ok(store)) = (db, store) {
        if !run.unreachable {
            let line = crate::pipeline::home::doctor_line(spec, db, store.store()).await;
            run.checks.push(line);
        }
    }
    summary.details = Some(RunDetails::Doctor(run));
    summary.settle()
}
