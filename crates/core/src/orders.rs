//! Prediction-market orders (`place-prediction-order`), in the order vocabulary Polymarket's users
//! know: FOK fills whole now at or better than its price or not at all, FAK fills what it can now at
//! or better than its price, GTC and GTD are held by the gateway until the market meets the price
//! (GTD until its expiration).
//!
//! An order is an intent of `place-prediction-order` with one execution for the agent's own wallet:
//! its id is the order id, its acceptance reserves the credits and the daily-limit share (the size
//! times the price, in the market's collateral), and the runner is the watcher. A held order's
//! execution that finds the limit unmet sends nothing and goes back to pending for a later look
//! ([`crate::execution::ExecutionOutcome::held`]); one that meets it fills under the intent's
//! lease through its execution key, so a fill happens at most once across a crash and a second
//! process. An order that ends without a fill (cancelled, expired, a FOK or FAK that found nothing)
//! gives its daily-limit share back ([`releases_daily_share`], applied by
//! [`crate::store::IntentStore::end_order`]) and, like every execution that did not succeed, its
//! credits.

use actiongate_api_types::ErrorCode;
use serde_json::{Value, json};

use crate::clock::{from_millis, rfc3339};
use crate::error::{Error, Result};
use crate::states::ExecutionState;
use crate::store::{ExecutionRecord, IntentRecord};

/// The action that places an order.
pub const PLACE: &str = "place-prediction-order";
/// The action that cancels a held order.
pub const CANCEL: &str = "cancel-prediction-order";
/// The read that lists an agent's orders.
pub const LIST: &str = "get-prediction-orders";
/// The venue whose orders these are.
pub const VENUE: &str = "ctf-amm";
/// Most decimals of an order's price.
pub const PRICE_DECIMALS: usize = 6;

/// How an order lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderType {
    /// Good till cancelled: held until it fills or is cancelled.
    Gtc,
    /// Good till date: held until it fills, is cancelled or its expiration passes.
    Gtd,
    /// Fill or kill: whole, now, or not at all.
    Fok,
    /// Fill and kill: what fills now at or better than the price; the rest is dropped.
    Fak,
}

impl OrderType {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "GTC" => Some(Self::Gtc),
            "GTD" => Some(Self::Gtd),
            "FOK" => Some(Self::Fok),
            "FAK" => Some(Self::Fak),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gtc => "GTC",
            Self::Gtd => "GTD",
            Self::Fok => "FOK",
            Self::Fak => "FAK",
        }
    }

    /// Held by the gateway until the market meets its price.
    pub fn held(self) -> bool {
        matches!(self, Self::Gtc | Self::Gtd)
    }

    /// Fills whole or not at all (FAK may fill a part).
    pub fn whole(self) -> bool {
        !matches!(self, Self::Fak)
    }
}

/// An order's terms beyond its market, outcome, side, price and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderTerms {
    pub order_type: OrderType,
    /// A GTD order's expiration, Unix seconds.
    pub expiration: Option<i64>,
}

impl OrderTerms {
    /// Past its expiration at `now_ms` (a GTD order only).
    pub fn expired(&self, now_ms: i64) -> bool {
        self.expiration
            .is_some_and(|secs| now_ms >= secs.saturating_mul(1000))
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::InvalidParams, message)
}

/// The terms of an order's params (`orderType`, `expiration`).
pub fn terms(params: &Value) -> Result<OrderTerms> {
    let text = params
        .get("orderType")
        .and_then(Value::as_str)
        .unwrap_or("GTC");
    let order_type = OrderType::parse(text)
        .ok_or_else(|| invalid(format!("orderType {text:?} is not GTC, GTD, FOK or FAK")))?;
    let expiration = match params.get("expiration") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_i64()
                .filter(|s| *s > 0)
                .ok_or_else(|| invalid("expiration must be a Unix time in seconds"))?,
        ),
    };
    match (order_type, expiration) {
        (OrderType::Gtd, None) => Err(invalid("a GTD order needs expiration (Unix seconds)")),
        (OrderType::Gtd, _) | (_, None) => Ok(OrderTerms {
            order_type,
            expiration,
        }),
        (other, Some(_)) => Err(invalid(format!(
            "expiration is for GTD orders; a {} order has none",
            other.as_str()
        ))),
    }
}

/// The order's price as a plain decimal strictly between 0 and 1 with at most
/// [`PRICE_DECIMALS`] decimals (a JSON number or a decimal string).
pub fn price_text(params: &Value) -> Result<String> {
    decimal_price(params.get("price"))
}

