//! Accepting intent drafts: the decision, as a pure function over what the accepting transaction
//! read under its locks ([`Snapshot`], a [`CreditLedger`] of the locked credit rows). It answers one
//! [`AcceptOutcome`] per draft and every row the accepted drafts write ([`Acceptance`]); the store
//! writes them in the same transaction. Checks, in order: the agent's key and policy are still
//! those the draft was checked against, idempotency (a replay, a reused key, a stale derived key),
//! the daily limit (a fan-out counts its amount once per user addressed), the users addressed
//! (delegation; in a fan-out every recipient-like param names the user), credits. Drafts are decided in arrival order,
//! each seeing the ones before it; a refused draft writes nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::crypto::SecretHash;
use crate::ledger::{Cover, CreditLedger, LedgerError, Reservation, price_for};
use crate::pricing::fits_daily_limit;
use crate::store::{
    AcceptOutcome, ExecutionDraft, IdempotencyRecord, IntentDraft, PolicyRecord, execution_key,
};

/// The DID of a user of a chain by wallet address (`did:pkh`, CAIP-10).
pub fn user_did(chain_id: u64, address: &str) -> String {
    format!("did:pkh:eip155:{chain_id}:{address}")
}

/// The longest idempotency key (CONTRACT "Prices behind the limits").
pub const MAX_IDEMPOTENCY_KEY: usize = 255;

/// An idempotency key is 1 to [`MAX_IDEMPOTENCY_KEY`] printable ASCII characters (0x20 to 0x7e): no
/// control character (a NUL byte must never reach PostgreSQL), nothing outside ASCII.
pub fn check_idempotency_key(key: &str) -> Result<(), crate::error::Error> {
    let printable = key.bytes().all(|b| (0x20..=0x7e).contains(&b));
    if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY || !printable {
        return Err(crate::error::Error::invalid(format!(
            "idempotencyKey must be 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters."
        )));
    }
    Ok(())
}

/// The params that name who receives an action's output (CONTRACT "Prices behind the limits").
pub const RECIPIENT_FIELDS: [&str; 4] = ["recipient", "receiver", "to", "onBehalfOf"];

/// Each of an action's recipient params (`fields`: the action's catalog entry says which; by
/// default [`RECIPIENT_FIELDS`]) present in `params`, with what it names (a value that is not a
/// string is kept as its JSON text, which names no wallet).
pub fn recipients(params: &serde_json::Value, fields: &[String]) -> Vec<(String, String)> {
    fields
        .iter()
        .filter_map(|field| {
            let v = params.get(field)?;
            let named = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            Some((field.clone(), named))
        })
        .collect()
}

/// The recipient params of an action whose catalog entry does not say: [`RECIPIENT_FIELDS`].
pub fn default_recipient_fields() -> Vec<String> {
    RECIPIENT_FIELDS.iter().map(|f| (*f).to_owned()).collect()
}

/// The first of `recipients` that does not name `delegator` (addresses compare case-insensitively):
/// under a delegation the output belongs to the delegator (the caveats bind contracts and
/// functions, not their arguments).
pub fn foreign_recipient<'r>(
    recipients: &'r [(String, String)],
    delegator: &str,
) -> Option<&'r (String, String)> {
    recipients
        .iter()
        .find(|(_, named)| !named.eq_ignore_ascii_case(delegator))
}

/// What a write of `amount_micros` counts against the daily limit when it addresses `users`: a
/// fan-out moves its amount once for every user. More than an i64 holds counts as `i64::MAX`, over
/// any limit, never wrapped.
pub fn counted_usage(amount_micros: i64, users: usize) -> i64 {
    i64::try_from(users)
        .ok()
        .and_then(|n| amount_micros.checked_mul(n))
        .unwrap_or(i64::MAX)
}

/// The daily usage an intent's acceptance counted, to give back when it ends having moved
/// nothing (an order without a fill, an approval rejected or expired): (the UTC day it was
/// counted on, the micro-dollars, [`counted_usage`]).
pub fn daily_share(intent: &crate::store::IntentRecord) -> (i64, i64) {
    let users = usize::try_from(intent.total.max(1)).unwrap_or(usize::MAX);
    (
        crate::ledger::day_of(intent.created_at),
        counted_usage(intent.amount_micros, users),
    )
}

