//! Onboarding codes, owner sessions, agents and their policies.

use actiongate_core::crypto::SecretHash;
use actiongate_core::store::{
    AgentRecord, AuditEvent, CheckBudget, CodeChecks, EmailChallenge, IdentityStore, NewAgent,
    Onboarding, OnboardingOutcome, PolicyRecord, SessionRecord, StoreError,
};
use async_trait::async_trait;
use sqlx::sqlite::SqliteConnection;

use crate::error::{closed, err};
use crate::rows::{agent_from_row, hash_from, policy_from_row};
use crate::{Backend, Dialect, SqlStore};

/// Inserts an agent and its policy inside the open transaction `$tx`.
macro_rules! insert_agent_with_policy {
    ($tx:ident, $agent:expr, $policy:expr, $allowed:expr) => {{
        let (a, p) = ($agent, $policy);
        sqlx::query(
            "INSERT INTO agents (id, account_id, name, key_hash, wallet_address, wallet_sealed, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&a.record.id)
        .bind(&a.record.account_id)
        .bind(&a.record.name)
        .bind(a.key_hash.0.to_vec())
        .bind(&a.record.wallet_address)
        .bind(&a.wallet_sealed)
        .bind(a.record.created_at)
        .execute(&mut *$tx)
        .await
        .map_err(err)?;
        sqlx::query(
            "INSERT INTO agent_policies (agent_id, allowed_actions, daily_limit_micros, max_per_action_micros, min_health_factor_bps, updated_at, approval_above_micros)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&p.agent_id)
        .bind($allowed)
        .bind(p.daily_limit_micros)
        .bind(p.max_per_action_micros)
        .bind(p.min_health_factor_bps)
        .bind(p.updated_at)
        .bind(p.approval_above_micros)
        .execute(&mut *$tx)
        .await
        .map_err(err)?;
    }};
}

#[async_trait]
impl IdentityStore for SqlStore {
    async fn put_email_challenge(&self, c: &EmailChallenge) -> Result<(), StoreError> {
        let attempts = i32::try_from(c.attempts).map_err(err)?;
        on_writer!(self, pool => sqlx::query(
            "INSERT INTO email_challenges (email, code_hash, expires_at, attempts) VALUES ($1, $2, $3, $4)
             ON CONFLICT (email) DO UPDATE SET code_hash = excluded.code_hash,
                 expires_at = excluded.expires_at, attempts = excluded.attempts",
        )
        .bind(&c.email)
        .bind(c.code_hash.0.to_vec())
        .bind(c.expires_at)
        .bind(attempts)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(err))
    }

    async fn get_email_challenge(&self, email: &str) -> Result<Option<EmailChallenge>, StoreError> {
        let row: Option<(String, Vec<u8>, i64, i32)> = on_pool!(self, pool => sqlx::query_as(
            "SELECT email, code_hash, expires_at, attempts FROM email_challenges WHERE email = $1",
        )
        .bind(email)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        row.map(|(email, hash, expires_at, attempts)| {
            Ok(EmailChallenge {
                email,
                code_hash: hash_from(hash)?,
                expires_at,
                attempts: u32::try_from(attempts).map_err(err)?,
            })
        })
        .transpose()
    }

    async fn count_code_check(
        &self,
        email: &str,
        now: i64,
        max_on_code: u32,
    ) -> Result<CodeChecks, StoreError> {
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let on_code: Option<i32> = sqlx::query_scalar(
                "UPDATE email_challenges SET attempts = attempts + 1 WHERE email = $1 RETURNING attempts",
            )
            .bind(email)
            .fetch_optional(&mut *tx)
            .await
            .map_err(err)?;
            let compared = on_code.is_some_and(|a| u32::try_from(a).is_ok_and(|a| a <= max_on_code));
            let budget: Option<(i32, i64)> = if compared {
                Some(sqlx::query_as(
                "INSERT INTO email_check_budget (email, window_start, checks) VALUES ($1, $2, 1)
                 ON CONFLICT (email) DO UPDATE SET
                     checks = CASE WHEN email_check_budget.window_start <= $2 - 86400000
                                   THEN 1 ELSE email_check_budget.checks + 1 END,
                     window_start = CASE WHEN email_check_budget.window_start <= $2 - 86400000
                                         THEN $2 ELSE email_check_budget.window_start END
                 RETURNING checks, window_start",
            )
            .bind(email)
            .bind(now)
            .fetch_one(&mut *tx)
            .await
            .map_err(err)?)
            } else {
                sqlx::query_as("SELECT checks, window_start FROM email_check_budget WHERE email = $1")
                    .bind(email)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(err)?
            };
            let (checks, window_start) = budget.unwrap_or((0, now));
            tx.commit().await.map_err(err)?;
            Ok(CodeChecks {
                // A challenge replaced or consumed meanwhile: count the try as the last one allowed.
                on_code: on_code.map_or(u32::MAX, |a| u32::try_from(a).unwrap_or(u32::MAX)),
                budget: CheckBudget {
                    checks: u32::try_from(checks).unwrap_or(u32::MAX),
                    window_start,
                },
            })
        })
    }

    async fn code_check_budget(&self, email: &str) -> Result<Option<CheckBudget>, StoreError> {
        let row: Option<(i32, i64)> = on_pool!(self, pool => sqlx::query_as(
            "SELECT checks, window_start FROM email_check_budget WHERE email = $1",
        )
        .bind(email)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        Ok(row.map(|(checks, window_start)| CheckBudget {
            checks: u32::try_from(checks).unwrap_or(u32::MAX),
            window_start,
        }))
    }

    async fn complete_onboarding(&self, o: &Onboarding) -> Result<OnboardingOutcome, StoreError> {
        let allowed = serde_json::to_string(&o.first_policy.allowed_actions).map_err(err)?;
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // The write comes first, so that SQLite takes its write lock before any read.
            let consumed = sqlx::query(
                "DELETE FROM email_challenges WHERE email = $1 AND code_hash = $2 AND expires_at > $3 AND attempts <= $4",
            )
            .bind(&o.email)
            .bind(o.code_hash.0.to_vec())
            .bind(o.now)
            .bind(i32::try_from(o.max_attempts).unwrap_or(i32::MAX))
            .execute(&mut *tx)
            .await
            .map_err(err)?
            .rows_affected();
            if consumed != 1 {
                tx.rollback().await.map_err(err)?;
                return Ok(OnboardingOutcome::ChallengeGone);
            }
            let inserted = sqlx::query(
                "INSERT INTO accounts (id, email, created_at) VALUES ($1, $2, $3) ON CONFLICT (email) DO NOTHING",
            )
            .bind(&o.new_account_id)
            .bind(&o.email)
            .bind(o.now)
            .execute(&mut *tx)
            .await
            .map_err(err)?
            .rows_affected();
            let outcome = if inserted == 1 {
                sqlx::query("INSERT INTO credit_accounts (account_id, updated_at) VALUES ($1, $2)")
                    .bind(&o.new_account_id)
                    .bind(o.now)
                    .execute(&mut *tx)
                    .await
                    .map_err(err)?;
                insert_agent_with_policy!(tx, &o.first_agent, &o.first_policy, &allowed);
                OnboardingOutcome::Created { account_id: o.new_account_id.clone() }
            } else {
                let id: String = sqlx::query_scalar("SELECT id FROM accounts WHERE email = $1")
                    .bind(&o.email)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(err)?;
                OnboardingOutcome::SignedIn { account_id: id }
            };
            let account_id = match &outcome {
                OnboardingOutcome::Created { account_id } | OnboardingOutcome::SignedIn { account_id } => account_id.clone(),
                OnboardingOutcome::ChallengeGone => String::new(),
            };
            sqlx::query(
                "INSERT INTO owner_sessions (token_hash, account_id, created_at, expires_at) VALUES ($1, $2, $3, $4)",
            )
            .bind(o.session_hash.0.to_vec())
            .bind(&account_id)
            .bind(o.now)
            .bind(o.session_expires_at)
            .execute(&mut *tx)
            .await
            .map_err(err)?;
            let created = o.created_events.iter().filter(|_| inserted == 1);
            let events: Vec<AuditEvent> = created
                .chain(std::iter::once(&o.login_event))
                .map(|e| AuditEvent { account_id: Some(account_id.clone()), ..e.clone() })
                .collect();
            insert_events!(tx, &events);
            tx.commit().await.map_err(err)?;
            Ok(outcome)
        })
    }

    async fn find_session(
        &self,
        token_hash: &SecretHash,
        now: i64,
    ) -> Result<Option<SessionRecord>, StoreError> {
        let row: Option<(String, i64)> = on_pool!(self, pool => sqlx::query_as(
            "SELECT account_id, expires_at FROM owner_sessions WHERE token_hash = $1 AND expires_at > $2",
        )
        .bind(token_hash.0.to_vec())
        .bind(now)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        Ok(row.map(|(account_id, expires_at)| SessionRecord {
            account_id,
            expires_at,
        }))
    }

    async fn delete_session(&self, token_hash: &SecretHash) -> Result<bool, StoreError> {
        on_writer!(self, pool => sqlx::query("DELETE FROM owner_sessions WHERE token_hash = $1")
            .bind(token_hash.0.to_vec())
            .execute(pool)
            .await
            .map(|r| r.rows_affected() == 1)
            .map_err(err))
    }

    async fn find_agent_and_policy(
        &self,
        key_hash: &SecretHash,
    ) -> Result<Option<(AgentRecord, Option<PolicyRecord>)>, StoreError> {
        on_pool!(self, pool => {
            let row = sqlx::query(concat!(
                "SELECT a.id, a.account_id, a.name, a.wallet_address, a.created_at, a.key_rotated_at, ",
                policy_columns!(),
                " FROM agents a LEFT JOIN agent_policies p ON p.agent_id = a.id WHERE a.key_hash = $1"
            ))
            .bind(key_hash.0.to_vec())
            .fetch_optional(pool)
            .await
            .map_err(err)?;
            let Some(row) = row else { return Ok(None) };
            let agent = agent_from_row(&row)?;
            let policy = policy_from_row(&row, &agent.id)?;
            Ok(Some((agent, policy)))
        })
    }

    async fn get_agent(&self, agent_id: &str) -> Result<Option<AgentRecord>, StoreError> {
        let sql = select_agents!("WHERE id = $1");
        on_pool!(self, pool => {
            let row = sqlx::query(sql).bind(agent_id).fetch_optional(pool).await.map_err(err)?;
            row.as_ref().map(agent_from_row).transpose()
        })
    }

    async fn list_agents(&self, account_id: &str) -> Result<Vec<AgentRecord>, StoreError> {
        let sql = select_agents!("WHERE account_id = $1 ORDER BY created_at, id");
        on_pool!(self, pool => {
            let rows = sqlx::query(sql).bind(account_id).fetch_all(pool).await.map_err(err)?;
            rows.iter().map(agent_from_row).collect()
        })
    }

    async fn account_email(&self, account_id: &str) -> Result<Option<String>, StoreError> {
        on_pool!(self, pool => sqlx::query_scalar("SELECT email FROM accounts WHERE id = $1")
            .bind(account_id)
            .fetch_optional(pool)
            .await
            .map_err(err))
    }

    async fn create_agent(
        &self,
        a: &NewAgent,
        p: &PolicyRecord,
        event: &AuditEvent,
    ) -> Result<(), StoreError> {
        let allowed = serde_json::to_string(&p.allowed_actions).map_err(err)?;
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            insert_agent_with_policy!(tx, a, p, &allowed);
            insert_events!(tx, [event]);
            tx.commit().await.map_err(err)
        })
    }

    async fn rotate_agent_key(
        &self,
        agent_id: &str,
        key_hash: &SecretHash,
        now: i64,
        event: &AuditEvent,
    ) -> Result<bool, StoreError> {
        update_with_event!(
            self,
            sqlx::query("UPDATE agents SET key_hash = $1, key_rotated_at = $2 WHERE id = $3")
                .bind(key_hash.0.to_vec())
                .bind(now)
                .bind(agent_id),
            event
        )
    }

    async fn agent_wallet_sealed(&self, agent_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        on_pool!(self, pool => sqlx::query_scalar("SELECT wallet_sealed FROM agents WHERE id = $1")
            .bind(agent_id)
            .fetch_optional(pool)
            .await
            .map_err(err))
    }

    async fn get_policy(&self, agent_id: &str) -> Result<Option<PolicyRecord>, StoreError> {
        on_pool!(self, pool => {
            let row = sqlx::query(concat!("SELECT ", policy_columns!(), " FROM agent_policies p WHERE p.agent_id = $1"))
                .bind(agent_id)
                .fetch_optional(pool)
                .await
                .map_err(err)?;
            Ok(match row {
                Some(row) => policy_from_row(&row, agent_id)?,
                None => None,
            })
        })
    }

    async fn put_policy(&self, p: &PolicyRecord, event: &AuditEvent) -> Result<(), StoreError> {
        let allowed = serde_json::to_string(&p.allowed_actions).map_err(err)?;
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            sqlx::query(
            "INSERT INTO agent_policies (agent_id, allowed_actions, daily_limit_micros, max_per_action_micros, min_health_factor_bps, updated_at, approval_above_micros)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (agent_id) DO UPDATE SET allowed_actions = excluded.allowed_actions,
                 daily_limit_micros = excluded.daily_limit_micros,
                 max_per_action_micros = excluded.max_per_action_micros,
                 min_health_factor_bps = excluded.min_health_factor_bps,
                 approval_above_micros = excluded.approval_above_micros,
                 updated_at = excluded.updated_at",
        )
        .bind(&p.agent_id)
        .bind(&allowed)
        .bind(p.daily_limit_micros)
        .bind(p.max_per_action_micros)
        .bind(p.min_health_factor_bps)
        .bind(p.updated_at)
        .bind(p.approval_above_micros)
        .execute(&mut *tx)
        .await
        .map_err(err)?;
            insert_events!(tx, [event]);
            tx.commit().await.map_err(err)
        })
    }
}
