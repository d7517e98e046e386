//! Bridges through Across V3 (family `across`): routes from `[chains.<id>.bridge-routes.<toChain>]`
//! (the destination's SpokePool, the output token of each input token, the route's fee and its
//! usual fill time), a quote from that fee, a deposit into the origin's `AcrossSpokePool` (after an
//! approval when short), and a deposit's status read from both chains: the deposit's receipt and
//! event on the origin, `fillStatuses` of its relay hash and the `FilledRelay` event on the
//! destination, and the origin spoke's relayer refunds once it expired. Never from the gateway's
//! memory: a refund is never `DONE`.

use actiongate_api_types::ErrorCode;
use actiongate_api_types::venues::BlockingCode;
use actiongate_core::chains::BridgeRoute;
use actiongate_core::error::Error;
use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::providers::Provider;
use alloy::rpc::types::Filter;
use alloy::sol_types::SolEvent;
use serde_json::{Value, json};

use super::{
    Plan, Token, address, approval, call, contract, invalid, opt_str, opt_u64, param_str,
    resolve_token, units, view,
};
use crate::amount::format_units;
use crate::bindings::IAcrossSpokePool;
use crate::client::{ChainClient, ChainClients};

/// The spoke's name in `[chains.<id>.contracts]`.
pub const SPOKE: &str = "AcrossSpokePool";
/// The provider id of the family.
pub const PROVIDER: &str = "across";
/// The write that bridges.
pub const BRIDGE: &str = "bridge-tokens";
/// How long after its quote a deposit may be filled (the spoke allows up to its
/// `fillDeadlineBuffer`, six hours as Across deploys it).
pub const FILL_WINDOW_SECS: u64 = 3600;

/// Whether the chain has a spoke and at least one route configured.
pub fn configured(client: &ChainClient) -> bool {
    client.settings.contracts.contains_key(SPOKE) && !client.settings.bridge_routes.is_empty()
}

fn not_served(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::RouteNotSupported, message)
}

/// One route from this chain: the input token (an ERC-20 of the chain's list), its output token
/// and the destination's spoke.
struct Route<'a> {
    input: Address,
    symbol: String,
    decimals: u8,
    output: Address,
    origin_spoke: Address,
    destination_spoke: Address,
    config: &'a BridgeRoute,
}

async fn route<'a>(
    client: &'a ChainClient,
    token: &str,
    to_chain: u64,
) -> Result<Route<'a>, Error> {
    let from = client.chain_id;
    let config = client
        .settings
        .bridge_routes
        .get(&to_chain)
        .ok_or_else(|| {
            not_served(format!(
                "No Across route from chain {from} to chain {to_chain} is configured here."
            ))
        })?;
    let Token::Erc20 {
        address: input,
        decimals,
        symbol,
    } = resolve_token(client, "token", token).await?
    else {
        return Err(not_served(format!(
            "Across routes here carry ERC-20 tokens; {token} is the native coin (wrap it first)."
        )));
    };
    let output = config
        .tokens
        .get(&symbol.to_ascii_uppercase())
        .ok_or_else(|| {
            not_served(format!(
                "The route from chain {from} to chain {to_chain} does not carry {symbol}."
            ))
        })?;
    let bad = |what: &str, v: &str| {
        Error::internal(format!(
            "[chains.{from}.bridge-routes.{to_chain}] {what} {v:?} is not an address"
        ))
    };
    Ok(Route {
        input,
        symbol,
        decimals,
        output: output.parse().map_err(|_| bad("token", output))?,
        origin_spoke: contract(client, SPOKE)?,
        destination_spoke: config
            .destination_spoke
            .parse()
            .map_err(|_| bad("destination-spoke", &config.destination_spoke))?,
        config,
    })
}

/// The fee of `amount` on a route: `fee-bps` of it, rounded up (the relayer is never short).
fn fee_of(amount: U256, fee_bps: u32) -> U256 {
    let bps = U256::from(fee_bps);
    (amount * bps).div_ceil(U256::from(10_000u64))
}

async fn latest_time(client: &ChainClient) -> Result<u64, Error> {
    super::block_time(client, alloy::eips::BlockNumberOrTag::Latest).await
}

/// The time a block mined now would have (an idle chain's latest block is older).
async fn pending_time(client: &ChainClient) -> Result<u64, Error> {
    super::block_time(client, alloy::eips::BlockNumberOrTag::Pending).await
}

