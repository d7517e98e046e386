//! The agent CLI: every command of SPEC's "MCP and CLI equivalents", a client of the public REST API
//! through `actiongate-client`. Writes need `--confirm-writes`; without it the command prints what it
//! would send (secrets masked) and sends nothing.

mod approvals;
mod args;
mod delegation;
mod login;
mod personhood;
mod venue;

use std::io::{IsTerminal, Write};
use std::time::Duration;

use actiongate_api_types::catalog::CatalogAction;
use actiongate_api_types::chain::BuildTxRequest;
use actiongate_api_types::credits::{
    BuyCreditsRequest, CreditPurchase, WalletLinkBegin, WalletLinkRequest,
};
use actiongate_api_types::intents::{ExecuteIntentRequest, Intent};
use actiongate_client::Client;
use actiongate_client::Purchase;
use serde_json::{Map, Value, json};

use crate::credentials;
use crate::output::Outcome;

use approvals::approvals;
pub use args::*;
use delegation::delegation;
use login::login;
use personhood::personhood;

pub(super) fn need_key() -> Result<String, Outcome> {
    credentials::agent_key()
        .map(|(k, _)| k)
        .ok_or_else(|| Outcome::Refused {
            code: "UNAUTHORIZED".into(),
            error: "UNAUTHORIZED".into(),
            message: "No agent key: sign in with actiongate login, or set ACTIONGATE_API_KEY."
                .into(),
        })
}

/// The owner session of the stored login; `what` says what needs it.
pub(super) fn need_session(what: &str) -> Result<String, Outcome> {
    credentials::load()
        .map(|s| s.owner_session)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Outcome::Refused {
            code: "UNAUTHORIZED".into(),
            error: "UNAUTHORIZED".into(),
            message: format!("{what} needs the owner's session: sign in with actiongate login."),
        })
}

/// Links the payer's wallet to the signed-in owner's account (idempotent: a linked wallet stays so).
pub(super) async fn link_wallet(client: &Client, payer: &crate::pay::Payer) -> Result<(), Outcome> {
    let session = credentials::load().map(|s| s.owner_session).filter(|s| !s.is_empty()).ok_or_else(|| {
        Outcome::failed("UNAUTHORIZED", "Paying from a local key links its wallet to your account, which needs the owner's session: sign in with actiongate login.")
    })?;
    let begun = client
        .wallet_link_begin(
            &session,
            &WalletLinkBegin {
                address: payer.address(),
                chain_id: None,
            },
        )
        .await
        .map_err(Outcome::from_error)?;
    let signature = payer
        .sign_message(&begun.message)
        .map_err(|e| Outcome::failed("PAYMENT_FAILED", e))?;
    client
        .wallet_link(
            &session,
            &WalletLinkRequest {
                message: begun.message,
                signature,
            },
        )
        .await
        .map_err(Outcome::from_error)?;
    Ok(())
}

pub(super) fn purchase_outcome(done: CreditPurchase) -> Outcome {
    let text = done.message.clone();
    Outcome::ok(to_value(&done), text)
}

/// Bad input, refused before anything is sent (exit 2).
pub(super) fn invalid(message: String) -> Outcome {
    Outcome::Refused {
        code: "INVALID_REQUEST".into(),
        error: "INVALID_REQUEST".into(),
        message,
    }
}

/// A write without --confirm-writes: what would be sent, secrets masked.
pub(super) fn dry_run(method: &str, path: &str, body: Value) -> Outcome {
    let mut body = body;
    for field in ["agentApiKey", "agentKey"] {
        if let Some(k) = body.get_mut(field) {
            *k = json!("agent-****");
        }
    }
    let text = format!(
        "not sent (a write: add --confirm-writes to send it):\n{method} {path}\n{}",
        serde_json::to_string_pretty(&body).unwrap_or_default()
    );
    Outcome::Done {
        code: "DRY_RUN",
        data: json!({"method": method, "path": path, "body": body}),
        text,
    }
}

/// A write is sent only with `--confirm-writes`; without it, what would be sent.
pub(super) fn unconfirmed<T: serde::Serialize>(
    g: &Global,
    route: actiongate_client::routes::Route,
    req: &T,
) -> Option<Outcome> {
    (!g.confirm_writes).then(|| dry_run(route.method.as_str(), route.path, without_nulls(req)))
}

