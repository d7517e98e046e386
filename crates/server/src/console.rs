//! The owner's web console at `/console` (issue 27): server-rendered HTML (maud), plain forms that
//! work without JavaScript, one embedded stylesheet; nothing is fetched from anywhere else. Signing
//! in takes the e-mail code and keeps the owner session in an HttpOnly, SameSite=Strict cookie
//! scoped to `/console`; every form posts back here and is refused when its `Origin` is another
//! site's. Each page calls the same core services as the REST routes and renders their answers.

use actiongate_api_types::identity::{EmailCompleteRequest, PolicyRequest};
use actiongate_core::OwnerContext;
use actiongate_core::states::{ApprovalState, DelegationStatus};
use axum::Form;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use maud::{DOCTYPE, Markup, html};
use serde::Deserialize;

use crate::http::AppState;

const COOKIE: &str = "actiongate_console";
const CSS: &str = include_str!("console.css");

/// The console's routes (not part of the API document).
pub fn routes() -> axum::Router<AppState> {
    axum::Router::new()
        .route("/console", get(home))
        .route("/console/", get(home))
        .route("/console/console.css", get(css))
        .route("/console/sign-in", post(sign_in))
        .route("/console/verify", post(verify))
        .route("/console/sign-out", post(sign_out))
        .route("/console/agents", post(create_agent))
        .route("/console/agents/{id}", get(agent_page))
        .route("/console/agents/{id}/policy", post(save_policy))
        .route("/console/agents/{id}/rotate-key", post(rotate_key))
        .route("/console/approvals", get(approvals_page))
        .route("/console/approvals/{id}/approve", post(approve))
        .route("/console/approvals/{id}/reject", post(reject))
        .route("/console/audit", get(audit_page))
        .route("/console/activity", get(activity_page))
        .route("/console/credits", get(credits_page))
        .route("/console/delegations", get(delegations_page))
        .route(
            "/console/delegations/{hash}/revoke",
            post(revoke_delegation),
        )
        .route("/console/audit/export", get(audit_export))
        .route("/console/webhooks", get(webhooks_page).post(create_webhook))
        .route("/console/webhooks/{id}", get(deliveries_page))
        .route("/console/webhooks/{id}/rotate-secret", post(rotate_webhook))
        .route("/console/webhooks/{id}/delete", post(delete_webhook))
}

async fn css() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        CSS,
    )
}

/// Every page: the frame, the navigation (when signed in), and a notice or an error.
fn page(
    title: &str,
    signed_in: bool,
    notice: Option<&str>,
    error: Option<&str>,
    body: Markup,
) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · actiongate" }
                link rel="stylesheet" href="/console/console.css";
            }
            body {
                a class="skip" href="#main" { "Skip to content" }
                header {
                    span class="brand" { "actiongate" }
                    @if signed_in {
                        nav aria-label="Console" {
                            a href="/console" { "Agents" }
                            a href="/console/approvals" { "Approvals" }
                            a href="/console/activity" { "Activity" }
                            a href="/console/credits" { "Credits" }
                            a href="/console/delegations" { "Delegations" }
                            a href="/console/webhooks" { "Webhooks" }
                            a href="/console/audit" { "Audit" }
                            form method="post" action="/console/sign-out" class="inline" {
                                button type="submit" class="link" { "Sign out" }
                            }
                        }
                    }
                }
                main id="main" {
                    h1 { (title) }
                    @if let Some(n) = notice { p class="notice" role="status" { (n) } }
                    @if let Some(e) = error { p class="error" role="alert" { (e) } }
                    (body)
                }
            }
        }
    };
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8")),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
                ),
            ),
            (header::REFERRER_POLICY, HeaderValue::from_static("same-origin")),
        ],
        markup.into_string(),
    )
        .into_response()
}

/// The signed-in owner, from the console's cookie; a request without one goes to the sign-in page.
struct ConsoleOwner(OwnerContext, String);

fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_owned())
}

impl FromRequestParts<AppState> for ConsoleOwner {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        // A form posted from another site is refused (the cookie is SameSite=Strict as well).
        if parts.method == axum::http::Method::POST {
            FromThisSite::from_request_parts(parts, state).await?;
        }
        let Some(token) = cookie_token(&parts.headers) else {
            return Err(Redirect::to("/console").into_response());
        };
        match state
            .gateway
            .identity()
            .authenticate_owner(Some(&token))
            .await
        {
            Ok(owner) => Ok(ConsoleOwner(owner, token)),
            Err(_) => Err(sign_in_page(Some("Your session ended; sign in again."))),
        }
    }
}

/// A form posted from this site ([`same_origin`]); one from another site is refused with 403.
/// The signed-in pages check it through [`ConsoleOwner`], the sign-in forms directly.
struct FromThisSite;

impl FromRequestParts<AppState> for FromThisSite {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, Response> {
        if same_origin(&parts.headers) {
            Ok(FromThisSite)
        } else {
            Err((StatusCode::FORBIDDEN, "cross-site form refused").into_response())
        }
    }
}

/// Whether a form comes from this site: its `Origin` (or, without one, its `Referer`) names this
/// request's host.
fn same_origin(headers: &HeaderMap) -> bool {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let from = headers
        .get(header::ORIGIN)
        .or_else(|| headers.get(header::REFERER))
        .and_then(|h| h.to_str().ok());
    match (host, from) {
        (Some(host), Some(from)) => url::Url::parse(from).is_ok_and(|u| {
            let authority = match u.port() {
                Some(p) => format!("{}:{p}", u.host_str().unwrap_or("")),
                None => u.host_str().unwrap_or("").to_owned(),
            };
            authority == host
        }),
        // No header to tell: a same-site navigation of an older client.
        (_, None) => true,
        (None, Some(_)) => false,
    }
}

fn sign_in_page(error: Option<&str>) -> Response {
    page(
        "Sign in",
        false,
        None,
        error,
        html! {
            p { "We e-mail you a 6-digit code." }
            form method="post" action="/console/sign-in" {
                label for="email" { "E-mail address" }
                input id="email" name="email" type="email" autocomplete="email" required;
                button type="submit" { "Send the code" }
            }
        },
    )
}

async fn home(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let owner = match cookie_token(&headers) {
        Some(token) => state
            .gateway
            .identity()
            .authenticate_owner(Some(&token))
            .await
            .ok(),
        None => None,
    };
    let Some(owner) = owner else {
        return sign_in_page(None);
    };
    agents_page(&state, &owner, None, None).await
}

#[derive(Deserialize)]
struct EmailForm {
    email: String,
}

async fn sign_in(
    State(state): State<AppState>,
    _: FromThisSite,
    Form(f): Form<EmailForm>,
) -> Response {
    match state
        .gateway
        .identity()
        .start_email_onboarding(&f.email)
        .await
    {
        Ok(started) => page(
            "Enter the code",
            false,
            Some(&format!("A code is on its way to {}.", started.email)),
            None,
            code_form(&started.email),
        ),
        Err(e) => sign_in_page(Some(&e.message)),
    }
}

fn code_form(email: &str) -> Markup {
    html! {
        form method="post" action="/console/verify" {
            input type="hidden" name="email" value=(email);
            label for="code" { "6-digit code" }
            input id="code" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" required;
            div class="check" {
                input id="terms" name="terms" type="checkbox" value="yes" required;
                label for="terms" { "I accept the terms of service" }
            }
            button type="submit" { "Sign in" }
        }
    }
}

#[derive(Deserialize)]
struct CodeForm {
    email: String,
    code: String,
    terms: Option<String>,
}

/// Whether the console is reached on this machine (plain HTTP to a loopback name): its cookie then
/// goes without `Secure`, which browsers would not send back over plain HTTP; elsewhere it is
/// reached over TLS and the cookie is `Secure`.
fn loopback(headers: &HeaderMap) -> bool {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    };
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
}

