//! A database server of the test's own in a temporary directory, of the suite's flavour: a
//! MariaDB (`mariadbd`, ready in about 4 s) or a MySQL 9.7 (`mysqld` in the chroot `.ci/mysql`
//! builds, started from a data directory initialised once per machine, ready in about 2 s).
//! Tests that restart or kill the database server use it, so the shared server is never
//! touched; and a pair of them, a primary and a real replica of it ([`Replicated`]: binary log
//! positions on MariaDB, GTID auto-positioning on MySQL), for the replica-lag tests.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Executor};

use super::database::{flavour, Flavour};
use super::free_port;

pub const PASSWORD: &str = "restart-secret-pw";

/// A database server of the test's own, in a temporary directory.
pub struct PrivateServer {
    dir: tempfile::TempDir,
    port: u16,
    process: Option<tokio::process::Child>,
    /// Server options beyond the defaults (binary log, server id, …).
    extra: Vec<String>,
}

/// The MySQL chroot (`.ci/mysql root`), or `/` (`OUTBOX_ARCHIVER_MYSQL_ROOT=/`) where mysqld is
/// installed on the machine itself.
pub fn mysql_chroot() -> PathBuf {
    if let Some(root) = std::env::var_os("OUTBOX_ARCHIVER_MYSQL_ROOT") {
        return root.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(&std::env::var_os("HOME").unwrap()).join(".cache"));
    cache.join("outbox-archiver/mysql-sid")
}

impl PrivateServer {
    /// Installs a data directory and starts the server. Panics, naming what is missing, where
    /// the server is not installed: `.ci/test` installs both, so a missing server is a failure
    /// here, never a silent pass.
    pub async fn start() -> PrivateServer {
        PrivateServer::start_with(|_| Vec::new()).await
    }

    /// As [`PrivateServer::start`], with server options that may name the server's port.
    pub async fn start_with(extra: impl Fn(u16) -> Vec<String>) -> PrivateServer {
        let dir = match flavour() {
            Flavour::MariaDb => install_mariadb().await,
            Flavour::MySql => install_mysql().await,
        };
        let mut server = PrivateServer {
            dir,
            port: 0,
            process: None,
            extra: Vec::new(),
        };
        // A port found free can be taken by another server starting beside this one before
        // the server binds it: then it exits, and another port is tried.
        for attempt in 0.. {
            server.port = free_port();
            server.extra = extra(server.port);
            if server.try_run().await {
                break;
            }
            assert!(
                attempt < 4,
                "private {:?} server did not start on any of 5 ports: {}",
                flavour(),
                server.error_log()
            );
        }
        let mut root = server.root().await;
        for statement in [
            format!("CREATE USER 'archiver'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'"),
            "GRANT ALL PRIVILEGES ON *.* TO 'archiver'@'127.0.0.1'".to_string(),
        ] {
            root.execute(AssertSqlSafe(statement)).await.unwrap();
        }
        root.close().await.unwrap();
        server
    }