fn without_nulls<T: serde::Serialize>(req: &T) -> serde_json::Value {
    match to_value(req) {
        serde_json::Value::Object(m) => m.into_iter().filter(|(_, v)| !v.is_null()).collect(),
        other => other,
    }
}

/// Typed params from --param k=v (by the action's paramsSchema) and --params JSON.
pub(super) fn params_of(
    args: &ActionArgs,
    action: Option<&CatalogAction>,
) -> Result<Value, Outcome> {
    let mut params: Map<String, Value> = match &args.params_json {
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            _ => {
                return Err(Outcome::failed(
                    "INVALID_REQUEST",
                    "--params must be a JSON object",
                ));
            }
        },
        None => Map::new(),
    };
    for pair in &args.params {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(Outcome::failed(
                "INVALID_REQUEST",
                format!("--param {pair:?} is not KEY=VALUE"),
            ));
        };
        let kind = action
            .and_then(|a| a.params_schema.as_ref())
            .and_then(|s| s["properties"][k]["type"].as_str())
            .unwrap_or("string");
        let value = match kind {
            "string" => json!(v),
            _ => serde_json::from_str(v).unwrap_or_else(|_| json!(v)),
        };
        params.insert(k.to_owned(), value);
    }
    Ok(Value::Object(params))
}

pub(super) async fn catalog_entry(client: &Client, name: &str) -> Option<CatalogAction> {
    let wanted = name.to_ascii_lowercase().replace('_', "-");
    let doc = client.catalog().await.ok()?;
    doc.actions.into_iter().find(|a| {
        a.action == wanted
            || a.aliases
                .iter()
                .any(|al| al.to_ascii_lowercase().replace('_', "-") == wanted)
    })
}

pub(super) fn request(
    g: &Global,
    a: &ActionArgs,
    key: String,
    params: Value,
    idem: Option<String>,
) -> ExecuteIntentRequest {
    ExecuteIntentRequest {
        agent_api_key: key,
        action: a.action.clone(),
        params,
        chain_id: Some(a.chain_id.unwrap_or_else(|| g.default_chain())),
        estimated_amount_usd: a.estimated_amount_usd,
        idempotency_key: idem,
    }
}

pub(super) fn intent_text(i: &Intent) -> String {
    let mut out = format!(
        "intent {}: {} ({} of {} executed)",
        i.intent_id, i.status, i.executed, i.total
    );
    for r in &i.results {
        let what = if r.success {
            r.tx_hash
                .clone()
                .map(|h| format!("tx {h}"))
                .unwrap_or_else(|| {
                    r.data
                        .as_ref()
                        .map(|d| format!("data {d}"))
                        .unwrap_or_else(|| "ok".into())
                })
        } else {
            format!(
                "{}: {}",
                r.code.clone().unwrap_or_default(),
                r.message.clone().unwrap_or_default()
            )
        };
        out.push_str(&format!(
            "\n  {} {} {what}",
            if r.success { "ok  " } else { "fail" },
            r.wallet_address
        ));
    }
    out
}