async fn verify(
    State(state): State<AppState>,
    headers: HeaderMap,
    _: FromThisSite,
    Form(f): Form<CodeForm>,
) -> Response {
    let req = EmailCompleteRequest {
        email: f.email.clone(),
        code: f.code,
        accept_terms: Some(serde_json::Value::Bool(f.terms.as_deref() == Some("yes"))),
    };
    match state
        .gateway
        .identity()
        .complete_email_onboarding(&req)
        .await
    {
        Ok(done) => {
            let secure = if loopback(&headers) { "" } else { "; Secure" };
            let cookie = format!(
                "{COOKIE}={}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
                done.session.token,
                state.gateway.settings().session_ttl.whole_seconds()
            );
            let mut resp = Redirect::to("/console").into_response();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                resp.headers_mut().insert(header::SET_COOKIE, v);
            }
            resp
        }
        Err(e) => page(
            "Enter the code",
            false,
            None,
            Some(&e.message),
            code_form(&f.email),
        ),
    }
}

async fn sign_out(State(state): State<AppState>, ConsoleOwner(_, token): ConsoleOwner) -> Response {
    let _ = state.gateway.identity().sign_out(Some(&token)).await;
    let mut resp = Redirect::to("/console").into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "actiongate_console=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0",
        ),
    );
    resp
}

async fn agents_page(
    state: &AppState,
    owner: &OwnerContext,
    notice: Option<&str>,
    shown_key: Option<(&str, &str)>,
) -> Response {
    let agents = match state.gateway.identity().list_agents(owner).await {
        Ok(a) => a.agents,
        Err(e) => return page("Agents", true, None, Some(&e.message), html! {}),
    };
    let pending = state
        .gateway
        .approvals()
        .list(owner, None)
        .await
        .map(|l| l.approvals.len())
        .unwrap_or(0);
    page(
        "Agents",
        true,
        notice,
        None,
        html! {
            @if pending > 0 {
                p class="notice" { a href="/console/approvals" { (pending) " intent(s) wait for your approval" } }
            }
            @if let Some((agent, key)) = shown_key {
                section class="key" aria-label="New agent key" {
                    p { "The key of agent " code { (agent) } ". It is shown once: copy it now." }
                    p { code class="secret" { (key) } }
                }
            }
            table {
                caption { "Your agents" }
                thead { tr { th scope="col" { "Name" } th scope="col" { "Agent" } th scope="col" { "Wallet" } th scope="col" { "Key rotated" } } }
                tbody {
                    @for a in &agents {
                        tr {
                            td { a href={ "/console/agents/" (a.agent_id) } { (a.name.clone().unwrap_or_else(|| "unnamed".into())) } }
                            td { code { (a.agent_id) } }
                            td { code { (a.agent_address) } }
                            td { (a.key_rotated_at.clone().unwrap_or_else(|| "never".into())) }
                        }
                    }
                }
            }
            form method="post" action="/console/agents" {
                label for="name" { "New agent's name" }
                input id="name" name="name" maxlength="100";
                button type="submit" { "Create an agent" }
            }
        },
    )
}

#[derive(Deserialize)]
struct NameForm {
    name: Option<String>,
}

async fn create_agent(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
    Form(f): Form<NameForm>,
) -> Response {
    match state.gateway.identity().create_agent(&owner, f.name).await {
        Ok(issued) => {
            let b = issued.bootstrap;
            agents_page(
                &state,
                &owner,
                Some("Agent created."),
                Some((&b.agent_id, &b.agent_api_key)),
            )
            .await
        }
        Err(e) => agents_page(&state, &owner, Some(&e.message), None).await,
    }
}