fn to_chain_of(params: &Value, field: &str) -> Result<u64, Error> {
    opt_u64(params, field)?.ok_or_else(|| invalid(field, "is required"))
}

/// The quote of a route, and the figures a deposit uses.
struct Quote {
    amount: U256,
    fee: U256,
    output: U256,
    quote_time: u64,
    fill_deadline: u64,
}

async fn quote_of(client: &ChainClient, r: &Route<'_>, amount: U256) -> Result<Quote, Error> {
    let fee = fee_of(amount, r.config.fee_bps);
    if fee >= amount {
        return Err(invalid(
            "amount",
            format!(
                "{} {} does not cover the route's fee",
                format_units(amount, r.decimals),
                r.symbol
            ),
        ));
    }
    let quote_time = latest_time(client).await?;
    Ok(Quote {
        amount,
        fee,
        output: amount - fee,
        quote_time,
        fill_deadline: quote_time + FILL_WINDOW_SECS,
    })
}

fn b32(a: Address) -> B256 {
    a.into_word()
}

fn from_b32(w: B256) -> Address {
    Address::from_word(w)
}

/// `get-bridge-quote {token, amount, toChain}` from this chain (`fromChain` is the request's).
pub async fn quote(client: &ChainClient, params: &Value) -> Result<Value, Error> {
    let token = param_str(params, "token")?;
    let to_chain = to_chain_of(params, "toChain")?;
    let r = route(client, token, to_chain).await?;
    let amount = units("amount", param_str(params, "amount")?, r.decimals)?;
    let q = quote_of(client, &r, amount).await?;
    let shown = |v: U256| format_units(v, r.decimals);
    Ok(json!({
        "bridge": PROVIDER,
        "fromChain": client.chain_id,
        "toChain": to_chain,
        "token": r.symbol,
        "inputAmount": shown(q.amount),
        "outputAmount": shown(q.output),
        "feeBps": r.config.fee_bps,
        "feeAmount": shown(q.fee),
        "fillDeadline": q.fill_deadline,
        "exclusivityDeadline": 0,
        "estimatedFillSeconds": r.config.fill_seconds,
        "route": {
            "originSpoke": r.origin_spoke.to_string(),
            "destinationSpoke": r.destination_spoke.to_string(),
            "inputToken": r.input.to_string(),
            "outputToken": r.output.to_string(),
        },
    }))
}

/// `bridge-tokens {token, amount, toChainId, recipient?, maxFeeBps?}`: an approval of the input
/// token to the origin spoke when short, then `deposit` for the recipient (else the signer) on the
/// destination, its output the amount less the route's fee, fillable for an hour.
pub(super) async fn plan_bridge(
    client: &ChainClient,
    params: &Value,
    signer: Address,
) -> Result<Plan, Error> {
    let token = param_str(params, "token")?;
    let to_chain = to_chain_of(params, "toChainId")?;
    if to_chain == client.chain_id {
        return Err(invalid("toChainId", "is the chain the tokens are on"));
    }
    let r = route(client, token, to_chain).await?;
    if let Some(max) = opt_u64(params, "maxFeeBps")?
        && u64::from(r.config.fee_bps) > max
    {
        return Err(invalid(
            "maxFeeBps",
            format!(
                "the route's fee is {} bps, above the {max} allowed",
                r.config.fee_bps
            ),
        ));
    }
    let recipient = match opt_str(params, "recipient") {
        Some(text) => address("recipient", text)?,
        None => signer,
    };
    let amount = units("amount", param_str(params, "amount")?, r.decimals)?;
    let q = quote_of(client, &r, amount).await?;
    let shown = |v: U256| format_units(v, r.decimals);
    let mut calls = Vec::new();
    calls.extend(
        approval(
            client,
            r.input,
            &r.symbol,
            r.decimals,
            signer,
            r.origin_spoke,
            amount,
        )
        .await?,
    );
    calls.push(call(
        r.origin_spoke,
        IAcrossSpokePool::depositCall {
            depositor: b32(signer),
            recipient: b32(recipient),
            inputToken: b32(r.input),
            outputToken: b32(r.output),
            inputAmount: amount,
            outputAmount: q.output,
            destinationChainId: U256::from(to_chain),
            exclusiveRelayer: B256::ZERO,
            quoteTimestamp: u32::try_from(q.quote_time).unwrap_or(u32::MAX),
            fillDeadline: u32::try_from(q.fill_deadline).unwrap_or(u32::MAX),
            exclusivityParameter: 0,
            message: Bytes::new(),
        },
        U256::ZERO,
        format!(
            "Bridge {} {} from chain {} to {recipient} on chain {to_chain} (receives {})",
            shown(amount),
            r.symbol,
            client.chain_id,
            shown(q.output)
        ),
    ));
    Ok(Plan {
        calls,
        summary: json!({"bridge": PROVIDER, "fromChain": client.chain_id, "toChain": to_chain,
                        "token": r.symbol, "inputAmount": shown(amount), "outputAmount": shown(q.output),
                        "feeBps": r.config.fee_bps, "fillDeadline": q.fill_deadline,
                        "recipient": recipient.to_string()}),
    })
}

