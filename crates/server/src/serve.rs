//! The connection loop (CONTRACT "Rate limits and abuse"): HTTP/1 connections served by hyper, each
//! closed when a request head has not fully arrived within [`HEAD_TIMEOUT`] (a slow client holds
//! nothing for long), at most [`MAX_CONNECTIONS`] at once (beyond them new connections wait in the
//! listen backlog), each request told its peer address (`ConnectInfo`, for the per-address limits).
//!
//! hyper runs the head timer whenever a connection waits for its next request head, so an idle
//! keep-alive connection is closed [`HEAD_TIMEOUT`] after its last response, sooner than the 60 s
//! CONTRACT allows it; a client then opens a new connection.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tower::Service;

/// How long a client has to send a whole request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How many connections are served at once.
pub const MAX_CONNECTIONS: usize = 4_096;

/// Serves `router` on `listener` until `shutdown` resolves, then lets every connection finish its
/// request in flight.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let mut stop = stop_rx.clone();
        connections.spawn(async move {
            let _permit = permit;
            let service =
                hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
                    request
                        .extensions_mut()
                        .insert(ConnectInfo::<SocketAddr>(peer));
                    let mut router = router.clone();
                    router.call(request)
                });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = stop.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
        while connections.try_join_next().is_some() {}
    }
    let _ = stop_tx.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}
