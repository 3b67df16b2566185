//! A MariaDB server of the test's own in a temporary directory (ready in about 4 s): tests that
//! restart or kill the database server use it, so the shared server is never touched.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Executor};

use super::{free_port, wait_for_port};

pub const PASSWORD: &str = "restart-secret-pw";

/// A MariaDB server of the test's own, in a temporary directory.
pub struct PrivateServer {
    dir: tempfile::TempDir,
    port: u16,
    process: Option<tokio::process::Child>,
}

impl PrivateServer {
    /// Installs a data directory and starts the server. Panics, naming what is missing, where
    /// MariaDB is not installed: `.ci/test` installs it, so a missing server is a failure here,
    /// never a silent pass.
    pub async fn start() -> PrivateServer {
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
        let out = install.output().await.unwrap();
        assert!(
            out.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let mut server = PrivateServer {
            dir,
            port,
            process: None,
        };
        server.run().await;
        let mut root = format!(
            "mysql://root@localhost/?socket={}",
            server.socket().display()
        )
        .parse::<sqlx::mysql::MySqlConnectOptions>()
        .unwrap()
        .connect()
        .await
        .unwrap();
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

    /// `mysql://archiver:…@127.0.0.1:port` (no database part).
    pub fn url(&self) -> String {
        format!("mysql://archiver:{PASSWORD}@127.0.0.1:{}", self.port)
    }

    /// Starts mariadbd on the data directory and waits until it answers.
    pub async fn run(&mut self) {
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
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        if unsafe { libc::geteuid() } == 0 {
            command.arg("--user=root");
        }
        self.process = Some(command.spawn().unwrap());
        wait_for_port(self.port, "private mariadbd", Duration::from_secs(30)).await;
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