/// The deposit a transaction of this chain made into its spoke (from its receipt's events).
pub async fn deposit_of_tx(
    client: &ChainClient,
    tx: B256,
) -> Result<Option<IAcrossSpokePool::FundsDeposited>, Error> {
    let spoke = contract(client, SPOKE)?;
    let receipt = client
        .provider
        .get_transaction_receipt(tx)
        .await
        .map_err(|e| super::rpc_error(client, e))?;
    Ok(receipt.and_then(|r| {
        r.inner.logs().iter().find_map(|l| {
            (l.address() == spoke)
                .then(|| IAcrossSpokePool::FundsDeposited::decode_log(&l.inner).ok())
                .flatten()
                .map(|e| e.data)
        })
    }))
}

/// A deposit's status from both chains: `check-bridge-status {transactionHash? | depositId?}` on
/// this (the origin) chain; `clients` reach the destination.
pub async fn status(
    client: &ChainClient,
    clients: &ChainClients,
    params: &Value,
) -> Result<Value, Error> {
    if let Some(p) = opt_str(params, "provider")
        && p != PROVIDER
    {
        return Err(invalid(
            "provider",
            format!("{p:?}: this gateway tracks {PROVIDER} deposits"),
        ));
    }
    let spoke = contract(client, SPOKE)?;
    let from = client.chain_id;
    let not_found = |message: String| {
        json!({"status": "NOT_FOUND", "substatus": null, "substatusMessage": message,
               "bridge": PROVIDER, "sending": null, "receiving": null})
    };
    // The deposit: by its transaction (its receipt's event), or by its id (the spoke's events).
    let (deposit, tx_hash) = match (opt_str(params, "transactionHash"), params.get("depositId")) {
        (Some(text), _) => {
            let hash: B256 = text
                .parse()
                .map_err(|_| invalid("transactionHash", "is not a 32-byte 0x hash"))?;
            match deposit_of_tx(client, hash).await? {
                Some(d) => (d, hash),
                None => {
                    let sent = client
                        .provider
                        .get_transaction_by_hash(hash)
                        .await
                        .map_err(|e| super::rpc_error(client, e))?;
                    let mined = client
                        .provider
                        .get_transaction_receipt(hash)
                        .await
                        .map_err(|e| super::rpc_error(client, e))?;
                    return Ok(match (sent, mined) {
                        (Some(_), None) => {
                            json!({"status": "PENDING", "substatus": "WAIT_SOURCE_CONFIRMATIONS",
                            "substatusMessage": format!("Transaction {hash} is not mined on chain {from} yet."),
                            "bridge": PROVIDER, "sending": {"txHash": hash.to_string(), "chainId": from}, "receiving": null})
                        }
                        (_, Some(_)) => not_found(format!(
                            "Transaction {hash} on chain {from} made no Across deposit into {spoke}."
                        )),
                        (None, None) => {
                            not_found(format!("Chain {from} knows no transaction {hash}."))
                        }
                    });
                }
            }
        }
        (None, Some(id)) => {
            let id = id
                .as_u64()
                .map(U256::from)
                .or_else(|| id.as_str().and_then(|s| s.parse::<U256>().ok()))
                .ok_or_else(|| invalid("depositId", "is not a deposit id"))?;
            let filter = Filter::new()
                .address(spoke)
                .event_signature(IAcrossSpokePool::FundsDeposited::SIGNATURE_HASH)
                .topic2(B256::from(id));
            let logs = recent_logs(client, filter, |_| true).await?;
            let Some(log) = logs.first() else {
                return Ok(not_found(format!(
                    "Spoke {spoke} on chain {from} has no deposit {id}."
                )));
            };
            let d = IAcrossSpokePool::FundsDeposited::decode_log(&log.inner)
                .map_err(|e| Error::internal(format!("a FundsDeposited log: {e}")))?
                .data;
            (d, log.transaction_hash.unwrap_or_default())
        }
        (None, None) => {
            return Err(invalid("transactionHash", "or depositId is required"));
        }
    };
    let to_chain = u64::try_from(deposit.destinationChainId).unwrap_or(u64::MAX);
    let config = client
        .settings
        .bridge_routes
        .get(&to_chain)
        .ok_or_else(|| {
            Error::new(
                ErrorCode::ChainNotConfigured,
                format!(
                    "Deposit {} goes to chain {to_chain}, for which no route is configured here.",
                    deposit.depositId
                ),
            )
        })?;
    let dest = clients.get(to_chain).ok_or_else(|| {
        Error::new(
            ErrorCode::ChainNotConfigured,
            format!("Chain {to_chain} (the deposit's destination) has no RPC URL here."),
        )
    })?;
    let dest_spoke: Address = config
        .destination_spoke
        .parse()
        .map_err(|_| Error::internal("a route's destination-spoke is not an address"))?;
    let input = resolve_token(client, "token", &from_b32(deposit.inputToken).to_string()).await?;
    let decimals = input.decimals();
    let shown = |v: U256| format_units(v, decimals);
    let relay = IAcrossSpokePool::V3RelayData {
        depositor: deposit.depositor,
        recipient: deposit.recipient,
        exclusiveRelayer: deposit.exclusiveRelayer,
        inputToken: deposit.inputToken,
        outputToken: deposit.outputToken,
        inputAmount: deposit.inputAmount,
        outputAmount: deposit.outputAmount,
        originChainId: U256::from(from),
        depositId: deposit.depositId,
        fillDeadline: deposit.fillDeadline,
        exclusivityDeadline: deposit.exclusivityDeadline,
        message: deposit.message.clone(),
    };
    let hash = view(
        dest,
        dest_spoke,
        IAcrossSpokePool::getV3RelayHashCall { relayData: relay },
    )
    .await?;
    let filled = view(
        dest,
        dest_spoke,
        IAcrossSpokePool::fillStatusesCall { relayHash: hash },
    )
    .await?;
    let mut answer = json!({
        "bridge": PROVIDER,
        "depositId": deposit.depositId.to_string(),
        "fillDeadline": deposit.fillDeadline,
        "sending": {"txHash": tx_hash.to_string(), "amount": shown(deposit.inputAmount),
                    "token": input.symbol(), "chainId": from},
        "receiving": null,
    });
    let (status, substatus, message) = if filled == U256::from(2u64) {
        let filter = Filter::new()
            .address(dest_spoke)
            .event_signature(IAcrossSpokePool::FilledRelay::SIGNATURE_HASH)
            .topic1(B256::from(U256::from(from)))
            .topic2(B256::from(deposit.depositId));
        let logs = recent_logs(dest, filter, |_| true).await?;
        let fill = logs.iter().find_map(|l| {
            IAcrossSpokePool::FilledRelay::decode_log(&l.inner)
                .ok()
                .map(|e| (e.data, l.transaction_hash))
        });
        match fill {
            Some((fill, fill_tx)) => {
                answer["receiving"] = json!({
                    "txHash": fill_tx.map(|h| h.to_string()),
                    "amount": shown(fill.relayExecutionInfo.updatedOutputAmount),
                    "token": from_b32(fill.outputToken).to_string(),
                    "recipient": from_b32(fill.relayExecutionInfo.updatedRecipient).to_string(),
                    "chainId": to_chain,
                });
                (
                    "DONE",
                    "COMPLETED",
                    format!("Filled on chain {to_chain}: the recipient received the output."),
                )
            }
            // Filled (the spoke says so) longer ago than the logs are looked for: done, without
            // the fill's details.
            None => (
                "DONE",
                "COMPLETED",
                format!(
                    "Filled on chain {to_chain} (longer ago than its fill transaction is looked for: {LOG_LOOKBACK} blocks)."
                ),
            ),
        }
    } else if pending_time(dest).await? > u64::from(deposit.fillDeadline) {
        match refund_of(client, spoke, &deposit).await? {
            Some(refund_tx) => {
                answer["refund"] = json!({"txHash": refund_tx, "amount": shown(deposit.inputAmount), "chainId": from});
                (
                    "FAILED",
                    "REFUNDED",
                    format!(
                        "Not filled before its deadline; refunded to the depositor on chain {from}."
                    ),
                )
            }
            None => (
                "FAILED",
                "EXPIRED",
                format!(
                    "Not filled before its deadline ({}); the refund to the depositor on chain {from} has not run yet.",
                    deposit.fillDeadline
                ),
            ),
        }
    } else {
        (
            "PENDING",
            "WAIT_DESTINATION_TRANSACTION",
            format!(
                "Deposited on chain {from}; waiting for a relayer to fill it on chain {to_chain} (deadline {}).",
                deposit.fillDeadline
            ),
        )
    };
    answer["status"] = json!(status);
    answer["substatus"] = json!(substatus);
    answer["substatusMessage"] = json!(message);
    Ok(answer)
}

