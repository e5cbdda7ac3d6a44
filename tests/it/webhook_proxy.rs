//! Webhooks and proxies: a `riverfeed serve` child with `HTTP_PROXY` and
//! `ALL_PROXY` in its environment sends deliveries directly (the proxy
//! variables would take them past the connection's address check), and
//! through a proxy only when `--webhooks-proxy` names one. The proxy is
//! the test's own, on loopback: it records each request line and answers
//! 200 itself.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::common::{free_port, metric_at, Client, PATIENCE};
use crate::webhooks::Receiver;

const T: &str = "acme";

/// A forward HTTP proxy that forwards nothing: it keeps the request line
/// of each request sent to it and answers `200`.
struct Proxy {
    url: String,
    connections: Arc<AtomicUsize>,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    async fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let connections: Arc<AtomicUsize> = Arc::default();
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let (count, keep) = (connections.clone(), lines.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(answer(stream, keep.clone()));
            }
        });
        Proxy {
            url,
            connections,
            lines,
        }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

/// Reads requests off one connection (headers, then a body of its
/// `content-length`), keeping each request line, and answers each `200`.
async fn answer(stream: TcpStream, keep: Arc<Mutex<Vec<String>>>) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).await.unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).await.unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length.min(1 << 20)];
        if reader.read_exact(&mut body).await.is_err() {
            return;
        }
        keep.lock()
            .unwrap()
            .push(request_line.trim_end().to_owned());
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        if reader.get_mut().write_all(ok).await.is_err() {
            return;
        }
    }
}

/// `riverfeed serve` on `dir`, in dev mode with private webhooks allowed,
/// every proxy variable of its environment pointing at `proxy`, and
/// `extra` flags.
async fn serve(dir: &Path, proxy: &Proxy, extra: &[&str]) -> (Child, String) {
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_riverfeed"))
        .arg("serve")
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--store", &format!("embedded:{}", dir.display())])
        .arg("--webhooks-allow-private")
        .args(extra)
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .env_remove("RIVERFEED_WEBHOOKS_PROXY")
        .env("HTTP_PROXY", &proxy.url)
        .env("http_proxy", &proxy.url)
        .env("ALL_PROXY", &proxy.url)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("riverfeed starts");
    let deadline = Instant::now() + PATIENCE * 2;
    loop {
        if let Ok(answer) = reqwest::get(format!("{base}/healthz")).await {
            if answer.status() == 200 {
                return (child, base);
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("riverfeed serve exited with {status}");
        }
        assert!(Instant::now() < deadline, "{base} never answered /healthz");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn record(base: &str, text: &str) {
    let mary = Client::at(base, Some((T, "mary", None)));
    mary.post_status(text, json!({})).await;
}

/// Without `--webhooks-proxy`, the proxy variables are ignored: the
/// delivery reaches the receiver directly and the proxy sees no
/// connection. With it, the delivery goes through the proxy named.
#[tokio::test]
async fn deliveries_ignore_proxy_variables_unless_a_proxy_is_named() {
    let dir = tempfile::tempdir().expect("a data directory");
    let proxy = Proxy::start().await;
    let receiver = Receiver::start(None).await;

    let (mut child, base) = serve(dir.path(), &proxy, &[]).await;
    let app = Client::at(&base, Some((T, "app-backend", Some("service"))));
    let registered = app
        .data(
            "mutation($url: String!) { registerWebhook(url: $url, events: [ACTION_RECORDED]) {
                webhook { webhookId } } }",
            json!({ "url": receiver.url }),
        )
        .await;
    assert!(registered["registerWebhook"]["webhook"]["webhookId"].is_string());
    record(&base, "Sent directly").await;
    let got = receiver
        .wait("a direct delivery", |got| got.len() == 1)
        .await;
    assert_eq!(got[0].body["data"]["descriptor"]["text"], "Sent directly");
    assert_eq!(
        proxy.connections.load(Ordering::SeqCst),
        0,
        "the proxy saw {:?}",
        proxy.lines()
    );
    // Its job finished, so the next process sends it no more.
    let deadline = Instant::now() + PATIENCE;
    while metric_at(&base, "riverfeed_webhook_queue_depth").await > 0.0 {
        assert!(Instant::now() < deadline, "the delivery never finished");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.start_kill().expect("kill");
    let _ = child.wait().await;

    let named = ["--webhooks-proxy", proxy.url.as_str()];
    let (mut child, base) = serve(dir.path(), &proxy, &named).await;
    record(&base, "Sent through the proxy").await;
    let deadline = Instant::now() + PATIENCE;
    while proxy.lines().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the proxy never saw the delivery"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        proxy.lines(),
        [format!("POST {} HTTP/1.1", receiver.url)],
        "a forward request for the endpoint"
    );
    assert_eq!(receiver.all().len(), 1, "not sent directly as well");
    child.start_kill().expect("kill");
    let _ = child.wait().await;
}
