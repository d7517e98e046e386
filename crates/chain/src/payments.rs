//! Onchain checks of credit payments: a transaction whose receipt (status 1, enough confirmations)
//! carries a `Transfer` of the configured stablecoin from the payer to the recipient of at least the
//! invoice amount. Each way a transaction can fail to pay has its own code.

use actiongate_api_types::ErrorCode;
use actiongate_core::error::{Error, Result};
use std::sync::Arc;

use actiongate_core::clock::Clock;
use actiongate_core::purchases::{
    Authorization, AuthorizationSettler, AuthorizationTerms, ExpectedTransfer, PaymentVerifier,
    TransferCheck,
};
use actiongate_core::store::Store;
use alloy::eips::BlockNumberOrTag;
use alloy::network::TransactionBuilder;
use alloy::primitives::{Address, B256, Signature, U256};
use alloy::providers::Provider;
use alloy::rpc::types::TransactionRequest;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol;
use alloy::sol_types::{Eip712Domain, SolCall, SolEvent, SolStruct};
use async_trait::async_trait;

use crate::bindings::IERC20;
use crate::client::{ChainClient, ChainClients};
use crate::locks::KeyedLocks;
use crate::plan::{Call, Plan, rpc_error};
use crate::sender::WalletSender;

/// The payment checks over the configured chains.
pub struct ChainPayments {
    clients: ChainClients,
}

impl ChainPayments {
    /// `None` when the payment chain has no RPC URL.
    pub fn for_chain(clients: ChainClients, chain_id: u64) -> Option<Self> {
        clients.get(chain_id).is_some().then_some(Self { clients })
    }

    fn client(&self, chain_id: u64) -> Result<&Arc<ChainClient>> {
        self.clients.get(chain_id).ok_or_else(|| {
            Error::new(
                ErrorCode::NotAvailable,
                format!("Chain {chain_id} has no RPC URL here."),
            )
        })
    }
}

/// An amount in the stablecoin's base units (never negative here).
fn atomic(units: i64) -> U256 {
    U256::from(u64::try_from(units).unwrap_or(u64::MAX))
}

fn parse<T: std::str::FromStr>(what: &str, text: &str) -> Result<T> {
    text.parse()
        .map_err(|_| Error::internal(format!("{what} {text:?} does not parse")))
}

#[async_trait]
impl PaymentVerifier for ChainPayments {
    async fn check_transfer(&self, e: &ExpectedTransfer<'_>) -> Result<TransferCheck> {
        let client = self.client(e.chain_id)?;
        let hash: B256 = e
            .tx_hash
            .parse()
            .map_err(|_| Error::invalid("X-Payment-Receipt is not a transaction hash"))?;
        let (token, payer, recipient): (Address, Address, Address) = (
            parse("token", e.token)?,
            parse("payer", e.payer)?,
            parse("recipient", e.recipient)?,
        );
        let Some(receipt) = client
            .provider
            .get_transaction_receipt(hash)
            .await
            .map_err(|err| rpc_error(client, err))?
        else {
            return Ok(TransferCheck::Pending(format!(
                "{} is not mined yet",
                e.tx_hash
            )));
        };
        if !receipt.status() {
            return Ok(TransferCheck::Refused(
                ErrorCode::PaymentReverted,
                format!("Transaction {} reverted: it paid nothing.", e.tx_hash),
            ));
        }
        let mined_in = receipt.block_number.unwrap_or_default();
        let latest = client
            .provider
            .get_block_number()
            .await
            .map_err(|err| rpc_error(client, err))?;
        let confirmations = latest.saturating_sub(mined_in) + 1;
        if confirmations < e.confirmations {
            return Ok(TransferCheck::Pending(format!(
                "{confirmations} of {} confirmations",
                e.confirmations
            )));
        }
        let transfers: Vec<IERC20::Transfer> = receipt
            .logs()
            .iter()
            .filter(|l| l.address() == token)
            .filter_map(|l| IERC20::Transfer::decode_log(&l.inner).ok().map(|d| d.data))
            .collect();
        if transfers.is_empty() {
            return Ok(TransferCheck::Refused(
                ErrorCode::PaymentWrongToken,
                format!(
                    "Transaction {} moves no {token} (the invoice's stablecoin).",
                    e.tx_hash
                ),
            ));
        }
        let to_recipient: Vec<&IERC20::Transfer> =
            transfers.iter().filter(|t| t.to == recipient).collect();
        if to_recipient.is_empty() {
            return Ok(TransferCheck::Refused(
                ErrorCode::PaymentWrongRecipient,
                format!(
                    "Transaction {} pays the stablecoin to someone other than {recipient}.",
                    e.tx_hash
                ),
            ));
        }
        let paid: U256 = to_recipient
            .iter()
            .filter(|t| t.from == payer)
            .map(|t| t.value)
            .fold(U256::ZERO, |a, b| a.saturating_add(b));
        if paid.is_zero() {
            return Ok(TransferCheck::Refused(
                ErrorCode::PaymentWrongPayer,
                format!(
                    "Transaction {} pays {recipient} from another wallet than {payer}.",
                    e.tx_hash
                ),
            ));
        }
        let needed = atomic(e.amount_atomic);
        if paid != needed {
            return Ok(TransferCheck::Refused(
                ErrorCode::PaymentAmountMismatch,
                format!(
                    "Transaction {} pays {paid} base units; the invoice is exactly {needed} (its challenge amount).",
                    e.tx_hash
                ),
            ));
        }
        let block = client
            .provider
            .get_block_by_number(BlockNumberOrTag::Number(mined_in))
            .await
            .map_err(|err| rpc_error(client, err))?
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::NotAvailable,
                    "The payment's block is not available from the node yet.",
                )
            })?;
        Ok(TransferCheck::Paid {
            block_number: mined_in,
            block_timestamp: block.header.timestamp,
        })
    }

    async fn head_block(&self, chain_id: u64) -> Result<u64> {
        let client = self.client(chain_id)?;
        client
            .provider
            .get_block_number()
            .await
            .map_err(|err| rpc_error(client, err))
    }
}