/// The origin spoke's refund of an expired deposit: a relayer refund leaf that paid its input
/// amount of its input token back to its depositor (the transaction's hash).
async fn refund_of(
    client: &ChainClient,
    spoke: Address,
    deposit: &IAcrossSpokePool::FundsDeposited,
) -> Result<Option<String>, Error> {
    let filter = Filter::new()
        .address(spoke)
        .event_signature(IAcrossSpokePool::ExecutedRelayerRefundRoot::SIGNATURE_HASH)
        .topic1(B256::from(U256::from(client.chain_id)));
    let (depositor, token) = (from_b32(deposit.depositor), from_b32(deposit.inputToken));
    let pays_back =
        |l: &alloy::rpc::types::Log| refund_in(l, depositor, token, deposit.inputAmount);
    let logs = recent_logs(client, filter, |logs| logs.iter().any(pays_back)).await?;
    Ok(logs
        .iter()
        .find(|l| pays_back(l))
        .and_then(|l| l.transaction_hash.map(|h| h.to_string())))
}

/// Did this relayer refund leaf pay `amount` of `token` back to `depositor`? (A deferred refund paid
/// nothing yet.)
fn refund_in(
    log: &alloy::rpc::types::Log,
    depositor: Address,
    token: Address,
    amount: U256,
) -> bool {
    IAcrossSpokePool::ExecutedRelayerRefundRoot::decode_log(&log.inner).is_ok_and(|e| {
        !e.data.deferredRefunds
            && e.data.l2TokenAddress == token
            && e.data
                .refundAddresses
                .iter()
                .zip(&e.data.refundAmounts)
                .any(|(to, paid)| *to == depositor && *paid == amount)
    })
}

