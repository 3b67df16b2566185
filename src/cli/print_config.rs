//! `--print-config`: every setting as it takes effect — value and source (command line,
//! environment variable, default) — with URLs' passwords redacted, plus the problems a run would
//! stop on before connecting (a bad store URL, a shard without --all-apps, no database URL,
//! Object Lock settings that cannot work).

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory};
use serde_json::{json, Map, Value};

use super::Cli;
use crate::store::Location;

/// The configuration as JSON, and whether it has no problems.
pub(crate) fn effective_config(cli: &Cli, matches: &ArgMatches) -> (Value, bool) {
    let command = Cli::command();
    let (name, sub_matches) = matches.subcommand().expect("clap requires a subcommand");
    let sub = command
        .find_subcommand(name)
        .expect("the subcommand parsed");
    let mut settings = Map::new();
    for (cmd, m) in [(&command, matches), (sub, sub_matches)] {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version" | "print_config") {
                continue;
            }
            let key = arg.get_long().unwrap_or(id).to_string();
            settings.insert(key, setting(arg, m));
        }
    }
    let problems = problems(cli);
    let ok = problems.is_empty();
    let config = json!({
        "command": name,
        "settings": settings,
        "s3_credentials": credentials(),
        "problems": problems,
    });
    (config, ok)
}

/// One setting's value (passwords in URLs redacted) and where it came from.
fn setting(arg: &clap::Arg, m: &ArgMatches) -> Value {
    let id = arg.get_id().as_str();
    let Some(source) = m.value_source(id) else {
        return fallback(id);
    };
    let values: Vec<String> = m
        .get_raw(id)
        .map(|raw| {
            raw.map(|v| crate::model::redact::url(&v.to_string_lossy()))
                .collect()
        })
        .unwrap_or_default();
    let source = match source {
        ValueSource::CommandLine => "command line".to_string(),
        ValueSource::EnvVariable => format!(
            "environment ({})",
            arg.get_env()
                .map(|e| e.to_string_lossy())
                .unwrap_or_default()
        ),
        _ => "default".to_string(),
    };
    let value = match values.as_slice() {
        [one] => json!(one),
        many => json!(many),
    };
    json!({ "value": value, "source": source })
}

/// A setting not given, where the AWS SDK's own variable stands in for it (as the run reads
/// them: `--s3-region` falls back to `AWS_REGION`, …); else unset.
fn fallback(id: &str) -> Value {
    let variables: &[&str] = match id {
        "s3_region" => &["AWS_REGION", "AWS_DEFAULT_REGION"],
        "s3_endpoint" => &["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"],
        "store_ca_bundle" => &["AWS_CA_BUNDLE"],
        _ => &[],
    };
    variables
        .iter()
        .find_map(|name| {
            let value = std::env::var(name).ok().filter(|v| !v.is_empty())?;
            Some(json!({
                "value": crate::model::redact::url(&value),
                "source": format!("environment ({name})"),
            }))
        })
        .unwrap_or_else(|| json!({ "value": null, "source": "unset" }))
}

/// Where the S3 credentials would come from (never the keys themselves).
fn credentials() -> &'static str {
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_some() {
        "static keys from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (not shown)"
    } else if std::env::var_os("AWS_WEB_IDENTITY_TOKEN_FILE").is_some() {
        "web identity (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN): IRSA / workload identity"
    } else if std::env::var_os("AWS_PROFILE").is_some() {
        "the profile named by AWS_PROFILE"
    } else {
        "the AWS SDK's default chain (profile, container or instance role)"
    }
}

/// What a run would stop on before connecting to anything.
fn problems(cli: &Cli) -> Vec<String> {
    let common = &cli.common;
    let mut problems = Vec::new();
    if let Some(store) = &common.store {
        if let Err(e) = Location::parse(store) {
            problems.push(e);
        }
    } else if cli.command.needs_store() {
        problems.push("no archive location: set --store or OUTBOX_ARCHIVER_STORE".to_string());
    }
    let needs_no_database = !cli.command.needs_database(common);
    match &common.db.database_url {
        None if !needs_no_database => {
            problems.push("no database: set --database-url or DATABASE_URL".to_string())
        }
        None => {}
        // What the run would refuse before connecting: another scheme, a password that needs
        // percent-encoding, an unknown parameter (said with the password masked).
        Some(url) => problems.extend(
            crate::db::connect_options(url, "--database-url / DATABASE_URL")
                .err()
                .map(|e| e.to_string()),
        ),
    }
    // A profile is read here; whether it fits the table is known once connected.
    let table = match common.profile() {
        Ok(Some(_)) => Ok(()),
        Ok(None) => common.spec().map(|_| ()),
        Err(e) => Err(e),
    };
    problems.extend(table.err());
    let apps = cli.command.app_args().and_then(|apps| apps.apps().err());
    problems.extend(apps);
    problems.extend(cli.command.problems(common));
    problems
}
