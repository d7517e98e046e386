//! `actiongate personhood …`: the owner's personhood proofs (organizations, agents, deposits).

use actiongate_api_types::personhood::{
    AgentBegin, AgentComplete, DepositBeginBody, DepositConsume, OrgBegin, OrgCheck, OrgComplete,
};
use actiongate_client::Client;
use actiongate_client::routes;
use serde_json::Value;

use crate::agent::{
    AgentPersonhoodCommand, DepositCommand, Global, OrgCommand, PersonhoodCommand, invalid,
    need_key, need_session, to_value, unconfirmed,
};
use crate::output::Outcome;

pub(super) fn proof_arg(text: &str) -> Result<Value, Outcome> {
    let raw = match text.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| Outcome::failed("LOCAL", format!("cannot read {path}: {e}")))?,
        None => text.to_owned(),
    };
    serde_json::from_str(&raw).map_err(|e| invalid(format!("--proof must be JSON: {e}")))
}

pub(super) async fn personhood(
    g: &Global,
    client: &Client,
    command: PersonhoodCommand,
) -> Result<Outcome, Outcome> {
    let session = need_session("Personhood")?;
    let key = match &command {
        PersonhoodCommand::Agent(_) => need_key()?,
        _ => String::new(),
    };
    let failed = Outcome::from_error;
    // Completing a proof is the write (it locks an org or an agent, or issues a receipt).
    let data = match command {
        PersonhoodCommand::Org(OrgCommand::Begin { org_id, chain_id }) => to_value(
            &client
                .personhood_org_begin(&session, &OrgBegin { org_id, chain_id })
                .await
                .map_err(failed)?,
        ),
        PersonhoodCommand::Org(OrgCommand::Complete { org_id, proof }) => {
            let req = OrgComplete {
                org_id,
                proof: proof_arg(&proof)?,
                chain_id: None,
            };
            if let Some(shown) = unconfirmed(g, routes::PERSONHOOD_ORG_COMPLETE, &req) {
                return Ok(shown);
            }
            to_value(
                &client
                    .personhood_org_complete(&session, &req)
                    .await
                    .map_err(failed)?,
            )
        }
        PersonhoodCommand::Org(OrgCommand::Check { org_id }) => to_value(
            &client
                .personhood_org_check(
                    &session,
                    &OrgCheck {
                        org_id,
                        chain_id: None,
                    },
                )
                .await
                .map_err(failed)?,
        ),
        PersonhoodCommand::Agent(AgentPersonhoodCommand::Begin { chain_id }) => to_value(
            &client
                .personhood_agent_begin(
                    &session,
                    &AgentBegin {
                        agent_key: Some(key),
                        agent_id: None,
                        chain_id,
                    },
                )
                .await
                .map_err(failed)?,
        ),
        PersonhoodCommand::Agent(AgentPersonhoodCommand::Complete { proof }) => {
            let req = AgentComplete {
                agent_key: Some(key),
                agent_id: None,
                proof: proof_arg(&proof)?,
                chain_id: None,
            };
            if let Some(shown) = unconfirmed(g, routes::PERSONHOOD_AGENT_COMPLETE, &req) {
                return Ok(shown);
            }
            to_value(
                &client
                    .personhood_agent_complete(&session, &req)
                    .await
                    .map_err(failed)?,
            )
        }
        PersonhoodCommand::Deposit(DepositCommand::Begin {
            org_id,
            deposit_signal,
            runtime_id,
            amount_usd,
            destination_address,
            idempotency_key,
        }) => {
            let req = DepositBeginBody {
                org_id,
                deposit_signal,
                runtime_id,
                amount_usd,
                destination_address,
                chain_id: None,
                idempotency_key,
            };
            to_value(
                &client
                    .personhood_deposit_begin(&session, &req)
                    .await
                    .map_err(failed)?,
            )
        }
        PersonhoodCommand::Deposit(DepositCommand::Complete { org_id, proof }) => {
            let req = OrgComplete {
                org_id,
                proof: proof_arg(&proof)?,
                chain_id: None,
            };
            if let Some(shown) = unconfirmed(g, routes::PERSONHOOD_DEPOSIT_COMPLETE, &req) {
                return Ok(shown);
            }
            to_value(
                &client
                    .personhood_deposit_complete(&session, &req)
                    .await
                    .map_err(failed)?,
            )
        }
        PersonhoodCommand::Deposit(DepositCommand::Consume {
            org_id,
            receipt_id,
            runtime_id,
            amount_usd,
        }) => {
            let req = DepositConsume {
                org_id,
                receipt_id,
                runtime_id,
                amount_usd,
            };
            if let Some(shown) = unconfirmed(g, routes::PERSONHOOD_DEPOSIT_CONSUME, &req) {
                return Ok(shown);
            }
            to_value(
                &client
                    .personhood_deposit_consume(&session, &req)
                    .await
                    .map_err(failed)?,
            )
        }
    };
    let text = serde_json::to_string_pretty(&data).unwrap_or_default();
    Ok(Outcome::ok(data, text))
}
