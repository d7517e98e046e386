use crate::helpers::{Backend, spawn_app};
use crate::on_both_backends;

async fn health_and_readiness(backend: Backend) {
    let app = spawn_app(backend).await;
    let r = app.get("/healthz").await;
    assert_eq!(r.assert_ok()["status"], "ok");
    let r = app.get("/readyz").await;
    assert_eq!(r.assert_ok()["status"], "ok");
    app.stop().await;
}

async fn every_response_carries_a_request_id(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut ids = std::collections::HashSet::new();
    for path in [
        "/healthz",
        "/healthz",
        "/api/v1/agent/actions/catalog",
        "/no/such/route",
    ] {
        let r = app.get(path).await;
        let id = r
            .headers
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        assert_eq!(id.len(), 36, "{path}: x-request-id {id:?}");
        assert!(
            ids.insert(id.to_owned()),
            "{path}: x-request-id {id:?} given twice"
        );
    }
    // A caller's own id is kept, so that it can follow its request through our logs.
    let r = app
        .send(
            app.client
                .get(app.url("/healthz"))
                .header("x-request-id", "trace-me-123"),
        )
        .await;
    assert_eq!(
        r.headers.get("x-request-id").and_then(|v| v.to_str().ok()),
        Some("trace-me-123")
    );
}

on_both_backends!(health_and_readiness, every_response_carries_a_request_id);

/// Slow clients hold nothing for long: 40 connections that never finish their request head are
/// closed within the head timeout (10 s), while `/healthz` keeps answering.
#[tokio::test]
async fn connections_that_never_finish_their_head_are_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let app = spawn_app(Backend::Sqlite).await;
    let mut slow = Vec::new();
    for _ in 0..40 {
        let mut s = tokio::net::TcpStream::connect(app.addr)
            .await
            .expect("connect");
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
            .await
            .expect("a partial head is sent");
        slow.push(s);
    }
    for _ in 0..5 {
        assert_eq!(app.get("/healthz").await.status, 200);
    }
    for mut s in slow {
        let mut buf = Vec::new();
        let closed =
            tokio::time::timeout(std::time::Duration::from_secs(15), s.read_to_end(&mut buf)).await;
        assert!(closed.is_ok(), "a slow connection is still open after 15 s");
        // Closed, with at most an error status, never a served request.
        let text = String::from_utf8_lossy(&buf);
        assert!(!text.contains("200 OK"), "{text}");
    }
    app.stop().await;
}

/// An idle keep-alive connection is not a slow client: it may wait between requests (CONTRACT: up to
/// 60 s) and is served again on the same socket; a connection that sends nothing at all is closed
/// within the head timeout.
#[tokio::test]
async fn an_idle_keep_alive_connection_is_served_again() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(s: &mut tokio::net::TcpStream) -> String {
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .expect("a request is sent");
        let mut buf = vec![0u8; 4096];
        let mut got = Vec::new();
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = tokio::time::timeout(std::time::Duration::from_secs(5), s.read(&mut buf))
                .await
                .expect("an answer within 5 s")
                .expect("read");
            assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got).into_owned()
    }

    let app = spawn_app(Backend::Sqlite).await;
    let mut kept = tokio::net::TcpStream::connect(app.addr)
        .await
        .expect("connect");
    let mut silent = tokio::net::TcpStream::connect(app.addr)
        .await
        .expect("connect");
    assert!(get(&mut kept).await.starts_with("HTTP/1.1 200"));
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    assert!(
        get(&mut kept).await.contains("HTTP/1.1 200"),
        "served again after 12 s idle"
    );
    let mut buf = Vec::new();
    let closed = tokio::time::timeout(
        std::time::Duration::from_secs(1),
        silent.read_to_end(&mut buf),
    )
    .await;
    assert!(
        matches!(closed, Ok(Ok(_))),
        "a connection that sent nothing for 12 s is closed"
    );
    app.stop().await;
}
