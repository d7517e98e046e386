//! The audit trail (issue 27): every decision about an account is an append-only entry, chained
//! per account by a keyed hash of the previous entry and its own content, so that an entry edited,
//! inserted or deleted in the database is found by [`verify`].
//!
//! Decisions write an [`AuditEvent`] in the same transaction that makes them (the `audit_events`
//! outbox: a crash loses none); a background step, [`Audit::chain`] on every process, moves events
//! into the chain in order (one process at a time, each account's head row locked), and answers
//! the entries it added (the webhooks and the event stream take them from there). The link hash is
//! HMAC-SHA-256 under a key derived from the master key: someone who can write the database but
//! does not hold the master key cannot recompute a chain to hide an edit.

use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use actiongate_api_types::audit::{AuditEntryView, AuditVerify};
use serde_json::{Value, json};

use crate::acceptance::AcceptedIntent;
use crate::clock::{from_millis, rfc3339, to_millis};
use crate::crypto::Keyring;
use crate::error::{Error, Result};
use crate::ledger::LedgerRow;
use crate::money::micros_to_usd;
use crate::states::IntentStatus;
use crate::store::{AuditEntry, AuditEvent, AuditRecord, ChainLinker, IntentRecord, Store};

/// The hash before an account's first entry.
pub const GENESIS: [u8; 32] = [0; 32];
/// Entries one page of an export or a verification reads.
pub const PAGE: u32 = 500;
/// Events one chaining step moves into the chains.
const CHAIN_BATCH: u32 = 1000;

/// Who made a decision.
pub mod actor {
    /// The account's owner (a session).
    pub const OWNER: &str = "owner";
    /// The gateway itself (the runner, a sweep).
    pub const GATEWAY: &str = "gateway";

    /// An agent, by id.
    pub fn agent(agent_id: &str) -> String {
        format!("agent:{agent_id}")
    }
}

/// Makes the link hashes of the chains (HMAC-SHA-256 under the master key's pepper, domain
/// `audit`).
#[derive(Clone, Debug)]
pub struct Linker {
    keys: Keyring,
    /// A ledger entry that takes the balance below this many credits is a `credits.low` event.
    credits_low_below: i64,
}

impl Linker {
    pub fn new(keys: Keyring) -> Self {
        Self {
            keys,
            credits_low_below: 100,
        }
    }

    pub fn with_credits_low_below(mut self, credits: i64) -> Self {
        self.credits_low_below = credits;
        self
    }

    /// The hash of an entry: the previous entry's hash and every field of this one, each
    /// length-delimited by the canonical JSON array it is written as.
    pub fn link(&self, prev: &[u8; 32], e: &AuditRecord) -> [u8; 32] {
        let body = json!([
            hex::encode(prev),
            e.account_id,
            e.seq,
            e.at,
            e.kind,
            e.actor,
            e.subject,
            e.code,
            e.data
        ]);
        self.keys.hash_secret("audit", &body.to_string()).0
    }
}

impl ChainLinker for Linker {
    fn extend(
        &self,
        account_id: &str,
        head: (i64, [u8; 32]),
        events: &[AuditEvent],
    ) -> (Vec<AuditEntry>, (i64, [u8; 32])) {
        let (mut seq, mut prev) = head;
        let mut out = Vec::with_capacity(events.len());
        for e in events {
            seq += 1;
            let unlinked = AuditRecord {
                account_id: account_id.to_owned(),
                seq,
                at: e.at,
                kind: e.kind.clone(),
                actor: e.actor.clone(),
                subject: e.subject.clone(),
                code: e.code.clone(),
                data: e.data.clone(),
            };
            let hash = self.link(&prev, &unlinked);
            out.push(AuditEntry {
                entry: unlinked,
                prev_hash: prev,
                hash,
            });
            prev = hash;
        }
        (out, (seq, prev))
    }

