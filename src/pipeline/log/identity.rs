//! An app's log identity (SPEC §5.16; README, "The log of batches"): the folder its log is kept
//! under — hence its checkpoints' origin and the app line of its entries — recorded once in the
//! database ([`LogIdentities`], migration 15) and never derived again from the source's
//! collation, which can change under a live archive (`Pay`'s log began in `pay/` while app codes
//! compared case-insensitively; made `utf8mb4_bin`, today's derivation says `Pay/`).
//!
//! The rules, in order:
//!
//! 1. **Recorded**: the folder recorded for the app, exactly its spelling.
//! 2. **Found** (a log an older build began): the first of the app's code and its code in
//!    lowercase — the only two names any build derived — that holds a checkpoint and is no other
//!    app's. An app none of whose receipts is logged takes such a log only if no other spelling
//!    of its code (`Pay` for `pay`, where case matters) has logged receipts whose log it is: that
//!    app's log is found first. Recorded by the app's next `archive`; until then every command
//!    finds it the same way (`verify` and `attest` need no write privilege, `purge` no more
//!    than it has).
//! 3. **Begins**: the app's code as the source's collation tells apps apart today (lowercase,
//!    or exactly where case matters), or — when that folder is another app's log already —
//!    `{that}~2`, `~3`, …, a name no app code can take (`~` is not in one). Recorded by the
//!    append that writes the log's first object, not before.

use std::collections::BTreeSet;

use super::{table_prefix, Log, LogError};
use crate::db::logs::{How, Recorded};
use crate::model::format;
use crate::pipeline::RunContext;

/// The most folders a log that begins tries (`{code}~2` … ): two apps' logs under one derived
/// name is already the rare case.
const MAX_SUFFIX: u32 = 64;

/// Why a log is opened: to append to it (`archive`: an identity found or begun is recorded),
/// or to read it (every other command: nothing is written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    Append,
    Read,
}

/// Where an app's log is, and whether that is recorded yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    pub folder: String,
    /// `false`: the log has not begun; the append that writes its first object records it.
    pub recorded: bool,
}

/// The app's log identity by the rules above; one found in the store is recorded when the log
/// is opened to append to.
pub(crate) async fn resolve(
    ctx: &RunContext,
    app: &str,
    purpose: Purpose,
) -> Result<Identity, LogError> {
    let ids = &ctx.tables.logs;
    if let Some(folder) = ids.folder_of(app).await? {
        return Ok(Identity {
            folder,
            recorded: true,
        });
    }
    let logged = ctx.tables.receipts.last_logged(app).await?.is_some();
    let found = match logged {
        true => found_logged(ctx, app).await?,
        false => found_unlogged(ctx, app, purpose).await?,
    };
    if let Some(folder) = found {
        return record_found(ctx, app, folder, purpose).await;
    }
    Ok(Identity {
        folder: fresh(ctx, app).await?,
        recorded: false,
    })
}

/// Records the log found for `app` (rule 2), when it is opened to append to; a valid app
/// code's only — a folder only the store knows (its app gone from the database) is audited
/// under its name, never recorded.
async fn record_found(
    ctx: &RunContext,
    app: &str,
    folder: String,
    purpose: Purpose,
) -> Result<Identity, LogError> {
    if purpose == Purpose::Read || crate::model::appcode::validate(app).is_err() {
        return Ok(Identity {
            folder,
            recorded: false,
        });
    }
    let ids = &ctx.tables.logs;
    match ids
        .record(app, &folder, How::Found, ctx.now())
        .await?
    {
        Recorded::Folder(folder) => Ok(Identity {
            folder,
            recorded: true,
        }),
        Recorded::Taken { by } => Err(LogError::Refused {
            app: app.to_string(),
            detail: format!("its log in folder {folder} was recorded as app {by}'s by another run at the same time; nothing changed — run the command again"),
        }),
    }
}

/// The names any build gave `app`'s log folder: its code, then its code in lowercase.
fn derived_names(app: &str) -> Vec<String> {
    let mut names = vec![app.to_string()];
    let lower = app.to_ascii_lowercase();
    if lower != app {
        names.push(lower);
    }
    names
}

/// Whether the store holds a checkpoint in the log folder `folder`.
async fn has_log(ctx: &RunContext, folder: &str) -> Result<bool, LogError> {
    let key = format::log_prefix(&table_prefix(ctx), folder).key(format::LOG_CHECKPOINT);
    Ok(ctx.store.head(&key).await?.is_some())
}

/// The log an older build began for `app`, whose receipts are logged (rule 2): the first of its
/// derived names that holds a checkpoint and is recorded for no other app.
async fn found_logged(ctx: &RunContext, app: &str) -> Result<Option<String>, LogError> {
    let ids = &ctx.tables.logs;
    for folder in derived_names(app) {
        if ids.app_of(&folder).await?.is_none() && has_log(ctx, &folder).await? {
            return Ok(Some(folder));
        }
    }
    Ok(None)
}

/// A log for `app`, none of whose receipts is logged (rule 2): a folder of its derived names
/// that holds a checkpoint no app's record or logged receipts claim — its own log of a run that
/// ended between the store and the database, or the log of an app the database forgot.
async fn found_unlogged(
    ctx: &RunContext,
    app: &str,
    purpose: Purpose,
) -> Result<Option<String>, LogError> {
    let ids = &ctx.tables.logs;
    let mut claimed: Option<BTreeSet<String>> = None;
    for folder in derived_names(app) {
        if ids.app_of(&folder).await?.is_some() || !has_log(ctx, &folder).await? {
            continue;
        }
        if claimed.is_none() {
            claimed = Some(claimed_by_other_spellings(ctx, app, purpose).await?);
        }
        if !claimed.as_ref().is_some_and(|c| c.contains(&folder)) {
            return Ok(Some(folder));
        }
    }
    Ok(None)
}