/// The refusal of a fan-out whose `field` names `named`, not the `delegator` it runs for.
pub fn foreign_recipient_refusal(field: &str, named: &str, delegator: &str) -> crate::error::Error {
    crate::error::Error::new(
        actiongate_api_types::ErrorCode::InvalidParams,
        format!(
            "params.{field}: under a delegation the output goes to the delegator {delegator}, not {named}."
        ),
    )
}

/// For a key the gateway derived from the request (no `idempotencyKey` given): a stored record
/// created before `replace_before` is stale, and a new request with the same key replaces it.
pub fn is_stale_derived_key(created_at: i64, replace_before: Option<i64>) -> bool {
    replace_before.is_some_and(|t| created_at < t)
}

/// An agent as the accepting transaction reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentNow {
    pub key_hash: SecretHash,
    /// None: no policy stored (the default applies).
    pub policy: Option<PolicyRecord>,
}

/// What the accepting transaction read for a batch of drafts.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The drafts' agents by id; an agent missing is gone.
    pub agents: HashMap<String, AgentNow>,
    /// The stored idempotency records of the drafts' keys, by agent, then key.
    pub idempotency: HashMap<String, HashMap<String, IdempotencyRecord>>,
    /// Daily usage in micro-dollars of the agents with writes in the batch, by agent, then UTC day;
    /// missing: none.
    pub usage: HashMap<String, HashMap<i64, i64>>,
    /// For each fan-out draft (by draft id): the delegators with an active, unexpired delegation to
    /// the agent on the draft's chain at the draft's time, once each, oldest delegation first
    /// (only the draft's `only_delegator`, when it names one).
    pub delegators: HashMap<String, Vec<String>>,
}

/// An intent a batch accepted, with what its acceptance decided.
#[derive(Debug, Clone)]
pub struct AcceptedIntent<'a> {
    pub draft: &'a IntentDraft,
    pub reserved_credits: i64,
    pub free_request: bool,
    pub total: u32,
}

/// One execution of an accepted intent, written pending.
#[derive(Debug, Clone, PartialEq)]
pub struct NewExecution<'a> {
    pub intent_id: &'a str,
    pub seq: u32,
    pub execution_key: String,
    pub user: ExecutionDraft,
    pub chain_id: u64,
}

/// Everything the accepted drafts write (the credit changes stay in the [`CreditLedger`]).
#[derive(Debug, Clone, Default)]
pub struct Acceptance<'a> {
    /// One per draft, in the drafts' order.
    pub outcomes: Vec<AcceptOutcome>,
    pub intents: Vec<AcceptedIntent<'a>>,
    pub executions: Vec<NewExecution<'a>>,
    /// Stale derived keys, (agent, key), to delete before the accepted drafts' keys are written.
    pub replaced_keys: Vec<(String, String)>,
    /// Daily usage to add: (agent, UTC day, micro-dollars), one entry per (agent, day).
    pub usage: Vec<(String, i64, i64)>,
}

/// The users a draft addresses: for a fan-out, each delegator of the snapshot; else the agent's
/// own wallet.
fn users_of(d: &IntentDraft, snapshot: &Snapshot) -> Vec<ExecutionDraft> {
    if !d.fan_out {
        return vec![d.own.clone()];
    }
    let delegators = snapshot.delegators.get(&d.id).map(Vec::as_slice);
    delegators
        .unwrap_or_default()
        .iter()
        .map(|wallet| ExecutionDraft {
            user_did: user_did(d.chain_id, wallet),
            wallet_address: wallet.clone(),
        })
        .collect()
}

