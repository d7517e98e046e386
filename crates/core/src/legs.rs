//! The legs a venue runs elsewhere after a write succeeded (a bridge's fill on its destination),
//! followed in the background until they end, so the owner hears of each end once: the audit
//! entry `bridge.completed` or `bridge.failed` (webhooks and the event stream carry them), written
//! with the leg's end in one transaction, so two processes looking at once record it once.

use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::audit::{actor, kinds};
use crate::clock::{Clock, from_millis, to_millis};
use crate::error::Result;
use crate::execution::Registry;
use crate::states::LegState;
use crate::store::{AuditEvent, OpenLeg, Store};

/// How often every process looks at the open legs.
pub const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(3);
/// A leg still open this long after its write is no longer followed (`untracked`).
pub const FOLLOWED_FOR: time::Duration = time::Duration::days(1);
/// How many open legs one look reads, and how many of them at once.
const BATCH: u32 = 200;
const AT_ONCE: usize = 8;

/// Follows open legs through their providers.
pub struct Legs {
    store: Arc<dyn Store>,
    registry: Arc<Registry>,
    clock: Arc<dyn Clock>,
    /// Where the next look starts among the open legs.
    skip: std::sync::atomic::AtomicU32,
}

impl Legs {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        registry: Arc<Registry>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            store,
            registry,
            clock,
            skip: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// Looks at [`BATCH`] open legs, the next ones after the last look's (from the longest open
    /// again once it reached the end), so that no leg waits behind older ones; the number this
    /// look ended.
    pub async fn watch(&self) -> Result<usize> {
        use std::sync::atomic::Ordering;
        let skip = self.skip.load(Ordering::Relaxed);
        let open = self.store.open_legs(skip, BATCH).await?;
        let next = if open.len() < BATCH as usize {
            0
        } else {
            skip.saturating_add(BATCH)
        };
        self.skip.store(next, Ordering::Relaxed);
        let ended = futures_util::stream::iter(open)
            .map(|leg| self.look(leg))
            .buffer_unordered(AT_ONCE)
            .collect::<Vec<_>>()
            .await;
        let mut n = 0;
        for r in ended {
            n += usize::from(r?);
        }
        Ok(n)
    }

    /// Reads one leg from its venue; ends it when the venue says it ended, or when it has been
    /// followed for [`FOLLOWED_FOR`]. True when this look ended it.
    async fn look(&self, leg: OpenLeg) -> Result<bool> {
        let (intent, execution) = (&leg.intent, &leg.execution);
        let data: Value = execution
            .data
            .as_deref()
            .and_then(|d| serde_json::from_str(d).ok())
            .unwrap_or(Value::Null);
        let read = match self.registry.provider(&intent.action, intent.lane) {
            Some(p) => p.follow(&intent.action, execution.chain_id, &data).await,
            None => Ok(None),
        };
        let now = self.clock.now();
        let overdue = now - from_millis(leg.finished_at) > FOLLOWED_FOR;
        let now = to_millis(now);
        let (state, kind, leg_view) = match read {
            Ok(Some(v)) if v["status"] == "DONE" => (LegState::Done, kinds::BRIDGE_COMPLETED, v),
            Ok(Some(v)) if v["status"] == "FAILED" => (LegState::Failed, kinds::BRIDGE_FAILED, v),
            // Nothing was recorded to follow (a deposit whose receipt named no deposit).
            Ok(None) => (LegState::Untracked, kinds::BRIDGE_UNTRACKED, Value::Null),
            Ok(Some(v)) if overdue => (LegState::Untracked, kinds::BRIDGE_UNTRACKED, v),
            Err(e) if overdue => (
                LegState::Untracked,
                kinds::BRIDGE_UNTRACKED,
                json!({"status": "UNKNOWN", "substatusMessage": e.message}),
            ),
            Ok(Some(_)) => return Ok(false),
            Err(e) => {
                tracing::debug!(intent_id = intent.id, seq = execution.seq, error = %e.message, "a leg could not be read now");
                return Ok(false);
            }
        };
        let event = AuditEvent::new(
            &intent.account_id,
            now,
            kind,
            actor::GATEWAY,
            &intent.id,
            json!({
                "seq": execution.seq,
                "action": intent.action,
                "chainId": execution.chain_id,
                "walletAddress": execution.wallet_address,
                "txHash": execution.tx_hash,
                "leg": leg_view,
            }),
        )
        .with_agent(&intent.agent_id);
        Ok(self
            .store
            .end_leg(&intent.id, execution.seq, state, &event)
            .await?)
    }
}