/// The folders of the logs of the other spellings of `app`'s code that have logged receipts
/// (only where the source's app codes compare case-sensitively: else they are one app),
/// each found now (and recorded, for an append). One index dive per app of the table: a rare
/// path (a log no record names, beside an app whose log has not begun).
async fn claimed_by_other_spellings(
    ctx: &RunContext,
    app: &str,
    purpose: Purpose,
) -> Result<BTreeSet<String>, LogError> {
    let mut claimed = BTreeSet::new();
    if !ctx.app_case_matters().await? {
        return Ok(claimed);
    }
    let ids = &ctx.tables.logs;
    let receipts = &ctx.tables.receipts;
    let apps = ctx.tables.receipts.apps_with_receipts().await?;
    for other in apps
        .iter()
        .filter(|o| *o != app && o.eq_ignore_ascii_case(app))
    {
        if let Some(folder) = ids.folder_of(other).await? {
            claimed.insert(folder);
        } else if receipts.last_logged(other).await?.is_some() {
            if let Some(folder) = found_logged(ctx, other).await? {
                claimed.insert(record_found(ctx, other, folder, purpose).await?.folder);
            }
        }
    }
    Ok(claimed)
}

/// The folder a log that begins now takes (rule 3): the derived one, or the first
/// `{derived}~{n}` that no record names and the store holds no log in.
async fn fresh(ctx: &RunContext, app: &str) -> Result<String, LogError> {
    let derived = folder_name(app, ctx.app_case_matters().await?);
    let ids = &ctx.tables.logs;
    for n in 1..=MAX_SUFFIX {
        let folder = match n {
            1 => derived.clone(),
            n => format!("{derived}~{n}"),
        };
        if ids.app_of(&folder).await?.is_none() && !has_log(ctx, &folder).await? {
            return Ok(folder);
        }
    }
    Err(LogError::Refused {
        app: app.to_string(),
        detail: format!("the log folders {derived} to {derived}~{MAX_SUFFIX} are all other apps' logs: no folder for a new log"),
    })
}

impl Log<'_> {
    /// Records the log's identity as it begins (rule 3), before its first object is written:
    /// once per log; a log whose identity is recorded passes at once.
    pub(super) async fn begin(&self) -> Result<(), LogError> {
        self.begun
            .get_or_try_init(|| async {
                if self.recorded {
                    return Ok(());
                }
                let ids = &self.ctx.tables.logs;
                let recorded = ids
                    .record(&self.app, &self.folder, How::Begun, self.ctx.now())
                    .await?;
                match recorded {
                    Recorded::Folder(f) if f == self.folder => Ok(()),
                    Recorded::Folder(f) => Err(self.refused(format!("its log was recorded in folder {f} by another run at the same time (this run meant {}); nothing written — run archive again", self.folder))),
                    Recorded::Taken { by } => Err(self.refused(format!("folder {} was recorded for app {by}'s log by another run at the same time; nothing written — run archive again", self.folder))),
                }
            })
            .await
            .copied()
    }
}

/// The apps whose logs `verify` and `attest` of every app audit beside `apps` (the apps the
/// database knows): the apps recorded with a log, and each folder of the store's logs that is
/// no app's — recorded for none, and not a name of a listed app whose log is not recorded —
/// by its name (an app whose receipts and rows are all gone still has its log).
pub(crate) async fn logged_apps(
    ctx: &RunContext,
    apps: &[String],
) -> Result<Vec<String>, LogError> {
    let recorded = ctx.tables.logs.all().await?;
    let mut claimed: BTreeSet<String> = recorded.iter().map(|(_, f)| f.clone()).collect();
    let mut more: Vec<String> = recorded
        .iter()
        .filter(|(a, _)| !apps.contains(a))
        .map(|(a, _)| a.clone())
        .collect();
    for app in apps
        .iter()
        .filter(|a| !recorded.iter().any(|(r, _)| r == *a))
    {
        claimed.extend(derived_names(app));
    }
    for folder in super::apps_in_store(ctx).await? {
        if !claimed.contains(&folder) && !more.contains(&folder) {
            more.push(folder);
        }
    }
    Ok(more)
}

/// The folder a log that begins today takes (and the name a build before issue 42 derived on
/// every run, its checkpoints' `app_code` included): the app's code as the database tells apps
/// apart — exactly where the source's app codes compare case-sensitively (`Pay` and `pay` are
/// two apps, two logs), else in lowercase (the database holds an app's spellings equal, so its
/// log is one). Only for a log that begins: an app's folder is its recorded log identity from
/// then on, whatever the collation says later.
fn folder_name(app_code: &str, case_matters: bool) -> String {
    match case_matters {
        true => app_code.to_string(),
        false => app_code.to_ascii_lowercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_the_code_as_the_database_tells_apps_apart() {
        assert_eq!(folder_name("Wallet-SG", false), "wallet-sg");
        assert_eq!(folder_name("Wallet-SG", true), "Wallet-SG");
        assert_eq!(derived_names("Wallet-SG"), ["Wallet-SG", "wallet-sg"]);
        assert_eq!(derived_names("pay"), ["pay"]);
    }
}
