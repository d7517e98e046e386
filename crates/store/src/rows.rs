//! Column lists and row readers shared by the aggregates' modules.

use actiongate_core::crypto::SecretHash;
use actiongate_core::params::Params;
use actiongate_core::store::{
    AgentRecord, ApprovalRecord, CreditAccount, IntentRecord, PolicyRecord, StoreError,
};
use sqlx::Row;

use crate::error::{corrupt, err};

macro_rules! intent_columns {
    () => {
        "id, agent_id, account_id, action, lane, params, chain_id, amount_micros, price_per_execution, \
         reserved_credits, free_request, status, total, created_at, finished_at, approval_state, \
         approval_requested_at, approval_expires_at, approval_decided_at, approval_reason"
    };
}

/// The stored policy joined to an agent row (`LEFT JOIN agent_policies`, its `updated_at` as
/// `policy_updated_at`): none when the agent has never had one stored.
pub(crate) fn policy_from_row<R: Row>(
    row: &R,
    agent_id: &str,
) -> Result<Option<PolicyRecord>, StoreError>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    Option<String>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<i64>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let Some(allowed) = row
        .try_get::<Option<String>, _>("allowed_actions")
        .map_err(err)?
    else {
        return Ok(None);
    };
    Ok(Some(PolicyRecord {
        agent_id: agent_id.to_owned(),
        allowed_actions: serde_json::from_str(&allowed).map_err(err)?,
        daily_limit_micros: row
            .try_get::<Option<i64>, _>("daily_limit_micros")
            .map_err(err)?
            .unwrap_or_default(),
        max_per_action_micros: row.try_get("max_per_action_micros").map_err(err)?,
        min_health_factor_bps: row
            .try_get::<Option<i64>, _>("min_health_factor_bps")
            .map_err(err)?
            .unwrap_or_default(),
        approval_above_micros: row.try_get("approval_above_micros").map_err(err)?,
        updated_at: row
            .try_get::<Option<i64>, _>("policy_updated_at")
            .map_err(err)?
            .unwrap_or_default(),
    }))
}

/// The policy columns [`policy_from_row`] reads, from `agent_policies p`.
macro_rules! policy_columns {
    () => {
        "p.allowed_actions, p.daily_limit_micros, p.max_per_action_micros, p.min_health_factor_bps, p.approval_above_micros, p.updated_at AS policy_updated_at"
    };
}

pub(crate) fn intent_from_row<R: Row>(row: &R) -> Result<IntentRecord, StoreError>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    String: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i32: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    bool: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<i64>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<String>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let chain: i64 = row.try_get("chain_id").map_err(err)?;
    let total: i32 = row.try_get("total").map_err(err)?;
    Ok(IntentRecord {
        id: row.try_get("id").map_err(err)?,
        agent_id: row.try_get("agent_id").map_err(err)?,
        account_id: row.try_get("account_id").map_err(err)?,
        action: row.try_get("action").map_err(err)?,
        lane: row
            .try_get::<String, _>("lane")
            .map_err(err)?
            .parse()
            .map_err(err)?,
        params: Params::stored(row.try_get("params").map_err(err)?),
        chain_id: u64::try_from(chain).map_err(err)?,
        amount_micros: row.try_get("amount_micros").map_err(err)?,
        price_per_execution: row.try_get("price_per_execution").map_err(err)?,
        reserved_credits: row.try_get("reserved_credits").map_err(err)?,
        free_request: row.try_get("free_request").map_err(err)?,
        status: row
            .try_get::<String, _>("status")
            .map_err(err)?
            .parse()
            .map_err(err)?,
        total: u32::try_from(total).map_err(err)?,
        created_at: row.try_get("created_at").map_err(err)?,
        finished_at: row.try_get("finished_at").map_err(err)?,
        approval: match row
            .try_get::<Option<String>, _>("approval_state")
            .map_err(err)?
        {
            None => None,
            Some(state) => Some(ApprovalRecord {
                state: state.parse().map_err(err)?,
                requested_at: row
                    .try_get::<Option<i64>, _>("approval_requested_at")
                    .map_err(err)?
                    .unwrap_or_default(),
                expires_at: row
                    .try_get::<Option<i64>, _>("approval_expires_at")
                    .map_err(err)?
                    .unwrap_or_default(),
                decided_at: row.try_get("approval_decided_at").map_err(err)?,
                reason: row.try_get("approval_reason").map_err(err)?,
            }),
        },
    })
}

/// The delegations of agent `$1` on chain `$2` that are active and unexpired at `$3` (the fan-out
/// gate: the users a submit addresses, the preflight's count, the delegation an execution runs under).
macro_rules! usable_delegations {
    () => {
        "FROM delegations WHERE agent_id = $1 AND chain_id = $2 AND status = 'active' AND (expires_at IS NULL OR expires_at > $3)"
    };
}

/// A credit row as read: (balance, reserved, free_day, free_used).
pub(crate) type CreditRow = (i64, i64, i64, i32);

pub(crate) fn credit_from(row: CreditRow) -> Result<CreditAccount, StoreError> {
    let (balance, reserved, free_day, free_used) = row;
    Ok(CreditAccount {
        balance,
        reserved,
        free_day,
        free_used: u32::try_from(free_used).map_err(err)?,
    })
}

pub(crate) fn agent_from_row<R: Row>(row: &R) -> Result<AgentRecord, StoreError>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    String: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<String>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<i64>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    Ok(AgentRecord {
        id: row.try_get("id").map_err(err)?,
        account_id: row.try_get("account_id").map_err(err)?,
        name: row.try_get("name").map_err(err)?,
        wallet_address: row.try_get("wallet_address").map_err(err)?,
        created_at: row.try_get("created_at").map_err(err)?,
        key_rotated_at: row.try_get("key_rotated_at").map_err(err)?,
    })
}

pub(crate) fn hash_from(bytes: Vec<u8>) -> Result<SecretHash, StoreError> {
    let arr: [u8; 32] = bytes
        .try_into()
        .map_err(|_| corrupt("a stored key hash is not 32 bytes"))?;
    Ok(SecretHash(arr))
}

macro_rules! select_agents {
    ($where:literal) => {
        concat!(
            "SELECT id, account_id, name, wallet_address, created_at, key_rotated_at FROM agents ",
            $where
        )
    };
}