    fn events_of(&self, entry: &AuditEntry) -> Vec<(String, String)> {
        events_of(entry, self.credits_low_below)
    }
}

/// What a verification found so far: carried from one page to the next.
#[derive(Debug, Clone)]
pub struct Verifier {
    linker: Linker,
    seq: i64,
    prev: [u8; 32],
    broken: Option<(i64, String)>,
}

impl Verifier {
    pub fn new(linker: Linker) -> Self {
        Self {
            linker,
            seq: 0,
            prev: GENESIS,
            broken: None,
        }
    }

    /// Checks the next entries, in order; stops looking at the first break.
    pub fn check(&mut self, entries: &[AuditEntry]) {
        for e in entries {
            if self.broken.is_some() {
                return;
            }
            let want = self.seq + 1;
            let reason = if e.entry.seq != want {
                Some(format!(
                    "entry {want} is missing (the next entry is {})",
                    e.entry.seq
                ))
            } else if e.prev_hash != self.prev {
                Some(format!(
                    "entry {} does not follow entry {}",
                    e.entry.seq, self.seq
                ))
            } else if self.linker.link(&e.prev_hash, &e.entry) != e.hash {
                Some(format!(
                    "entry {} was changed after it was written",
                    e.entry.seq
                ))
            } else {
                None
            };
            match reason {
                Some(reason) => self.broken = Some((want.min(e.entry.seq), reason)),
                None => {
                    self.seq = e.entry.seq;
                    self.prev = e.hash;
                }
            }
        }
    }

    /// The verdict, given the chain's head as stored (its last entry's seq and hash).
    pub fn finish(mut self, head: Option<(i64, [u8; 32])>) -> AuditVerify {
        if self.broken.is_none() {
            let (seq, hash) = head.unwrap_or((0, GENESIS));
            if seq != self.seq || hash != self.prev {
                self.broken = Some((
                    self.seq + 1,
                    format!(
                        "the chain's head is entry {seq}, its last readable entry is {}: entries were removed from its end",
                        self.seq
                    ),
                ));
            }
        }
        AuditVerify {
            ok: self.broken.is_none(),
            entries: u64::try_from(self.seq).unwrap_or(0),
            head: hex::encode(self.prev),
            broken_at: self.broken.as_ref().map(|(seq, _)| *seq),
            reason: self.broken.map(|(_, reason)| reason),
        }
    }
}

/// The wire shape of an entry.
pub fn entry_view(e: &AuditEntry) -> AuditEntryView {
    AuditEntryView {
        seq: e.entry.seq,
        at: rfc3339(from_millis(e.entry.at)),
        kind: e.entry.kind.clone(),
        actor: e.entry.actor.clone(),
        subject: e.entry.subject.clone(),
        code: e.entry.code.clone(),
        data: serde_json::from_str(&e.entry.data).unwrap_or(Value::Null),
        prev_hash: hex::encode(e.prev_hash),
        hash: hex::encode(e.hash),
    }
}