/// [`price_text`] of a param's value.
pub fn decimal_price(value: Option<&Value>) -> Result<String> {
    let text = match value {
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        _ => return Err(invalid("price is required: a decimal between 0 and 1")),
    };
    let (whole, frac) = text.split_once('.').unwrap_or((text.as_str(), ""));
    let plain = !whole.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit());
    let frac = frac.trim_end_matches('0');
    let between = whole.trim_start_matches('0').is_empty() && !frac.is_empty();
    if !plain || !between || frac.len() > PRICE_DECIMALS {
        return Err(invalid(format!(
            "price {text} is not a decimal between 0 and 1 (exclusive) with at most {PRICE_DECIMALS} decimals"
        )));
    }
    Ok(format!("0.{frac}"))
}

/// The exact product of two plain decimals (`size × price`, an order's collateral), `None` when
/// either is not one or the product does not fit.
pub fn decimal_product(a: &str, b: &str) -> Option<String> {
    fn parse(s: &str) -> Option<(u128, usize)> {
        let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
        if whole.is_empty()
            || !whole
                .bytes()
                .chain(frac.bytes())
                .all(|b| b.is_ascii_digit())
        {
            return None;
        }
        Some((format!("{whole}{frac}").parse().ok()?, frac.len()))
    }
    let ((x, sx), (y, sy)) = (parse(a)?, parse(b)?);
    let digits = x.checked_mul(y)?.to_string();
    let scale = sx + sy;
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (whole, frac) = padded.split_at(padded.len() - scale);
    let frac = frac.trim_end_matches('0');
    Some(match frac.is_empty() {
        true => whole.to_owned(),
        false => format!("{whole}.{frac}"),
    })
}

/// The collateral an order's limit is worth (`size × price`): what a buy spends at most, what a
/// sell takes at least, and what the policy's limits count.
pub fn notional(params: &Value) -> Result<String> {
    let size = params
        .get("size")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("size is required: shares as a decimal string"))?;
    decimal_product(size, &price_text(params)?)
        .ok_or_else(|| invalid(format!("size {size} is not a plain decimal, or too large")))
}

/// The checks of an order made when it is placed, beyond its params schema: its terms, its price,
/// its size, and a GTD expiration still ahead.
pub fn check_placement(action: &str, params: &Value, now_ms: i64) -> Result<()> {
    if action != PLACE {
        return Ok(());
    }
    let terms = terms(params)?;
    if terms.expired(now_ms) {
        return Err(invalid("expiration has passed already"));
    }
    let notional = notional(params)?;
    if notional.trim_start_matches(['0', '.']).is_empty() {
        return Err(invalid("size must be more than 0"));
    }
    Ok(())
}

/// The terms of a held order (GTC or GTD) of `action`, `None` for anything else.
pub fn held_order(action: &str, params: &Value) -> Option<OrderTerms> {
    (action == PLACE)
        .then(|| terms(params).ok())
        .flatten()
        .filter(|t| t.order_type.held())
}

/// Whether an order that ended with `code` gives its daily-limit share back: it moved nothing.
pub fn releases_daily_share(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::OrderCancelled | ErrorCode::OrderExpired | ErrorCode::OrderNotFilled
    )
}

/// Where an order stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderStatus {
    /// Held, waiting for the market to meet its price (or not looked at yet).
    Open,
    /// Being filled now.
    Filling,
    Filled,
    Cancelled,
    Expired,
    /// A FOK or FAK that found nothing to fill.
    Unfilled,
    /// Ended otherwise (the market resolved, a revert, a refusal); the code says why.
    Failed,
}

impl OrderStatus {
    pub fn parse(text: &str) -> Option<Self> {
        [
            Self::Open,
            Self::Filling,
            Self::Filled,
            Self::Cancelled,
            Self::Expired,
            Self::Unfilled,
            Self::Failed,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Filling => "filling",
            Self::Filled => "filled",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
            Self::Unfilled => "unfilled",
            Self::Failed => "failed",
        }
    }
}

/// The status of an order by its execution.
pub fn status_of(execution: &ExecutionRecord) -> OrderStatus {
    match execution.state {
        ExecutionState::Pending => OrderStatus::Open,
        ExecutionState::Started => OrderStatus::Filling,
        ExecutionState::Succeeded => OrderStatus::Filled,
        ExecutionState::Failed => match execution.error_code.as_deref() {
            Some(c) if c == ErrorCode::OrderCancelled.as_str() => OrderStatus::Cancelled,
            Some(c) if c == ErrorCode::OrderExpired.as_str() => OrderStatus::Expired,
            Some(c) if c == ErrorCode::OrderNotFilled.as_str() => OrderStatus::Unfilled,
            _ => OrderStatus::Failed,
        },
    }
}

