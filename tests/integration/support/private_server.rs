//! A MariaDB server of the test's own in a temporary directory (ready in about 4 s): tests that
//! restart or kill the database server use it, so the shared server is never touched; and a
//! pair of them, a primary and a real replica of it ([`Replicated`]), for the replica-lag tests.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Executor};

use super::free_port;

pub const PASSWORD: &str = "restart-secret-pw";

/// A MariaDB server of the test's own, in a temporary directory.
pub struct PrivateServer {
    dir: tempfile::TempDir,
    port: u16,
    process: Option<tokio::process::Child>,
    /// Server options beyond the defaults (binary log, server id, …).
    extra: Vec<String>,
}

impl PrivateServer {
    /// Installs a data directory and starts the server. Panics, naming what is missing, where
    /// MariaDB is not installed: `.ci/test` installs it, so a missing server is a failure here,
    /// never a silent pass.
    pub async fn start() -> PrivateServer {
        PrivateServer::start_with(|_| Vec::new()).await
    }

    /// As [`PrivateServer::start`], with server options that may name the server's port.
    pub async fn start_with(extra: impl Fn(u16) -> Vec<String>) -> PrivateServer {
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
        let mut server = PrivateServer {
            dir,
            port: 0,
            process: None,
            extra: Vec::new(),
        };
        // A port found free can be taken by another server starting beside this one before
        // mariadbd binds it: then it exits, and another port is tried.
        for attempt in 0.. {
            server.port = free_port();
            server.extra = extra(server.port);
            if server.try_run().await {
                break;
            }
            assert!(
                attempt < 4,
                "private mariadbd did not start on any of 5 ports"
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

    fn socket(&self) -> PathBuf {
        self.dir.path().join("mysqld.sock")
    }

    /// root over the server's unix socket.
    pub async fn root(&self) -> sqlx::MySqlConnection {
        format!("mysql://root@localhost/?socket={}", self.socket().display())
            .parse::<sqlx::mysql::MySqlConnectOptions>()
            .unwrap()
            .connect()
            .await
            .unwrap()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `mysql://archiver:…@127.0.0.1:port` (no database part).
    pub fn url(&self) -> String {
        format!("mysql://archiver:{PASSWORD}@127.0.0.1:{}", self.port)
    }

    /// Starts mariadbd on the data directory and waits until it answers.
    pub async fn run(&mut self) {
        assert!(
            self.try_run().await,
            "private mariadbd exited on start (port {} taken?)",
            self.port
        );
    }

    /// Starts mariadbd and waits until it answers on its socket and its port; false if it
    /// exited first (its port was taken).
    async fn try_run(&mut self) -> bool {
        let mut command = tokio::process::Command::new("/usr/sbin/mariadbd");
        command
            .arg("--no-defaults")
            .arg(format!(
                "--datadir={}",
                self.dir.path().join("data").display()
            ))
            .arg(format!("--socket={}", self.socket().display()))
            .arg(format!("--port={}", self.port))
            .args(["--bind-address=127.0.0.1", "--innodb-buffer-pool-size=128M"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        if unsafe { libc::geteuid() } == 0 {
            command.arg("--user=root");
        }
        let mut process = command.spawn().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if process.try_wait().unwrap().is_some() {
                return false;
            }
            let socket = tokio::net::UnixStream::connect(self.socket()).await.is_ok();
            if socket
                && tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                    .await
                    .is_ok()
            {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "private mariadbd did not start"
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
        let primary = PrivateServer::start_with(|_| {
            [
                "--log-bin=mysql-bin",
                "--server-id=1",
                "--binlog-format=ROW",
            ]
            .map(str::to_string)
            .to_vec()
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
        let (file, position) = binlog_position(&mut root).await;
        root.close().await.unwrap();
        let mut root = replica.root().await;
        root.execute(AssertSqlSafe(format!(
            "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={}, MASTER_USER='repl', \
             MASTER_PASSWORD='repl-pw', MASTER_LOG_FILE='{file}', MASTER_LOG_POS={position}, \
             MASTER_USE_GTID=no",
            primary.port
        )))
        .await
        .unwrap();
        root.execute("START SLAVE").await.unwrap();
        root.close().await.unwrap();
        let pair = Replicated { primary, replica };
        pair.caught_up().await;
        pair
    }

    /// Runs `sql` as root on the replica (`STOP SLAVE SQL_THREAD`, …).
    pub async fn on_replica(&self, sql: &str) {
        let mut root = self.replica.root().await;
        root.execute(AssertSqlSafe(sql.to_string())).await.unwrap();
        root.close().await.unwrap();
    }

    /// Waits until the replica has applied everything the primary has written so far.
    pub async fn caught_up(&self) {
        let mut primary = self.primary.root().await;
        let (file, position) = binlog_position(&mut primary).await;
        primary.close().await.unwrap();
        let mut replica = self.replica.root().await;
        let waited: Option<i64> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT MASTER_POS_WAIT('{file}', {position}, 60)"
        )))
        .fetch_one(&mut replica)
        .await
        .unwrap();
        assert!(
            waited.is_some_and(|w| w >= 0),
            "the replica did not catch up within 60 s ({waited:?})"
        );
        replica.close().await.unwrap();
    }

    /// The URL of database `name` on the replica.
    pub fn replica_url(&self, name: &str) -> String {
        format!("{}/{name}", self.replica.url())
    }
}

async fn binlog_position(root: &mut sqlx::MySqlConnection) -> (String, u64) {
    use sqlx::Row;
    let row = sqlx::raw_sql("SHOW MASTER STATUS")
        .fetch_one(&mut *root)
        .await
        .unwrap();
    let file: String = row.try_get("File").unwrap();
    let position: u64 = row.try_get("Position").unwrap();
    (file, position)
}
