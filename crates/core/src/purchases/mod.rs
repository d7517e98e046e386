//! Credits: buying them with x402 and linking the wallets that pay ([`wallets`], EIP-4361).
//!
//! Buying credits with x402 (SPEC "Credits", the four steps): a request without payment headers is
//! answered 402 with a challenge whose invoice is persisted with an expiry; the retry names the
//! invoice and the transaction that paid it, which is verified onchain (through the
//! [`PaymentVerifier`] port) before the credits are added in the transaction that marks the invoice
//! paid and the hash used. A payment not yet mined (or short of confirmations) is answered with the
//! same challenge again and a Retry-After, never with an error that loses it.

mod wallets;

use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use actiongate_api_types::account::{AccountCredits, LedgerItem};
use actiongate_api_types::credits::{
    BuyCreditsRequest, ChallengeBody, CreditPackage, CreditPurchase, PaymentCurrency,
    X402Challenge, X402Metadata,
};

use crate::clock::Clock;
use crate::clock::to_millis;
use crate::crypto::to_checksum;
use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::settings::Settings;
use crate::store::{InvoiceRecord, SettleOutcome, Store};

pub use crate::payments::{
    Authorization, AuthorizationSettler, AuthorizationTerms, ExpectedTransfer, Package,
    PaymentProof, PaymentVerifier, PurchaseSettings, TransferCheck,
};

/// The stablecoin's decimals (SPEC: 6).
pub const STABLECOIN_DECIMALS: u8 = 6;
/// Seconds a client should wait before retrying a payment that is not confirmed yet.
pub const PENDING_RETRY_AFTER: u64 = 2;
/// Invoice tags are 1 to `TAG_SPACE - 1` base units: below 0.01 of the stablecoin (CONTRACT).
const TAG_SPACE: i64 = 10_000;
/// How many ledger rows the owner reads (the newest).
const OWNER_LEDGER_ROWS: u32 = 200;
/// Random tags tried before the gateway says it has too many open invoices.
const TAG_TRIES: usize = 24;
/// How long after its invoice expired a tag stays held: a payment mined before the expiry and
/// retried late must never match a newer invoice of the same amount (which refuses payments mined
/// before it was issued anyway).
const TAG_HOLD_AFTER_EXPIRY_MS: i64 = 10 * 60 * 1000;
/// Seconds to wait when every tag is held (an invoice expires within the TTL).
const TAGS_FULL_RETRY_AFTER: u64 = 60;

/// A block's timestamp (Unix seconds) in milliseconds.
fn block_millis(block_timestamp: u64) -> i64 {
    i64::try_from(block_timestamp)
        .unwrap_or(i64::MAX)
        .saturating_mul(1000)
}

/// Whether a payment mined in block `block_number` (timestamp `block_timestamp`) was mined before
/// `invoice` was issued, so cannot answer its challenge. By the chain's own order: at or below the
/// head the invoice recorded. The gateway's clock and the chain's are never compared, since a
/// node's timestamps may lag the gateway's by seconds (anvil's do, by its start-up). Invoices made
/// before the head was recorded fall back to the timestamps, whole seconds: a payment in the
/// invoice's second counts as after it.
fn mined_before_issue(invoice: &InvoiceRecord, block_number: u64, block_timestamp: u64) -> bool {
    match invoice.issued_block {
        Some(head) => i64::try_from(block_number).is_ok_and(|mined| mined <= head),
        None => block_millis(block_timestamp).saturating_add(1000) <= invoice.created_at,
    }
}

/// The answer of a purchase request.
#[derive(Debug, Clone, PartialEq)]
pub enum BuyAnswer {
    /// HTTP 402: pay this (again, with a Retry-After when a payment was seen but is not confirmed).
    /// `accepts` are the x402 v2 payment requirements of the same invoice (the `PAYMENT-REQUIRED`
    /// header carries them, with the resource, for standard x402 clients).
    Challenge {
        body: ChallengeBody,
        retry_after: Option<u64>,
        accepts: serde_json::Value,
    },
    /// HTTP 200; `settlement` is the x402 v2 `PAYMENT-RESPONSE` of a standard payment.
    Paid {
        purchase: CreditPurchase,
        settlement: Option<serde_json::Value>,
    },
}

