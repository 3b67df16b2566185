//! A fault-injecting HTTP proxy of the project's own, in front of a real S3 server: every request
//! is passed through, or answered with a fault the test's plan chooses — an HTTP 5xx, a connection
//! reset, a response held past the client's timeout, a body cut short or gone silent halfway, a
//! flipped byte. It logs what it injected so a test can compare with what the archiver reports.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// What the proxy does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    Pass,
    /// Answers with this status and an S3 error document, without forwarding.
    Status(u16),
    /// Reads the request, then closes the connection with a TCP reset, without forwarding.
    Reset,
    /// Forwards the request (it takes effect), then holds the response past the client's
    /// timeout and resets: the client never learns the outcome.
    StallResponse,
    /// Forwards, then sends the headers and half the body, then (150 ms later) resets.
    TruncateBody,
    /// Forwards, then sends the headers and half the body, then goes silent.
    StallBody,
    /// Forwards with one byte of the request body flipped (a PUT) or returns the response
    /// with one byte of its body flipped (a GET).
    FlipByte,
}

/// One request as the plan sees it.
pub struct Seen<'a> {
    /// Requests before this one.
    pub n: u64,
    pub method: &'a Method,
    pub path: &'a str,
}

type Plan = Arc<dyn Fn(&Seen) -> Fault + Send + Sync>;

pub struct FaultProxy {
    /// `http://127.0.0.1:port`, to use as the S3 endpoint.
    pub endpoint: String,
    injected: Arc<Mutex<Vec<(Fault, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

/// How long a stall lasts: far past any timeout the tests configure.
const STALL: Duration = Duration::from_secs(5);
/// How long a body that will be cut short flows before the cut.
const CUT_AFTER: Duration = Duration::from_millis(150);

impl FaultProxy {
    /// Proxies to `upstream` (`http://host:port`), faulting as `plan` says.
    pub async fn start(
        upstream: &str,
        plan: impl Fn(&Seen) -> Fault + Send + Sync + 'static,
    ) -> FaultProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(State {
            upstream: upstream.trim_end_matches('/').to_string(),
            client: Client::builder(TokioExecutor::new()).build_http(),
            plan: Arc::new(plan),
            count: AtomicU64::new(0),
            injected: Arc::new(Mutex::new(Vec::new())),
        });
        let injected = state.injected.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                // A close after an aborted exchange is a reset, not a polite FIN. (Deprecated
                // because a lingering close blocks the thread; a zero linger never does.)
                #[allow(deprecated)]
                let _ = tcp.set_linger(Some(Duration::ZERO));
                let _ = tcp.set_nodelay(true);
                let state = state.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| state.clone().handle(req));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        FaultProxy {
            endpoint,
            injected,
            task,
        }
    }

    /// Every fault injected so far, with the request it hit (`METHOD path`).
    pub fn injected(&self) -> Vec<(Fault, String)> {
        self.injected.lock().unwrap().clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct State {
    upstream: String,
    client: Client<HttpConnector, Full<Bytes>>,
    plan: Plan,
    count: AtomicU64,
    injected: Arc<Mutex<Vec<(Fault, String)>>>,
}

type Body = BoxBody<Bytes, std::io::Error>;

fn full(bytes: Bytes) -> Body {
    Full::new(bytes)
        .map_err(|never: Infallible| match never {})
        .boxed()
}

fn flip(bytes: Bytes) -> Bytes {
    let mut bytes = bytes.to_vec();
    let middle = bytes.len() / 2;
    if let Some(b) = bytes.get_mut(middle) {
        *b ^= 0x01;
    }
    bytes.into()
}

impl State {
    async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
    ) -> Result<Response<Body>, std::io::Error> {
        let n = self.count.fetch_add(1, Ordering::SeqCst);
        let what = format!("{} {}", req.method(), req.uri().path());
        let fault = (self.plan)(&Seen {
            n,
            method: req.method(),
            path: req.uri().path(),
        });
        if fault != Fault::Pass {
            self.injected.lock().unwrap().push((fault, what));
        }
        let (mut parts, body) = req.into_parts();
        let mut body = body
            .collect()
            .await
            .map_err(std::io::Error::other)?
            .to_bytes();
        match fault {
            Fault::Status(code) => {
                let s3_code = if code == 503 {
                    "SlowDown"
                } else {
                    "InternalError"
                };
                let xml = format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{s3_code}</Code><Message>injected by the test proxy</Message></Error>"
                );
                return Ok(Response::builder()
                    .status(code)
                    .header("content-type", "application/xml")
                    .body(full(xml.into()))
                    .unwrap());
            }
            Fault::Reset => return Err(std::io::Error::other("injected reset")),
            Fault::FlipByte if parts.method == Method::PUT => body = flip(body),
            _ => {}
        }
        let head = parts.method == Method::HEAD;
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        parts.uri = format!("{}{path}", self.upstream).parse().unwrap();
        let response = self
            .client
            .request(Request::from_parts(parts, Full::new(body)))
            .await
            .map_err(std::io::Error::other)?;
        let (mut parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map_err(std::io::Error::other)?
            .to_bytes();
        if !head {
            // The body goes out whole (or deliberately cut short of this length).
            parts.headers.remove(hyper::header::TRANSFER_ENCODING);
            parts
                .headers
                .insert(hyper::header::CONTENT_LENGTH, body.len().into());
        }
        let body = match fault {
            Fault::StallResponse => {
                tokio::time::sleep(STALL).await;
                return Err(std::io::Error::other("injected stall"));
            }
            Fault::FlipByte if body.len() > 1 && parts.status.is_success() => full(flip(body)),
            Fault::TruncateBody | Fault::StallBody if body.len() > 1 => {
                let half = body.slice(..body.len() / 2);
                let stall = fault == Fault::StallBody;
                let frames = futures_util::stream::unfold(0, move |step| {
                    let half = half.clone();
                    async move {
                        match step {
                            0 => Some((Ok(Frame::data(half)), 1)),
                            _ => {
                                // The cut comes after the client has the headers, within
                                // its read timeout; the stall outlasts it.
                                let pause = if stall { STALL } else { CUT_AFTER };
                                tokio::time::sleep(pause).await;
                                Some((Err(std::io::Error::other("injected cut")), 2))
                            }
                        }
                    }
                });
                StreamBody::new(frames).boxed()
            }
            _ => full(body),
        };
        Ok(Response::from_parts(parts, body))
    }
}
