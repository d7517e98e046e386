//! The gateway's own side of prediction-market orders ([`crate::orders`]): cancelling a held order
//! (`cancel-prediction-order`) and listing an agent's orders (`get-prediction-orders`). Placing
//! and filling one is the venue's (the EVM provider's `place-prediction-order`).

use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::acceptance::daily_share;
use crate::catalog::Lane;
use crate::clock::{Clock, to_millis};
use crate::error::{Error, Result};
use crate::execution::{ExecutionContext, ExecutionOutcome, Provider, Reconciled};
use crate::orders::{CANCEL, LIST, OrderStatus, PLACE, VENUE, order_view, status_of};
use crate::store::{ExecutionFinish, IntentRecord, OrderEnd, Store};

/// Most orders one listing answers.
const MAX_LIST: u64 = 200;
/// Orders one listing looks through before its status filter.
const SCAN: u32 = 1000;

/// Cancels and lists orders held in the gateway's store.
pub struct OrderBook {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
}

/// How long a cancel waits for the runner's look at a held order to end.
const CANCEL_WAIT: std::time::Duration = std::time::Duration::from_secs(3);
/// How often a waiting cancel looks again.
const CANCEL_RETRY: std::time::Duration = std::time::Duration::from_millis(50);

impl OrderBook {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        Self { store, clock }
    }

    /// The agent's order `orderId` with its one execution.
    async fn order(
        &self,
        ctx: &ExecutionContext,
        id: &str,
    ) -> Result<(IntentRecord, Option<crate::store::ExecutionRecord>)> {
        let intent = self
            .store
            .get_intent(id)
            .await?
            .filter(|i| i.agent_id == ctx.agent_id && i.action == PLACE)
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::NotFound,
                    format!("This agent has no prediction order {id}."),
                )
            })?;
        let execution = self.store.list_executions(id).await?.into_iter().next();
        Ok((intent, execution))
    }

    async fn cancel(&self, ctx: &ExecutionContext) -> Result<Value> {
        let id = ctx
            .params
            .get("orderId")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::new(ErrorCode::InvalidParams, "orderId is required"))?;
        if let Some(p) = ctx.params.get("providerId").and_then(Value::as_str)
            && p != VENUE
        {
            return Err(Error::new(
                ErrorCode::InvalidParams,
                format!("providerId {p:?}: this gateway holds orders of {VENUE} only"),
            ));
        }
        // The runner's look at a held order (does the market meet its limit now?) holds it
        // `filling` for a moment with nothing sent; a cancel that meets such a look waits it out
        // (up to CANCEL_WAIT) instead of refusing an order that is open again right after.
        let deadline = tokio::time::Instant::now() + CANCEL_WAIT;
        loop {
            let (intent, execution) = self.order(ctx, id).await?;
            let Some(execution) = execution else {
                return Err(Error::internal(format!("order {id} has no execution")));
            };
            let (day, release_micros) = daily_share(&intent);
            let now = to_millis(self.clock.now());
            let end = OrderEnd {
                intent_id: intent.id.clone(),
                seq: execution.seq,
                owner: None,
                agent_id: intent.agent_id.clone(),
                day,
                release_micros,
                finish: ExecutionFinish {
                    success: false,
                    tx_hash: None,
                    error_code: Some(ErrorCode::OrderCancelled.as_str().to_owned()),
                    error_message: Some(format!(
                        "Cancelled by its agent (intent {}) before it filled; nothing was sent.",
                        ctx.intent_id
                    )),
                    data: execution.data.clone(),
                    leg_open: false,
                },
                now,
            };
            if self.store.end_order(&end).await? {
                self.store.finish_intent(&intent.id, now).await?;
                tracing::info!(order_id = intent.id, "prediction order cancelled");
            }
            let (intent, execution) = self.order(ctx, id).await?;
            match execution.as_ref().map(status_of) {
                // Cancelled now, or by an earlier run of the same cancellation: the same answer.
                Some(OrderStatus::Cancelled) => return Ok(order_view(&intent, execution.as_ref())),
                Some(OrderStatus::Filling) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(CANCEL_RETRY).await;
                }
                status => {
                    return Err(Error::new(
                        ErrorCode::OrderNotOpen,
                        format!(
                            "Order {id} is {}: nothing was cancelled.",
                            status.unwrap_or(OrderStatus::Open).as_str()
                        ),
                    ));
                }
            }
        }
    }

    async fn list(&self, ctx: &ExecutionContext) -> Result<Value> {
        let status = match ctx.params.get("status").and_then(Value::as_str) {
            Some(text) => Some(OrderStatus::parse(text).ok_or_else(|| {
                Error::new(
                    ErrorCode::InvalidParams,
                    format!("status {text:?} is not an order status"),
                )
            })?),
            None => None,
        };
        let limit = ctx
            .params
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(50)
            .clamp(1, MAX_LIST);
        let intents = self
            .store
            .list_agent_intents(&ctx.agent_id, PLACE, SCAN)
            .await?;
        let ids: Vec<String> = intents.iter().map(|i| i.id.clone()).collect();
        let executions = self.store.list_executions_of(&ids).await?;
        let orders: Vec<Value> = intents
            .iter()
            .map(|i| {
                let e = executions.iter().find(|e| e.intent_id == i.id);
                (e.map_or(OrderStatus::Open, status_of), order_view(i, e))
            })
            .filter(|(s, _)| status.is_none_or(|want| *s == want))
            .map(|(_, v)| v)
            .take(usize::try_from(limit).unwrap_or(50))
            .collect();
        Ok(json!({"providerId": VENUE, "orders": orders}))
    }
}

#[async_trait]
impl Provider for OrderBook {
    fn lanes(&self) -> Vec<(&'static str, Lane)> {
        vec![
            (CANCEL, Lane::Execute),
            (CANCEL, Lane::ExecuteIntent),
            (LIST, Lane::ExecuteIntent),
        ]
    }

    async fn execute(&self, ctx: &ExecutionContext) -> ExecutionOutcome {
        let answered = match ctx.action.as_str() {
            CANCEL => self.cancel(ctx).await,
            LIST => self.list(ctx).await,
            other => Err(Error::new(
                ErrorCode::NotAvailable,
                format!("{other} is not an order action."),
            )),
        };
        match answered {
            Ok(data) => ExecutionOutcome::read(data),
            Err(e) => e.into(),
        }
    }

    /// A cancellation run again answers the same cancelled order; a listing is a read.
    async fn reconcile(&self, _ctx: &ExecutionContext) -> Reconciled {
        Reconciled::NotSent
    }
}
