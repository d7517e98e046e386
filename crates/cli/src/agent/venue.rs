//! `actiongate venue …`: venue readiness, one typed call of the client each.

use actiongate_api_types::venues::{BlockingReason, ReadinessQuery, VenueListQuery};
use actiongate_client::Client;

use crate::agent::{Global, VenueCommand, need_key, to_value};
use crate::output::Outcome;

/// One line a reason: its code, what was found, and the fix.
fn reasons_text(reasons: &[BlockingReason]) -> String {
    reasons
        .iter()
        .map(|r| {
            let mut line = format!(
                "  {}: {}\n    fix: {}",
                r.code.as_str(),
                r.message,
                r.fix.text
            );
            if let Some(route) = &r.fix.route {
                line.push_str(&format!(" ({route})"));
            }
            if let Some(tx) = &r.fix.transaction {
                line.push_str(&format!("\n    transaction: to {} data {}", tx.to, tx.data));
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) async fn venue(
    g: &Global,
    client: &Client,
    command: VenueCommand,
) -> Result<Outcome, Outcome> {
    let key = need_key()?;
    let failed = Outcome::from_error;
    Ok(match command {
        VenueCommand::Readiness {
            venue,
            chain_id,
            lane,
            token,
            amount,
            wallet_address,
        } => {
            let query = ReadinessQuery {
                venue,
                chain_id: Some(chain_id.unwrap_or_else(|| g.default_chain())),
                lane,
                amount,
                token,
                wallet_address,
            };
            let r = client.venue_readiness(&key, &query).await.map_err(failed)?;
            let text = if r.ready {
                format!("{} is ready on chain {} ({}).", r.venue, r.chain_id, r.lane)
            } else {
                format!(
                    "{} is not ready on chain {} ({}): do not proceed.\n{}",
                    r.venue,
                    r.chain_id,
                    r.lane,
                    reasons_text(&r.blocking_reasons)
                )
            };
            Outcome::ok(to_value(&r), text)
        }
        VenueCommand::List {
            chain_id,
            lane,
            wallet_address,
        } => {
            let query = VenueListQuery {
                chain_id: Some(chain_id.unwrap_or_else(|| g.default_chain())),
                lane,
                wallet_address,
            };
            let list = client.venues(&key, &query).await.map_err(failed)?;
            let mut text = format!("Venues on chain {} ({}):", list.chain_id, list.lane);
            for v in &list.venues {
                let codes: Vec<&str> = v.blocking_reasons.iter().map(|r| r.code.as_str()).collect();
                text.push_str(&format!(
                    "\n{:<16} {:<9} {}",
                    v.venue,
                    if v.ready { "ready" } else { "blocked" },
                    if v.ready {
                        v.actions.join(", ")
                    } else {
                        codes.join(", ")
                    }
                ));
            }
            Outcome::ok(to_value(&list), text)
        }
    })
}
