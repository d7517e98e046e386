//! `actiongate-venue-gateway`: the real gateway with the stand-in venue of the test kit registered
//! for `transfer`, for tests that kill and restart a gateway process. Not shipped.
//!
//! Usage: `actiongate-venue-gateway --config FILE` with `STANDIN_LOG` (the venue's durable record)
//! and `STANDIN_DELAY_MS` (how long each execution takes) in the environment.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use actiongate_server::{Application, Config, Deps, Overrides};
use actiongate_testkit::standin::StandInVenue;
use anyhow::Context;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(flag), Some(config)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: actiongate-venue-gateway --config FILE");
    };
    anyhow::ensure!(flag == "--config", "usage: actiongate-venue-gateway --config FILE");
    let log = PathBuf::from(std::env::var("STANDIN_LOG").context("STANDIN_LOG is required")?);
    let delay: u64 = std::env::var("STANDIN_DELAY_MS").ok().and_then(|d| d.parse().ok()).unwrap_or(0);
    let config = Config::load(Overrides { config: Some(config.into()), ..Overrides::default() })?;
    let venue = StandInVenue::persistent(log, Duration::from_millis(delay));
    let app = Application::build(&config, Deps { providers: vec![venue], ..Deps::default() }).await?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "actiongate listening on http://{}", app.local_addr())?;
    out.flush()?;
    drop(out);
    app.run(std::future::pending()).await
}
