//! `actiongate delegation …`: ERC-7710 delegations, each command one typed call of the client. The
//! arguments are `--body` JSON in the route's own request shape, checked here before anything is
//! sent.

use actiongate_api_types::delegation::{
    DelegationActivateRequest, DelegationCheckQuery, DelegationCreateRequest, DelegationHashQuery,
    DelegationRedeemRequest, DelegationRevokeRequest,
};
use actiongate_client::Client;
use actiongate_client::routes;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::agent::{DelegationCommand, Global, invalid, need_key, to_value, unconfirmed};
use crate::output::Outcome;

/// `delegation status`: the database's view (check), or with `"verify": true` one delegation checked
/// onchain (verify).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StatusBody {
    chain_id: Option<u64>,
    delegator: Option<String>,
    delegation_hash: Option<String>,
    #[serde(default)]
    verify: bool,
    agent_api_key: Option<String>,
}

fn body<T: DeserializeOwned>(text: Option<&str>) -> Result<T, Outcome> {
    serde_json::from_str(text.unwrap_or("{}")).map_err(|e| invalid(format!("--body: {e}")))
}

pub(super) async fn delegation(
    g: &Global,
    client: &Client,
    command: DelegationCommand,
) -> Result<Outcome, Outcome> {
    let key = need_key()?;
    let failed = Outcome::from_error;
    Ok(match command {
        DelegationCommand::Create(p) | DelegationCommand::Grant(p) => {
            let req: DelegationCreateRequest = body(p.body.as_deref())?;
            let done = client.delegation_create(&key, &req).await.map_err(failed)?;
            let text = format!(
                "Delegation {} for the owner to sign (eth_signTypedData_v4 of data.typedData), then activate it.",
                done.delegation_hash
            );
            Outcome::ok(to_value(&done), text)
        }
        DelegationCommand::Activate(p) => {
            let req: DelegationActivateRequest = body(p.body.as_deref())?;
            if let Some(shown) = unconfirmed(g, routes::DELEGATION_ACTIVATE, &req) {
                return Ok(shown);
            }
            let done = client
                .delegation_activate(&key, &req)
                .await
                .map_err(failed)?;
            let text = format!("Delegation {} is {}.", done.delegation_hash, done.status);
            Outcome::ok(to_value(&done), text)
        }
        DelegationCommand::Status(p) => {
            let status: StatusBody = body(p.body.as_deref())?;
            if status.verify {
                let Some(delegation_hash) = status.delegation_hash else {
                    return Err(invalid(
                        "--body: \"verify\": true checks one delegation onchain: name its delegationHash.".into(),
                    ));
                };
                let query = DelegationHashQuery {
                    delegation_hash,
                    agent_api_key: status.agent_api_key,
                };
                pretty(
                    client
                        .delegation_verify(&key, &query)
                        .await
                        .map_err(failed)?,
                )
            } else {
                if status.delegation_hash.is_some() {
                    return Err(invalid(
                        "--body: delegationHash is checked onchain: add \"verify\": true.".into(),
                    ));
                }
                let query = DelegationCheckQuery {
                    chain_id: status.chain_id,
                    delegator: status.delegator,
                    agent_api_key: status.agent_api_key,
                };
                pretty(
                    client
                        .delegation_check(&key, &query)
                        .await
                        .map_err(failed)?,
                )
            }
        }
        DelegationCommand::Inspect(p) => {
            let query: DelegationHashQuery = body(p.body.as_deref())?;
            pretty(
                client
                    .delegation_inspect(&key, &query)
                    .await
                    .map_err(failed)?,
            )
        }
        DelegationCommand::Balance(p) => {
            let query: DelegationHashQuery = body(p.body.as_deref())?;
            pretty(
                client
                    .delegation_balance(&key, &query)
                    .await
                    .map_err(failed)?,
            )
        }
        DelegationCommand::Redeem(p) => {
            let req: DelegationRedeemRequest = body(p.body.as_deref())?;
            if let Some(shown) = unconfirmed(g, routes::DELEGATION_REDEEM, &req) {
                return Ok(shown);
            }
            let done = client.delegation_redeem(&key, &req).await.map_err(failed)?;
            let text = format!(
                "Redemption for {}: {} {}",
                done.wallet_address,
                done.status,
                done.tx_hash
                    .as_deref()
                    .or(done.message.as_deref())
                    .unwrap_or("")
            );
            Outcome::ok(to_value(&done), text)
        }
        DelegationCommand::Revoke(p) => {
            let req: DelegationRevokeRequest = body(p.body.as_deref())?;
            if let Some(shown) = unconfirmed(g, routes::DELEGATION_REVOKE, &req) {
                return Ok(shown);
            }
            let done = client.delegation_revoke(&key, &req).await.map_err(failed)?;
            let text = if done.transaction.is_some() {
                "The owner's account sends data.transaction (disableDelegation); run revoke again once it is mined.".to_owned()
            } else {
                format!("Delegation {} is {}.", done.delegation_hash, done.status)
            };
            Outcome::ok(to_value(&done), text)
        }
    })
}

fn pretty<T: serde::Serialize>(data: T) -> Outcome {
    let data = to_value(&data);
    let text = serde_json::to_string_pretty(&data).unwrap_or_default();
    Outcome::ok(data, text)
}
