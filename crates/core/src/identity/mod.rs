//! Identity: e-mail onboarding, agent keys and the cache of agents by key, owner sessions, agents,
//! and their policies ([`policy`]). Every other capability authenticates through [`Identity`].

mod policy;

use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use actiongate_api_types::identity::{
    AccountSummary, AgentBootstrap, AgentKeyIssued, AgentListResponse, AgentView,
    EmailCompleteRequest, EmailCompleteResponse, EmailStartResponse, OwnerSession,
};
use serde_json::json;
use zeroize::Zeroizing;

use crate::audit::{actor, kinds};
use crate::catalog::Catalog;
use crate::clock::Clock;
use crate::clock::{from_millis, rfc3339, to_millis};
use crate::crypto::Keyring;
use crate::crypto::{self, AGENT_KEY_PREFIX, OWNER_SESSION_PREFIX, SecretHash};
use crate::error::{Error, Result};
use crate::identity::policy::{canonical_names, health_factor_bps};
use crate::limits::Limits;
use crate::mail::{Mailer, OutgoingMail};
use crate::money::usd_to_micros;
use crate::settings::Settings;
use crate::store::Store;
use crate::store::{
    AgentRecord, AuditEvent, CheckBudget, EmailChallenge, NewAgent, Onboarding, OnboardingOutcome,
    PolicyRecord,
};

const HASH_AGENT_KEY: &str = "agent-key";
const HASH_SESSION: &str = "owner-session";
const HASH_EMAIL_CODE: &str = "email-code";
const HASH_BEARER: &str = "bearer";
/// How soon a new code may replace a live one.
const RESEND_COOLDOWN_MS: i64 = 30_000;
/// The window of an address's code check budget.
const DAY_MS: i64 = 86_400_000;

/// An authenticated agent.
#[derive(Debug, Clone)]
pub struct AgentContext {
    pub agent: AgentRecord,
}

/// An authenticated owner.
#[derive(Debug, Clone)]
pub struct OwnerContext {
    pub account_id: String,
}

/// An agent and its stored policy as read for a submit, with the hash of the key that found them.
#[derive(Debug, Clone)]
pub(crate) struct AgentBasis {
    pub agent: AgentContext,
    pub policy: Option<PolicyRecord>,
    pub key_hash: SecretHash,
}

/// Agents with their stored policies by key hash, so that a submit need not read them. An entry is
/// trusted only for an acceptance, which the accepting transaction confirms against the database
/// (`AcceptOutcome::Stale` otherwise); a refusal is always decided again on a fresh read. Entries
/// live [`AGENT_CACHE_TTL`]; the map is emptied when it holds [`AGENT_CACHE_MAX`].
#[derive(Default)]
struct AgentCache {
    entries:
        std::sync::Mutex<std::collections::HashMap<SecretHash, (std::time::Instant, AgentBasis)>>,
}

const AGENT_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(30);
const AGENT_CACHE_MAX: usize = 10_000;

impl AgentCache {
    fn get(&self, hash: &SecretHash) -> Option<AgentBasis> {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries
            .get(hash)
            .filter(|(at, _)| at.elapsed() < AGENT_CACHE_TTL)
            .map(|(_, b)| b.clone())
    }

    fn put(&self, basis: &AgentBasis) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if entries.len() >= AGENT_CACHE_MAX {
            entries.clear();
        }
        entries.insert(
            basis.key_hash.clone(),
            (std::time::Instant::now(), basis.clone()),
        );
    }

    fn forget(&self, hash: &SecretHash) {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(hash);
    }

    fn forget_agent(&self, agent_id: &str) {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|_, (_, b)| b.agent.agent.id != agent_id);
    }
}

/// Identity: who an agent key or an owner session belongs to, onboarding, agents and policies.
pub struct Identity {
    store: Arc<dyn Store>,
    mailer: Arc<dyn Mailer>,
    clock: Arc<dyn Clock>,
    catalog: Arc<Catalog>,
    keys: Keyring,
    settings: Arc<Settings>,
    limits: Arc<Limits>,
    /// The default policy resolved against the catalog once.
    default_allowed: Vec<String>,
    default_daily_micros: i64,
    default_per_action_micros: Option<i64>,
    default_health_factor_bps: i64,
    agents: AgentCache,
}

