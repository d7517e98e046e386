//! `actiongate-venue-gateway`: the real gateway with switches for tests that kill and restart a
//! gateway process. Not shipped.
//!
//! Usage: `actiongate-venue-gateway --config FILE`, with in the environment:
//! - `STANDIN_LOG` (and `STANDIN_DELAY_MS`): register the test kit's stand-in venue for `transfer` and `swap`
//!   fan-out, with its durable record of effects in that file;
//! - `CRASH_AFTER_SEND=1`: abort the process right after the EVM sender hands a transaction to the
//!   node and before anything is recorded (the window a crash-safe sender must survive);
//! - `ACTIONGATE_TEST_LOG=FILTER` (e.g. `warn`): the gateway's log on stderr, at that filter (none
//!   otherwise: a test's expected warnings would crowd the test run's output);
//! - `STEAL_LEASE_BEFORE_RESERVE=1`: the first time an execution is about to reserve its nonces
//!   (it has the wallet's turn), another worker ("thief") takes the leases of the queued intents for
//!   3 seconds, as a process that found them run out would; the worker must then reserve nothing
//!   and send nothing.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::{AtomicBool, Ordering};

use actiongate_chain::sender::BeforeReserve;
use actiongate_core::store::IntentStore;
use actiongate_server::{Application, Config, Deps, Overrides};
use actiongate_store::SqlStore;
use actiongate_testkit::standin::StandInVenue;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(flag), Some(config)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: actiongate-venue-gateway --config FILE");
    };
    if let Ok(filter) = std::env::var("ACTIONGATE_TEST_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    anyhow::ensure!(
        flag == "--config",
        "usage: actiongate-venue-gateway --config FILE"
    );
    let config = Config::load(Overrides {
        config: Some(config.into()),
        ..Overrides::default()
    })?;
    let mut deps = Deps::default();
    if let Ok(log) = std::env::var("STANDIN_LOG") {
        let delay: u64 = std::env::var("STANDIN_DELAY_MS")
            .ok()
            .and_then(|d| d.parse().ok())
            .unwrap_or(0);
        deps.providers.push(StandInVenue::persistent(
            PathBuf::from(log),
            Duration::from_millis(delay),
        ));
    }
    if std::env::var("CRASH_AFTER_SEND").is_ok() {
        deps.send_hooks.after_send = Some(Arc::new(|| std::process::abort()));
    }
    if std::env::var("STEAL_LEASE_BEFORE_RESERVE").is_ok() {
        deps.send_hooks.before_reserve = Some(steal_lease_once(&config)?);
    }
    let app = Application::build(&config, deps).await?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "actiongate listening on http://{}", app.local_addr())?;
    out.flush()?;
    drop(out);
    Ok(app.run(std::future::pending()).await?)
}

/// The `STEAL_LEASE_BEFORE_RESERVE` hook: fires once.
fn steal_lease_once(config: &Config) -> anyhow::Result<BeforeReserve> {
    let url = config.database_url.clone();
    let fired = Arc::new(AtomicBool::new(false));
    Ok(Arc::new(move |execution_key: &str| {
        let (url, fired, key) = (url.clone(), fired.clone(), execution_key.to_owned());
        Box::pin(async move {
            if fired.swap(true, Ordering::SeqCst) {
                return;
            }
            let store = match SqlStore::connect(&url).await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("steal: cannot open the database: {e}");
                    return;
                }
            };
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
                .unwrap_or_default();
            // Claimed as if an hour had passed: every queued intent's lease looks run out.
            match store
                .claim_intents("thief", now + 3_600_000, now + 3_000, 32)
                .await
            {
                Ok(taken) => {
                    eprintln!(
                        "steal: took {} lease(s) before {key} reserved its nonces",
                        taken.len()
                    )
                }
                Err(e) => eprintln!("steal: {e}"),
            }
            store.close().await;
        })
    }))
}