/// Decides `drafts` against `snapshot` and the locked credit rows in `ledger` (which keeps the
/// credit changes and their ledger rows). An error is never a refusal: the caller rolls back.
pub fn decide<'a>(
    drafts: &'a [IntentDraft],
    snapshot: &Snapshot,
    ledger: &mut CreditLedger<'a>,
) -> Result<Acceptance<'a>, LedgerError> {
    let mut out = Acceptance {
        outcomes: Vec::with_capacity(drafts.len()),
        ..Acceptance::default()
    };
    // Keys accepted in this batch: (request hash, intent).
    let mut in_batch: HashMap<(&str, &str), (&[u8; 32], &str)> = HashMap::new();
    // Keys whose stale record an accepted draft replaced.
    let mut replaced: BTreeSet<(&str, &str)> = BTreeSet::new();
    // Usage the batch's accepted writes add, by (agent, day).
    let mut added_usage: BTreeMap<(&str, i64), i64> = BTreeMap::new();
    for d in drafts {
        let outcome = decide_one(
            d,
            snapshot,
            ledger,
            &mut in_batch,
            &mut replaced,
            &mut added_usage,
        )?;
        if let AcceptOutcome::Accepted {
            total,
            reserved_credits,
            free_request,
        } = outcome
        {
            for (seq, user) in (0u32..).zip(users_of(d, snapshot)) {
                out.executions.push(NewExecution {
                    intent_id: &d.id,
                    seq,
                    execution_key: execution_key(&d.id, seq),
                    user,
                    chain_id: d.chain_id,
                });
            }
            out.intents.push(AcceptedIntent {
                draft: d,
                reserved_credits,
                free_request,
                total,
            });
        }
        out.outcomes.push(outcome);
    }
    out.replaced_keys = replaced
        .into_iter()
        .map(|(agent, key)| (agent.to_owned(), key.to_owned()))
        .collect();
    out.usage = added_usage
        .into_iter()
        .map(|((agent, day), micros)| (agent.to_owned(), day, micros))
        .collect();
    Ok(out)
}