impl Identity {
    /// Fails when the default policy names actions the catalog does not have.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        mailer: Arc<dyn Mailer>,
        clock: Arc<dyn Clock>,
        catalog: Arc<Catalog>,
        keys: Keyring,
        settings: Arc<Settings>,
        limits: Arc<Limits>,
    ) -> Result<Self> {
        let default_allowed = match &settings.default_policy.allowed_actions {
            Some(names) => canonical_names(&catalog, names)?,
            None => catalog
                .actions()
                .filter(|a| a.is_read() && a.entry.enabled)
                .map(|a| a.name().to_owned())
                .collect(),
        };
        let default_daily_micros = usd_to_micros(
            "policy.default.dailyLimitUsd",
            settings.default_policy.daily_limit_usd,
        )?;
        let default_per_action_micros = settings
            .default_policy
            .max_amount_usd_per_action
            .map(|v| usd_to_micros("policy.default.maxAmountUsdPerAction", v))
            .transpose()?;
        let default_health_factor_bps = health_factor_bps(
            "policy.default.minHealthFactor",
            settings.default_policy.min_health_factor,
        )?;
        Ok(Self {
            store,
            mailer,
            clock,
            catalog,
            keys,
            settings,
            limits,
            default_allowed,
            default_daily_micros,
            default_per_action_micros,
            default_health_factor_bps,
            agents: AgentCache::default(),
        })
    }

    // ------------------------------------------------------------------ onboarding

    /// Sends a 6-digit code to the address; replaces any earlier code for it.
    pub async fn start_email_onboarding(&self, email: &str) -> Result<EmailStartResponse> {
        let email = normalise_email(email)?;
        let now = self.clock.now();
        // An address whose code checks of the day are spent gets no new code until the window ends.
        self.check_budget_left(&email, to_millis(now)).await?;
        // One code a half-minute per address, whatever its tries: no mail flooding, and guessing is
        // held to 5 tries per code and the address's daily budget across codes.
        if let Some(live) = self.store.get_email_challenge(&email).await?
            && to_millis(now) < live.expires_at
        {
            let created =
                live.expires_at - self.settings.email_code_ttl.whole_milliseconds() as i64;
            let wait_ms = created + RESEND_COOLDOWN_MS - to_millis(now);
            if wait_ms > 0 {
                let seconds = u64::try_from(wait_ms.div_euclid(1000) + 1).unwrap_or(1);
                return Err(Error::new(
                    ErrorCode::RateLimited,
                    format!("A code was just sent to this address; ask again in {seconds} s."),
                )
                .with_retry_after(seconds));
            }
        }
        let code = crypto::new_email_code()?;
        let expires_at = now + self.settings.email_code_ttl;
        self.store
            .put_email_challenge(&EmailChallenge {
                email: email.clone(),
                code_hash: self.code_hash(&email, &code),
                expires_at: to_millis(expires_at),
                attempts: 0,
            })
            .await?;
        let minutes = self.settings.email_code_ttl.whole_minutes();
        let mail = OutgoingMail {
            to: email.clone(),
            subject: format!("Your actiongate code: {}", code.as_str()),
            body: format!(
                "Your actiongate sign-in code is {}.\r\n\r\nIt works for {minutes} minutes and only once. \
                 If you did not ask for it, ignore this message: nothing happens without the code.\r\n",
                code.as_str()
            ),
        };
        self.mailer.send(mail).await.map_err(|e| {
            Error::new(
                ErrorCode::NotAvailable,
                "The code could not be sent; try again shortly.",
            )
            .with_detail(e)
        })?;
        Ok(EmailStartResponse {
            email,
            expires_at: rfc3339(expires_at),
            max_attempts: self.settings.email_code_max_attempts,
        })
    }

    /// Checks the code; creates the account with its first agent on first completion, signs the
    /// owner in on later ones.
    pub async fn complete_email_onboarding(
        &self,
        req: &EmailCompleteRequest,
    ) -> Result<EmailCompleteResponse> {
        if req.accept_terms != Some(serde_json::Value::Bool(true)) {
            return Err(Error::new(
                ErrorCode::TermsNotAccepted,
                "acceptTerms must be true: onboarding completes only after the user agrees to the terms.",
            ));
        }
        let email = normalise_email(&req.email)?;
        let now = self.clock.now();
        let max = self.settings.email_code_max_attempts;
        let Some(challenge) = self.store.get_email_challenge(&email).await? else {
            return Err(code_expired());
        };
        if challenge.attempts >= max {
            return Err(too_many_attempts());
        }
        if to_millis(now) >= challenge.expires_at {
            return Err(code_expired());
        }
        self.check_budget_left(&email, to_millis(now)).await?;
        // Count the try before comparing, atomically, on the code and on the address's daily
        // budget: parallel guesses cannot exceed either, and a new code does not reset the budget.
        let counted = self
            .store
            .count_code_check(&email, to_millis(now), max)
            .await?;
        if counted.budget.checks > self.settings.limits.code_checks_per_day {
            return Err(self.budget_spent(counted.budget, to_millis(now)));
        }
        let attempt = counted.on_code;
        if attempt > max {
            return Err(too_many_attempts());
        }
        let offered = self.code_hash(&email, req.code.trim());
        if !offered.matches(&challenge.code_hash) {
            if attempt >= max {
                return Err(too_many_attempts());
            }
            let left = max - attempt;
            return Err(Error::new(
                ErrorCode::InvalidCode,
                format!(
                    "The code is wrong; {left} {} left.",
                    if left == 1 { "try" } else { "tries" }
                ),
            ));
        }

        let account_id = uuid::Uuid::now_v7().to_string();
        let (first_agent, key) = self.new_agent(&account_id, None, now)?;
        let first_policy = self.default_policy(&first_agent.record.id, now);
        let session = crypto::new_token(OWNER_SESSION_PREFIX)?;
        let session_expires = now + self.settings.session_ttl;
        let at = to_millis(now);
        // The account is filled in by the store: the new one, or the one signed into.
        let in_account = |kind: &str, actor: &str, subject: &str, data: serde_json::Value| {
            let mut e = AuditEvent::new("", at, kind, actor, subject, data);
            e.account_id = None;
            e
        };
        let created_events = vec![
            in_account(
                kinds::AGENT_CREATED,
                actor::OWNER,
                &first_agent.record.id,
                json!({"agentAddress": first_agent.record.wallet_address, "name": first_agent.record.name}),
            )
            .with_agent(&first_agent.record.id),
        ];
        let login_event = in_account(
            kinds::LOGIN,
            actor::OWNER,
            &email,
            json!({"method": "email"}),
        );
        let outcome = self
            .store
            .complete_onboarding(&Onboarding {
                email: email.clone(),
                code_hash: offered,
                max_attempts: max,
                now: to_millis(now),
                new_account_id: account_id,
                first_agent: first_agent.clone(),
                first_policy,
                session_hash: self.keys.hash_secret(HASH_SESSION, &session),
                session_expires_at: to_millis(session_expires),
                created_events,
                login_event,
            })
            .await?;
        let (account_id, bootstrap) = match outcome {
            OnboardingOutcome::Created { account_id } => {
                tracing::info!(
                    account_id,
                    agent_id = first_agent.record.id,
                    "account created"
                );
                (account_id, Some(bootstrap(&first_agent.record, key)))
            }
            OnboardingOutcome::SignedIn { account_id } => {
                tracing::info!(account_id, "owner signed in");
                (account_id, None)
            }
            OnboardingOutcome::ChallengeGone => return Err(code_expired()),
        };
        let created = bootstrap.is_some();
        Ok(EmailCompleteResponse {
            bootstrap,
            session: OwnerSession {
                token: session.to_string(),
                expires_at: rfc3339(session_expires),
            },
            account: AccountSummary {
                account_id,
                email,
                created,
            },
        })
    }

    /// Refuses an address whose code checks of the 24-hour window are spent.
    async fn check_budget_left(&self, email: &str, now: i64) -> Result<()> {
        match self.store.code_check_budget(email).await? {
            Some(b)
                if b.window_start > now - DAY_MS
                    && b.checks >= self.settings.limits.code_checks_per_day =>
            {
                Err(self.budget_spent(b, now))
            }
            _ => Ok(()),
        }
    }

    fn budget_spent(&self, budget: CheckBudget, now: i64) -> Error {
        let seconds = u64::try_from((budget.window_start + DAY_MS - now).div_euclid(1000) + 1)
            .unwrap_or(1)
            .max(1);
        Error::new(
            ErrorCode::RateLimited,
            format!(
                "Too many sign-in codes were checked for this address in 24 hours ({}); it can sign in again in {seconds} s.",
                self.settings.limits.code_checks_per_day
            ),
        )
        .with_retry_after(seconds)
    }

    fn code_hash(&self, email: &str, code: &str) -> SecretHash {
        self.keys
            .hash_secret(HASH_EMAIL_CODE, &format!("{email}\n{code}"))
    }

    // ------------------------------------------------------------------ authentication

    /// The agent a key belongs to. Missing, malformed, unknown and revoked keys are all the same
    /// 401, so that the answer tells an attacker nothing.
    pub async fn authenticate_agent(&self, key: Option<&str>) -> Result<AgentContext> {
        self.authenticate_agent_with_policy(key)
            .await
            .map(|(agent, _)| agent)
    }

    /// [`Identity::authenticate_agent`] with the agent's stored policy (none: the default applies),
    /// in one read.
    pub async fn authenticate_agent_with_policy(
        &self,
        key: Option<&str>,
    ) -> Result<(AgentContext, Option<PolicyRecord>)> {
        self.admit_agent(key)?;
        let basis = self.read_agent_basis(key).await?;
        Ok((basis.agent, basis.policy))
    }

    /// [`Identity::authenticate_agent`] without spending the key's rate: for a gate in front of a
    /// call that authenticates again (the MCP endpoint's check before its tool runs).
    pub async fn recognize_agent(&self, key: Option<&str>) -> Result<AgentContext> {
        Ok(self.read_agent_basis(key).await?.agent)
    }

    /// One request of an agent key against its rate (`[limits]`); a missing or malformed key is
    /// left to authentication to refuse.
    pub(crate) fn admit_agent(&self, key: Option<&str>) -> Result<()> {
        match self.agent_key_hash(key) {
            Ok(hash) => self.limits.request(&credential_key("agent", &hash)),
            Err(_) => Ok(()),
        }
    }

    fn agent_key_hash(&self, key: Option<&str>) -> Result<SecretHash> {
        let key = key
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .ok_or_else(|| Error::unauthorized("An agent API key is required."))?;
        if !key.starts_with(AGENT_KEY_PREFIX) {
            return Err(Error::unauthorized(
                "The agent API key is invalid or revoked.",
            ));
        }
        Ok(self.keys.hash_secret(HASH_AGENT_KEY, key))
    }

    /// The agent and policy of a key, read from the database (and cached for [`Identity::cached_agent_basis`]).
    pub(crate) async fn read_agent_basis(&self, key: Option<&str>) -> Result<AgentBasis> {
        let key_hash = self.agent_key_hash(key)?;
        match self.store.find_agent_and_policy(&key_hash).await? {
            Some((agent, policy)) => {
                let basis = AgentBasis {
                    agent: AgentContext { agent },
                    policy,
                    key_hash,
                };
                self.agents.put(&basis);
                Ok(basis)
            }
            None => {
                self.agents.forget(&key_hash);
                Err(Error::unauthorized(
                    "The agent API key is invalid or revoked.",
                ))
            }
        }
    }

    /// The agent and policy of a key as last read by this process, if recently: only for a decision
    /// the database confirms (see [`AgentCache`]).
    pub(crate) fn cached_agent_basis(&self, key: Option<&str>) -> Option<AgentBasis> {
        self.agent_key_hash(key)
            .ok()
            .and_then(|hash| self.agents.get(&hash))
    }

    /// A stable keyed hash of a bearer token (an agent key or an owner session), to record who
    /// opened something without keeping the token.
    pub fn bearer_id(&self, token: &str) -> String {
        hex::encode(self.keys.hash_secret(HASH_BEARER, token.trim()).0)
    }

    /// The owner a session token belongs to. An agent key is refused: owner routes need a session.
    /// Each call spends one request of the session's rate (`[limits]`).
    pub async fn authenticate_owner(&self, token: Option<&str>) -> Result<OwnerContext> {
        self.owner_session(token, true).await
    }

    /// [`Identity::authenticate_owner`] without spending the session's rate (a gate in front of a
    /// call that authenticates again).
    pub async fn recognize_owner(&self, token: Option<&str>) -> Result<OwnerContext> {
        self.owner_session(token, false).await
    }

    async fn owner_session(&self, token: Option<&str>, metered: bool) -> Result<OwnerContext> {
        let token = token
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .ok_or_else(|| {
                Error::unauthorized("An owner session is required: Authorization: Bearer owner-…")
            })?;
        if token.starts_with(AGENT_KEY_PREFIX) {
            return Err(Error::unauthorized(
                "This route needs the owner's session, not an agent key: sign in by e-mail to get one.",
            ));
        }
        if !token.starts_with(OWNER_SESSION_PREFIX) {
            return Err(Error::unauthorized(
                "The owner session is invalid or expired.",
            ));
        }
        let hash = self.keys.hash_secret(HASH_SESSION, token);
        if metered {
            self.limits.request(&credential_key("owner", &hash))?;
        }
        match self
            .store
            .find_session(&hash, to_millis(self.clock.now()))
            .await?
        {
            Some(s) => Ok(OwnerContext {
                account_id: s.account_id,
            }),
            None => Err(Error::unauthorized(
                "The owner session is invalid or expired.",
            )),
        }
    }

    /// Revokes the owner session carried by `token` (after authenticating it).
    pub async fn sign_out(&self, token: Option<&str>) -> Result<()> {
        self.authenticate_owner(token).await?;
        let token = token.map(str::trim).unwrap_or_default();
        self.store
            .delete_session(&self.keys.hash_secret(HASH_SESSION, token))
            .await?;
        Ok(())
    }

    // ------------------------------------------------------------------ agents

    fn new_agent(
        &self,
        account_id: &str,
        name: Option<String>,
        now: time::OffsetDateTime,
    ) -> Result<(NewAgent, Zeroizing<String>)> {
        let id = uuid::Uuid::now_v7().to_string();
        let key = crypto::new_token(AGENT_KEY_PREFIX)?;
        let wallet = crypto::new_wallet()?;
        let sealed = self.keys.seal_wallet_key(&wallet.secret, &id)?;
        let agent = NewAgent {
            record: AgentRecord {
                id,
                account_id: account_id.to_owned(),
                name,
                wallet_address: wallet.address,
                created_at: to_millis(now),
                key_rotated_at: None,
            },
            key_hash: self.keys.hash_secret(HASH_AGENT_KEY, &key),
            wallet_sealed: sealed,
        };
        Ok((agent, key))
    }

    /// Creates a further agent for the owner's account, with the default policy.
    pub async fn create_agent(
        &self,
        owner: &OwnerContext,
        name: Option<String>,
    ) -> Result<AgentKeyIssued> {
        let name = match name.map(|n| n.trim().to_owned()) {
            Some(n) if n.chars().count() > 100 => {
                return Err(Error::invalid("name must be at most 100 characters"));
            }
            Some(n) if n.is_empty() => None,
            other => other,
        };
        let now = self.clock.now();
        let (agent, key) = self.new_agent(&owner.account_id, name, now)?;
        let policy = self.default_policy(&agent.record.id, now);
        let event = AuditEvent::new(
            &owner.account_id,
            to_millis(now),
            kinds::AGENT_CREATED,
            actor::OWNER,
            &agent.record.id,
            json!({"agentAddress": agent.record.wallet_address, "name": agent.record.name}),
        )
        .with_agent(&agent.record.id);
        self.store.create_agent(&agent, &policy, &event).await?;
        tracing::info!(
            account_id = owner.account_id,
            agent_id = agent.record.id,
            "agent created"
        );
        Ok(AgentKeyIssued {
            bootstrap: bootstrap(&agent.record, key),
        })
    }

    pub async fn list_agents(&self, owner: &OwnerContext) -> Result<AgentListResponse> {
        let agents = self.store.list_agents(&owner.account_id).await?;
        Ok(AgentListResponse {
            agents: agents.iter().map(agent_view).collect(),
        })
    }

    /// The owner's agent, or 404 (also for another account's agent, so ids leak nothing).
    /// The agent of `agent_key`, only when it belongs to the owner's account: the one ownership
    /// check of an agent named by its key (another account's agent is answered as not found).
    pub async fn owned_agent_by_key(
        &self,
        owner: &OwnerContext,
        agent_key: &str,
    ) -> Result<AgentContext> {
        // An unknown or revoked key is answered as another account's agent: the answer does not
        // tell whether a key exists. The owner's request is metered on the owner's session.
        let not_found = || Error::not_found("No such agent in this account.");
        let agent = match self.read_agent_basis(Some(agent_key)).await {
            Ok(basis) => basis.agent,
            Err(e) if e.code == ErrorCode::Unauthorized => return Err(not_found()),
            Err(e) => return Err(e),
        };
        if agent.agent.account_id != owner.account_id {
            return Err(not_found());
        }
        Ok(agent)
    }

    /// The owner's agent named by its id or by its key (one of the two; owner routes SPEC gives an
    /// `agentKey` accept an `agentId` too, so that the owner need not hold the agent's key); its id.
    /// Another account's agent, an unknown id and an unknown key are answered alike (404).
    pub async fn owned_agent_named(
        &self,
        owner: &OwnerContext,
        agent_id: Option<&str>,
        agent_key: Option<&str>,
    ) -> Result<String> {
        match (agent_id, agent_key) {
            (Some(id), None) => self.owned_agent(owner, id).await.map(|a| a.id),
            (None, Some(key)) => Ok(self.owned_agent_by_key(owner, key).await?.agent.id),
            _ => Err(Error::invalid(
                "Name the agent by agentId (or by agentKey): one of the two.",
            )),
        }
    }

    async fn owned_agent(&self, owner: &OwnerContext, agent_id: &str) -> Result<AgentRecord> {
        match self.store.get_agent(agent_id).await? {
            Some(a) if a.account_id == owner.account_id => Ok(a),
            _ => Err(Error::not_found(format!(
                "No agent {agent_id} in this account."
            ))),
        }
    }

    /// Issues a new key; the old one stops working at once.
    pub async fn rotate_agent_key(
        &self,
        owner: &OwnerContext,
        agent_id: &str,
    ) -> Result<AgentKeyIssued> {
        let mut agent = self.owned_agent(owner, agent_id).await?;
        let key = crypto::new_token(AGENT_KEY_PREFIX)?;
        let now = self.clock.now();
        let hash = self.keys.hash_secret(HASH_AGENT_KEY, &key);
        if !self
            .store
            .rotate_agent_key(
                agent_id,
                &hash,
                to_millis(now),
                &AuditEvent::new(
                    &owner.account_id,
                    to_millis(now),
                    kinds::KEY_ROTATED,
                    actor::OWNER,
                    agent_id,
                    json!({}),
                )
                .with_agent(agent_id),
            )
            .await?
        {
            return Err(Error::not_found(format!(
                "No agent {agent_id} in this account."
            )));
        }
        agent.key_rotated_at = Some(to_millis(now));
        self.agents.forget_agent(agent_id);
        tracing::info!(account_id = owner.account_id, agent_id, "agent key rotated");
        Ok(AgentKeyIssued {
            bootstrap: bootstrap(&agent, key),
        })
    }
}

