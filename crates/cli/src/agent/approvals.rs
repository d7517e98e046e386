//! `actiongate approvals …` and `actiongate audit …`: the owner's approval queue and audit trail,
//! one typed call of the client each.

use actiongate_api_types::intents::{ApprovalItem, RejectRequest};
use actiongate_client::Client;
use actiongate_client::routes;
use serde_json::json;

use crate::agent::{ApprovalsCommand, AuditCommand, Global, dry_run, need_session, to_value};
use crate::output::Outcome;

fn item_text(a: &ApprovalItem) -> String {
    let mut line = format!(
        "{} {}: {} on chain {} for {} USD by agent {} ({}, intent {}; expires {})",
        a.approval.state,
        a.intent_id,
        a.action,
        a.chain_id,
        a.amount_usd,
        a.agent_id,
        a.lane,
        a.status,
        a.approval.expires_at
    );
    if let Some(reason) = &a.approval.reason {
        line.push_str(&format!("; reason: {reason}"));
    }
    line
}

pub(super) async fn approvals(
    g: &Global,
    client: &Client,
    command: ApprovalsCommand,
) -> Result<Outcome, Outcome> {
    let session = need_session("The approval queue")?;
    let failed = Outcome::from_error;
    Ok(match command {
        ApprovalsCommand::List { state } => {
            let list = client
                .approvals(&session, state.as_deref())
                .await
                .map_err(failed)?;
            let text = match list.approvals.is_empty() {
                true => format!("No {} approvals.", state.as_deref().unwrap_or("pending")),
                false => list
                    .approvals
                    .iter()
                    .map(item_text)
                    .collect::<Vec<_>>()
                    .join("\n"),
            };
            Outcome::ok(to_value(&list), text)
        }
        ApprovalsCommand::Approve { intent_id } => {
            if !g.confirm_writes {
                let path = routes::APPROVE.path.replace("{intentId}", &intent_id);
                return Ok(dry_run(routes::APPROVE.method.as_str(), &path, json!({})));
            }
            let a = client.approve(&session, &intent_id).await.map_err(failed)?;
            Outcome::ok(to_value(&a), item_text(&a))
        }
        ApprovalsCommand::Reject { intent_id, reason } => {
            let req = RejectRequest { reason };
            if !g.confirm_writes {
                let path = routes::REJECT.path.replace("{intentId}", &intent_id);
                return Ok(dry_run(
                    routes::REJECT.method.as_str(),
                    &path,
                    to_value(&req),
                ));
            }
            let a = client
                .reject(&session, &intent_id, &req)
                .await
                .map_err(failed)?;
            Outcome::ok(to_value(&a), item_text(&a))
        }
    })
}

pub(super) async fn audit(client: &Client, command: AuditCommand) -> Result<Outcome, Outcome> {
    let session = need_session("The audit trail")?;
    let failed = Outcome::from_error;
    Ok(match command {
        AuditCommand::Verify => {
            let v = client.audit_verify(&session).await.map_err(failed)?;
            let text = match (&v.broken_at, &v.reason) {
                (Some(at), Some(reason)) => {
                    format!("The audit chain is broken at entry {at}: {reason}.")
                }
                _ => format!("The audit chain is intact: {} entries.", v.entries),
            };
            Outcome::ok(to_value(&v), text)
        }
        AuditCommand::Export {
            from,
            to,
            format,
            output,
        } => {
            let mut query: Vec<(&str, &str)> = Vec::new();
            for (k, v) in [("from", &from), ("to", &to), ("format", &format)] {
                if let Some(v) = v {
                    query.push((k, v.as_str()));
                }
            }
            let written = match &output {
                Some(path) => {
                    let mut file = std::fs::File::create(path).map_err(|e| {
                        Outcome::failed("LOCAL", format!("cannot write {}: {e}", path.display()))
                    })?;
                    client
                        .audit_export(&session, &query, &mut file)
                        .await
                        .map_err(failed)?
                }
                None => {
                    // The export itself is the output.
                    client
                        .audit_export(&session, &query, &mut std::io::stdout())
                        .await
                        .map_err(failed)?;
                    return Ok(Outcome::Streamed);
                }
            };
            let path = output.map(|p| p.display().to_string()).unwrap_or_default();
            Outcome::ok(
                json!({"bytes": written, "output": path}),
                format!("{written} bytes of audit entries written to {path}."),
            )
        }
    })
}
