//! The Kubernetes manifests in `deploy/kubernetes/` render (kustomize), validate against the
//! Kubernetes API schemas (`kubernetes-validate --strict`, from PyPI), follow the rules operators
//! rely on (Forbid, deadlines longer than --max-runtime, non-root, read-only root filesystem,
//! requests and limits), and every container's arguments are accepted by this binary.
//! `.ci/test` installs kubectl and kubernetes-validate.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(command: &mut Command) -> String {
    let out = command.output().unwrap_or_else(|e| {
        panic!("{command:?}: {e} (.ci/test installs kubectl and kubernetes-validate)")
    });
    assert!(
        out.status.success(),
        "{command:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `kustomize build` where kustomize is installed, else `kubectl kustomize`.
fn kustomize(dir: &Path) -> String {
    match Command::new("kustomize").arg("build").arg(dir).output() {
        Ok(out) if out.status.success() => String::from_utf8(out.stdout).unwrap(),
        _ => run(Command::new("kubectl").arg("kustomize").arg(dir)),
    }
}

fn validate(yaml_file: &Path) {
    run(Command::new("kubernetes-validate")
        .args(["--strict", "--quiet"])
        .arg(yaml_file));
}

/// Every document of a YAML stream, as JSON (PyYAML comes with kubernetes-validate).
fn documents(yaml_file: &Path) -> Vec<Value> {
    let json = run(Command::new("python3").args([
        "-c",
        "import sys, json, yaml; print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d]))",
    ]).arg(yaml_file));
    serde_json::from_str(&json).unwrap()
}

fn duration_s(text: &str) -> u64 {
    let (n, unit) = text.split_at(text.len() - 1);
    let n: u64 = n.parse().unwrap();
    n * match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => panic!("unit of {text}"),
    }
}

/// The rules every Job or CronJob in `docs` follows; `whole` says the set is a complete
/// rendering (so referenced ConfigMaps and ServiceAccounts must be in it).
fn check(docs: &[Value], whole: bool, source: &str) -> usize {
    let named = |kind: &str| -> Vec<&str> {
        docs.iter()
            .filter(|d| d["kind"] == kind)
            .filter_map(|d| d["metadata"]["name"].as_str())
            .collect()
    };
    let mut jobs = 0;
    for doc in docs {
        let name = doc["metadata"]["name"]
            .as_str()
            .or(doc["metadata"]["generateName"].as_str())
            .unwrap_or_default()
            .to_string();
        let what = format!("{source}: {} {name}", doc["kind"]);
        let job = match doc["kind"].as_str() {
            Some("CronJob") => {
                let spec = &doc["spec"];
                assert_eq!(spec["concurrencyPolicy"], "Forbid", "{what}");
                for field in [
                    "startingDeadlineSeconds",
                    "successfulJobsHistoryLimit",
                    "failedJobsHistoryLimit",
                ] {
                    assert!(spec[field].is_u64(), "{what}: {field}");
                }
                &spec["jobTemplate"]["spec"]
            }
            Some("Job") => &doc["spec"],
            _ => continue,
        };
        jobs += 1;
        assert!(
            job["activeDeadlineSeconds"].is_u64(),
            "{what}: activeDeadlineSeconds"
        );
        assert!(
            job["backoffLimit"].is_u64() || job["backoffLimitPerIndex"].is_u64(),
            "{what}: backoffLimit"
        );
        let pod = &job["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{what}");
        assert_eq!(pod["restartPolicy"], "Never", "{what}");
        let account = pod["serviceAccountName"]
            .as_str()
            .expect("a service account");
        if whole {
            assert!(
                named("ServiceAccount").contains(&account),
                "{what}: {account}"
            );
        }
        let containers = pod["containers"]
            .as_array()
            .unwrap()
            .iter()
            .chain(pod["initContainers"].as_array().into_iter().flatten());
        for container in containers {
            let security = &container["securityContext"];
            assert_eq!(security["readOnlyRootFilesystem"], true, "{what}");
            assert_eq!(security["allowPrivilegeEscalation"], false, "{what}");
            assert_eq!(
                security["capabilities"]["drop"],
                serde_json::json!(["ALL"]),
                "{what}"
            );
            for kind in ["requests", "limits"] {
                assert!(
                    container["resources"][kind]["memory"].is_string(),
                    "{what}: {kind}"
                );
            }
            let args: Vec<String> = container["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().replace("$(SHARD_INDEX)", "0"))
                .collect();
            if let Some(i) = args.iter().position(|a| a == "--max-runtime") {
                let deadline = job["activeDeadlineSeconds"].as_u64().unwrap();
                assert!(
                    deadline >= duration_s(&args[i + 1]) + 60,
                    "{what}: activeDeadlineSeconds {deadline} leaves --max-runtime {} no margin",
                    args[i + 1]
                );
            }
            let mut command = Command::new(env!("CARGO_BIN_EXE_outbox-archiver"));
            command
                .args(&args)
                .arg("--print-config")
                .env_clear()
                .env("DATABASE_URL", "mysql://u:p@db:3306/x");
            for source in container["envFrom"].as_array().into_iter().flatten() {
                let config = source["configMapRef"]["name"].as_str().unwrap();
                if whole {
                    let map = docs
                        .iter()
                        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == config)
                        .unwrap_or_else(|| panic!("{what}: ConfigMap {config}"));
                    for (k, v) in map["data"].as_object().unwrap() {
                        command.env(k, v.as_str().unwrap());
                    }
                }
            }
            if !whole {
                command.env("OUTBOX_ARCHIVER_STORE", "s3://bucket/prefix");
            }
            let printed = run(&mut command);
            let config: Value = serde_json::from_str(&printed).unwrap();
            assert_eq!(
                config["problems"],
                serde_json::json!([]),
                "{what}: {args:?}"
            );
        }
    }
    jobs
}