/// A decimal string of a base-unit amount with 2 decimals at least ("18.00", "0.015").
pub fn price_text(atomic: i64) -> String {
    let d = i64::from(10u32.pow(u32::from(STABLECOIN_DECIMALS)));
    let (whole, frac) = (atomic / d, atomic % d);
    let frac = format!("{frac:06}");
    let trimmed = frac.trim_end_matches('0');
    let shown = if trimmed.len() < 2 {
        &frac[..2]
    } else {
        trimmed
    };
    format!("{whole}.{shown}")
}

/// An EVM address in EIP-55 form, or `INVALID_REQUEST`.
pub fn checksum_address(field: &str, text: &str) -> Result<String> {
    let hex_part = text
        .strip_prefix("0x")
        .filter(|h| h.len() == 40)
        .and_then(|h| hex::decode(h).ok());
    match hex_part {
        Some(bytes) => Ok(to_checksum(&bytes)),
        None => Err(Error::invalid(format!(
            "{field} must be a 0x address of 40 hex digits"
        ))),
    }
}

fn network_name(settings: &Settings, chain_id: u64) -> String {
    settings
        .chains
        .get(chain_id)
        .map(|c| c.name.clone())
        .unwrap_or_else(|| format!("eip155:{chain_id}"))
}

/// Credits: buying them with x402 and linking the wallets that pay for an account.
pub struct Credits {
    identity: Arc<Identity>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    settings: Arc<Settings>,
    /// Checks credit payments onchain; credit purchases are off without it.
    payments: Option<Arc<dyn PaymentVerifier>>,
    /// Settles x402 EIP-3009 authorizations; the standard x402 scheme is off without it.
    settler: Option<Arc<dyn AuthorizationSettler>>,
}

impl Credits {
    pub(crate) fn new(
        identity: Arc<Identity>,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        settings: Arc<Settings>,
        payments: Option<Arc<dyn PaymentVerifier>>,
        settler: Option<Arc<dyn AuthorizationSettler>>,
    ) -> Self {
        Self {
            identity,
            store,
            clock,
            settings,
            payments,
            settler,
        }
    }

    /// The onchain payment checks, when the payment chain has an RPC URL.
    pub fn payments(&self) -> Option<&Arc<dyn PaymentVerifier>> {
        self.payments.as_ref()
    }

    /// The x402 settlement of EIP-3009 authorizations, when configured.
    pub fn settler(&self) -> Option<&Arc<dyn AuthorizationSettler>> {
        self.settler.as_ref()
    }

    /// The x402 v2 payment requirements of an invoice ("exact" on EVM with EIP-3009).
    fn requirements(&self, invoice: &InvoiceRecord) -> serde_json::Value {
        let p = &self.settings.purchase;
        serde_json::json!([{
            "scheme": "exact",
            "network": format!("eip155:{}", invoice.chain_id),
            "amount": invoice.amount_atomic.to_string(),
            "asset": invoice.token,
            "payTo": invoice.recipient,
            "maxTimeoutSeconds": p.max_timeout_seconds,
            "extra": {"name": p.token_name, "version": p.token_version, "invoiceId": invoice.id},
        }])
    }