async fn rotate_key(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
    Path(id): Path<String>,
) -> Response {
    match state.gateway.identity().rotate_agent_key(&owner, &id).await {
        Ok(issued) => {
            let b = issued.bootstrap;
            agents_page(
                &state,
                &owner,
                Some("Key rotated: the old key is refused from now on."),
                Some((&b.agent_id, &b.agent_api_key)),
            )
            .await
        }
        Err(e) => agents_page(&state, &owner, Some(&e.message), None).await,
    }
}

async fn agent_page(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
    Path(id): Path<String>,
) -> Response {
    policy_page(&state, &owner, &id, None, None).await
}

async fn policy_page(
    state: &AppState,
    owner: &OwnerContext,
    id: &str,
    notice: Option<&str>,
    error: Option<&str>,
) -> Response {
    let policy = match state.gateway.identity().get_policy(owner, id).await {
        Ok(p) => p,
        Err(e) => return page("Agent", true, None, Some(&e.message), html! {}),
    };
    let actions = &state.gateway.catalog().document().actions;
    let opt = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    page(
        "Policy",
        true,
        notice,
        error,
        html! {
            p { "Agent " code { (id) } }
            form method="post" action={ "/console/agents/" (id) "/policy" } {
                fieldset {
                    legend { "Limits" }
                    label for="daily" { "Daily limit (USD)" }
                    input id="daily" name="dailyLimitUsd" inputmode="decimal" required value=(policy.daily_limit_usd);
                    label for="cap" { "Per-action cap (USD, empty: none)" }
                    input id="cap" name="maxAmountUsdPerAction" inputmode="decimal" value=(opt(policy.max_amount_usd_per_action));
                    label for="approval" { "Ask me to approve writes above (USD, empty: never)" }
                    input id="approval" name="approvalAboveUsd" inputmode="decimal" value=(opt(policy.approval_above_usd));
                    label for="hf" { "Minimum health factor (1 to 100)" }
                    input id="hf" name="minHealthFactor" inputmode="decimal" value=(policy.min_health_factor);
                }
                fieldset {
                    legend { "Allowed actions" }
                    @for a in actions.iter().filter(|a| a.enabled) {
                        div class="check" {
                            input type="checkbox" id={ "a-" (a.action) } name="allowed" value=(a.action)
                                checked[policy.allowed_actions.iter().any(|n| n == &a.action)];
                            label for={ "a-" (a.action) } { (a.action) @if a.max_amount_usd.is_some_and(|m| m > 0.0) { " (write)" } }
                        }
                    }
                }
                button type="submit" { "Save the policy" }
            }
            form method="post" action={ "/console/agents/" (id) "/rotate-key" } {
                button type="submit" class="secondary" { "Rotate this agent's key" }
            }
        },
    )
}

/// A decimal field of a form: empty is none; anything else must be a number.
fn number(field: &str, text: Option<&str>) -> Result<Option<f64>, String> {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t) => t
            .parse::<f64>()
            .map(Some)
            .map_err(|_| format!("{field} must be a number.")),
    }
}