/// The events a batch of the intent pipeline writes beside its rows: each accepted intent (and
/// its approval request), each intent that ended, each credit ledger entry.
pub fn batch_events(
    accepted: &[AcceptedIntent<'_>],
    ended: &[(&IntentRecord, IntentStatus)],
    ledger: &[LedgerRow<'_>],
    at: i64,
) -> Vec<AuditEvent> {
    let mut out = Vec::with_capacity(accepted.len() + ended.len() + ledger.len());
    for a in accepted {
        let d = a.draft;
        let data = json!({
            "action": d.action,
            "lane": d.lane.as_str(),
            "chainId": d.chain_id,
            "amountUsd": micros_to_usd(d.amount_micros),
            "users": a.total,
            "reservedCredits": a.reserved_credits,
            "freeRequest": a.free_request,
        });
        out.push(
            AuditEvent::new(
                &d.account_id,
                d.now,
                "intent.accepted",
                actor::agent(&d.agent_id),
                &d.id,
                data,
            )
            .with_agent(&d.agent_id),
        );
        if let Some(expires_at) = d.approval_expires_at {
            out.push(
                AuditEvent::new(
                    &d.account_id,
                    d.now,
                    kinds::APPROVAL_REQUESTED,
                    actor::agent(&d.agent_id),
                    &d.id,
                    json!({
                        "action": d.action,
                        "chainId": d.chain_id,
                        "amountUsd": micros_to_usd(d.amount_micros),
                        "expiresAt": rfc3339(from_millis(expires_at)),
                    }),
                )
                .with_agent(&d.agent_id),
            );
        }
    }
    for (intent, status) in ended {
        let kind = match status {
            IntentStatus::Failed => kinds::INTENT_FAILED,
            _ => kinds::INTENT_COMPLETED,
        };
        out.push(
            AuditEvent::new(
                &intent.account_id,
                at,
                kind,
                actor::GATEWAY,
                &intent.id,
                json!({"action": intent.action, "chainId": intent.chain_id, "users": intent.total}),
            )
            .with_agent(&intent.agent_id),
        );
    }
    for l in ledger {
        let mut e = AuditEvent::new(
            l.account_id,
            l.at,
            format!("credits.{}", l.kind.as_str()),
            l.agent_id
                .map_or_else(|| actor::GATEWAY.to_owned(), actor::agent),
            l.intent_id.or(l.invoice_id).unwrap_or(l.account_id),
            json!({
                "reason": l.reason,
                "balanceBefore": l.before.balance,
                "balanceAfter": l.after.balance,
                "reservedBefore": l.before.reserved,
                "reservedAfter": l.after.reserved,
                "intentId": l.intent_id,
                "invoiceId": l.invoice_id,
            }),
        );
        e.agent_id = l.agent_id.map(str::to_owned);
        out.push(e);
    }
    out
}

/// The audit event of an execution's end (a write's: a read's end is its intent's).
pub fn execution_event(
    intent: &IntentRecord,
    execution: &crate::store::ExecutionRecord,
    finish: &crate::store::ExecutionFinish,
    at: i64,
) -> AuditEvent {
    AuditEvent::new(
        &intent.account_id,
        at,
        kinds::EXECUTION_ENDED,
        actor::GATEWAY,
        &intent.id,
        json!({
            "seq": execution.seq,
            "walletAddress": execution.wallet_address,
            "chainId": execution.chain_id,
            "success": finish.success,
            "txHash": finish.tx_hash,
        }),
    )
    .with_agent(&intent.agent_id)
    .with_code(finish.error_code.as_deref())
}

/// The audit event of a delegation's new status, by whoever found it (`actor`).
pub fn delegation_event(
    agent_id: &str,
    hash: &str,
    status: crate::states::DelegationStatus,
    actor: &str,
    at: i64,
    data: Value,
) -> AuditEvent {
    use crate::states::DelegationStatus as S;
    let kind = match status {
        S::Active => kinds::DELEGATION_ACTIVATED.to_owned(),
        S::Revoked => kinds::DELEGATION_REVOKED.to_owned(),
        S::Expired => kinds::DELEGATION_EXPIRED.to_owned(),
        other => format!("delegation.{}", other.as_str()),
    };
    AuditEvent::for_agent(agent_id, at, kind, actor, hash, data)
}

/// The event types a webhook endpoint may subscribe to (and the event stream carries).
pub const EVENT_TYPES: &[&str] = &[
    kinds::INTENT_COMPLETED,
    kinds::INTENT_FAILED,
    kinds::APPROVAL_REQUESTED,
    kinds::DELEGATION_REVOKED,
    kinds::CREDITS_LOW,
    kinds::BRIDGE_COMPLETED,
    kinds::BRIDGE_FAILED,
];
/// The events an audit entry makes, as (type, payload): the entry's own kind when it is an event
/// type, and `credits.low` for a ledger entry that takes the balance below `credits_low_below`.
pub fn events_of(entry: &AuditEntry, credits_low_below: i64) -> Vec<(String, String)> {
    let e = &entry.entry;
    let data: Value = serde_json::from_str(&e.data).unwrap_or(Value::Null);
    let mut kinds = Vec::new();
    if EVENT_TYPES.contains(&e.kind.as_str()) {
        kinds.push(e.kind.clone());
    }
    if e.kind.starts_with("credits.") {
        let before = data["balanceBefore"].as_i64().unwrap_or(i64::MIN);
        let after = data["balanceAfter"].as_i64().unwrap_or(i64::MAX);
        if before >= credits_low_below && after < credits_low_below {
            kinds.push(kinds::CREDITS_LOW.to_owned());
        }
    }
    kinds
        .into_iter()
        .map(|kind| {
            let id = event_id(entry, &kind);
            let payload = json!({
                "id": id,
                "type": kind,
                "createdAt": rfc3339(from_millis(e.at)),
                "accountId": e.account_id,
                "subject": e.subject,
                "code": e.code,
                "data": data,
                "auditSeq": e.seq,
            });
            (kind, payload.to_string())
        })
        .collect()
}

/// An event's id: stable (a retry and the stream carry the same), unique per account entry and type.
pub fn event_id(entry: &AuditEntry, kind: &str) -> String {
    let suffix = if kind == kinds::CREDITS_LOW {
        "_low"
    } else {
        ""
    };
    format!("evt_{}{suffix}", &hex::encode(entry.hash)[..32])
}

/// The kinds other modules name (webhooks subscribe to some of them).
pub mod kinds {
    pub const INTENT_COMPLETED: &str = "intent.completed";
    pub const INTENT_FAILED: &str = "intent.failed";
    pub const INTENT_REFUSED: &str = "intent.refused";
    pub const APPROVAL_REQUESTED: &str = "approval.requested";
    pub const APPROVAL_APPROVED: &str = "approval.approved";
    pub const APPROVAL_REJECTED: &str = "approval.rejected";
    pub const APPROVAL_EXPIRED: &str = "approval.expired";
    pub const EXECUTION_ENDED: &str = "execution.ended";
    pub const POLICY_CHANGED: &str = "policy.changed";
    pub const AGENT_CREATED: &str = "agent.created";
    pub const KEY_ROTATED: &str = "agent.key_rotated";
    pub const LOGIN: &str = "owner.login";
    pub const DELEGATION_ACTIVATED: &str = "delegation.activated";
    pub const DELEGATION_REVOKED: &str = "delegation.revoked";
    pub const DELEGATION_EXPIRED: &str = "delegation.expired";
    /// A bridge's deposit filled on its destination (the recipient has the output).
    pub const BRIDGE_COMPLETED: &str = "bridge.completed";
    /// A bridge's deposit expired unfilled (refunded to the depositor, or to be).
    pub const BRIDGE_FAILED: &str = "bridge.failed";
    /// A bridge's leg no longer followed (nothing recorded to follow, or open past a day).
    pub const BRIDGE_UNTRACKED: &str = "bridge.untracked";
    /// Derived, not an entry's own kind: a ledger entry that takes the balance below the threshold.
    pub const CREDITS_LOW: &str = "credits.low";
}

/// The audit trail of an owner's account (the surfaces authenticate the owner and pass its account):
/// export and verification, and the chaining step.
pub struct Audit {
    store: Arc<dyn Store>,
    linker: Linker,
}

impl Audit {
    pub(crate) fn new(store: Arc<dyn Store>, linker: Linker) -> Self {
        Self { store, linker }
    }

    /// Moves waiting events into their accounts' chains; the entries added, in chain order.
    pub async fn chain(&self) -> Result<Vec<AuditEntry>> {
        Ok(self.store.chain_audit(&self.linker, CHAIN_BATCH).await?)
    }

    /// One page of the account's entries after `after` (a seq), with `at` in `[from, to)` when
    /// given; an empty page ends the export.
    pub async fn page(
        &self,
        account_id: &str,
        after: i64,
        range: (Option<i64>, Option<i64>),
    ) -> Result<Vec<AuditEntry>> {
        Ok(self
            .store
            .audit_page(account_id, after, range.0, range.1, PAGE)
            .await?)
    }

    /// Walks the whole chain of the account and says whether it is intact, and where not.
    pub async fn verify(&self, account_id: &str) -> Result<AuditVerify> {
        let mut verifier = Verifier::new(self.linker.clone());
        let mut after = 0;
        loop {
            let page = self
                .store
                .audit_page(account_id, after, None, None, PAGE)
                .await?;
            let Some(last) = page.last() else { break };
            after = last.entry.seq;
            verifier.check(&page);
        }
        let head = self.store.audit_head(account_id).await?;
        Ok(verifier.finish(head))
    }

    /// The seq of the account's last chained entry (0: none yet).
    pub async fn head_seq(&self, account_id: &str) -> Result<i64> {
        Ok(self
            .store
            .audit_head(account_id)
            .await?
            .map_or(0, |(seq, _)| seq))
    }

    /// The webhook events an entry makes, as the webhooks receive them.
    pub fn events_of(&self, entry: &AuditEntry) -> Vec<(String, String)> {
        self.linker.events_of(entry)
    }

    /// Parses an export bound: an RFC 3339 instant.
    pub fn bound(field: &str, text: Option<&str>) -> Result<Option<i64>> {
        text.map(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                .map(to_millis)
                .map_err(|_| {
                    Error::new(
                        ErrorCode::InvalidRequest,
                        format!("{field} must be an RFC 3339 instant (2026-11-25T00:00:00Z)."),
                    )
                })
        })
        .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::MasterKey;

    fn linker() -> Linker {
        Linker::new(
            MasterKey::from_hex(&"11".repeat(32))
                .expect("key")
                .keyring(),
        )
    }

    fn events(n: usize) -> Vec<AuditEvent> {
        (0..n)
            .map(|i| {
                AuditEvent::new(
                    "acc",
                    i64::try_from(i).unwrap_or(0),
                    "policy.changed",
                    actor::OWNER,
                    "agent-1",
                    json!({"i": i}),
                )
            })
            .collect()
    }

    #[test]
    fn a_chain_verifies_and_every_kind_of_tampering_is_found() {
        let l = linker();
        let (first, head) = l.extend("acc", (0, GENESIS), &events(3));
        let (more, head) = l.extend("acc", head, &events(2));
        let chain: Vec<AuditEntry> = first.into_iter().chain(more).collect();
        assert_eq!(head.0, 5);
        let verdict = |entries: &[AuditEntry], head| {
            let mut v = Verifier::new(l.clone());
            v.check(entries);
            v.finish(head)
        };
        let ok = verdict(&chain, Some(head));
        assert!(ok.ok && ok.entries == 5, "{ok:?}");

        let mut edited = chain.clone();
        edited[2].entry.data = r#"{"i":99}"#.into();
        let v = verdict(&edited, Some(head));
        assert_eq!((v.ok, v.broken_at), (false, Some(3)), "{v:?}");

        let mut deleted = chain.clone();
        deleted.remove(1);
        assert_eq!(verdict(&deleted, Some(head)).broken_at, Some(2));

        let truncated = &chain[..4];
        let v = verdict(truncated, Some(head));
        assert_eq!((v.ok, v.broken_at), (false, Some(5)), "{v:?}");

        // Recomputed with another key (someone without the master key): found.
        let other = Linker::new(
            MasterKey::from_hex(&"22".repeat(32))
                .expect("key")
                .keyring(),
        );
        let (forged, forged_head) = other.extend("acc", (0, GENESIS), &events(5));
        assert_eq!(verdict(&forged, Some(forged_head)).broken_at, Some(1));
    }
}