    /// The server's directory as the server sees it (inside the chroot for MySQL).
    fn server_path(&self, name: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        match flavour() {
            Flavour::MariaDb => path,
            Flavour::MySql => Path::new("/").join(
                path.strip_prefix(mysql_chroot())
                    .expect("inside the chroot"),
            ),
        }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("mysqld.sock")
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log"))
            .map(|log| log.lines().rev().take(15).collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }

    /// root over the server's unix socket.
    pub async fn root(&self) -> sqlx::MySqlConnection {
        format!(
            "mysql://root@localhost/?socket={}&ssl-mode=disabled",
            self.socket().display()
        )
        .parse::<sqlx::mysql::MySqlConnectOptions>()
        .unwrap()
        .connect()
        .await
        .unwrap()
    }

    async fn answers(&self) -> bool {
        let Ok(options) = format!(
            "mysql://root@localhost/?socket={}&ssl-mode=disabled",
            self.socket().display()
        )
        .parse::<sqlx::mysql::MySqlConnectOptions>() else {
            return false;
        };
        match options.connect().await {
            Ok(mut conn) => {
                let ok = conn.execute("SELECT 1").await.is_ok();
                let _ = conn.close().await;
                ok
            }
            Err(_) => false,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's temporary directory (as this process sees it).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `path` (a file under [`PrivateServer::dir`]) as the server sees it, for a server option.
    pub fn path_for_server(&self, path: &Path) -> PathBuf {
        let relative = path.strip_prefix(self.dir.path()).expect("under dir()");
        self.server_path(relative.to_str().unwrap())
    }

    /// Replaces the server options beyond the defaults (effective at the next [`run`](Self::run)).
    pub fn set_options(&mut self, extra: Vec<String>) {
        self.extra = extra;
    }

    /// The options that make the server offer TLS with `ca.pem`, `server-cert.pem` and
    /// `server-key.pem` of its directory.
    pub fn tls_options(&self) -> Vec<String> {
        [
            ("--ssl-ca", "ca.pem"),
            ("--ssl-cert", "server-cert.pem"),
            ("--ssl-key", "server-key.pem"),
        ]
        .iter()
        .map(|(option, file)| format!("{option}={}", self.server_path(file).display()))
        .collect()
    }

    /// Makes the running server read its certificate files again.
    pub async fn reload_tls(&self) {
        let mut root = self.root().await;
        root.execute(match flavour() {
            Flavour::MariaDb => "FLUSH SSL",
            Flavour::MySql => "ALTER INSTANCE RELOAD TLS",
        })
        .await
        .unwrap();
        root.close().await.unwrap();
    }

    /// `mysql://archiver:…@127.0.0.1:port` (no database part).
    pub fn url(&self) -> String {
        format!("mysql://archiver:{PASSWORD}@127.0.0.1:{}", self.port)
    }

    /// Starts the server on its data directory and waits until it answers.
    pub async fn run(&mut self) {
        assert!(
            self.try_run().await,
            "private server exited on start (port {} taken?): {}",
            self.port,
            self.error_log()
        );
    }

    /// Starts the server and waits until it answers on its socket and its port; false if it
    /// exited first (its port was taken).
    async fn try_run(&mut self) -> bool {
        let mut command = match flavour() {
            Flavour::MariaDb => {
                let mut command = tokio::process::Command::new("/usr/sbin/mariadbd");
                command.arg("--no-defaults");
                command
            }
            Flavour::MySql => {
                let mut command = tokio::process::Command::new("chroot");
                command.arg(mysql_chroot()).args([
                    "/usr/sbin/mysqld",
                    "--no-defaults",
                    "--mysqlx=OFF",
                ]);
                command.arg(format!(
                    "--pid-file={}",
                    self.server_path("mysqld.pid").display()
                ));
                command
            }
        };
        command
            .arg(format!("--datadir={}", self.server_path("data").display()))
            .arg(format!(
                "--socket={}",
                self.server_path("mysqld.sock").display()
            ))
            .arg(format!(
                "--log-error={}",
                self.server_path("error.log").display()
            ))
            .arg(format!("--port={}", self.port))
            .args(["--bind-address=127.0.0.1", "--innodb-buffer-pool-size=128M"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        if unsafe { libc::geteuid() } == 0 {
            command.arg("--user=root");
        }
        let _ = std::fs::remove_file(self.socket());
        let mut process = command.spawn().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            if process.try_wait().unwrap().is_some() {
                return false;
            }
            // Ready: it answers a query on its socket (a server that is about to abort on a bad
            // option may have opened it) and accepts on its port.
            if self.answers().await
                && tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                    .await
                    .is_ok()
            {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "private server did not start: {}",
                self.error_log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.process = Some(process);
        true
    }

    /// Stops the server with `signal` (SIGTERM: a clean shutdown; SIGKILL: a crash) and waits.
    pub async fn stop(&mut self, signal: i32) {
        let mut process = self.process.take().expect("running");
        unsafe { libc::kill(process.id().unwrap() as i32, signal) };
        process.wait().await.unwrap();
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        if let Some(process) = &self.process {
            unsafe { libc::kill(process.id().unwrap_or(0) as i32, libc::SIGKILL) };
        }
    }
}

/// A temporary directory with a fresh MariaDB data directory in `data/`.
async fn install_mariadb() -> tempfile::TempDir {
    let install_db = which("mariadb-install-db");
    assert!(
        Path::new("/usr/sbin/mariadbd").exists() && install_db.is_some(),
        "this test runs a private MariaDB server: install mariadb-server (.ci/test does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut install = tokio::process::Command::new(install_db.unwrap());
    install
        .arg("--no-defaults")
        .arg(format!("--datadir={}", dir.path().join("data").display()))
        .args(["--skip-test-db", "--auth-root-authentication-method=socket"]);
    if unsafe { libc::geteuid() } == 0 {
        install.arg("--user=root");
    }
    // Installs running side by side now and then trip over each other's temporary tables:
    // a second try is clean.
    let mut out = install.output().await.unwrap();
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(dir.path().join("data"));
        out = install.output().await.unwrap();
    }
    assert!(
        out.status.success(),
        "mariadb-install-db: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// A temporary directory inside the MySQL chroot with a copy of a data directory initialised
/// once per machine (`mysqld --initialize-insecure`: root@localhost without a password, over
/// the socket only). The copy leaves out `auto.cnf`, so every server gets its own server UUID
/// (a replica refuses a source with its own).
async fn install_mysql() -> tempfile::TempDir {
    let root = mysql_chroot();
    // `/`: mysqld is installed on this machine itself (the compose test image).
    assert!(
        root.join(".oat-ready").exists()
            || (root == Path::new("/") && Path::new("/usr/sbin/mysqld").exists()),
        "this test runs a private MySQL server in the chroot {}: build it with .ci/mysql ensure (.ci/test does), or set OUTBOX_ARCHIVER_MYSQL_ROOT=/ where mysqld is installed",
        root.display()
    );
    let template = mysql_template(&root).await;
    let dir = tempfile::tempdir_in(root.join("tmp")).unwrap();
    let out = tokio::process::Command::new("cp")
        .arg("-a")
        .arg(&template)
        .arg(dir.path().join("data"))
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "copying the MySQL data directory");
    let _ = std::fs::remove_file(dir.path().join("data/auto.cnf"));
    dir
}

/// The chroot's initialised data directory, made the first time it is asked for (in a
/// directory of its own, then renamed into place, so processes running side by side agree).
async fn mysql_template(root: &Path) -> PathBuf {
    let template = root.join("var/lib/oat-template");
    if template.join("mysql.ibd").exists() {
        return template;
    }
    let building = tempfile::tempdir_in(root.join("var/lib")).unwrap();
    let inside = Path::new("/").join(building.path().strip_prefix(root).unwrap());
    let out = tokio::process::Command::new("chroot")
        .arg(root)
        .args([
            "/usr/sbin/mysqld",
            "--no-defaults",
            "--initialize-insecure",
            "--user=root",
        ])
        .arg(format!("--datadir={}/data", inside.display()))
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "mysqld --initialize-insecure: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Another process may have won the race: either copy is a good one.
    let _ = std::fs::rename(building.path().join("data"), &template);
    template
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(program))
        .find(|path| path.exists())
}

/// A primary with a binary log and a real replica of it, each a private server: what the
/// primary commits, the replica applies (or not, once a test stops its SQL thread).
pub struct Replicated {
    pub primary: PrivateServer,
    pub replica: PrivateServer,
}

impl Replicated {
    pub async fn start() -> Replicated {
        let primary = PrivateServer::start_with(|_| match flavour() {
            Flavour::MariaDb => [
                "--log-bin=mysql-bin",
                "--server-id=1",
                "--binlog-format=ROW",
            ]
            .map(str::to_string)
            .to_vec(),
            // MySQL's defaults: binary log, ROW, GTID on.
            Flavour::MySql => vec!["--server-id=1".to_string()],
        })
        .await;
        let replica = PrivateServer::start_with(|port| {
            vec![
                "--server-id=2".into(),
                "--relay-log=relay-bin".into(),
                "--report-host=127.0.0.1".into(),
                format!("--report-port={port}"),
            ]
        })
        .await;
        let mut root = primary.root().await;
        root.execute("CREATE USER 'repl'@'127.0.0.1' IDENTIFIED BY 'repl-pw'")
            .await
            .unwrap();
        root.execute("GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1'")
            .await
            .unwrap();
        let position = position(&mut root).await;
        root.close().await.unwrap();
        let mut root = replica.root().await;
        let setup = match &position {
            Position::File(file, offset) => vec![format!(
                "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={}, MASTER_USER='repl', \
                 MASTER_PASSWORD='repl-pw', MASTER_LOG_FILE='{file}', MASTER_LOG_POS={offset}, \
                 MASTER_USE_GTID=no",
                primary.port
            )],
            // What the primary did before (its users) is taken as applied: the replica has its
            // own. GET_SOURCE_PUBLIC_KEY: caching_sha2_password without TLS.
            Position::Gtid(executed) => vec![
                "RESET BINARY LOGS AND GTIDS".to_string(),
                format!("SET GLOBAL gtid_purged = '{executed}'"),
                format!(
                    "CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT={}, \
                     SOURCE_USER='repl', SOURCE_PASSWORD='repl-pw', SOURCE_AUTO_POSITION=1, \
                     GET_SOURCE_PUBLIC_KEY=1",
                    primary.port
                ),
            ],
        };
        for statement in setup {
            root.execute(AssertSqlSafe(statement)).await.unwrap();
        }
        root.execute("START REPLICA").await.unwrap();
        root.close().await.unwrap();
        let pair = Replicated { primary, replica };
        pair.caught_up().await;
        pair
    }

    /// Runs `sql` as root on the replica (`STOP REPLICA SQL_THREAD`, …).
    pub async fn on_replica(&self, sql: &str) {
        let mut root = self.replica.root().await;
        root.execute(AssertSqlSafe(sql.to_string())).await.unwrap();
        root.close().await.unwrap();
    }

    /// Makes the replica apply each transaction `seconds` after the primary committed it
    /// (replication stopped and started again around the change).
    pub async fn delay_replica(&self, seconds: u32) {
        self.on_replica("STOP REPLICA").await;
        self.on_replica(&match flavour() {
            Flavour::MariaDb => format!("CHANGE MASTER TO MASTER_DELAY = {seconds}"),
            Flavour::MySql => format!("CHANGE REPLICATION SOURCE TO SOURCE_DELAY = {seconds}"),
        })
        .await;
        self.on_replica("START REPLICA").await;
    }

    /// Waits until the replica has applied everything the primary has written so far.
    pub async fn caught_up(&self) {
        let mut primary = self.primary.root().await;
        let position = position(&mut primary).await;
        primary.close().await.unwrap();
        let mut replica = self.replica.root().await;
        let (sql, ok): (String, fn(i64) -> bool) = match position {
            Position::File(file, offset) => (
                format!("SELECT MASTER_POS_WAIT('{file}', {offset}, 60)"),
                |w| w >= 0,
            ),
            // 0: applied; 1: the timeout.
            Position::Gtid(executed) => (
                format!("SELECT WAIT_FOR_EXECUTED_GTID_SET('{executed}', 60)"),
                |w| w == 0,
            ),
        };
        let waited: Option<i64> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT CAST(({}) AS SIGNED)",
            sql.trim_start_matches("SELECT ")
        )))
        .fetch_one(&mut replica)
        .await
        .unwrap();
        assert!(
            waited.is_some_and(ok),
            "the replica did not catch up within 60 s ({waited:?})"
        );
        replica.close().await.unwrap();
    }

    /// The URL of database `name` on the replica.
    pub fn replica_url(&self, name: &str) -> String {
        format!("{}/{name}", self.replica.url())
    }
}

/// Where a primary's binary log stands.
enum Position {
    /// MariaDB: a file and an offset.
    File(String, u64),
    /// MySQL: the GTID set executed.
    Gtid(String),
}

async fn position(root: &mut sqlx::MySqlConnection) -> Position {
    use sqlx::Row;
    match flavour() {
        Flavour::MariaDb => {
            let row = sqlx::raw_sql("SHOW MASTER STATUS")
                .fetch_one(&mut *root)
                .await
                .unwrap();
            Position::File(
                row.try_get("File").unwrap(),
                row.try_get("Position").unwrap(),
            )
        }
        Flavour::MySql => Position::Gtid(
            sqlx::query_scalar("SELECT @@GLOBAL.gtid_executed")
                .fetch_one(&mut *root)
                .await
                .unwrap(),
        ),
    }
}