sol! {
    /// EIP-3009 on the stablecoin (Circle's FiatToken v2 and the devnet's USDC).
    interface IEIP3009 {
        function authorizationState(address authorizer, bytes32 nonce) external view returns (bool);
        function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s) external;
    }

    /// The EIP-712 struct an EIP-3009 authorization signs.
    struct TransferWithAuthorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
    }
}

/// A settlement sent and not mined yet: nothing is lost; the same payment sent again finds it by its
/// nonce, re-sends or bumps it, and credits it once mined.
fn settlement_pending(tx_hash: Option<String>) -> Error {
    Error::new(
        ErrorCode::NotAvailable,
        format!(
            "The settlement transaction {} is sent and not mined yet; send the same payment again to finish.",
            tx_hash.unwrap_or_default()
        ),
    )
    .with_retry_after(crate::payments::SETTLEMENT_RETRY_AFTER)
}

/// Seconds a client waits before sending a payment whose settlement is not mined yet again.
pub const SETTLEMENT_RETRY_AFTER: u64 = 5;

/// Seconds an authorization must stay valid beyond now to be accepted (the reference facilitator's).
const VALID_BEFORE_MARGIN: u64 = 6;

/// Verifies EIP-3009 authorizations as the x402 reference facilitator does and submits them from the
/// gateway's settlement wallet, through the nonce-managed sender (so a retry or a crash never submits
/// one twice).
pub struct ChainSettler {
    clients: ChainClients,
    signer: PrivateKeySigner,
    sender: WalletSender,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    /// One settlement of an invoice at a time in this process.
    settling: KeyedLocks<String>,
}

impl ChainSettler {
    /// Takes up the settlement wallet's signed, unmined transactions that no request waits for any
    /// more (last signed a receipt wait ago): each is claimed in the database, so that one process at
    /// a time works its nonce, then re-sent, bumped at its nonce and awaited. The settlement is
    /// credited on the client's retry of the same payment; this keeps the wallet from stalling
    /// behind an unmined transaction meanwhile. Answers how many were taken up.
    pub async fn sweep(&self) -> Result<usize> {
        let wait =
            i64::try_from(self.clients.options.receipt_timeout.as_millis()).unwrap_or(i64::MAX);
        let wallet = self.signer.address().to_string();
        let mut swept = 0;
        for client in self.clients.iter() {
            let now = actiongate_core::clock::to_millis(self.clock.now());
            let keys = self
                .store
                .claim_unmined(
                    client.chain_id,
                    &wallet,
                    now.saturating_sub(wait),
                    now,
                    now.saturating_add(wait.saturating_mul(2))
                        .saturating_add(60_000),
                )
                .await?;
            for key in keys {
                let _one_at_a_time = self.settling.lock(key.clone()).await;
                match self
                    .sender
                    .reconcile(client, &self.signer, &key, None)
                    .await
                {
                    Ok(Some(o)) if o.pending => tracing::info!(
                        settlement_key = key,
                        "a settlement is still not mined; re-sent and bumped"
                    ),
                    Ok(Some(o)) => tracing::info!(
                        settlement_key = key,
                        mined = o.success,
                        "a swept settlement was mined"
                    ),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(settlement_key = key, code = %e.code, "sweeping a settlement failed")
                    }
                }
                swept += 1;
            }
        }
        Ok(swept)
    }

    pub fn new(
        clients: ChainClients,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        secret: &[u8; 32],
    ) -> Result<Self> {
        let signer = PrivateKeySigner::from_bytes(&B256::from(*secret))
            .map_err(|_| Error::internal("the settlement key is not a secp256k1 key"))?;
        let sender = WalletSender::new(
            store.clone(),
            clock.clone(),
            clients.options.clone(),
            Default::default(),
        );
        Ok(Self {
            clients,
            signer,
            sender,
            store,
            clock,
            settling: Default::default(),
        })
    }
}

