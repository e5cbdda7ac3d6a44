//! Clients that send slowly or not at all (slowloris) are cut off by the
//! header, body and idle timeouts, and one address cannot open every
//! connection, while other clients are served.

use std::net::SocketAddr;
use std::time::Duration;

use riverfeed::auth::Authenticator;
use riverfeed::http::listen::ListenLimits;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::start;
use crate::common::{first_error_code, Backend, TestServer};

/// A dev-mode server with these connection limits.
async fn server(limits: ListenLimits) -> TestServer {
    start(Backend::Embedded, Authenticator::Dev, |o| {
        o.listen_limits = limits
    })
    .await
    .expect("embedded")
}

fn addr(server: &TestServer) -> SocketAddr {
    server.server.addr
}

/// What the server sends until it closes the connection; `None` if it has
/// not closed it by `within`.
async fn until_closed(stream: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let read = async {
        let mut received = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return received,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
    };
    tokio::time::timeout(within, read).await.ok()
}

/// `GET /healthz` from `from`, on a connection of its own.
async fn healthz_from(server: &TestServer, from: std::net::IpAddr) -> reqwest::StatusCode {
    reqwest::Client::builder()
        .local_address(from)
        .build()
        .unwrap()
        .get(format!("{}/healthz", server.base))
        .send()
        .await
        .expect("served")
        .status()
}

#[tokio::test]
async fn half_sent_headers_and_idle_connections_are_closed() {
    let server = server(ListenLimits {
        header_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_millis(300),
        max_connections_per_address: 512,
        ..ListenLimits::default()
    })
    .await;
    let mut slow = Vec::new();
    for _ in 0..200 {
        let mut stream = TcpStream::connect(addr(&server)).await.unwrap();
        stream.write_all(b"GET /healthz HTT").await.unwrap();
        slow.push(stream);
    }
    // Served meanwhile.
    let loopback = "127.0.0.1".parse().unwrap();
    assert_eq!(healthz_from(&server, loopback).await, 200);
    let all_closed = async {
        for stream in &mut slow {
            let received = until_closed(stream, Duration::from_secs(30))
                .await
                .expect("closed by the header timeout");
            assert!(received.is_empty(), "nothing is answered");
        }
    };
    tokio::time::timeout(Duration::from_secs(30), all_closed)
        .await
        .expect("every half-sent request closed in time");

    // A kept-alive connection with no next request is closed too.
    let mut idle = TcpStream::connect(addr(&server)).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let received = until_closed(&mut idle, Duration::from_secs(30))
        .await
        .expect("closed by the idle timeout");
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    server.stop().await;
}

#[tokio::test]
async fn a_body_that_trickles_is_cut_off() {
    let server = server(ListenLimits {
        body_timeout: Duration::from_millis(300),
        ..ListenLimits::default()
    })
    .await;
    let stream = TcpStream::connect(addr(&server)).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    write
        .write_all(
            b"POST /graphql HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
              x-riverfeed-tenant: acme\r\nx-riverfeed-user: alice\r\ncontent-length: 1000\r\n\r\n",
        )
        .await
        .unwrap();
    // A byte every 20 ms: the whole body would take 20 s.
    let trickle = tokio::spawn(async move {
        for _ in 0..1000 {
            if write.write_all(b" ").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let mut received = Vec::new();
    let answered = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buffer = [0u8; 4096];
        while !String::from_utf8_lossy(&received).contains("}]}") {
            match read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await;
    trickle.abort();
    answered.expect("answered before the body would have arrived");
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    let body: Value = serde_json::from_str(&text[text.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    assert_eq!(
        first_error_code(&body).as_deref(),
        Some("REQUEST_TIMEOUT"),
        "{body}"
    );
    server.stop().await;
}

#[tokio::test]
async fn one_address_cannot_open_every_connection() {
    let server = server(ListenLimits {
        header_timeout: Duration::from_secs(60),
        max_connections_per_address: 4,
        ..ListenLimits::default()
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(addr(&server)).await.unwrap());
    }
    // The fifth from the same address is refused: closed, at most after a 503.
    let mut fifth = TcpStream::connect(addr(&server)).await.unwrap();
    let _ = fifth
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        .await;
    let received = until_closed(&mut fifth, Duration::from_secs(10))
        .await
        .expect("closed at accept");
    let text = String::from_utf8_lossy(&received);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 503"),
        "{text}"
    );
    if !text.is_empty() {
        assert!(text.contains("TOO_MANY_CONNECTIONS"), "{text}");
    }
    // Another address is served meanwhile.
    assert_eq!(
        healthz_from(&server, "127.0.0.2".parse().unwrap()).await,
        200
    );
    drop(held);
    server.stop().await;
}