/// Blocks one log query covers: hosted nodes refuse wide ranges (2,000 is within every common
/// provider's limit).
const LOG_WINDOW: u64 = 2_000;
/// How far back a bridge's logs are looked for: 200,000 blocks (about 4.6 days at 2 s a block, far
/// beyond a deposit's fill deadline and its refund).
const LOG_LOOKBACK: u64 = 200_000;

/// The logs `filter` matches, newest window first, back from the chain's head in windows of
/// `LOG_WINDOW` blocks, until a window's logs satisfy `found` or `LOG_LOOKBACK` blocks were read
/// (never from block 0: a node with a range limit refuses that). Answers that window's logs (or none).
async fn recent_logs(
    client: &ChainClient,
    filter: Filter,
    found: impl Fn(&[alloy::rpc::types::Log]) -> bool,
) -> Result<Vec<alloy::rpc::types::Log>, Error> {
    let head = client
        .provider
        .get_block_number()
        .await
        .map_err(|e| super::rpc_error(client, e))?;
    let oldest = head.saturating_sub(LOG_LOOKBACK);
    let mut to = head;
    loop {
        let from = to.saturating_sub(LOG_WINDOW - 1).max(oldest);
        let logs = client
            .provider
            .get_logs(&filter.clone().from_block(from).to_block(to))
            .await
            .map_err(|e| super::rpc_error(client, e))?;
        if !logs.is_empty() && found(&logs) {
            return Ok(logs);
        }
        if from <= oldest {
            return Ok(Vec::new());
        }
        to = from - 1;
    }
}