fn invalid(message: String) -> Error {
    Error::new(ErrorCode::PaymentAuthorizationInvalid, message)
}

fn uint(field: &str, text: &str) -> Result<U256> {
    U256::from_str_radix(text, 10).map_err(|_| {
        invalid(format!(
            "authorization.{field} {text:?} is not a whole number"
        ))
    })
}

#[async_trait]
impl AuthorizationSettler for ChainSettler {
    fn address(&self) -> String {
        self.signer.address().to_string()
    }

    async fn settle(
        &self,
        t: &AuthorizationTerms<'_>,
        a: &Authorization,
        signature: &str,
    ) -> Result<String> {
        let client = self.clients.get(t.chain_id).ok_or_else(|| {
            Error::new(
                ErrorCode::NotAvailable,
                format!("Chain {} has no RPC URL here.", t.chain_id),
            )
        })?;
        let _one_at_a_time = self.settling.lock(t.settlement_key.to_owned()).await;
        // A settlement of this invoice sent before (the process died before crediting, or the client
        // retried): its transaction is found by its reserved nonce and awaited, never sent again.
        if let Some(earlier) = self
            .sender
            .reconcile(client, &self.signer, t.settlement_key, None)
            .await?
        {
            if earlier.pending {
                return Err(settlement_pending(earlier.tx_hash));
            }
            return match (earlier.success, earlier.tx_hash, earlier.error) {
                (true, Some(hash), _) => Ok(hash),
                (_, _, Some((ErrorCode::ExecutionReverted, message))) => Err(invalid(message)),
                (_, _, Some((code, message))) => Err(Error::new(code, message)),
                _ => Err(Error::internal(
                    "an earlier settlement ended without a transaction",
                )),
            };
        }
        let token: Address = parse("token", t.token)?;
        let recipient: Address = parse("recipient", t.recipient)?;
        let from: Address = a
            .from
            .parse()
            .map_err(|_| invalid("authorization.from is not an address".into()))?;
        let to: Address =
            a.to.parse()
                .map_err(|_| invalid("authorization.to is not an address".into()))?;
        let message = TransferWithAuthorization {
            from,
            to,
            value: uint("value", &a.value)?,
            validAfter: uint("validAfter", &a.valid_after)?,
            validBefore: uint("validBefore", &a.valid_before)?,
            nonce: a
                .nonce
                .parse()
                .map_err(|_| invalid("authorization.nonce is not 32 bytes".into()))?,
        };
        let domain = Eip712Domain::new(
            Some(t.token_name.to_owned().into()),
            Some(t.token_version.to_owned().into()),
            Some(U256::from(t.chain_id)),
            Some(token),
            None,
        );
        let digest = message.eip712_signing_hash(&domain);
        let bytes = alloy::primitives::hex::decode(signature)
            .map_err(|_| invalid("the signature is not hex".into()))?;
        let sig = Signature::try_from(bytes.as_slice())
            .map_err(|_| invalid("the signature is not 65 bytes".into()))?;
        if sig.recover_address_from_prehash(&digest).ok() != Some(from) {
            return Err(invalid(format!(
                "The signature is not {from}'s over this authorization (EIP-712 domain {} {}).",
                t.token_name, t.token_version
            )));
        }
        if to != recipient {
            return Err(Error::new(
                ErrorCode::PaymentWrongRecipient,
                format!("The authorization pays {to}, not {recipient}."),
            ));
        }
        let amount = atomic(t.amount_atomic);
        if message.value != amount {
            return Err(invalid(format!(
                "The authorization is for {} base units; the invoice is exactly {amount}.",
                message.value
            )));
        }
        let now = u64::try_from(self.clock.now().unix_timestamp()).unwrap_or_default();
        if message.validAfter > U256::from(now)
            || message.validBefore < U256::from(now + VALID_BEFORE_MARGIN)
        {
            return Err(invalid(format!(
                "The authorization is valid from {} to {}; now is {now}.",
                message.validAfter, message.validBefore
            )));
        }
        let state = IEIP3009::authorizationStateCall {
            authorizer: from,
            nonce: message.nonce,
        };
        let used = client
            .provider
            .call(
                TransactionRequest::default()
                    .with_to(token)
                    .with_input(state.abi_encode()),
            )
            .await
            .map_err(|e| rpc_error(client, e))?;
        if IEIP3009::authorizationStateCall::abi_decode_returns(&used).unwrap_or(true) {
            return Err(Error::new(
                ErrorCode::PaymentAlreadyUsed,
                format!("Authorization {} of {from} was used before.", a.nonce),
            ));
        }
        let balance =
            client
                .provider
                .call(TransactionRequest::default().with_to(token).with_input(
                    crate::bindings::IERC20::balanceOfCall { owner: from }.abi_encode(),
                ))
                .await
                .map_err(|e| rpc_error(client, e))?;
        if crate::bindings::IERC20::balanceOfCall::abi_decode_returns(&balance).unwrap_or_default()
            < amount
        {
            return Err(invalid(format!(
                "{from} holds less than {amount} base units of the stablecoin."
            )));
        }
        let settle = IEIP3009::transferWithAuthorizationCall {
            from,
            to,
            value: message.value,
            validAfter: message.validAfter,
            validBefore: message.validBefore,
            nonce: message.nonce,
            v: 27 + u8::from(sig.v()),
            r: sig.r().into(),
            s: sig.s().into(),
        };
        let call = Call {
            to: token,
            data: settle.abi_encode().into(),
            value: U256::ZERO,
            description: format!("Settle {from}'s x402 authorization of {amount} to {to}"),
        };
        let outcome = self
            .sender
            .execute(
                client,
                &self.signer,
                self.signer.address(),
                t.settlement_key,
                None,
                || {
                    let plan = Plan {
                        calls: vec![call.clone()],
                        summary: serde_json::Value::Null,
                    };
                    async move { Ok(plan) }
                },
            )
            .await;
        if outcome.pending {
            return Err(settlement_pending(outcome.tx_hash));
        }
        match (outcome.success, outcome.tx_hash, outcome.error) {
            (true, Some(hash), _) => Ok(hash),
            (_, _, Some((ErrorCode::ExecutionReverted, message))) => Err(invalid(message)),
            (_, _, Some((code, message))) => Err(Error::new(code, message)),
            _ => Err(Error::internal("a settlement ended without a transaction")),
        }
    }
}

