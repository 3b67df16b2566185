//! A real Prometheus Pushgateway (Debian's `prometheus-pushgateway`, started on a free port, or
//! `OUTBOX_ARCHIVER_TEST_PUSHGATEWAY`), and what it exposes, read as a scrape would.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{free_port, wait_for_port};

pub struct Pushgateway {
    host: String,
    port: u16,
    _process: Option<tokio::process::Child>,
}

impl Pushgateway {
    /// `OUTBOX_ARCHIVER_TEST_PUSHGATEWAY` (http://host:port) if set, else a local one.
    pub async fn start() -> Pushgateway {
        if let Ok(url) = std::env::var("OUTBOX_ARCHIVER_TEST_PUSHGATEWAY") {
            let url = url::Url::parse(&url).unwrap();
            return Pushgateway {
                host: url.host_str().unwrap().to_string(),
                port: url.port().unwrap_or(9091),
                _process: None,
            };
        }
        let port = free_port();
        let process = tokio::process::Command::new("prometheus-pushgateway")
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start prometheus-pushgateway ({e}): apt-get install prometheus-pushgateway (.ci/test does)")
            });
        wait_for_port(port, "the Pushgateway", Duration::from_secs(20)).await;
        Pushgateway {
            host: "127.0.0.1".into(),
            port,
            _process: Some(process),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}:{}", self.host, self.port)
    }

    /// Every `outbox_archiver_*` sample the gateway exposes: (name, labels) → value.
    pub async fn scrape(&self) -> BTreeMap<(String, BTreeMap<String, String>), f64> {
        let mut tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .unwrap();
        // HTTP/1.0: the body comes whole, not in chunks that would split lines.
        tcp.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .await
            .unwrap();
        let mut text = String::new();
        tcp.read_to_string(&mut text).await.unwrap();
        text.lines()
            .filter(|l| l.starts_with("outbox_archiver_"))
            .map(parse_line)
            .collect()
    }
}

fn parse_line(line: &str) -> ((String, BTreeMap<String, String>), f64) {
    let (series, value) = line.rsplit_once(' ').unwrap();
    let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
    let labels = labels
        .trim_end_matches('}')
        .split("\",")
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap();
            (k.to_string(), v.trim_matches('"').to_string())
        })
        .collect();
    ((name.to_string(), labels), value.parse().unwrap())
}

pub type Samples = BTreeMap<(String, BTreeMap<String, String>), f64>;

/// The value of `name` whose labels include all of `want`.
pub fn value(samples: &Samples, name: &str, want: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|((n, labels), _)| {
            n == name
                && want
                    .iter()
                    .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, v)| *v)
}