/// What blocks a bridge of the params from this chain now, as readiness tells it: (code, message,
/// fix). The route not configured for the token and destination; the origin spoke without code or
/// not taking deposits (`pausedDeposits`).
pub async fn blockers(
    client: &ChainClient,
    params: &Value,
) -> Result<Vec<(BlockingCode, String, String)>, Error> {
    let (Some(token), Ok(to_chain)) = (opt_str(params, "token"), to_chain_of(params, "toChainId"))
    else {
        return Ok(Vec::new());
    };
    let from = client.chain_id;
    let r = match route(client, token, to_chain).await {
        Ok(r) => r,
        Err(e) if e.code == ErrorCode::RouteNotSupported => {
            let served: Vec<String> = client
                .settings
                .bridge_routes
                .iter()
                .map(|(to, r)| {
                    format!(
                        "to {to}: {}",
                        r.tokens.keys().cloned().collect::<Vec<_>>().join(", ")
                    )
                })
                .collect();
            return Ok(vec![(
                BlockingCode::VenueUnavailable,
                e.message,
                match served.is_empty() {
                    true => format!("Chain {from} has no Across route configured here."),
                    false => format!("Routes from chain {from}: {}.", served.join("; ")),
                },
            )]);
        }
        Err(e) => return Err(e),
    };
    if !has_code(client, r.origin_spoke).await? {
        return Ok(vec![(
            BlockingCode::ChainNotConfigured,
            format!(
                "Chain {from}'s {SPOKE} is configured at {}, where there is no contract.",
                r.origin_spoke
            ),
            format!("The operator sets [chains.{from}.contracts] {SPOKE} to the deployed spoke."),
        )]);
    }
    let paused = view(
        client,
        r.origin_spoke,
        IAcrossSpokePool::pausedDepositsCall {},
    )
    .await?;
    Ok(match paused {
        true => vec![(
            BlockingCode::VenuePaused,
            format!(
                "Across's spoke {} on chain {from} takes no deposits now (paused by its admin).",
                r.origin_spoke
            ),
            "Wait until Across resumes deposits, or bridge another way.".to_owned(),
        )],
        false => Vec::new(),
    })
}

/// Whether there is a contract at `at` on the chain.
async fn has_code(client: &ChainClient, at: Address) -> Result<bool, Error> {
    client
        .provider
        .get_code_at(at)
        .await
        .map(|c| !c.is_empty())
        .map_err(|e| super::rpc_error(client, e))
}

/// `get-bridge-tokens {fromChain?, toChain?}`: the routes of every chain with a spoke, checked
/// onchain now. A route is listed when its origin spoke has code and takes deposits and its
/// destination spoke has code on a chain this gateway reads; the others are in `unavailable` with
/// the reason.
pub async fn routes(clients: &ChainClients, params: &Value) -> Result<Value, Error> {
    let from = opt_u64(params, "fromChain")?;
    let to = opt_u64(params, "toChain")?;
    let (mut served, mut unavailable) = (Vec::new(), Vec::new());
    for client in clients.iter().filter(|c| configured(c)) {
        if from.is_some_and(|f| f != client.chain_id) {
            continue;
        }
        let spoke = contract(client, SPOKE)?;
        let origin = match has_code(client, spoke).await? {
            false => Some(format!("no contract at the spoke {spoke}")),
            true => view(client, spoke, IAcrossSpokePool::pausedDepositsCall {})
                .await?
                .then(|| format!("the spoke {spoke} takes no deposits (paused)")),
        };
        for (dest, route) in &client.settings.bridge_routes {
            if to.is_some_and(|t| t != *dest) {
                continue;
            }
            let dest_spoke: Address = route
                .destination_spoke
                .parse()
                .map_err(|_| Error::internal("a route's destination-spoke is not an address"))?;
            let destination = match clients.get(*dest) {
                None => Some(format!("chain {dest} has no RPC URL here")),
                Some(d) => (!has_code(d, dest_spoke).await?)
                    .then(|| format!("no contract at chain {dest}'s spoke {dest_spoke}")),
            };
            for (symbol, output) in &route.tokens {
                let input = client
                    .settings
                    .tokens
                    .get(symbol)
                    .map(|t| t.address.clone());
                let row = json!({
                    "bridge": PROVIDER, "fromChain": client.chain_id, "toChain": dest,
                    "token": symbol, "inputToken": input, "outputToken": output,
                    "originSpoke": spoke.to_string(), "destinationSpoke": dest_spoke.to_string(),
                    "feeBps": route.fee_bps, "estimatedFillSeconds": route.fill_seconds,
                });
                match origin.clone().or_else(|| destination.clone()) {
                    None => served.push(row),
                    Some(reason) => {
                        let mut row = row;
                        row["reason"] = json!(reason);
                        unavailable.push(row);
                    }
                }
            }
        }
    }
    Ok(json!({"routes": served, "unavailable": unavailable}))
}
