//! `actiongate personhood …`: the owner's personhood proofs (organizations, agents, deposits).

use actiongate_client::Client;
use serde_json::{Value, json};

use crate::agent::{
    AgentPersonhoodCommand, DepositCommand, Global, OrgCommand, PersonhoodCommand, dry_run,
    need_key,
};
use crate::credentials;
use crate::output::Outcome;

pub(super) fn proof_arg(text: &str) -> Result<Value, Outcome> {
    let raw = match text.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| Outcome::failed("LOCAL", format!("cannot read {path}: {e}")))?,
        None => text.to_owned(),
    };
    serde_json::from_str(&raw)
        .map_err(|e| Outcome::failed("INVALID_REQUEST", format!("--proof must be JSON: {e}")))
}

pub(super) async fn personhood(
    g: &Global,
    client: &Client,
    command: PersonhoodCommand,
) -> Result<Outcome, Outcome> {
    let stored = credentials::load();
    let session = stored
        .as_ref()
        .map(|s| s.owner_session.clone())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Outcome::Refused {
            code: "UNAUTHORIZED".into(),
            error: "UNAUTHORIZED".into(),
            message: "Personhood needs the owner's session: sign in with actiongate login.".into(),
        })?;
    const P: &str = "/api/v1/agent/delegation/personhood";
    let drop_nulls = |v: Value| match v {
        Value::Object(m) => Value::Object(m.into_iter().filter(|(_, v)| !v.is_null()).collect()),
        other => other,
    };
    let (method, path, body, write) = match command {
        PersonhoodCommand::Org(OrgCommand::Begin { org_id, chain_id }) => (
            "POST",
            "org/begin",
            json!({"orgId": org_id, "chainId": chain_id}),
            false,
        ),
        PersonhoodCommand::Org(OrgCommand::Complete { org_id, proof }) => (
            "POST",
            "org/complete",
            json!({"orgId": org_id, "proof": proof_arg(&proof)?}),
            true,
        ),
        PersonhoodCommand::Org(OrgCommand::Check { org_id }) => {
            ("GET", "org/check", json!({"orgId": org_id}), false)
        }
        PersonhoodCommand::Agent(c) => {
            let key = need_key()?;
            match c {
                AgentPersonhoodCommand::Begin { chain_id } => (
                    "POST",
                    "begin",
                    json!({"agentKey": key, "chainId": chain_id}),
                    false,
                ),
                AgentPersonhoodCommand::Complete { proof } => (
                    "POST",
                    "complete",
                    json!({"agentKey": key, "proof": proof_arg(&proof)?}),
                    true,
                ),
            }
        }
        PersonhoodCommand::Deposit(DepositCommand::Begin {
            org_id,
            deposit_signal,
            runtime_id,
            amount_usd,
            destination_address,
            idempotency_key,
        }) => (
            "POST",
            "deposit/begin",
            json!({"orgId": org_id, "depositSignal": deposit_signal, "runtimeId": runtime_id, "amountUsd": amount_usd,
                   "destinationAddress": destination_address, "idempotencyKey": idempotency_key}),
            false,
        ),
        PersonhoodCommand::Deposit(DepositCommand::Complete { org_id, proof }) => (
            "POST",
            "deposit/complete",
            json!({"orgId": org_id, "proof": proof_arg(&proof)?}),
            true,
        ),
        PersonhoodCommand::Deposit(DepositCommand::Consume {
            org_id,
            receipt_id,
            runtime_id,
            amount_usd,
        }) => (
            "POST",
            "deposit/consume",
            json!({"orgId": org_id, "receiptId": receipt_id, "runtimeId": runtime_id, "amountUsd": amount_usd}),
            true,
        ),
    };
    let body = drop_nulls(body);
    let full = format!("{P}/{path}");
    if write && !g.confirm_writes {
        let mut shown = body.clone();
        if let Some(k) = shown.get_mut("agentKey") {
            *k = json!("agent-****");
        }
        return Ok(dry_run(method, &full, shown));
    }
    let data = client
        .owner_call(&session, method, &full, &body)
        .await
        .map_err(Outcome::from_error)?;
    let text = serde_json::to_string_pretty(&data).unwrap_or_default();
    Ok(Outcome::ok(data, text))
}