    /// Pays an invoice with an x402 v2 `PAYMENT-SIGNATURE` (an EIP-3009 authorization), settled from
    /// the gateway's settlement wallet.
    async fn pay_with_authorization(
        &self,
        header: &str,
        sku: &str,
        payer: &str,
        owner: Option<&str>,
    ) -> Result<(InvoiceRecord, String)> {
        use base64::Engine as _;
        let bad = |why: &str| Error::invalid(format!("PAYMENT-SIGNATURE {why}"));
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(header.trim())
            .map_err(|_| bad("is not base64"))?;
        let payload: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|_| bad("is not JSON"))?;
        if payload["x402Version"] != serde_json::json!(2) {
            return Err(bad("must be x402 version 2"));
        }
        let invoice_id = payload["accepted"]["extra"]["invoiceId"]
            .as_str()
            .ok_or_else(|| bad("does not name the invoice (accepted.extra.invoiceId)"))?;
        let not_found = || {
            Error::new(
                ErrorCode::InvoiceNotFound,
                format!("No invoice {invoice_id} for this buyer; ask for a new challenge."),
            )
        };
        let invoice = self
            .store
            .get_invoice(invoice_id)
            .await?
            .ok_or_else(not_found)?;
        if owner.is_some() && invoice.account_id.as_deref() != owner {
            return Err(not_found());
        }
        if invoice.sku != sku {
            return Err(Error::new(
                ErrorCode::InvoiceMismatch,
                format!("Invoice {invoice_id} is for {}, not {sku}.", invoice.sku),
            ));
        }
        if invoice.paid_at.is_some() {
            return Err(Error::new(
                ErrorCode::PaymentAlreadyUsed,
                format!("Invoice {invoice_id} is paid; an authorization pays once."),
            ));
        }
        let settlement_key = format!("x402:{}", invoice.id);
        let settling = !self.store.execution_txs(&settlement_key).await?.is_empty();
        if to_millis(self.clock.now()) > invoice.expires_at && !settling {
            return Err(Error::new(
                ErrorCode::InvoiceExpired,
                format!("Invoice {invoice_id} expired; ask for a new challenge."),
            ));
        }
        let ours = self.requirements(&invoice);
        let accepted = &payload["accepted"];
        for field in ["scheme", "network", "amount", "asset", "payTo"] {
            let (a, b) = (
                accepted[field].as_str().map(str::to_ascii_lowercase),
                ours[0][field].as_str().map(str::to_ascii_lowercase),
            );
            if a != b {
                return Err(Error::new(
                    ErrorCode::PaymentAuthorizationInvalid,
                    format!(
                        "The payment accepts {field} {:?}; the invoice requires {:?}.",
                        accepted[field], ours[0][field]
                    ),
                ));
            }
        }
        let authorization: Authorization =
            serde_json::from_value(payload["payload"]["authorization"].clone())
                .map_err(|_| bad("carries no EIP-3009 authorization"))?;
        let signature = payload["payload"]["signature"]
            .as_str()
            .ok_or_else(|| bad("carries no signature"))?;
        let from = checksum_address("authorization.from", &authorization.from)?;
        if from != payer || from != invoice.payer {
            return Err(Error::new(
                ErrorCode::PaymentWrongPayer,
                format!(
                    "The authorization is from {from}; the invoice is for {}.",
                    invoice.payer
                ),
            ));
        }
        let settler = self
            .settler
            .as_ref()
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::NotAvailable,
                    "x402 settlement is not configured here.",
                )
            })?
            .clone();
        let p = &self.settings.purchase;
        let (token_name, token_version, signature) = (
            p.token_name.clone(),
            p.token_version.clone(),
            signature.to_owned(),
        );
        let settled = invoice.clone();
        // The settlement runs in its own task: a client that goes away or a request deadline does not
        // cut it between sending and crediting (a retry with the same payload resumes it by its nonce).
        let task = tokio::spawn(async move {
            let terms = AuthorizationTerms {
                chain_id: settled.chain_id,
                token: &settled.token,
                token_name: &token_name,
                token_version: &token_version,
                recipient: &settled.recipient,
                amount_atomic: settled.amount_atomic,
                settlement_key: &settlement_key,
            };
            settler.settle(&terms, &authorization, &signature).await
        });
        let tx_hash = task
            .await
            .map_err(|e| Error::internal(format!("settlement task: {e}")))??;
        Ok((invoice, tx_hash))
    }

    fn purchase_terms(
        &self,
    ) -> Result<(&PurchaseSettings, String, String, &Arc<dyn PaymentVerifier>)> {
        let p = &self.settings.purchase;
        let off = |why: &str| {
            Error::new(
                ErrorCode::NotAvailable,
                format!("Buying credits is not configured on this gateway: {why}."),
            )
        };
        let recipient = p
            .recipient
            .clone()
            .ok_or_else(|| off("no recipient address"))?;
        let token = self
            .settings
            .chains
            .get(p.chain_id)
            .and_then(|c| c.tokens.get(&p.token.to_ascii_uppercase()))
            .map(|t| t.address.clone())
            .ok_or_else(|| off("the stablecoin is not in the chain's token list"))?;
        let verifier = self
            .payments
            .as_ref()
            .ok_or_else(|| off("the payment chain has no RPC URL"))?;
        Ok((p, recipient, token, verifier))
    }

    /// `GET /api/v1/credits/x402-metadata`.
    /// The owner's account's credits and its ledger, newest entry first.
    pub async fn owner_credits(
        &self,
        owner: &crate::identity::OwnerContext,
    ) -> Result<AccountCredits> {
        let account = self
            .store
            .credit_account(&owner.account_id)
            .await?
            .unwrap_or_default();
        let ledger = self
            .store
            .recent_ledger(&owner.account_id, OWNER_LEDGER_ROWS)
            .await?;
        let at = |ms: i64| crate::clock::rfc3339(crate::clock::from_millis(ms));
        Ok(AccountCredits {
            balance: account.balance,
            reserved: account.reserved,
            ledger: ledger
                .into_iter()
                .map(|l| LedgerItem {
                    kind: l.kind.as_str().to_owned(),
                    reason: l.reason,
                    agent_id: l.agent_id,
                    intent_id: l.intent_id,
                    invoice_id: l.invoice_id,
                    balance_before: l.balance_before,
                    balance_after: l.balance_after,
                    reserved_before: l.reserved_before,
                    reserved_after: l.reserved_after,
                    created_at: at(l.created_at),
                })
                .collect(),
        })
    }

    pub fn x402_metadata(&self) -> Result<X402Metadata> {
        let (p, recipient, token, _) = self.purchase_terms()?;
        Ok(X402Metadata {
            packages: p
                .packages
                .iter()
                .map(|k| CreditPackage {
                    sku: k.sku.clone(),
                    credits: k.credits,
                    price: price_text(k.price_atomic),
                    price_atomic: k.price_atomic.to_string(),
                })
                .collect(),
            recipient,
            currency: PaymentCurrency {
                address: token,
                symbol: p.token.clone(),
                decimals: STABLECOIN_DECIMALS,
            },
            network: network_name(&self.settings, p.chain_id),
            chain_id: p.chain_id,
            confirmations: p.confirmations,
            invoice_ttl_seconds: p.invoice_ttl.whole_seconds().unsigned_abs(),
            settlement_address: self.settler.as_ref().map(|s| s.address()),
        })
    }

    /// `POST /api/v1/credits/buy-with-x402` (no `agent_key`: open, the payment is the authentication)
    /// and `POST /api/v1/agent/credits/buy-with-x402` (the credits go to the agent's account).
    pub async fn buy_credits(
        &self,
        req: &BuyCreditsRequest,
        proof: &PaymentProof,
        agent_key: Option<&str>,
    ) -> Result<BuyAnswer> {
        let (p, recipient, token, verifier) = self.purchase_terms()?;
        let agent = match agent_key {
            Some(k) => Some(self.identity.authenticate_agent(Some(k)).await?),
            None => None,
        };
        let package = p
            .packages
            .iter()
            .find(|k| k.sku == req.sku)
            .ok_or_else(|| {
                let known: Vec<&str> = p.packages.iter().map(|k| k.sku.as_str()).collect();
                Error::invalid(format!(
                    "sku {:?} is not a credit package; one of {known:?}",
                    req.sku
                ))
            })?;
        let payer = match (&req.user_address, &agent) {
            (Some(a), _) => checksum_address("userAddress", a)?,
            (None, Some(a)) => checksum_address("agent wallet", &a.agent.wallet_address)?,
            (None, None) => {
                return Err(Error::invalid(
                    "userAddress is required: the wallet that pays",
                ));
            }
        };
        // On the agent route the payer is a wallet of the agent's account (its execution wallet or a
        // wallet linked with EIP-4361): nobody claims another wallet's payment for their account.
        if let Some(a) = &agent {
            let own = checksum_address("agent wallet", &a.agent.wallet_address)? == payer
                || self.store.linked_account(&payer).await?.as_deref()
                    == Some(a.agent.account_id.as_str());
            if !own {
                return Err(Error::new(
                    ErrorCode::PaymentWrongPayer,
                    format!(
                        "{payer} is not this agent's wallet nor linked to its account; link it first (POST /api/v1/wallets/link)."
                    ),
                ));
            }
        }
        let now = self.clock.now();
        let challenge = |invoice: &InvoiceRecord| ChallengeBody {
            x402_challenge: X402Challenge {
                invoice_id: invoice.id.clone(),
                amount: price_text(invoice.challenge_atomic()),
                recipient: invoice.recipient.clone(),
                currency: p.token.clone(),
                network: network_name(&self.settings, invoice.chain_id),
            },
        };
        if let Some(header) = &proof.payment_signature {
            let (invoice, tx_hash) = self
                .pay_with_authorization(
                    header,
                    &package.sku,
                    &payer,
                    agent.as_ref().map(|a| a.agent.account_id.as_str()),
                )
                .await?;
            let settlement = serde_json::json!({
                "success": true,
                "transaction": tx_hash,
                "network": format!("eip155:{}", invoice.chain_id),
                "payer": invoice.payer,
            });
            // Should crediting not happen (one short database transaction), the retry of the same payload
            // resumes the mined settlement by its nonce and credits it.
            let purchase = self.credit_invoice(&invoice, &tx_hash).await?;
            return Ok(BuyAnswer::Paid {
                purchase,
                settlement: Some(settlement),
            });
        }
        let (receipt, invoice_id) = match (&proof.receipt, &proof.invoice_id) {
            (None, None) => {
                // Credits bought for an agent's execution wallet go to that agent's account: nobody
                // but the gateway holds that wallet's key, so nobody could link it.
                let account_id = match &agent {
                    Some(a) => Some(a.agent.account_id.clone()),
                    None => self.store.agent_wallet_account(&payer).await?,
                };
                // The chain's head now: a payment mined at or below it was sent before this
                // challenge existed. Without the node no payment could be checked either.
                let head = verifier.head_block(p.chain_id).await?;
                let invoice = InvoiceRecord {
                    id: format!("inv_{}", uuid::Uuid::new_v4().simple()),
                    sku: package.sku.clone(),
                    credits: package.credits,
                    amount_atomic: package.price_atomic,
                    tag_atomic: 0,
                    payer,
                    account_id,
                    agent_id: agent.as_ref().map(|a| a.agent.id.clone()),
                    chain_id: p.chain_id,
                    token,
                    recipient,
                    created_at: to_millis(now),
                    issued_block: Some(i64::try_from(head).unwrap_or(i64::MAX)),
                    expires_at: to_millis(now + p.invoice_ttl),
                    paid_at: None,
                    tx_hash: None,
                };
                let invoice = self.open_invoice(invoice).await?;
                tracing::info!(
                    invoice_id = invoice.id,
                    sku = invoice.sku,
                    "x402 challenge issued"
                );
                return Ok(BuyAnswer::Challenge {
                    body: challenge(&invoice),
                    retry_after: None,
                    accepts: self.requirements(&invoice),
                });
            }
            (Some(r), Some(i)) => (r.trim().to_ascii_lowercase(), i.trim().to_owned()),
            _ => {
                return Err(Error::invalid(
                    "A paid retry carries both X-Payment-Receipt (the transaction hash) and X-Invoice-Id.",
                ));
            }
        };
        if !(receipt.len() == 66
            && receipt.starts_with("0x")
            && receipt[2..].bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(Error::invalid(
                "X-Payment-Receipt must be a transaction hash: 0x and 64 hex digits",
            ));
        }
        let not_found = || {
            Error::new(
                ErrorCode::InvoiceNotFound,
                format!("No invoice {invoice_id} for this buyer; ask for a new challenge."),
            )
        };
        let invoice = self
            .store
            .get_invoice(&invoice_id)
            .await?
            .ok_or_else(not_found)?;
        let owner = agent.as_ref().map(|a| a.agent.account_id.clone());
        if owner.is_some() && invoice.account_id != owner {
            return Err(not_found());
        }
        if invoice.sku != package.sku || invoice.payer != payer {
            return Err(Error::new(
                ErrorCode::InvoiceMismatch,
                format!(
                    "Invoice {invoice_id} is for {} paid by {}, not {} paid by {payer}.",
                    invoice.sku, invoice.payer, package.sku
                ),
            ));
        }
        if invoice.tx_hash.as_deref().is_some_and(|h| h != receipt) {
            return Err(Error::new(
                ErrorCode::InvoiceAlreadyPaid,
                format!("Invoice {invoice_id} was paid by another transaction."),
            ));
        }
        let expected = ExpectedTransfer {
            chain_id: invoice.chain_id,
            tx_hash: &receipt,
            token: &invoice.token,
            payer: &invoice.payer,
            recipient: &invoice.recipient,
            amount_atomic: invoice.challenge_atomic(),
            confirmations: p.confirmations,
        };
        let expired = |at_ms: i64| at_ms > invoice.expires_at;
        match verifier.check_transfer(&expected).await? {
            TransferCheck::Pending(why) => {
                if invoice.paid_at.is_none() && expired(to_millis(now)) {
                    return Err(Error::new(
                        ErrorCode::InvoiceExpired,
                        format!(
                            "Invoice {invoice_id} expired and its payment is not confirmed: {why}."
                        ),
                    ));
                }
                return Ok(BuyAnswer::Challenge {
                    body: challenge(&invoice),
                    retry_after: Some(PENDING_RETRY_AFTER),
                    accepts: self.requirements(&invoice),
                });
            }
            TransferCheck::Refused(code, message) => return Err(Error::new(code, message)),
            TransferCheck::Paid {
                block_number,
                block_timestamp,
            } => {
                let paid_at = block_millis(block_timestamp);
                if mined_before_issue(&invoice, block_number, block_timestamp) {
                    if self
                        .store
                        .paid_invoice_of(&receipt)
                        .await?
                        .is_some_and(|other| other != invoice.id)
                    {
                        return Err(Error::new(
                            ErrorCode::PaymentAlreadyUsed,
                            format!("Transaction {receipt} already paid another invoice."),
                        ));
                    }
                    return Err(Error::new(
                        ErrorCode::InvoiceMismatch,
                        format!(
                            "{receipt} was mined before invoice {invoice_id} was issued; a payment answers its own challenge."
                        ),
                    ));
                }
                if invoice.paid_at.is_none() && expired(paid_at) {
                    return Err(Error::new(
                        ErrorCode::InvoiceExpired,
                        format!(
                            "Invoice {invoice_id} had expired when {receipt} was mined; ask for a new challenge."
                        ),
                    ));
                }
            }
        }
        let purchase = self.credit_invoice(&invoice, &receipt).await?;
        Ok(BuyAnswer::Paid {
            purchase,
            settlement: None,
        })
    }

    /// Stores a new invoice with a tag no open invoice of its recipient and token holds, so that its
    /// challenge amount is its own (CONTRACT: one transfer pays one invoice).
    async fn open_invoice(&self, mut invoice: InvoiceRecord) -> Result<InvoiceRecord> {
        let now = to_millis(self.clock.now());
        let open_until = invoice.expires_at.saturating_add(TAG_HOLD_AFTER_EXPIRY_MS);
        for _ in 0..TAG_TRIES {
            let draw = u16::from_le_bytes(crate::crypto::random_bytes::<2>()?);
            invoice.tag_atomic = 1 + i64::from(draw) % (TAG_SPACE - 1);
            if self.store.create_invoice(&invoice, open_until, now).await? {
                return Ok(invoice);
            }
        }
        Err(Error::new(
            ErrorCode::RateLimited,
            format!(
                "Too many credit invoices are open; wait {TAGS_FULL_RETRY_AFTER} s and ask again."
            ),
        )
        .with_retry_after(TAGS_FULL_RETRY_AFTER))
    }

    /// Marks the invoice paid by `tx_hash` and adds its credits (once); the purchase answer.
    async fn credit_invoice(
        &self,
        invoice: &InvoiceRecord,
        tx_hash: &str,
    ) -> Result<CreditPurchase> {
        let invoice_id = &invoice.id;
        let (account, balance, new) = match self
            .store
            .settle_invoice(invoice_id, tx_hash, to_millis(self.clock.now()))
            .await?
        {
            SettleOutcome::Credited { account, balance } => (account, balance, true),
            SettleOutcome::AlreadyPaid { account, balance } => (account, balance, false),
            SettleOutcome::PaymentUsed => {
                return Err(Error::new(
                    ErrorCode::PaymentAlreadyUsed,
                    format!("Transaction {tx_hash} already paid another invoice."),
                ));
            }
            SettleOutcome::InvoicePaid => {
                return Err(Error::new(
                    ErrorCode::InvoiceAlreadyPaid,
                    format!("Invoice {invoice_id} was paid by another transaction."),
                ));
            }
        };
        if new {
            tracing::info!(
                invoice_id,
                credits = invoice.credits,
                "credits bought with x402"
            );
        }
        let message = match &account {
            Some(_) => format!(
                "{} credits added; the balance is {balance}.",
                invoice.credits
            ),
            None => format!(
                "{} credits are held for {} until the wallet is linked to an account (POST /api/v1/wallets/link); {balance} held in all.",
                invoice.credits, invoice.payer
            ),
        };
        Ok(CreditPurchase {
            success: true,
            credits: invoice.credits,
            balance,
            message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_read_as_money() {
        assert_eq!(price_text(2_000_000), "2.00");
        assert_eq!(price_text(18_000_000), "18.00");
        assert_eq!(price_text(160_000_000), "160.00");
        assert_eq!(price_text(15_000), "0.015");
        assert_eq!(price_text(1_500_000), "1.50");
    }

    #[test]
    fn addresses_are_checksummed() {
        assert_eq!(
            checksum_address("a", "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed")
                .ok()
                .as_deref(),
            Some("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed")
        );
        assert!(checksum_address("a", "0x123").is_err());
    }

    fn issued(created_at: i64, issued_block: Option<i64>) -> InvoiceRecord {
        InvoiceRecord {
            id: "inv_1".into(),
            sku: "credits_100".into(),
            credits: 100,
            amount_atomic: 2_000_000,
            tag_atomic: 7,
            payer: "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed".into(),
            account_id: None,
            agent_id: None,
            chain_id: 84_532,
            token: "0x036CbD53842c5426634e7929541eC2318f3dCF7e".into(),
            recipient: "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed".into(),
            created_at,
            issued_block,
            expires_at: created_at + 600_000,
            paid_at: None,
            tx_hash: None,
        }
    }

    #[test]
    fn a_payment_is_ordered_after_its_invoice_by_the_chain() {
        // Issued at 10:00:05.700 (gateway clock) with the head at block 40.
        let invoice = issued(1_700_000_005_700, Some(40));
        // Mined in block 41, its timestamp 30 s behind the gateway's clock: after the invoice.
        assert!(!mined_before_issue(&invoice, 41, 1_699_999_975));
        // In the head's block or below: mined before the challenge existed, whatever its time.
        assert!(mined_before_issue(&invoice, 40, 1_700_000_010));
        assert!(mined_before_issue(&invoice, 12, 1_700_000_999));
    }

    #[test]
    fn an_invoice_without_a_head_is_ordered_by_whole_seconds() {
        let invoice = issued(1_700_000_005_700, None);
        // The invoice's own second counts as after it; the second before does not.
        assert!(!mined_before_issue(&invoice, 1, 1_700_000_005));
        assert!(mined_before_issue(&invoice, 1, 1_700_000_004));
    }
}