#[test]
fn kubernetes_manifests_render_validate_and_run_this_binary() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = Vec::new();
    for kustomization in [
        "deploy/kubernetes/base",
        "deploy/kubernetes/overlays/example",
    ] {
        let rendered = dir.path().join(kustomization.replace('/', "_") + ".yaml");
        std::fs::write(&rendered, kustomize(&root().join(kustomization))).unwrap();
        validate(&rendered);
        let docs = documents(&rendered);
        let jobs = check(&docs, true, kustomization);
        assert_eq!(
            jobs, 4,
            "{kustomization}: archive, verify, purge and compact CronJobs"
        );
        checked.push(format!("{kustomization}: {} objects", docs.len()));
    }
    let examples = root().join("deploy/kubernetes/examples");
    let mut examples_checked = 0;
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            validate(&path);
            check(&documents(&path), false, &path.display().to_string());
            checked.push(path.file_name().unwrap().to_string_lossy().to_string());
            examples_checked += 1;
        }
    }
    // The backfill, doctor, secret and sharded examples README points to: a loop that found
    // none would check nothing.
    assert!(
        examples_checked >= 4,
        "{examples_checked} example manifests in {}",
        examples.display()
    );
    eprintln!("validated: {}", checked.join("; "));
}

#[test]
fn the_overlay_changes_what_it_says() {
    let dir = tempfile::tempdir().unwrap();
    let rendered = dir.path().join("overlay.yaml");
    std::fs::write(
        &rendered,
        kustomize(&root().join("deploy/kubernetes/overlays/example")),
    )
    .unwrap();
    let docs = documents(&rendered);
    for doc in &docs {
        assert_eq!(doc["metadata"]["namespace"], "payments", "{}", doc["kind"]);
    }
    let archive = docs
        .iter()
        .find(|d| d["metadata"]["name"] == "outbox-archiver-archive" && d["kind"] == "CronJob")
        .unwrap();
    let pod = &archive["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["image"],
        "registry.example.com/payments/outbox-archiver:0.1.0"
    );
    let purge = docs
        .iter()
        .find(|d| d["metadata"]["name"] == "outbox-archiver-purge")
        .unwrap();
    assert_eq!(purge["spec"]["suspend"], true, "purge starts suspended");
    let compact = docs
        .iter()
        .find(|d| d["metadata"]["name"] == "outbox-archiver-compact")
        .unwrap();
    assert_eq!(compact["spec"]["suspend"], true, "compact starts suspended");
    let config = docs.iter().find(|d| d["kind"] == "ConfigMap").unwrap();
    assert_eq!(
        config["data"]["OUTBOX_ARCHIVER_OBJECT_LOCK_MODE"],
        "compliance"
    );
    assert_eq!(config["data"]["OUTBOX_ARCHIVER_RETENTION"], "7y");
}

