//! The pods of `deploy/kubernetes/`, run with podman as a kubelet runs them, in the image built
//! from `deploy/Dockerfile`'s runtime stage ([`image`]). A [`Pod`] is a container of a rendered
//! manifest — its command and args (the image's entrypoint when there is no command), its
//! environment from ConfigMaps, Secrets and values, its security context (user and group,
//! `runAsNonRoot` checked as the kubelet checks it, read-only root filesystem, capabilities,
//! privilege escalation, seccomp), its CPU and memory limits and exactly the volumes it mounts
//! (an emptyDir is a tmpfs of its size limit; a ConfigMap or Secret a read-only directory of its
//! keys; a hostPath the test's directory for that path) — turned into `podman run` flags. A field
//! this file does not know fails the test rather than being left out, so a manifest and the image
//! cannot disagree unseen. The network is the host's: the test's servers on loopback stand in for
//! the cluster's services. Values go through an env file, never the command line.
//!
//! Podman's configuration and storage, and the base image, come from `.ci/podman setup` (run by
//! `.ci/test`), whose exports this reads; where no container can start, it says so in
//! `OUTBOX_ARCHIVER_TEST_NO_CONTAINERS` and [`image`] returns `None`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `podman`, with the configuration `.ci/podman` wrote (its exports are in the environment).
pub fn podman() -> std::process::Command {
    std::process::Command::new("podman")
}

/// Runs a command to its end; its stdout, or a panic with everything it printed.
fn output(command: &mut std::process::Command) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The image the CronJobs run, built once per test process: `deploy/Dockerfile`'s runtime stage
/// on the base `.ci/podman` made (`--build-arg RUNTIME_IMAGE`), its build stage replaced by the
/// binary under test with its debug information stripped (`--build-context build=…`: 394 MB of
/// debug information would only slow the build and every container start). `None` where no
/// container can start here, with the reason printed.
pub fn image() -> Option<&'static str> {
    if let Ok(why) = std::env::var("OUTBOX_ARCHIVER_TEST_NO_CONTAINERS") {
        eprintln!(
            "SKIPPED: no container can start on this machine ({why}), so the image is not tested"
        );
        return None;
    }
    static IMAGE: OnceLock<String> = OnceLock::new();
    Some(IMAGE.get_or_init(build).as_str())
}