/// Decides one draft, recording in the batch's maps what an acceptance changes.
fn decide_one<'a>(
    d: &'a IntentDraft,
    snapshot: &Snapshot,
    ledger: &mut CreditLedger<'a>,
    in_batch: &mut HashMap<(&'a str, &'a str), (&'a [u8; 32], &'a str)>,
    replaced: &mut BTreeSet<(&'a str, &'a str)>,
    added_usage: &mut BTreeMap<(&'a str, i64), i64>,
) -> Result<AcceptOutcome, LedgerError> {
    let confirmed = snapshot
        .agents
        .get(&d.agent_id)
        .is_some_and(|a| a.key_hash.0 == d.key_hash.0 && a.policy == d.policy);
    if !confirmed {
        return Ok(AcceptOutcome::Stale);
    }
    let key = (d.agent_id.as_str(), d.idempotency_key.as_str());
    let replay = |hash: &[u8; 32], intent_id: &str| {
        if *hash == d.request_hash {
            AcceptOutcome::Replay {
                intent_id: intent_id.to_owned(),
            }
        } else {
            AcceptOutcome::KeyReused
        }
    };
    if let Some((hash, intent_id)) = in_batch.get(&key) {
        return Ok(replay(hash, intent_id));
    }
    let mut replaces_stale = false;
    if let Some(found) = snapshot
        .idempotency
        .get(&d.agent_id)
        .and_then(|keys| keys.get(&d.idempotency_key))
    {
        if is_stale_derived_key(found.created_at, d.replace_idempotency_before) {
            replaces_stale = true;
        } else {
            return Ok(replay(&found.request_hash, &found.intent_id));
        }
    }
    let used_key = (d.agent_id.as_str(), d.day);
    let stored = snapshot
        .usage
        .get(&d.agent_id)
        .and_then(|days| days.get(&d.day))
        .copied()
        .unwrap_or(0);
    let used = stored.saturating_add(added_usage.get(&used_key).copied().unwrap_or(0));
    let addressed: &[String] = match d.fan_out {
        true => snapshot.delegators.get(&d.id).map_or(&[], Vec::as_slice),
        false => &[],
    };
    let users = if d.fan_out { addressed.len() } else { 1 };
    // Checked in CONTRACT order, before the users addressed: a fan-out that addresses nobody yet is
    // held to its amount once (and then refused as DELEGATION_REQUIRED).
    let counted = counted_usage(d.amount_micros, users.max(1));
    if d.is_write && !fits_daily_limit(used, counted, d.daily_limit_micros) {
        return Ok(AcceptOutcome::DailyLimit {
            used_micros: used,
            amount_micros: counted,
        });
    }
    if users == 0 {
        return Ok(AcceptOutcome::DelegationRequired);
    }
    for delegator in addressed {
        if let Some((field, named)) = foreign_recipient(&d.recipients, delegator) {
            return Ok(AcceptOutcome::ForeignRecipient {
                field: field.clone(),
                named: named.clone(),
                delegator: delegator.clone(),
            });
        }
    }
    let users = u32::try_from(users).map_err(|_| LedgerError::OutOfRange("users"))?;
    let Some(price) = price_for(d.price_per_execution, u64::from(users)) else {
        // More than any balance can hold: refused as short, never priced lower.
        return Ok(AcceptOutcome::InsufficientCredits {
            balance: ledger.account(&d.account_id).map_or(0, |a| a.balance),
            price: i64::MAX,
        });
    };
    let reservation = Reservation {
        account_id: &d.account_id,
        agent_id: &d.agent_id,
        intent_id: &d.id,
        action: &d.action,
        price,
        users,
        free_per_day: d.free_per_day,
        at: d.now,
    };
    let (reserve, free_request) = match ledger.cover(&reservation)? {
        Cover::Covered {
            reserve,
            free_request,
        } => (reserve, free_request),
        Cover::Insufficient { balance, price } => {
            return Ok(AcceptOutcome::InsufficientCredits { balance, price });
        }
        Cover::AllowanceUsed => return Ok(AcceptOutcome::DailyFreeLimitExceeded),
    };
    ledger.reserve(&reservation, reserve, free_request)?;
    if d.is_write && counted > 0 {
        let added = added_usage.entry(used_key).or_insert(0);
        *added = added.saturating_add(counted);
    }
    if replaces_stale {
        replaced.insert(key);
    }
    in_batch.insert(key, (&d.request_hash, &d.id));
    Ok(AcceptOutcome::Accepted {
        total: users,
        reserved_credits: reserve,
        free_request,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{DAY_MS, day_of};
    use crate::states::LedgerKind;
    use crate::store::CreditAccount;

    const NOON: i64 = 20_000 * DAY_MS + DAY_MS / 2;

    fn policy() -> PolicyRecord {
        PolicyRecord {
            agent_id: "agent".into(),
            allowed_actions: vec!["swap".into()],
            daily_limit_micros: 100,
            max_per_action_micros: None,
            min_health_factor_bps: 15_000,
            approval_above_micros: None,
            updated_at: 1,
        }
    }

    /// A write of `amount` micro-dollars at 10 credits, for the agent's own wallet, at noon.
    fn draft(id: &str, key: &str, amount: i64) -> IntentDraft {
        IntentDraft {
            id: id.into(),
            agent_id: "agent".into(),
            account_id: "acc".into(),
            action: "swap".into(),
            lane: crate::states::Lane::ExecuteIntent,
            params: Default::default(),
            chain_id: 8453,
            amount_micros: amount,
            is_write: true,
            daily_limit_micros: 100,
            price_per_execution: 10,
            free_per_day: 1,
            idempotency_key: key.into(),
            request_hash: [key.len() as u8; 32],
            replace_idempotency_before: None,
            fan_out: false,
            only_delegator: None,
            recipients: vec![],
            own: ExecutionDraft {
                user_did: user_did(8453, "0xA6E47"),
                wallet_address: "0xA6E47".into(),
            },
            lease: None,
            day: day_of(NOON),
            now: NOON,
            key_hash: SecretHash([7; 32]),
            policy: Some(policy()),
            approval_expires_at: None,
        }
    }

    fn snapshot() -> Snapshot {
        let agent = AgentNow {
            key_hash: SecretHash([7; 32]),
            policy: Some(policy()),
        };
        Snapshot {
            agents: HashMap::from([("agent".to_owned(), agent)]),
            ..Snapshot::default()
        }
    }

    fn ledger(balance: i64, free_day: i64, free_used: u32) -> CreditLedger<'static> {
        let account = CreditAccount {
            balance,
            reserved: 0,
            free_day,
            free_used,
        };
        CreditLedger::new(BTreeMap::from([("acc", account)]))
    }

    fn accepted(total: u32, reserved_credits: i64, free_request: bool) -> AcceptOutcome {
        AcceptOutcome::Accepted {
            total,
            reserved_credits,
            free_request,
        }
    }

    fn outcomes(drafts: &[IntentDraft], s: &Snapshot, balance: i64) -> Vec<AcceptOutcome> {
        let mut l = ledger(balance, 0, 0);
        decide(drafts, s, &mut l).map(|a| a.outcomes).unwrap()
    }

    #[test]
    fn an_accepted_draft_writes_its_intent_execution_usage_and_reservation() {
        let drafts = [draft("i1", "k", 40)];
        let mut l = ledger(100, 0, 0);
        let a = decide(&drafts, &snapshot(), &mut l).unwrap();
        assert_eq!(a.outcomes, [accepted(1, 10, false)]);
        assert_eq!(a.intents.len(), 1);
        assert_eq!((a.intents[0].total, a.intents[0].reserved_credits), (1, 10));
        let e = &a.executions[0];
        assert_eq!(
            (e.intent_id, e.seq, e.execution_key.as_str()),
            ("i1", 0, "i1:0")
        );
        assert_eq!(e.user, drafts[0].own);
        assert_eq!(a.usage, [("agent".to_owned(), day_of(NOON), 40)]);
        assert!(a.replaced_keys.is_empty());
        assert_eq!(
            l.account("acc").map(|a| (a.balance, a.reserved)),
            Some((90, 10))
        );
        assert_eq!(l.rows()[0].kind, LedgerKind::Reserve);
    }

    #[test]
    fn a_changed_key_or_policy_or_a_gone_agent_is_stale_and_writes_nothing() {
        let mut rotated = snapshot();
        rotated.agents.get_mut("agent").unwrap().key_hash = SecretHash([8; 32]);
        let mut repoliced = snapshot();
        repoliced.agents.get_mut("agent").unwrap().policy = None;
        let gone = Snapshot::default();
        for s in [rotated, repoliced, gone] {
            let drafts = [draft("i1", "k", 1)];
            let mut l = ledger(100, 0, 0);
            let a = decide(&drafts, &s, &mut l).unwrap();
            assert_eq!(a.outcomes, [AcceptOutcome::Stale]);
            assert!(a.intents.is_empty() && a.executions.is_empty() && a.usage.is_empty());
            assert!(l.rows().is_empty() && l.changed().is_empty());
        }
    }

    #[test]
    fn a_stored_key_replays_or_is_reused() {
        let mut s = snapshot();
        let stored = IdempotencyRecord {
            request_hash: [1; 32],
            intent_id: "earlier".into(),
            created_at: NOON - 10,
        };
        s.idempotency
            .entry("agent".into())
            .or_default()
            .insert("k".into(), stored);
        let same = draft("i1", "k", 1); // request hash [1; 32]
        let mut other = draft("i2", "k", 1);
        other.request_hash = [2; 32];
        let replay = AcceptOutcome::Replay {
            intent_id: "earlier".into(),
        };
        assert_eq!(
            outcomes(&[same, other], &s, 100),
            [replay, AcceptOutcome::KeyReused]
        );
    }

    #[test]
    fn a_key_accepted_earlier_in_the_batch_replays_or_is_reused() {
        let first = draft("i1", "k", 1);
        let again = draft("i2", "k", 1);
        let mut other = draft("i3", "k", 1);
        other.request_hash = [9; 32];
        let replay = AcceptOutcome::Replay {
            intent_id: "i1".into(),
        };
        let got = outcomes(&[first, again, other], &snapshot(), 100);
        assert_eq!(
            got,
            [accepted(1, 10, false), replay, AcceptOutcome::KeyReused]
        );
    }

    #[test]
    fn a_stale_derived_key_is_replaced_only_by_an_accepted_draft() {
        let mut s = snapshot();
        let stored = IdempotencyRecord {
            request_hash: [1; 32],
            intent_id: "old".into(),
            created_at: NOON - 1000,
        };
        s.idempotency
            .entry("agent".into())
            .or_default()
            .insert("k".into(), stored);
        let mut d = draft("i1", "k", 1);
        d.replace_idempotency_before = Some(NOON - 999);
        let drafts = [d.clone()];
        let a = decide(&drafts, &s, &mut ledger(100, 0, 0)).unwrap();
        assert_eq!(a.outcomes, [accepted(1, 10, false)]);
        assert_eq!(a.replaced_keys, [("agent".to_owned(), "k".to_owned())]);
        // Inside the window the record stands: a replay.
        d.replace_idempotency_before = Some(NOON - 1000);
        let drafts = [d.clone()];
        let a = decide(&drafts, &s, &mut ledger(100, 0, 0)).unwrap();
        let replay = AcceptOutcome::Replay {
            intent_id: "old".into(),
        };
        assert_eq!((a.outcomes, a.replaced_keys.len()), (vec![replay], 0));
        // A stale record whose replacement is refused stays.
        d.replace_idempotency_before = Some(NOON);
        d.amount_micros = 101;
        let drafts = [d];
        let a = decide(&drafts, &s, &mut ledger(100, 0, 0)).unwrap();
        let refused = AcceptOutcome::DailyLimit {
            used_micros: 0,
            amount_micros: 101,
        };
        assert_eq!(a.outcomes, [refused]);
        assert!(a.replaced_keys.is_empty());
    }

    #[test]
    fn the_daily_limit_counts_what_was_used_and_each_draft_before() {
        let mut s = snapshot();
        s.usage
            .entry("agent".into())
            .or_default()
            .insert(day_of(NOON), 60);
        // 60 used of 100: 40 fits exactly, then 1 more does not; a read is never counted.
        let mut read = draft("i3", "k3", 500);
        read.is_write = false;
        let drafts = [draft("i1", "k1", 40), draft("i2", "k2", 1), read];
        let got = outcomes(&drafts, &s, 100);
        let refused = AcceptOutcome::DailyLimit {
            used_micros: 100,
            amount_micros: 1,
        };
        assert_eq!(
            got,
            [accepted(1, 10, false), refused, accepted(1, 10, false)]
        );
        // Yesterday's usage does not count today.
        let mut s = snapshot();
        s.usage
            .entry("agent".into())
            .or_default()
            .insert(day_of(NOON) - 1, 100);
        assert_eq!(
            outcomes(&[draft("i1", "k1", 100)], &s, 100),
            [accepted(1, 10, false)]
        );
    }

    #[test]
    fn usage_is_added_once_per_agent_and_day() {
        let drafts = [
            draft("i1", "k1", 10),
            draft("i2", "k2", 15),
            draft("i3", "k3", 0),
        ];
        let a = decide(&drafts, &snapshot(), &mut ledger(100, 0, 0)).unwrap();
        assert_eq!(a.usage, [("agent".to_owned(), day_of(NOON), 25)]);
    }

    #[test]
    fn a_fan_out_addresses_every_delegator_and_reserves_for_each() {
        let mut d = draft("i1", "k", 1);
        d.fan_out = true;
        let drafts = [d];
        // No delegator: refused, nothing written.
        let mut l = ledger(100, 0, 0);
        let a = decide(&drafts, &snapshot(), &mut l).unwrap();
        assert_eq!(a.outcomes, [AcceptOutcome::DelegationRequired]);
        assert!(l.changed().is_empty());
        let mut s = snapshot();
        let wallets = vec!["0xB0B".to_owned(), "0xCAFE".to_owned(), "0xD00D".to_owned()];
        s.delegators.insert("i1".into(), wallets);
        let mut l = ledger(100, 0, 0);
        let a = decide(&drafts, &s, &mut l).unwrap();
        assert_eq!(a.outcomes, [accepted(3, 30, false)]);
        let users: Vec<_> = a
            .executions
            .iter()
            .map(|e| (e.seq, e.user.user_did.as_str()))
            .collect();
        assert_eq!(
            users,
            [
                (0, "did:pkh:eip155:8453:0xB0B"),
                (1, "did:pkh:eip155:8453:0xCAFE"),
                (2, "did:pkh:eip155:8453:0xD00D"),
            ]
        );
        assert_eq!(l.rows()[0].reason, "swap x3");
        // 30 credits needed, 25 held, the free request used: refused with the whole price.
        let mut l = ledger(25, day_of(NOON), 1);
        let a = decide(&drafts, &s, &mut l).unwrap();
        let short = AcceptOutcome::InsufficientCredits {
            balance: 25,
            price: 30,
        };
        assert_eq!(a.outcomes, [short]);
    }

    #[test]
    fn credits_then_the_free_allowance_then_a_refusal() {
        // 15 credits: one paid draft; then the one free request of the day; then refused as short.
        let drafts = [
            draft("i1", "k1", 0),
            draft("i2", "k2", 0),
            draft("i3", "k3", 0),
        ];
        let short = AcceptOutcome::InsufficientCredits {
            balance: 5,
            price: 10,
        };
        let got = outcomes(&drafts, &snapshot(), 15);
        assert_eq!(got, [accepted(1, 10, false), accepted(1, 0, true), short]);
        // An empty balance with the allowance used is told apart.
        let got = outcomes(&drafts[..2], &snapshot(), 0);
        assert_eq!(
            got,
            [accepted(1, 0, true), AcceptOutcome::DailyFreeLimitExceeded]
        );
    }

    #[test]
    fn the_free_allowance_is_whole_again_after_utc_midnight() {
        let mut late = draft("i1", "k1", 0);
        late.now = day_of(NOON) * DAY_MS + DAY_MS - 1;
        late.day = day_of(late.now);
        let mut early = draft("i2", "k2", 0);
        early.now = late.now + 1;
        early.day = day_of(early.now);
        let drafts = [late, early];
        // Yesterday's (day - 1) request is used; 23:59:59.999 has none left, 00:00 has one.
        let mut l = ledger(0, day_of(NOON) - 1, 1);
        let a = decide(&drafts[..1], &snapshot(), &mut l).unwrap();
        assert_eq!(a.outcomes, [accepted(1, 0, true)]);
        let a = decide(&drafts, &snapshot(), &mut ledger(0, day_of(NOON), 1)).unwrap();
        assert_eq!(
            a.outcomes,
            [AcceptOutcome::DailyFreeLimitExceeded, accepted(1, 0, true)]
        );
        let mut l = ledger(0, day_of(NOON), 1);
        decide(&drafts, &snapshot(), &mut l).unwrap();
        assert_eq!(
            l.account("acc").map(|a| (a.free_day, a.free_used)),
            Some((day_of(NOON) + 1, 1))
        );
    }

    #[test]
    fn a_price_that_overflows_is_refused_not_wrapped() {
        let mut d = draft("i1", "k", 0);
        d.fan_out = true;
        d.price_per_execution = i64::MAX / 2 + 1;
        let drafts = [d];
        let mut s = snapshot();
        s.delegators
            .insert("i1".into(), vec!["0xB0B".into(), "0xCAFE".into()]);
        let mut l = ledger(100, 0, 0);
        let a = decide(&drafts, &s, &mut l).unwrap();
        let refused = AcceptOutcome::InsufficientCredits {
            balance: 100,
            price: i64::MAX,
        };
        assert_eq!(a.outcomes, [refused]);
        assert!(l.changed().is_empty() && a.executions.is_empty());
    }

    #[test]
    fn a_fan_out_counts_its_amount_once_per_user_against_the_daily_limit() {
        let mut d = draft("i1", "k", 30);
        d.fan_out = true;
        let drafts = [d];
        let mut s = snapshot();
        let wallets = vec!["0xB0B".to_owned(), "0xCAFE".to_owned(), "0xD00D".to_owned()];
        s.delegators.insert("i1".into(), wallets.clone());
        // 3 users x 30 = 90 of 100: accepted, 90 counted.
        let a = decide(&drafts, &s, &mut ledger(100, 0, 0)).unwrap();
        assert_eq!(a.outcomes, [accepted(3, 30, false)]);
        assert_eq!(a.usage, [("agent".to_owned(), day_of(NOON), 90)]);
        // With 11 used, 90 more does not fit (30 alone would).
        s.usage
            .entry("agent".into())
            .or_default()
            .insert(day_of(NOON), 11);
        let refused = AcceptOutcome::DailyLimit {
            used_micros: 11,
            amount_micros: 90,
        };
        assert_eq!(outcomes(&drafts, &s, 100), [refused]);
        // An amount times the users past i64 is over any limit, not wrapped.
        let mut huge = drafts[0].clone();
        huge.amount_micros = i64::MAX / 2;
        huge.daily_limit_micros = i64::MAX - 1;
        let refused = AcceptOutcome::DailyLimit {
            used_micros: 11,
            amount_micros: i64::MAX,
        };
        assert_eq!(outcomes(&[huge], &s, 100), [refused]);
    }

    #[test]
    fn a_fan_out_naming_another_recipient_is_refused_and_writes_nothing() {
        let mut d = draft("i1", "k", 1);
        d.fan_out = true;
        d.recipients = recipients(
            &serde_json::json!({"to": "0xb0b", "amount": "1"}),
            &default_recipient_fields(),
        );
        let mut s = snapshot();
        s.delegators.insert("i1".into(), vec!["0xB0B".to_owned()]);
        // The one delegator, in another case: accepted.
        let drafts = [d.clone()];
        assert_eq!(outcomes(&drafts, &s, 100), [accepted(1, 10, false)]);
        // Two delegators: the second is not who `to` names.
        s.delegators
            .insert("i1".into(), vec!["0xB0B".to_owned(), "0xCAFE".to_owned()]);
        let mut l = ledger(100, 0, 0);
        let a = decide(&drafts, &s, &mut l).unwrap();
        let refused = AcceptOutcome::ForeignRecipient {
            field: "to".into(),
            named: "0xb0b".into(),
            delegator: "0xCAFE".into(),
        };
        assert_eq!(a.outcomes, [refused]);
        assert!(l.changed().is_empty() && a.executions.is_empty() && a.usage.is_empty());
    }

    #[test]
    fn every_recipient_like_param_is_found() {
        let p = serde_json::json!({
            "recipient": "0xA", "receiver": "0xB", "to": "0xC", "onBehalfOf": 7, "amount": "1"
        });
        let got = recipients(&p, &default_recipient_fields());
        let fields: Vec<_> = got.iter().map(|(f, n)| (f.as_str(), n.as_str())).collect();
        assert_eq!(
            fields,
            [
                ("recipient", "0xA"),
                ("receiver", "0xB"),
                ("to", "0xC"),
                ("onBehalfOf", "7")
            ]
        );
        assert!(
            recipients(
                &serde_json::json!({"amount": "1"}),
                &default_recipient_fields()
            )
            .is_empty()
        );
        // An action that says it has none (fx-swap's `to` is a token): nothing is a recipient.
        assert!(recipients(&p, &[]).is_empty());
    }

    #[test]
    fn idempotency_keys_are_short_printable_ascii() {
        for ok in ["k", "order-2026-11-24/7 #1", "x".repeat(255).as_str()] {
            assert!(check_idempotency_key(ok).is_ok(), "{ok:?}");
        }
        for bad in [
            "",
            "a\0b",
            "tab\there",
            "caf\u{e9}",
            "\u{7f}",
            "x".repeat(256).as_str(),
        ] {
            let err = check_idempotency_key(bad).expect_err(bad);
            assert_eq!(err.code, actiongate_api_types::ErrorCode::InvalidRequest);
        }
    }

    #[test]
    fn an_unlocked_account_is_an_error_not_a_refusal() {
        let drafts = [draft("i1", "k", 0)];
        let got = decide(&drafts, &snapshot(), &mut CreditLedger::default());
        assert_eq!(
            got.map(|a| a.outcomes),
            Err(LedgerError::AccountNotLocked("acc".into()))
        );
    }
}