/// Polls with backoff until the intent ends; a progress line on a terminal.
pub(super) async fn wait_for(
    client: &Client,
    key: &str,
    id: &str,
    json_mode: bool,
) -> Result<Intent, Outcome> {
    let mut delay = Duration::from_millis(100);
    let tty = !json_mode && std::io::stderr().is_terminal();
    loop {
        let intent = client
            .intent_status(key, id)
            .await
            .map_err(Outcome::from_error)?;
        if actiongate_core::intents::has_ended(&intent) {
            if tty {
                eprintln!();
            }
            return Ok(intent);
        }
        if tty {
            eprint!(
                "\r{id}: queued, {} of {} executed",
                intent.executed, intent.total
            );
            let _ = std::io::stderr().flush();
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}

pub(super) fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

pub async fn run(g: Global, command: AgentCommand) -> Outcome {
    let client = match Client::new(&g.base()) {
        Ok(c) => c,
        Err(e) => return Outcome::from_error(e),
    };
    match dispatch(&g, &client, command).await {
        Ok(o) | Err(o) => o,
    }
}

async fn dispatch(g: &Global, client: &Client, command: AgentCommand) -> Result<Outcome, Outcome> {
    Ok(match command {
        AgentCommand::Actions {
            which: Some(ActionsCommand::Catalog),
        } => {
            let doc = client.catalog().await.map_err(Outcome::from_error)?;
            let mut text = format!(
                "{:<34} {:<8} {:<16} required params",
                "action", "enabled", "provider"
            );
            for a in &doc.actions {
                text.push_str(&format!(
                    "\n{:<34} {:<8} {:<16} {}",
                    a.action,
                    a.enabled,
                    a.provider_id,
                    a.required_params.join(", ")
                ));
            }
            Outcome::ok(to_value(&doc), text)
        }
        AgentCommand::Actions { which: None } => {
            let key = need_key()?;
            let list = client
                .actions(Some(&key))
                .await
                .map_err(Outcome::from_error)?;
            let text = if list.actions.is_empty() {
                "no action is allowed and enabled for this agent".to_owned()
            } else {
                list.actions
                    .iter()
                    .map(|a| format!("{:<34} {}", a.action, a.description))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            Outcome::ok(to_value(&list), text)
        }
        AgentCommand::Run(args) => {
            let key = need_key()?;
            let entry = catalog_entry(client, &args.action.action).await;
            let params = params_of(&args.action, entry.as_ref())?;
            let idem = args
                .idempotency_key
                .clone()
                .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
            let req = request(g, &args.action, key.clone(), params, Some(idem.clone()));
            let is_write = entry.as_ref().is_some_and(|a| !a.is_read());
            let path = if args.direct {
                "/api/v1/agent/execute"
            } else {
                "/api/v1/agent/execute-intent"
            };
            if is_write && !g.confirm_writes {
                return Ok(dry_run("POST", path, to_value(&req)));
            }
            if !g.json {
                eprintln!(
                    "idempotency key: {idem} (reuse it with --idempotency-key to retry safely)"
                );
            }
            if args.direct {
                let done = client
                    .execute_direct(&req)
                    .await
                    .map_err(Outcome::from_error)?;
                let text = format!(
                    "{}: {} {}",
                    done.status,
                    done.wallet_address,
                    done.tx_hash.clone().unwrap_or_default()
                );
                let mut data = to_value(&done);
                data["idempotencyKey"] = json!(idem);
                return Ok(Outcome::ok(data, text));
            }
            let submitted = client
                .execute_intent(&req)
                .await
                .map_err(Outcome::from_error)?;
            let intent = if args.wait {
                wait_for(client, &key, &submitted.intent_id, g.json).await?
            } else {
                submitted
            };
            let mut data = to_value(&intent);
            data["idempotencyKey"] = json!(idem);
            Outcome::ok(data, intent_text(&intent))
        }
        AgentCommand::IntentStatus { intent_id, wait } => {
            let key = need_key()?;
            let intent = if wait {
                wait_for(client, &key, &intent_id, g.json).await?
            } else {
                client
                    .intent_status(&key, &intent_id)
                    .await
                    .map_err(Outcome::from_error)?
            };
            Outcome::ok(to_value(&intent), intent_text(&intent))
        }
        AgentCommand::Preflight(args) => {
            let key = need_key()?;
            let entry = catalog_entry(client, &args.action.action).await;
            let params = params_of(&args.action, entry.as_ref())?;
            let req = request(g, &args.action, key, params, None);
            let report = client
                .preflight(&req, args.direct)
                .await
                .map_err(Outcome::from_error)?;
            let mut text = String::new();
            for c in &report.checks {
                let mark = match c.ok {
                    Some(true) => "pass",
                    Some(false) => "FAIL",
                    None => "skip",
                };
                text.push_str(&format!(
                    "{mark}  {:<12} {}{}\n",
                    c.name,
                    c.code
                        .as_deref()
                        .map(|c| format!("{c}: "))
                        .unwrap_or_default(),
                    c.detail
                ));
            }
            text.push_str(if report.ready {
                "ready: a run would pass these checks"
            } else {
                "not ready"
            });
            if report.ready {
                Outcome::ok(to_value(&report), text)
            } else {
                let failed = report.checks.iter().find(|c| c.ok == Some(false));
                if !g.json {
                    println!("{text}");
                }
                Outcome::Refused {
                    code: failed
                        .and_then(|c| c.code.clone())
                        .unwrap_or_else(|| "INVALID_REQUEST".into()),
                    error: "PREFLIGHT_FAILED".into(),
                    message: failed.map(|c| c.detail.clone()).unwrap_or_default(),
                }
            }
        }
        AgentCommand::BuildTx(args) => {
            let key = need_key()?;
            let entry = catalog_entry(client, &args.action.action).await;
            let params = params_of(&args.action, entry.as_ref())?;
            let req = BuildTxRequest {
                agent_api_key: key,
                action: args.action.action.clone(),
                params,
                chain_id: args.action.chain_id.unwrap_or_else(|| g.default_chain()),
                wallet_address: args.wallet_address.clone(),
                estimated_amount_usd: args.action.estimated_amount_usd,
            };
            let built = client.build_tx(&req).await.map_err(Outcome::from_error)?;
            let mut text = format!(
                "{} transaction(s) for chain {} to sign locally:",
                built.transactions.len(),
                built.chain_id
            );
            for (i, t) in built.transactions.iter().enumerate() {
                text.push_str(&format!(
                    "\n{}. {} (to {}, nonce {})",
                    i + 1,
                    t.description,
                    t.to,
                    t.nonce.as_deref().unwrap_or("-")
                ));
            }
            Outcome::ok(to_value(&built), text)
        }
        AgentCommand::Delegation { command } => delegation(g, client, command).await?,
        AgentCommand::Venue { command } => venue::venue(g, client, command).await?,
        AgentCommand::Login {
            email,
            code,
            accept_terms,
        } => login(g, client, &email, code, accept_terms).await?,
        AgentCommand::Logout => {
            // Revoke the owner session on the gateway it came from (best effort), then forget it here.
            let revoked = match credentials::load() {
                Some(s) if !s.owner_session.is_empty() => match Client::new(&s.base_url) {
                    Ok(c) => c.sign_out(&s.owner_session).await.is_ok(),
                    Err(_) => false,
                },
                _ => false,
            };
            let removed =
                credentials::remove().map_err(|e| Outcome::failed("LOCAL", e.to_string()))?;
            Outcome::ok(
                json!({"removed": removed, "sessionRevoked": revoked}),
                if removed {
                    "signed out"
                } else {
                    "no stored login"
                },
            )
        }
        AgentCommand::Whoami => {
            let (key, source) = credentials::agent_key().ok_or_else(|| {
                need_key()
                    .err()
                    .unwrap_or_else(|| Outcome::failed("LOCAL", ""))
            })?;
            let me = client.whoami(&key).await.map_err(Outcome::from_error)?;
            let text = format!(
                "agent {} ({}) of account {}, key from {source}, gateway {}",
                me.agent_id,
                me.agent_address,
                me.account_id,
                client.base_url()
            );
            if let Some(addr) = credentials::agent_address()
                && !addr.eq_ignore_ascii_case(&me.agent_address)
            {
                return Err(Outcome::failed(
                    "AGENT_IDENTITY_MISMATCH",
                    format!(
                        "ACTIONGATE_AGENT_ADDRESS is {addr}, but the key belongs to agent {} ({})",
                        me.agent_id, me.agent_address
                    ),
                ));
            }
            let mut data = to_value(&me);
            data["keySource"] = json!(source);
            data["baseUrl"] = json!(client.base_url());
            Outcome::ok(data, text)
        }
        AgentCommand::Personhood { command } => personhood(g, client, command).await?,
        AgentCommand::Approvals { command } => approvals(g, client, command).await?,
        AgentCommand::Audit { command } => approvals::audit(client, command).await?,
        AgentCommand::Credits {
            command: CreditsCommand::Balance,
        } => {
            let key = need_key()?;
            let b = client
                .credits_balance(&key)
                .await
                .map_err(Outcome::from_error)?;
            let text = format!(
                "{} credits ({} reserved); free requests today {}/{} (reset {})",
                b.balance,
                b.reserved,
                b.free_requests_used_today,
                b.free_requests_per_day,
                b.free_resets_at
            );
            Outcome::ok(to_value(&b), text)
        }
        AgentCommand::Credits {
            command:
                CreditsCommand::Buy {
                    sku,
                    user_address,
                    pay_key_file,
                    rpc_url,
                    x402,
                    invoice_id,
                    receipt,
                },
        } => {
            let key = need_key()?;
            if !g.confirm_writes {
                return Ok(dry_run(
                    "POST",
                    "/api/v1/agent/credits/buy-with-x402",
                    json!({"sku": sku, "userAddress": user_address}),
                ));
            }
            let payer = match &pay_key_file {
                Some(file) => Some(
                    crate::pay::Payer::from_file(file)
                        .map_err(|e| Outcome::failed("INVALID_REQUEST", e))?,
                ),
                None => None,
            };
            let user_address = user_address.or_else(|| payer.as_ref().map(|p| p.address()));
            let req = BuyCreditsRequest {
                sku: sku.clone(),
                user_address,
            };
            // Credits bought on the agent route are paid by a wallet of the account: link the local
            // key's wallet first (EIP-4361, signed by that key, with the owner's session).
            if let Some(p) = &payer
                && req.user_address.as_deref() == Some(p.address().as_str())
            {
                link_wallet(client, p).await?;
            }
            if x402 {
                let payer = payer.as_ref().ok_or_else(|| {
                    Outcome::failed("INVALID_REQUEST", "--x402 needs --pay-key-file")
                })?;
                let required = match client
                    .buy_credits(&key, &req, None)
                    .await
                    .map_err(Outcome::from_error)?
                {
                    Purchase::PaymentRequired {
                        requirements: Some(r),
                        ..
                    } => r,
                    Purchase::PaymentRequired {
                        requirements: None, ..
                    } => {
                        return Err(Outcome::failed(
                            "NOT_AVAILABLE",
                            "the gateway's 402 carries no x402 v2 requirements",
                        ));
                    }
                    Purchase::Paid(done) => return Ok(purchase_outcome(done)),
                };
                let header = payer
                    .x402_payment(&required)
                    .map_err(|e| Outcome::failed("PAYMENT_FAILED", e))?;
                return match client
                    .buy_credits_x402(&key, &req, &header)
                    .await
                    .map_err(Outcome::from_error)?
                {
                    Purchase::Paid(done) => Ok(purchase_outcome(done)),
                    Purchase::PaymentRequired { .. } => Err(Outcome::failed(
                        "PAYMENT_FAILED",
                        "the gateway asked for payment again",
                    )),
                };
            }
            let paid = match (invoice_id, receipt) {
                (Some(i), Some(r)) => (i, r),
                _ => {
                    let challenge = match client
                        .buy_credits(&key, &req, None)
                        .await
                        .map_err(Outcome::from_error)?
                    {
                        Purchase::PaymentRequired { challenge, .. } => challenge.x402_challenge,
                        Purchase::Paid(done) => return Ok(purchase_outcome(done)),
                    };
                    let (Some(payer), Some(rpc)) = (&payer, &rpc_url) else {
                        let text = format!(
                            "pay {} {} to {} on {}, then run again with --invoice-id {} --receipt <tx hash>",
                            challenge.amount,
                            challenge.currency,
                            challenge.recipient,
                            challenge.network,
                            challenge.invoice_id
                        );
                        return Ok(Outcome::Done {
                            code: "PAYMENT_REQUIRED",
                            data: json!({"x402Challenge": challenge}),
                            text,
                        });
                    };
                    let meta = client.x402_metadata().await.map_err(Outcome::from_error)?;
                    // The challenge's amount exactly (the price plus the invoice's tag), never the
                    // package price: a payment pays its own invoice only.
                    let atomic =
                        crate::pay::atomic_units(&challenge.amount, meta.currency.decimals)
                            .map_err(|e| Outcome::failed("PAYMENT_FAILED", e))?;
                    if !g.json {
                        eprintln!(
                            "paying {} {} to {} from {}",
                            challenge.amount,
                            challenge.currency,
                            challenge.recipient,
                            payer.address()
                        );
                    }
                    let hash = payer
                        .transfer(rpc, &meta.currency.address, &challenge.recipient, &atomic)
                        .await
                        .map_err(|e| Outcome::failed("PAYMENT_FAILED", e))?;
                    (challenge.invoice_id, hash)
                }
            };
            // Retry until the payment is confirmed (the gateway answers 402 with Retry-After until then).
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(120);
            loop {
                match client
                    .buy_credits(&key, &req, Some((&paid.0, &paid.1)))
                    .await
                    .map_err(Outcome::from_error)?
                {
                    Purchase::Paid(done) => break purchase_outcome(done),
                    Purchase::PaymentRequired { retry_after, .. } => {
                        if tokio::time::Instant::now() > deadline {
                            return Err(Outcome::failed(
                                "PAYMENT_PENDING",
                                format!(
                                    "{} is not confirmed yet; run again with --invoice-id {} --receipt {}",
                                    paid.1, paid.0, paid.1
                                ),
                            ));
                        }
                        tokio::time::sleep(std::time::Duration::from_secs(
                            retry_after.unwrap_or(2),
                        ))
                        .await;
                    }
                }
            }
        }
    })
}