/// An order as `get-prediction-orders` and a cancellation show it.
pub fn order_view(intent: &IntentRecord, execution: Option<&ExecutionRecord>) -> Value {
    let params = intent.params.value().unwrap_or(Value::Null);
    let status = execution.map_or(OrderStatus::Open, status_of);
    let data: Option<Value> = execution
        .and_then(|e| e.data.as_deref())
        .and_then(|d| serde_json::from_str(d).ok());
    let mut view = json!({
        "orderId": intent.id,
        "providerId": VENUE,
        "chainId": intent.chain_id,
        "marketId": params.get("marketId"),
        "outcomeIndex": params.get("outcomeIndex"),
        "side": params.get("side"),
        "price": price_text(&params).ok(),
        "size": params.get("size"),
        "orderType": terms(&params).map(|t| t.order_type.as_str()).unwrap_or("GTC"),
        "expiration": params.get("expiration"),
        "status": status.as_str(),
        "createdAt": rfc3339(from_millis(intent.created_at)),
        "txHash": execution.and_then(|e| e.tx_hash.clone()),
    });
    if let Some(fill) = data.as_ref().and_then(|d| d.get("fill")) {
        view["fill"] = fill.clone();
    }
    if let (OrderStatus::Open, Some(why)) = (status, data.as_ref().and_then(|d| d.get("waiting"))) {
        view["waiting"] = why.clone();
    }
    if let Some(e) = execution.filter(|e| e.state == ExecutionState::Failed) {
        view["code"] = json!(e.error_code);
        view["message"] = json!(e.error_message);
    }
    view
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn prices_are_plain_decimals_between_0_and_1() {
        assert_eq!(
            price_text(&json!({"price": 0.45})).ok(),
            Some("0.45".into())
        );
        assert_eq!(
            price_text(&json!({"price": "0.450"})).ok(),
            Some("0.45".into())
        );
        for bad in [
            json!(0),
            json!(1),
            json!(1.5),
            json!("0.1234567"),
            json!("abc"),
            json!(1e-9),
        ] {
            assert_eq!(
                price_text(&json!({ "price": bad }))
                    .map_err(|e| e.code)
                    .err(),
                Some(ErrorCode::InvalidParams),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_notional_is_size_times_price_exactly() {
        assert_eq!(decimal_product("200", "0.45").as_deref(), Some("90"));
        assert_eq!(decimal_product("12.5", "0.3").as_deref(), Some("3.75"));
        assert_eq!(
            decimal_product("0.001", "0.001").as_deref(),
            Some("0.000001")
        );
        assert_eq!(decimal_product("1e3", "0.5"), None);
        assert_eq!(
            notional(&json!({"size": "10", "price": 0.25}))
                .ok()
                .as_deref(),
            Some("2.5")
        );
    }

    #[test]
    fn terms_follow_the_order_type() {
        let gtd = terms(&json!({"orderType": "GTD", "expiration": 100})).ok();
        assert_eq!(
            gtd,
            Some(OrderTerms {
                order_type: OrderType::Gtd,
                expiration: Some(100)
            })
        );
        assert!(gtd.is_some_and(|t| t.expired(100_000) && !t.expired(99_999)));
        assert!(terms(&json!({"orderType": "GTD"})).is_err());
        assert!(terms(&json!({"orderType": "FOK", "expiration": 100})).is_err());
        assert!(terms(&json!({"orderType": "IOC"})).is_err());
        assert_eq!(
            terms(&json!({})).map(|t| t.order_type).ok(),
            Some(OrderType::Gtc)
        );
        assert!(held_order(PLACE, &json!({"orderType": "GTC"})).is_some());
        assert!(held_order(PLACE, &json!({"orderType": "FOK"})).is_none());
        assert!(held_order("swap", &json!({"orderType": "GTC"})).is_none());
        assert!(
            check_placement(
                PLACE,
                &json!({"orderType": "GTD", "expiration": 10, "size": "1", "price": 0.5}),
                20_000
            )
            .is_err()
        );
        assert!(check_placement(PLACE, &json!({"size": "0", "price": 0.5}), 0).is_err());
        assert!(check_placement(PLACE, &json!({"size": "5", "price": 0.5}), 0).is_ok());
    }

    #[test]
    fn only_orders_that_moved_nothing_give_their_share_back() {
        for code in [
            ErrorCode::OrderCancelled,
            ErrorCode::OrderExpired,
            ErrorCode::OrderNotFilled,
        ] {
            assert!(releases_daily_share(code), "{code}");
        }
        for code in [
            ErrorCode::ExecutionReverted,
            ErrorCode::NotAvailable,
            ErrorCode::InvalidParams,
        ] {
            assert!(!releases_daily_share(code), "{code}");
        }
    }
}
