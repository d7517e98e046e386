//! `actiongate login`: e-mail onboarding from the terminal; the key is stored (0600), never printed.

use std::io::{BufRead, IsTerminal, Write};

use actiongate_api_types::identity::EmailCompleteRequest;
use actiongate_client::Client;
use serde_json::json;

use crate::agent::Global;
use crate::credentials;
use crate::output::Outcome;

pub(super) fn prompt(question: &str) -> Result<String, Outcome> {
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Outcome::failed("LOCAL", e.to_string()))?;
    Ok(line.trim().to_owned())
}

pub(super) async fn login(
    g: &Global,
    client: &Client,
    email: &str,
    code: Option<String>,
    accept_terms: bool,
) -> Result<Outcome, Outcome> {
    let code = match code {
        Some(c) => c,
        None => {
            let started = client
                .email_start(email)
                .await
                .map_err(Outcome::from_error)?;
            if g.json && !std::io::stdin().is_terminal() {
                return Ok(Outcome::Done {
                    code: "CODE_SENT",
                    data: json!({"email": started.email, "expiresAt": started.expires_at}),
                    text: String::new(),
                });
            }
            prompt(&format!("A code was sent to {}. Code: ", started.email))?
        }
    };
    let accepted = accept_terms || {
        let answer = prompt("Do you accept the actiongate terms of service? [y/N] ")?;
        matches!(answer.to_ascii_lowercase().as_str(), "y" | "yes")
    };
    if !accepted {
        return Err(Outcome::Refused {
            code: "TERMS_NOT_ACCEPTED".into(),
            error: "INVALID_REQUEST".into(),
            message: "The terms were not accepted; nothing was sent.".into(),
        });
    }
    let done = client
        .email_complete(&EmailCompleteRequest {
            email: email.to_owned(),
            code,
            accept_terms: Some(json!(true)),
        })
        .await
        .map_err(Outcome::from_error)?;
    let previous = credentials::load();
    let (key, agent_id, address) = match &done.bootstrap {
        Some(b) => (
            Some(b.agent_api_key.clone()),
            Some(b.agent_id.clone()),
            Some(b.agent_address.clone()),
        ),
        // A returning owner: keep the key this machine already has for the same gateway, if any.
        None => match previous
            .filter(|p| p.base_url == client.base_url() && p.email == done.account.email)
        {
            Some(p) => (p.agent_api_key, p.agent_id, p.agent_address),
            None => (None, None, None),
        },
    };
    let stored = credentials::Stored {
        base_url: client.base_url().to_owned(),
        agent_api_key: key.clone(),
        agent_id: agent_id.clone(),
        agent_address: address.clone(),
        email: done.account.email.clone(),
        owner_session: done.session.token.clone(),
        session_expires_at: done.session.expires_at.clone(),
    };
    let path = credentials::save(&stored)
        .map_err(|e| Outcome::failed("LOCAL", format!("cannot store the login: {e}")))?;
    let data = json!({
        "accountId": done.account.account_id,
        "email": done.account.email,
        "created": done.account.created,
        "agentId": agent_id,
        "agentAddress": address,
        "hasAgentKey": key.is_some(),
        "stored": path.display().to_string(),
    });
    let text = match (&agent_id, key.is_some()) {
        (Some(id), true) => format!(
            "signed in as {}; agent {id} ready (key stored in {})",
            done.account.email,
            path.display()
        ),
        _ => format!(
            "signed in as {}; no agent key on this machine (keys are shown once): create one with the owner API",
            done.account.email
        ),
    };
    Ok(Outcome::ok(data, text))
}
