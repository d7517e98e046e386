//! The connection loop (CONTRACT "Rate limits and abuse"): HTTP/1 connections served by hyper, each
//! closed when a request head has not fully arrived within [`HEAD_TIMEOUT`] (a slow client holds
//! nothing for long), idle keep-alive connections closed after [`IDLE_TIMEOUT`], at most
//! [`MAX_CONNECTIONS`] at once (beyond them new connections wait in the listen backlog), each request
//! told its peer address (`ConnectInfo`, for the per-address limits).
//!
//! hyper's own head timer runs whenever a connection waits for its next head, idle or not, so it is
//! set to the idle limit; the head limit is kept here by a [`HeadClock`]: it starts when the
//! connection is accepted, and again at the first byte that arrives after a response, and stops when
//! a head was read (the request reaches the service).

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
/// How long a keep-alive connection may stay idle between requests.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// When the request head a connection is sending began, lock-free (it is read on every socket read):
/// milliseconds since the connection was accepted plus one, 0 while in a request or idle.
struct HeadClock {
    accepted: std::time::Instant,
    started: std::sync::atomic::AtomicU64,
    in_request: std::sync::atomic::AtomicBool,
}

impl HeadClock {
    /// A new connection owes its first head from now.
    fn new() -> Self {
        Self {
            accepted: std::time::Instant::now(),
            started: std::sync::atomic::AtomicU64::new(1),
            in_request: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Bytes arrived: a head begins unless one is being read or a request is in flight.
    fn bytes_arrived(&self) {
        use std::sync::atomic::Ordering;
        if !self.in_request.load(Ordering::Acquire) && self.started.load(Ordering::Acquire) == 0 {
            let since = u64::try_from(self.accepted.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
            let _ =
                self.started
                    .compare_exchange(0, since + 1, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    fn request_began(&self) {
        use std::sync::atomic::Ordering;
        self.in_request.store(true, Ordering::Release);
        self.started.store(0, Ordering::Release);
    }

    fn request_ended(&self) {
        self.in_request
            .store(false, std::sync::atomic::Ordering::Release);
    }

    /// When the head being read must have arrived.
    fn deadline(&self) -> Option<tokio::time::Instant> {
        match self.started.load(std::sync::atomic::Ordering::Acquire) {
            0 => None,
            at => Some(tokio::time::Instant::from_std(
                self.accepted + Duration::from_millis(at - 1) + HEAD_TIMEOUT,
            )),
        }
    }
}

/// The connection's socket, telling its [`HeadClock`] when bytes arrive.
struct Clocked {
    inner: tokio::net::TcpStream,
    clock: Arc<HeadClock>,
}

impl tokio::io::AsyncRead for Clocked {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.clock.bytes_arrived();
        }
        polled
    }
}

impl tokio::io::AsyncWrite for Clocked {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
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
            let clock = Arc::new(HeadClock::new());
            let in_service = clock.clone();
            let service =
                hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
                    request
                        .extensions_mut()
                        .insert(ConnectInfo::<SocketAddr>(peer));
                    let mut router = router.clone();
                    let clock = in_service.clone();
                    clock.request_began();
                    async move {
                        let response = router.call(request).await;
                        clock.request_ended();
                        response
                    }
                });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(IDLE_TIMEOUT);
            let io = Clocked {
                inner: stream,
                clock: clock.clone(),
            };
            let connection = builder.serve_connection(TokioIo::new(io), service);
            tokio::pin!(connection);
            loop {
                // Woken at least once a second to look at the head clock (bytes that start a head
                // arrive through the connection's own polling).
                let look = tokio::time::sleep(Duration::from_secs(1));
                tokio::select! {
                    _ = connection.as_mut() => break,
                    _ = stop.changed() => {
                        connection.as_mut().graceful_shutdown();
                        let _ = connection.await;
                        break;
                    }
                    () = look => {
                        if clock
                            .deadline()
                            .is_some_and(|d| d <= tokio::time::Instant::now())
                        {
                            // A head not sent in time: the connection is dropped, closing it.
                            break;
                        }
                    }
                }
            }
        });
        while connections.try_join_next().is_some() {}
    }
    let _ = stop_tx.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}