/// The rate-limit bucket of a credential: its kind and half its keyed hash (never the secret).
fn credential_key(kind: &str, hash: &SecretHash) -> String {
    format!("{kind}:{}", hex::encode(&hash.0[..16]))
}

fn code_expired() -> Error {
    Error::new(
        ErrorCode::CodeExpired,
        "No valid code is pending for this e-mail: it expired or was used. Start onboarding again.",
    )
}

fn too_many_attempts() -> Error {
    Error::new(
        ErrorCode::TooManyAttempts,
        "Too many wrong codes: this code no longer works. Start onboarding again for a new one.",
    )
}

fn bootstrap(agent: &AgentRecord, key: Zeroizing<String>) -> AgentBootstrap {
    AgentBootstrap {
        agent_api_key: key.to_string(),
        agent_id: agent.id.clone(),
        agent_address: agent.wallet_address.clone(),
    }
}

fn agent_view(a: &AgentRecord) -> AgentView {
    AgentView {
        agent_id: a.id.clone(),
        agent_address: a.wallet_address.clone(),
        name: a.name.clone(),
        created_at: rfc3339(from_millis(a.created_at)),
        key_rotated_at: a.key_rotated_at.map(|t| rfc3339(from_millis(t))),
    }
}

/// Lowercases and checks the shape of an e-mail address.
fn normalise_email(email: &str) -> Result<String> {
    let email = email.trim().to_lowercase();
    let bad = || Error::invalid("email must be an e-mail address such as name@example.com");
    if email.len() > 254 || email.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad());
    }
    let (local, domain) = email.split_once('@').ok_or_else(bad)?;
    if local.is_empty()
        || domain.is_empty()
        || domain.contains('@')
        || !domain.contains('.')
        || domain.starts_with('.')
        || domain.ends_with('.')
    {
        return Err(bad());
    }
    Ok(email)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalised_and_checked() {
        assert_eq!(
            normalise_email(" Ann@Example.COM ").ok(),
            Some("ann@example.com".to_owned())
        );
        for bad in [
            "",
            "ann",
            "ann@",
            "@example.com",
            "ann@example",
            "a b@example.com",
            "a@b@c.com",
            "ann@.com",
        ] {
            assert!(normalise_email(bad).is_err(), "{bad:?} accepted");
        }
    }
}
