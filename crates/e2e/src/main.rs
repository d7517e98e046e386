//! `actiongate-venue-gateway`: the real gateway with switches for tests that kill and restart a
//! gateway process. Not shipped.
//!
//! Usage: `actiongate-venue-gateway --config FILE`, with in the environment:
//! - `STANDIN_LOG` (and `STANDIN_DELAY_MS`): register the test kit's stand-in venue for `transfer` and `swap`
//!   fan-out, with its durable record of effects in that file;
//! - `CRASH_AFTER_SEND=1`: abort the process right after the EVM sender hands a transaction to the
//!   node and before anything is recorded (the window a crash-safe sender must survive).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actiongate_server::{Application, Config, Deps, Overrides};
use actiongate_testkit::standin::StandInVenue;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(flag), Some(config)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: actiongate-venue-gateway --config FILE");
    };
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
        deps.after_send = Some(Arc::new(|| std::process::abort()));
    }
    let app = Application::build(&config, deps).await?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "actiongate listening on http://{}", app.local_addr())?;
    out.flush()?;
    drop(out);
    Ok(app.run(std::future::pending()).await?)
}