async fn save_policy(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
    Path(id): Path<String>,
    body: String,
) -> Response {
    // Repeated `allowed` fields: parsed by hand (serde_urlencoded takes one value a key).
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let get = |k: &str| {
        pairs
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    let parsed = (|| -> Result<PolicyRequest, String> {
        Ok(PolicyRequest {
            allowed_actions: pairs
                .iter()
                .filter(|(k, _)| k == "allowed")
                .map(|(_, v)| v.clone())
                .collect(),
            daily_limit_usd: number("The daily limit", get("dailyLimitUsd"))?.unwrap_or(0.0),
            max_amount_usd_per_action: number("The per-action cap", get("maxAmountUsdPerAction"))?,
            min_health_factor: number("The minimum health factor", get("minHealthFactor"))?,
            approval_above_usd: number("The approval threshold", get("approvalAboveUsd"))?,
        })
    })();
    let req = match parsed {
        Ok(r) => r,
        Err(message) => return policy_page(&state, &owner, &id, None, Some(&message)).await,
    };
    match state.gateway.identity().put_policy(&owner, &id, &req).await {
        Ok(_) => policy_page(&state, &owner, &id, Some("Policy saved."), None).await,
        Err(e) => policy_page(&state, &owner, &id, None, Some(&e.message)).await,
    }
}

#[derive(Deserialize)]
struct StateQuery {
    state: Option<String>,
}

async fn approvals_page(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
    Query(q): Query<StateQuery>,
) -> Response {
    render_approvals(&state, &owner, q.state.as_deref(), None, None).await
}

async fn render_approvals(
    state: &AppState,
    owner: &OwnerContext,
    which: Option<&str>,
    notice: Option<&str>,
    error: Option<&str>,
) -> Response {
    let list = match state.gateway.approvals().list(owner, which).await {
        Ok(l) => l.approvals,
        Err(e) => return page("Approvals", true, None, Some(&e.message), html! {}),
    };
    let which = which.unwrap_or("pending");
    page(
        "Approvals",
        true,
        notice,
        error,
        html! {
            nav aria-label="Approval states" class="tabs" {
                @for s in ["pending", "approved", "rejected", "expired"] {
                    a href={ "/console/approvals?state=" (s) } aria-current=[(s == which).then_some("page")] { (s) }
                }
            }
            @if list.is_empty() { p { "No " (which) " approvals." } }
            @for a in &list {
                article class="approval" aria-labelledby={ "t-" (a.intent_id) } {
                    h2 id={ "t-" (a.intent_id) } { (a.action) " for " (a.amount_usd) " USD" }
                    dl {
                        dt { "Intent" } dd { code { (a.intent_id) } }
                        dt { "Agent" } dd { code { (a.agent_id) } }
                        dt { "Chain" } dd { (a.chain_id) }
                        dt { "Params" } dd { code { (a.params) } }
                        dt { "Asked" } dd { (a.approval.requested_at) }
                        dt { "Expires" } dd { (a.approval.expires_at) }
                        dt { "Status" } dd { (a.approval.state) ", intent " (a.status) }
                        @if let Some(r) = &a.approval.reason { dt { "Reason" } dd { (r) } }
                    }
                    @if a.approval.state == ApprovalState::Pending.as_str() {
                        form method="post" action={ "/console/approvals/" (a.intent_id) "/approve" } class="inline" {
                            button type="submit" { "Approve" }
                        }
                        form method="post" action={ "/console/approvals/" (a.intent_id) "/reject" } class="inline" {
                            label for={ "r-" (a.intent_id) } { "Reason (optional)" }
                            input id={ "r-" (a.intent_id) } name="reason" maxlength="500";
                            button type="submit" class="danger" { "Reject" }
                        }
                    }
                }
            }
        },
    )
}

async fn approve(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
    Path(id): Path<String>,
) -> Response {
    match state.gateway.approvals().approve(&owner, &id).await {
        Ok(_) => render_approvals(&state, &owner, None, Some("Approved: it runs now."), None).await,
        Err(e) => render_approvals(&state, &owner, None, None, Some(&e.message)).await,
    }
}

#[derive(Deserialize)]
struct ReasonForm {
    reason: Option<String>,
}

async fn reject(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
    Path(id): Path<String>,
    Form(f): Form<ReasonForm>,
) -> Response {
    match state
        .gateway
        .approvals()
        .reject(&owner, &id, f.reason.as_deref())
        .await
    {
        Ok(_) => {
            render_approvals(
                &state,
                &owner,
                None,
                Some("Rejected: nothing was sent."),
                None,
            )
            .await
        }
        Err(e) => render_approvals(&state, &owner, None, None, Some(&e.message)).await,
    }
}

#[derive(Deserialize)]
struct VerifyQuery {
    verify: Option<String>,
}

async fn audit_page(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
    Query(q): Query<VerifyQuery>,
) -> Response {
    let verdict = match q.verify {
        Some(_) => Some(state.gateway.audit().verify(&owner.account_id).await),
        None => None,
    };
    page(
        "Audit trail",
        true,
        None,
        None,
        html! {
            p { "Every decision about your account, each entry chained to the one before it." }
            ul {
                li { a href="/console/audit/export?format=csv" download="audit.csv" { "Export as CSV" } }
                li { a href="/console/audit/export?format=jsonl" download="audit.jsonl" { "Export as JSON lines" } }
            }
            form method="get" action="/console/audit" {
                input type="hidden" name="verify" value="1";
                button type="submit" { "Verify the chain" }
            }
            @match verdict {
                Some(Ok(v)) if v.ok => p class="notice" role="status" { "The chain is intact: " (v.entries) " entries." },
                Some(Ok(v)) => p class="error" role="alert" {
                    "The chain is broken at entry " (v.broken_at.unwrap_or(0)) ": " (v.reason.unwrap_or_default()) "."
                },
                Some(Err(e)) => p class="error" role="alert" { (e.message) },
                None => {},
            }
        },
    )
}

async fn audit_export(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
    Query(q): Query<crate::http::audit::ExportQuery>,
) -> Response {
    match crate::http::audit::stream_export(&state, owner, q).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn activity_page(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
) -> Response {
    let intents = match state.gateway.intents().account_intents(&owner).await {
        Ok(i) => i.intents,
        Err(e) => return page("Activity", true, None, Some(&e.message), html! {}),
    };
    page(
        "Activity",
        true,
        None,
        None,
        html! {
            @if intents.is_empty() { p { "No intents yet." } }
            h2 { "Your agents' latest intents" }
            @for i in &intents {
                article class="approval" aria-label={ "Intent " (i.intent.intent_id) } {
                    dl {
                        dt { "When" } dd { (i.created_at) }
                        dt { "Action" } dd { (i.action) " (" (i.lane) ")" }
                        dt { "Agent" } dd { code { (i.agent_id) } }
                        dt { "Intent" } dd { code { (i.intent.intent_id) } }
                        dt { "Status" } dd {
                            (i.intent.status)
                            @if let Some(a) = &i.intent.approval { " · approval " (a.state) }
                        }
                        @for r in &i.intent.results {
                            dt { "Result" } dd {
                                @if r.success { "ok" } @else { (r.code.clone().unwrap_or_default()) }
                                @if let Some(tx) = &r.tx_hash { " · tx " code { (tx) } }
                            }
                        }
                    }
                }
            }
        },
    )
}

async fn credits_page(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
) -> Response {
    let account = match state.gateway.credits().owner_credits(&owner).await {
        Ok(c) => c,
        Err(e) => return page("Credits", true, None, Some(&e.message), html! {}),
    };
    let packages = state
        .gateway
        .credits()
        .x402_metadata()
        .map(|m| m.packages)
        .unwrap_or_default();
    page(
        "Credits",
        true,
        None,
        None,
        html! {
            p class="balance" { "Balance " strong { (account.balance) } " credits, " (account.reserved) " held for intents that have not ended." }
            @if !packages.is_empty() {
                table {
                    caption { "Packages (bought with x402: actiongate credits buy)" }
                    thead { tr { th scope="col" { "Package" } th scope="col" { "Credits" } th scope="col" { "Price" } } }
                    tbody { @for p in &packages { tr { td { (p.sku) } td { (p.credits) } td { (p.price) } } } }
                }
            }
            table {
                caption { "Ledger, newest first" }
                thead { tr {
                    th scope="col" { "When" } th scope="col" { "Entry" } th scope="col" { "Balance" }
                    th scope="col" { "Held" } th scope="col" { "Why" }
                } }
                tbody {
                    @for l in &account.ledger {
                        tr {
                            td { (l.created_at) }
                            td { (l.kind) }
                            td { (l.balance_before) " → " (l.balance_after) }
                            td { (l.reserved_before) " → " (l.reserved_after) }
                            td { (l.reason) }
                        }
                    }
                }
            }
        },
    )
}

async fn delegations_page(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
) -> Response {
    render_delegations(&state, &owner, None, None).await
}

async fn render_delegations(
    state: &AppState,
    owner: &OwnerContext,
    notice: Option<&str>,
    error: Option<&str>,
) -> Response {
    let list = match state.gateway.delegations().owner_delegations(owner).await {
        Ok(l) => l.delegations,
        Err(e) => return page("Delegations", true, None, Some(&e.message), html! {}),
    };
    page(
        "Delegations",
        true,
        notice,
        error,
        html! {
            p { "Users who delegated to your agents (ERC-7710). Revoking one here stops your agents from using it at once; the user's own onchain revocation is theirs to send." }
            @if list.is_empty() { p { "No delegations yet." } }
            @for d in &list {
                article class="approval" aria-label={ "Delegation " (d.hash) } {
                    dl {
                        dt { "Delegator" } dd { code { (d.delegator) } }
                        dt { "Agent" } dd { code { (d.agent_id) } }
                        dt { "Chain" } dd { (d.chain_id) }
                        dt { "Status" } dd { (d.status) }
                        dt { "Hash" } dd { code { (d.hash) } }
                        @if let Some(e) = &d.expires_at { dt { "Until" } dd { (e) } }
                    }
                    @if d.status == DelegationStatus::Active.as_str() {
                        form method="post" action={ "/console/delegations/" (d.hash) "/revoke" } {
                            button type="submit" class="danger" { "Revoke for my agents" }
                        }
                    }
                }
            }
        },
    )
}

async fn revoke_delegation(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
    Path(hash): Path<String>,
) -> Response {
    match state
        .gateway
        .delegations()
        .owner_revoke(&owner, &hash)
        .await
    {
        Ok(_) => {
            render_delegations(
                &state,
                &owner,
                Some("Revoked: your agents no longer use this delegation."),
                None,
            )
            .await
        }
        Err(e) => render_delegations(&state, &owner, None, Some(&e.message)).await,
    }
}

async fn webhooks_page(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
) -> Response {
    render_webhooks(&state, &owner, None, None, None).await
}

/// The endpoints, a form to register one, and (once, after a registration or a rotation) the
/// secret that signs its deliveries.
async fn render_webhooks(
    state: &AppState,
    owner: &OwnerContext,
    notice: Option<&str>,
    error: Option<&str>,
    shown_secret: Option<(&str, &str)>,
) -> Response {
    let list = match state.gateway.webhooks().list(owner).await {
        Ok(l) => l.webhooks,
        Err(e) => return page("Webhooks", true, None, Some(&e.message), html! {}),
    };
    page(
        "Webhooks",
        true,
        notice,
        error,
        html! {
            p { "Endpoints the gateway posts your account's events to, each signed with its secret (header " code { "actiongate-signature" } "), retried for a day until it answers 2xx." }
            @if let Some((id, secret)) = shown_secret {
                section class="key" aria-label="Webhook secret" {
                    p { "The signing secret of " code { (id) } ". It is shown once: copy it now." }
                    p { code class="secret" { (secret) } }
                }
            }
            @if list.is_empty() { p { "No webhooks yet." } }
            @for w in &list {
                article class="approval" aria-labelledby={ "w-" (w.id) } {
                    h2 id={ "w-" (w.id) } { (w.url) }
                    dl {
                        dt { "Id" } dd { code { (w.id) } }
                        dt { "Events" } dd { (w.events.join(", ")) }
                        dt { "Since" } dd { (w.created_at) }
                    }
                    p { a href={ "/console/webhooks/" (w.id) } { "Deliveries" } }
                    form method="post" action={ "/console/webhooks/" (w.id) "/rotate-secret" } class="inline" {
                        button type="submit" { "Rotate the secret" }
                    }
                    form method="post" action={ "/console/webhooks/" (w.id) "/delete" } class="inline" {
                        button type="submit" class="danger" { "Delete" }
                    }
                }
            }
            form method="post" action="/console/webhooks" {
                h2 { "Register an endpoint" }
                label for="url" { "URL" }
                input id="url" name="url" type="url" maxlength="2000" required placeholder="https://example.com/hooks/actiongate";
                fieldset {
                    legend { "Events" }
                    @for t in actiongate_core::audit::EVENT_TYPES {
                        div class="check" {
                            input id={ "e-" (t) } name="events" type="checkbox" value=(t) checked;
                            label for={ "e-" (t) } { (t) }
                        }
                    }
                }
                button type="submit" { "Register" }
            }
        },
    )
}

/// A form's fields in order, repeated names kept (the event checkboxes).
type Fields = Vec<(String, String)>;

async fn create_webhook(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
    Form(fields): Form<Fields>,
) -> Response {
    let mut req = actiongate_api_types::webhooks::WebhookRequest {
        url: String::new(),
        events: Vec::new(),
    };
    for (name, value) in fields {
        match name.as_str() {
            "url" => req.url = value,
            "events" => req.events.push(value),
            _ => {}
        }
    }
    match state.gateway.webhooks().create(&owner, &req).await {
        Ok(created) => {
            render_webhooks(
                &state,
                &owner,
                Some("Webhook registered."),
                None,
                Some((&created.webhook.id, &created.secret)),
            )
            .await
        }
        Err(e) => render_webhooks(&state, &owner, None, Some(&e.message), None).await,
    }
}

async fn rotate_webhook(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
    Path(id): Path<String>,
) -> Response {
    match state.gateway.webhooks().rotate_secret(&owner, &id).await {
        Ok(created) => {
            render_webhooks(
                &state,
                &owner,
                Some("Secret rotated: the old one signs nothing from now on."),
                None,
                Some((&created.webhook.id, &created.secret)),
            )
            .await
        }
        Err(e) => render_webhooks(&state, &owner, None, Some(&e.message), None).await,
    }
}

async fn delete_webhook(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
    Path(id): Path<String>,
) -> Response {
    match state.gateway.webhooks().delete(&owner, &id).await {
        Ok(_) => {
            render_webhooks(
                &state,
                &owner,
                Some("Webhook deleted: nothing more is posted to it."),
                None,
                None,
            )
            .await
        }
        Err(e) => render_webhooks(&state, &owner, None, Some(&e.message), None).await,
    }
}

async fn deliveries_page(
    State(state): State<AppState>,
    ConsoleOwner(owner, _): ConsoleOwner,
    Path(id): Path<String>,
) -> Response {
    let list = match state.gateway.webhooks().deliveries(&owner, &id).await {
        Ok(l) => l.deliveries,
        Err(e) => return page("Deliveries", true, None, Some(&e.message), html! {}),
    };
    page(
        "Deliveries",
        true,
        None,
        None,
        html! {
            p { "The latest deliveries to " code { (id) } ", newest first. " a href="/console/webhooks" { "Back to the webhooks" } }
            @if list.is_empty() { p { "Nothing delivered yet." } }
            @else {
                table {
                    caption { "Deliveries" }
                    thead { tr {
                        th scope="col" { "Event" } th scope="col" { "Type" } th scope="col" { "State" }
                        th scope="col" { "Attempts" } th scope="col" { "Last answer" } th scope="col" { "When" }
                    } }
                    tbody {
                        @for d in &list {
                            tr {
                                td { code { (d.event_id) } }
                                td { (d.event_type) }
                                td { (d.state) }
                                td { (d.attempts) }
                                td {
                                    @if let Some(s) = d.last_status { (s) }
                                    @if let Some(e) = &d.last_error { " " (e) }
                                }
                                td { (d.delivered_at.clone().or_else(|| d.next_attempt_at.clone()).unwrap_or_else(|| d.created_at.clone())) }
                            }
                        }
                    }
                }
            }
        },
    )
}