/// The x402 v2 `PAYMENT-SIGNATURE` header (a base64 JSON payment payload) answering the first of
/// `required`'s accepted requirements ("exact" on EVM): an EIP-3009 authorization from `signer` for
/// the amount to `payTo`, valid from 0 until `now + maxTimeoutSeconds`, with `nonce`, signed over the
/// token's EIP-712 domain. What an x402 client sends; the CLI's `credits buy --x402` sends it.
pub fn x402_payment_header(
    signer: &PrivateKeySigner,
    required: &serde_json::Value,
    nonce: B256,
    now: u64,
) -> std::result::Result<String, String> {
    use alloy::signers::SignerSync;
    use base64::Engine as _;
    let accepted = required["accepts"]
        .get(0)
        .ok_or("the 402 carries no x402 requirements")?;
    let text = |k: &str| {
        accepted[k]
            .as_str()
            .map(str::to_owned)
            .ok_or(format!("the requirements have no {k}"))
    };
    let chain_id: u64 = text("network")?
        .strip_prefix("eip155:")
        .and_then(|c| c.parse().ok())
        .ok_or("not an EVM network")?;
    let asset: Address = text("asset")?.parse().map_err(|_| "bad asset")?;
    let to: Address = text("payTo")?.parse().map_err(|_| "bad payTo")?;
    let value = U256::from_str_radix(&text("amount")?, 10).map_err(|_| "bad amount".to_owned())?;
    let timeout = accepted["maxTimeoutSeconds"].as_u64().unwrap_or(300);
    let message = TransferWithAuthorization {
        from: signer.address(),
        to,
        value,
        validAfter: U256::ZERO,
        validBefore: U256::from(now + timeout),
        nonce,
    };
    let name = accepted["extra"]["name"]
        .as_str()
        .ok_or("the requirements have no token name")?
        .to_owned();
    let version = accepted["extra"]["version"]
        .as_str()
        .ok_or("the requirements have no token version")?
        .to_owned();
    let domain = Eip712Domain::new(
        Some(name.into()),
        Some(version.into()),
        Some(U256::from(chain_id)),
        Some(asset),
        None,
    );
    let signature = signer
        .sign_hash_sync(&message.eip712_signing_hash(&domain))
        .map_err(|e| format!("signing: {e}"))?;
    let payload = serde_json::json!({
        "x402Version": 2,
        "resource": required["resource"],
        "accepted": accepted,
        "payload": {
            "authorization": {
                "from": message.from, "to": to, "value": value.to_string(), "validAfter": "0",
                "validBefore": message.validBefore.to_string(), "nonce": message.nonce,
            },
            "signature": format!("0x{}", alloy::primitives::hex::encode(signature.as_bytes())),
        },
    });
    Ok(base64::engine::general_purpose::STANDARD.encode(payload.to_string()))
}