fn build() -> String {
    let base = std::env::var("OUTBOX_ARCHIVER_TEST_IMAGE_BASE").unwrap_or_else(|_| {
        panic!(
            "the image test needs podman and a base image: run .ci/test, or \
             eval \"$(.ci/podman setup)\" first (OUTBOX_ARCHIVER_TEST_IMAGE_BASE is not set)"
        )
    });
    let dir = tempfile::tempdir().unwrap();
    let stage = dir.path().join("build");
    std::fs::create_dir_all(stage.join("out")).unwrap();
    let context = dir.path().join("context");
    std::fs::create_dir_all(&context).unwrap();
    output(
        std::process::Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(stage.join("out/outbox-archiver"))
            .arg(super::binary()),
    );
    let name = "localhost/outbox-archiver:test";
    let started = Instant::now();
    output(
        podman()
            .args(["build", "--quiet", "--pull=never", "--isolation=chroot"])
            .args(["--network=host", "--target", "runtime"])
            .arg(format!("--build-arg=RUNTIME_IMAGE={base}"))
            .arg(format!("--build-context=build={}", stage.display()))
            .arg("--file")
            .arg(root().join("deploy/Dockerfile"))
            .args(["--tag", name])
            .arg(&context),
    );
    eprintln!(
        "built {name} from deploy/Dockerfile on {base} in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    name.to_string()
}

/// What `podman image inspect` says of `image`, as JSON.
pub fn inspect(image: &str) -> Value {
    let text = output(podman().args(["image", "inspect", image]));
    let all: Value = serde_json::from_str(&text).unwrap();
    all[0].clone()
}

/// The bytes of the file at `path` in `image` (copied out of a container that never starts).
pub fn file_of(image: &str, path: &str) -> Vec<u8> {
    let container = output(podman().args(["create", "--pull=never", image]))
        .trim()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let copy = podman()
        .arg("cp")
        .arg(format!("{container}:{path}"))
        .arg(dir.path().join("file"))
        .output();
    output(podman().args(["rm", "--force", &container]));
    let copy = copy.unwrap();
    assert!(
        copy.status.success(),
        "{path} in {image}: {}",
        String::from_utf8_lossy(&copy.stderr)
    );
    std::fs::read(dir.path().join("file")).unwrap()
}

/// Every object `kubectl kustomize deploy/kubernetes/base` renders (what an operator applies),
/// and every object of the examples, as JSON.
pub fn manifests() -> Vec<Value> {
    let rendered = match std::process::Command::new("kustomize")
        .arg("build")
        .arg(root().join("deploy/kubernetes/base"))
        .output()
    {
        Ok(out) if out.status.success() => String::from_utf8(out.stdout).unwrap(),
        _ => output(
            std::process::Command::new("kubectl")
                .arg("kustomize")
                .arg(root().join("deploy/kubernetes/base")),
        ),
    };
    let mut yaml = rendered;
    let examples = root().join("deploy/kubernetes/examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(examples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for file in files {
        yaml += "\n---\n";
        yaml += &std::fs::read_to_string(file).unwrap();
    }
    let mut python = std::process::Command::new("python3");
    python
        .args([
            "-c",
            "import sys, json, yaml; print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d]))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = python
        .spawn()
        .expect("python3 with PyYAML (.ci/test installs kubernetes-validate, which brings it)");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), yaml.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// One container of a pod, and what the cluster holds for it: ConfigMaps, Secrets, the node's
/// directories behind hostPath volumes.
#[derive(Clone)]
pub struct Pod {
    /// "CronJob outbox-archiver-archive, container archive", for messages.
    pub what: String,
    spec: Value,
    container: Value,
    config_maps: BTreeMap<String, BTreeMap<String, String>>,
    secrets: BTreeMap<String, BTreeMap<String, String>>,
    host_paths: BTreeMap<String, PathBuf>,
}

/// A container's run: its exit status, what it printed, how long `podman run` took.
pub struct Ran {
    pub what: String,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Ran {
    /// The JSON summary the command printed on stdout.
    pub fn summary(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "{}: stdout is one JSON summary ({e}):\n{}",
                self.what,
                self.all_output()
            )
        })
    }

    pub fn all_output(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }

    /// Exit status `code`, or a panic that shows everything the container printed.
    pub fn expect_code(&self, code: i32) -> &Ran {
        assert_eq!(
            self.code,
            code,
            "{} exited {}:\n{}",
            self.what,
            self.code,
            self.all_output()
        );
        self
    }
}

static RUNS: AtomicU32 = AtomicU32::new(0);

impl Pod {
    /// Container `container` of the CronJob or Job `name` (a Job of the examples by its
    /// `generateName`) in `docs`, with the ConfigMaps and Secrets `docs` hold.
    pub fn of(docs: &[Value], kind: &str, name: &str, container: &str) -> Pod {
        let doc = docs
            .iter()
            .find(|d| {
                d["kind"] == kind
                    && (d["metadata"]["name"] == name || d["metadata"]["generateName"] == name)
            })
            .unwrap_or_else(|| panic!("no {kind} {name} in the manifests"));
        let spec = match kind {
            "CronJob" => &doc["spec"]["jobTemplate"]["spec"]["template"]["spec"],
            "Job" => &doc["spec"]["template"]["spec"],
            _ => panic!("{kind}: a CronJob or a Job"),
        };
        let c = spec["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == container)
            .unwrap_or_else(|| panic!("no container {container} in {kind} {name}"))
            .clone();
        let mut pod = Pod {
            what: format!("{kind} {name}, container {container}"),
            spec: spec.clone(),
            container: c,
            config_maps: BTreeMap::new(),
            secrets: BTreeMap::new(),
            host_paths: BTreeMap::new(),
        };
        for d in docs.iter().filter(|d| d["kind"] == "ConfigMap") {
            let data = d["data"].as_object().into_iter().flatten();
            pod.config_maps.insert(
                d["metadata"]["name"].as_str().unwrap().to_string(),
                data.map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect(),
            );
        }
        pod
    }

    /// The container's args replaced (a one-off run in this pod, such as `migrate`).
    pub fn with_args(mut self, args: &[&str]) -> Pod {
        self.what += &format!(", args {args:?}");
        self.container["args"] = json!(args);
        self
    }

    /// Key `key` of ConfigMap `name` set to `value` (an overlay's merge; a new ConfigMap if the
    /// cluster had none of that name).
    pub fn with_config(mut self, name: &str, key: &str, value: &str) -> Pod {
        self.config_maps
            .entry(name.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Key `key` of Secret `name`.
    pub fn with_secret(mut self, name: &str, key: &str, value: &str) -> Pod {
        self.secrets
            .entry(name.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
        self
    }

    /// A variable added to the container's `env`.
    pub fn with_env(mut self, name: &str, value: &str) -> Pod {
        let env = self.container["env"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut env: Vec<Value> = env.into_iter().filter(|e| e["name"] != name).collect();
        env.push(json!({"name": name, "value": value}));
        self.container["env"] = Value::Array(env);
        self
    }

    /// A volume added to the pod and mounted in the container, as an operator's patch would.
    pub fn with_volume(mut self, volume: Value, mount: Value) -> Pod {
        self.what += &format!(", with volume {}", volume["name"]);
        push(&mut self.spec["volumes"], volume);
        push(&mut self.container["volumeMounts"], mount);
        self
    }

    /// Where hostPath `path` of the node is, for this run.
    pub fn with_host_path(mut self, path: &str, dir: &Path) -> Pod {
        self.host_paths.insert(path.to_string(), dir.to_path_buf());
        self
    }

    /// Runs the container in `image` to its end (at most `limit`), as the kubelet would.
    pub async fn run(&self, image: &str) -> Ran {
        let dir = tempfile::tempdir().unwrap();
        let mut args = self.podman_args(image, dir.path());
        let name = format!(
            "oat-{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::SeqCst)
        );
        args.splice(2..2, ["--name".to_string(), name.clone()]);
        let started = Instant::now();
        let run = tokio::process::Command::new("podman")
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output();
        let out = match tokio::time::timeout(Duration::from_secs(300), run).await {
            Ok(out) => out.unwrap(),
            Err(_) => {
                let _ = podman().args(["rm", "--force", &name]).output();
                panic!("{}: still running after 300 s", self.what)
            }
        };
        Ran {
            what: self.what.clone(),
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            elapsed: started.elapsed(),
        }
    }

    /// `podman run`'s arguments for this container; files it needs (the env file, ConfigMap and
    /// Secret volumes) are written under `dir`.
    fn podman_args(&self, image: &str, dir: &Path) -> Vec<String> {
        let what = &self.what;
        known(
            &self.spec,
            &[
                "containers",
                "initContainers",
                "restartPolicy",
                "securityContext",
                "serviceAccountName",
                "terminationGracePeriodSeconds",
                "volumes",
            ],
            what,
            "the pod spec",
        );
        known(
            &self.container,
            &[
                "args",
                "command",
                "env",
                "envFrom",
                "image",
                "imagePullPolicy",
                "name",
                "resources",
                "securityContext",
                "volumeMounts",
            ],
            what,
            "the container",
        );
        let mut args: Vec<String> = ["run", "--rm", "--pull=never", "--network=host"]
            .map(String::from)
            .to_vec();

        // The environment: envFrom in order, then env (later wins, as in Kubernetes).
        let mut env: Vec<(String, String)> = Vec::new();
        for source in self.container["envFrom"].as_array().into_iter().flatten() {
            known(source, &["configMapRef", "secretRef"], what, "envFrom");
            let (store, reference) = match (&source["configMapRef"], &source["secretRef"]) {
                (Value::Object(_), _) => (&self.config_maps, &source["configMapRef"]),
                (_, Value::Object(_)) => (&self.secrets, &source["secretRef"]),
                _ => panic!("{what}: envFrom {source}"),
            };
            let name = reference["name"].as_str().unwrap();
            match store.get(name) {
                Some(data) => env.extend(data.iter().map(|(k, v)| (k.clone(), v.clone()))),
                None if reference["optional"] == true => {}
                None => panic!("{what}: the pod would not start: envFrom {name} does not exist"),
            }
        }
        for var in self.container["env"].as_array().into_iter().flatten() {
            let name = var["name"].as_str().unwrap().to_string();
            let value = if let Some(value) = var["value"].as_str() {
                value.to_string()
            } else {
                let from = &var["valueFrom"];
                let (store, reference) = match (&from["secretKeyRef"], &from["configMapKeyRef"]) {
                    (Value::Object(r), _) => (&self.secrets, r),
                    (_, Value::Object(r)) => (&self.config_maps, r),
                    _ => panic!("{what}: env {name}: {from} is not a value this test can give"),
                };
                let (map, key) = (
                    reference["name"].as_str().unwrap(),
                    reference["key"].as_str().unwrap(),
                );
                store
                    .get(map)
                    .and_then(|m| m.get(key))
                    .unwrap_or_else(|| {
                        panic!("{what}: env {name}: the test gave no {map}/{key} (a missing key stops the pod)")
                    })
                    .clone()
            };
            env.retain(|(k, _)| *k != name);
            env.push((name, value));
        }
        let env_file = dir.join("env");
        let mut text = String::new();
        for (k, v) in &env {
            assert!(!v.contains('\n'), "{what}: {k} holds a newline");
            text += &format!("{k}={v}\n");
        }
        std::fs::write(&env_file, text).unwrap();
        args.push(format!("--env-file={}", env_file.display()));

        // The security context: the container's fields over the pod's.
        let mut security = self.spec["securityContext"].clone();
        known(
            &security,
            &[
                "runAsNonRoot",
                "runAsUser",
                "runAsGroup",
                "seccompProfile",
                "supplementalGroups",
            ],
            what,
            "the pod's securityContext",
        );
        let container_security = &self.container["securityContext"];
        known(
            container_security,
            &[
                "allowPrivilegeEscalation",
                "capabilities",
                "readOnlyRootFilesystem",
                "runAsNonRoot",
                "runAsUser",
                "runAsGroup",
                "seccompProfile",
            ],
            what,
            "the container's securityContext",
        );
        if let Value::Object(fields) = container_security {
            if !security.is_object() {
                security = json!({});
            }
            for (k, v) in fields {
                security[k] = v.clone();
            }
        }
        // The user: runAsUser, else the image's; the kubelet refuses to start a container that
        // would run as root under runAsNonRoot (podman has no such check: it is made here).
        let image_user = inspect(image)["Config"]["User"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let uid = match security["runAsUser"].as_u64() {
            Some(uid) => uid,
            None => image_user
                .split(':')
                .next()
                .unwrap()
                .parse()
                .unwrap_or_else(|_| {
                    panic!("{what}: the image's user {image_user:?} is not numeric, so the kubelet cannot check runAsNonRoot")
                }),
        };
        if security["runAsNonRoot"] == true {
            assert_ne!(
                uid, 0,
                "{what}: runAsNonRoot, and the container would run as root: the kubelet refuses to start it"
            );
        }
        args.push(match security["runAsGroup"].as_u64() {
            Some(gid) => format!("--user={uid}:{gid}"),
            None => format!("--user={uid}"),
        });
        for group in security["supplementalGroups"]
            .as_array()
            .into_iter()
            .flatten()
        {
            args.push(format!("--group-add={group}"));
        }
        if security["readOnlyRootFilesystem"] == true {
            // Podman's --read-only alone also mounts tmpfs on /tmp, /var/tmp and /run, which
            // Kubernetes does not: a pod writes only where a volume is mounted.
            args.extend(["--read-only".into(), "--read-only-tmpfs=false".into()]);
        }
        if security["allowPrivilegeEscalation"] == false {
            args.push("--security-opt=no-new-privileges".into());
        }
        let capabilities = &security["capabilities"];
        known(capabilities, &["add", "drop"], what, "capabilities");
        for cap in capabilities["drop"].as_array().into_iter().flatten() {
            args.push(format!("--cap-drop={}", cap.as_str().unwrap()));
        }
        for cap in capabilities["add"].as_array().into_iter().flatten() {
            args.push(format!("--cap-add={}", cap.as_str().unwrap()));
        }
        match security["seccompProfile"]["type"].as_str() {
            // Podman's default profile is the runtime's default.
            None | Some("RuntimeDefault") => {}
            Some("Unconfined") => args.push("--security-opt=seccomp=unconfined".into()),
            Some(other) => panic!("{what}: seccompProfile {other}"),
        }

        // Limits (requests only place a pod).
        let resources = &self.container["resources"];
        known(resources, &["limits", "requests"], what, "resources");
        known(&resources["limits"], &["cpu", "memory"], what, "limits");
        if let Some(memory) = resources["limits"]["memory"].as_str() {
            args.push(format!("--memory={}b", bytes(memory)));
        }
        if let Some(cpu) = resources["limits"]["cpu"].as_str() {
            let cpus = match cpu.strip_suffix('m') {
                Some(milli) => milli.parse::<f64>().unwrap() / 1000.0,
                None => cpu.parse().unwrap(),
            };
            args.push(format!("--cpus={cpus}"));
        }
        if let Some(grace) = self.spec["terminationGracePeriodSeconds"].as_u64() {
            args.push(format!("--stop-timeout={grace}"));
        }

        // Exactly the volumes the container mounts.
        let volumes = self.spec["volumes"].as_array().cloned().unwrap_or_default();
        for (i, mount) in self.container["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            known(
                mount,
                &["name", "mountPath", "readOnly"],
                what,
                "a volumeMount",
            );
            let name = mount["name"].as_str().unwrap();
            let path = mount["mountPath"].as_str().unwrap();
            let read_only = mount["readOnly"] == true;
            let volume = volumes
                .iter()
                .find(|v| v["name"] == name)
                .unwrap_or_else(|| panic!("{what}: volumeMount {name} has no volume"));
            let kind = volume
                .as_object()
                .unwrap()
                .keys()
                .find(|k| *k != "name")
                .unwrap_or_else(|| panic!("{what}: volume {name} has no source"))
                .as_str();
            let source = &volume[kind];
            let bind = |host: &Path, read_only: bool| {
                format!(
                    "--volume={}:{path}{}",
                    host.display(),
                    if read_only { ":ro" } else { "" }
                )
            };
            match kind {
                "emptyDir" => {
                    known(source, &["sizeLimit"], what, "an emptyDir");
                    let size = source["sizeLimit"]
                        .as_str()
                        .map(|s| format!(",size={}", bytes(s)))
                        .unwrap_or_default();
                    // A fresh directory every user may write, as the kubelet makes it; tmpfs so
                    // that the size limit holds (the kubelet evicts a pod past it).
                    args.push(format!("--tmpfs={path}:rw,exec,mode=1777{size}"));
                }
                "configMap" | "secret" => {
                    known(
                        source,
                        &["name", "secretName", "optional"],
                        what,
                        &format!("a {kind} volume"),
                    );
                    let (store, map) = match kind {
                        "configMap" => (&self.config_maps, source["name"].as_str().unwrap()),
                        _ => (&self.secrets, source["secretName"].as_str().unwrap()),
                    };
                    let data = match store.get(map) {
                        Some(data) => data.clone(),
                        // An optional one that does not exist is an empty directory.
                        None if source["optional"] == true => BTreeMap::new(),
                        None => {
                            panic!("{what}: the pod would not start: {kind} {map} does not exist")
                        }
                    };
                    let host = dir.join(format!("volume-{i}"));
                    std::fs::create_dir(&host).unwrap();
                    for (key, value) in data {
                        std::fs::write(host.join(key), value).unwrap();
                    }
                    // Always read-only, whatever the mount says.
                    args.push(bind(&host, true));
                }
                "hostPath" => {
                    known(source, &["path", "type"], what, "a hostPath volume");
                    let node = source["path"].as_str().unwrap();
                    let host = self.host_paths.get(node).unwrap_or_else(|| {
                        panic!("{what}: hostPath {node}: the test gave no directory for it")
                    });
                    args.push(bind(host, read_only));
                }
                other => {
                    panic!("{what}: volume {name}: a {other} volume is not one this test runs")
                }
            }
        }

        // Kubernetes' command replaces the image's entrypoint, args its CMD; $(VAR) is a
        // variable of the container's environment.
        let expand = |arg: &Value| {
            let mut arg = arg.as_str().unwrap().to_string();
            for (k, v) in &env {
                arg = arg.replace(&format!("$({k})"), v);
            }
            arg
        };
        if let Some(command) = self.container["command"].as_array() {
            let command: Vec<String> = command.iter().map(expand).collect();
            args.push(format!(
                "--entrypoint={}",
                serde_json::to_string(&command).unwrap()
            ));
        }
        args.push(image.to_string());
        args.extend(
            self.container["args"]
                .as_array()
                .into_iter()
                .flatten()
                .map(expand),
        );
        args
    }
}

fn push(list: &mut Value, item: Value) {
    match list {
        Value::Array(items) => items.push(item),
        _ => *list = Value::Array(vec![item]),
    }
}

/// Fails when `object` has a field that is not in `fields`: a manifest saying something this
/// file would not honour.
fn known(object: &Value, fields: &[&str], what: &str, part: &str) {
    if let Value::Object(map) = object {
        for key in map.keys() {
            assert!(
                fields.contains(&key.as_str()),
                "{what}: {part} has `{key}`, which tests/integration/support/pod.rs does not run \
                 yet: teach it, so that the image is tested as the manifest runs it"
            );
        }
    }
}

/// A Kubernetes quantity of bytes (`64Mi`, `1G`, `512`).
fn bytes(quantity: &str) -> u64 {
    let units = [
        ("Ki", 1u64 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
    ];
    for (suffix, factor) in units {
        if let Some(n) = quantity.strip_suffix(suffix) {
            return n.parse::<u64>().unwrap() * factor;
        }
    }
    quantity.parse().unwrap()
}