/// Every `outbox_archiver_*` metric the dashboard and the alerts use is one the binary exports.
#[test]
fn dashboard_and_alerts_use_only_exported_metrics() {
    let exported = std::fs::read_to_string(root().join("src/output/metrics.rs")).unwrap();
    let mut used = 0;
    for file in [
        "deploy/grafana-dashboard.json",
        "deploy/prometheus-alerts.yaml",
    ] {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        if file.ends_with(".json") {
            serde_json::from_str::<Value>(&text).unwrap();
        } else {
            documents(&root().join(file));
        }
        let mut rest = text.as_str();
        while let Some(at) = rest.find("outbox_archiver_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            if name == "outbox_archiver_" {
                continue;
            }
            assert!(
                exported.contains(&format!("\"{name}\""))
                    || name == "outbox_archiver_last_success_timestamp_seconds",
                "{file} uses {name}, which src/output/metrics.rs does not export"
            );
            used += 1;
        }
    }
    assert!(used >= 10, "{used}");
}

/// The compose file parses, has the servers and the job, and hands the test suite the
/// environment variables the suite reads.
#[test]
fn compose_file_wires_the_suite_to_its_servers() {
    let docs = documents(&root().join("deploy/compose.yaml"));
    let services = &docs[0]["services"];
    for name in [
        "mysql",
        "minio",
        "pushgateway",
        "migrate",
        "archiver",
        "tests",
    ] {
        assert!(services[name].is_object(), "service {name}");
    }
    let mut support = std::fs::read_to_string(root().join("tests/integration/metrics.rs")).unwrap();
    for file in std::fs::read_dir(root().join("tests/integration/support")).unwrap() {
        support += &std::fs::read_to_string(file.unwrap().path()).unwrap();
    }
    for (var, _) in services["tests"]["environment"].as_object().unwrap() {
        if var.starts_with("OUTBOX_ARCHIVER_TEST_") {
            assert!(support.contains(var.as_str()), "the suite reads {var}");
        }
    }
}

/// Issue 43: the auditor's script given a wrong folder or table ended in a Python traceback
/// (FileNotFoundError). It audits nothing then, and says so — naming the folder and what it
/// holds — with exit 2, not 0 or a traceback.
#[test]
fn the_audit_script_names_a_wrong_folder_or_table() {
    let script = root().join("deploy/audit-chain.py");
    let audit = |copy: &Path, table: &str| {
        let out = Command::new("python3")
            .arg(&script)
            .arg(copy)
            .arg(table)
            .output()
            .expect("python3 runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("copy");
    let (code, out) = audit(&missing, "wallet_outbox");
    assert_eq!(code, 2, "{out}");
    assert!(
        !out.contains("Traceback") && out.contains("no such folder"),
        "{out}"
    );
    std::fs::create_dir_all(dir.path().join("room_outbox/_log")).unwrap();
    let (code, out) = audit(dir.path(), "wallet_outbox");
    assert_eq!(code, 2, "{out}");
    assert!(
        !out.contains("Traceback")
            && out.contains("holds no folder wallet_outbox")
            && out.contains("its folders: room_outbox"),
        "{out}"
    );
}
