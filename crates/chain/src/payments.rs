//! Onchain checks of credit payments: a transaction whose receipt (status 1, enough confirmations)
//! carries a `Transfer` of the configured stablecoin from the payer to the recipient of at least the
//! invoice amount. Each way a transaction can fail to pay has its own code.

use actiongate_api_types::ErrorCode;
use actiongate_core::error::{Error, Result};
use actiongate_core::purchases::{ExpectedTransfer, PaymentVerifier, TransferCheck};
use alloy::eips::BlockNumberOrTag;
use alloy::primitives::{Address, B256, U256};
use alloy::providers::Provider;
use alloy::sol_types::SolEvent;
use async_trait::async_trait;

use crate::bindings::IERC20;
use crate::client::ChainClients;
use crate::plan::rpc_error;

/// The payment checks over the configured chains.
pub struct ChainPayments {
    clients: ChainClients,
}

impl ChainPayments {
    /// `None` when the payment chain has no RPC URL.
    pub fn for_chain(clients: ChainClients, chain_id: u64) -> Option<Self> {
        clients.get(chain_id).is_some().then_some(Self { clients })
    }
}

fn parse<T: std::str::FromStr>(what: &str, text: &str) -> Result<T> {
    text.parse().map_err(|_| Error::internal(format!("{what} {text:?} does not parse")))
}

#[async_trait]
impl PaymentVerifier for ChainPayments {
    async fn check_transfer(&self, e: &ExpectedTransfer<'_>) -> Result<TransferCheck> {
        let client = self.clients.get(e.chain_id).ok_or_else(|| Error::new(ErrorCode::NotAvailable, format!("Chain {} has no RPC URL here.", e.chain_id)))?;
        let hash: B256 = e.tx_hash.parse().map_err(|_| Error::invalid("X-Payment-Receipt is not a transaction hash"))?;
        let (token, payer, recipient): (Address, Address, Address) = (parse("token", e.token)?, parse("payer", e.payer)?, parse("recipient", e.recipient)?);
        let Some(receipt) = client.provider.get_transaction_receipt(hash).await.map_err(|err| rpc_error(client, err))? else {
            return Ok(TransferCheck::Pending(format!("{} is not mined yet", e.tx_hash)));
        };
        if !receipt.status() {
            return Ok(TransferCheck::Refused(ErrorCode::PaymentReverted, format!("Transaction {} reverted: it paid nothing.", e.tx_hash)));
        }
        let mined_in = receipt.block_number.unwrap_or_default();
        let latest = client.provider.get_block_number().await.map_err(|err| rpc_error(client, err))?;
        let confirmations = latest.saturating_sub(mined_in) + 1;
        if confirmations < e.confirmations {
            return Ok(TransferCheck::Pending(format!("{confirmations} of {} confirmations", e.confirmations)));
        }
        let transfers: Vec<IERC20::Transfer> = receipt
            .logs()
            .iter()
            .filter(|l| l.address() == token)
            .filter_map(|l| IERC20::Transfer::decode_log(&l.inner).ok().map(|d| d.data))
            .collect();
        if transfers.is_empty() {
            return Ok(TransferCheck::Refused(ErrorCode::PaymentWrongToken, format!("Transaction {} moves no {token} (the invoice's stablecoin).", e.tx_hash)));
        }
        let to_recipient: Vec<&IERC20::Transfer> = transfers.iter().filter(|t| t.to == recipient).collect();
        if to_recipient.is_empty() {
            return Ok(TransferCheck::Refused(ErrorCode::PaymentWrongRecipient, format!("Transaction {} pays the stablecoin to someone other than {recipient}.", e.tx_hash)));
        }
        let paid: U256 = to_recipient.iter().filter(|t| t.from == payer).map(|t| t.value).fold(U256::ZERO, |a, b| a.saturating_add(b));
        if paid.is_zero() {
            return Ok(TransferCheck::Refused(ErrorCode::PaymentWrongPayer, format!("Transaction {} pays {recipient} from another wallet than {payer}.", e.tx_hash)));
        }
        let needed = U256::from(u64::try_from(e.min_atomic).unwrap_or(u64::MAX));
        if paid < needed {
            return Ok(TransferCheck::Refused(ErrorCode::PaymentAmountShort, format!("Transaction {} pays {paid} base units; the invoice is {needed}.", e.tx_hash)));
        }
        let block = client
            .provider
            .get_block_by_number(BlockNumberOrTag::Number(mined_in))
            .await
            .map_err(|err| rpc_error(client, err))?
            .ok_or_else(|| Error::new(ErrorCode::NotAvailable, "The payment's block is not available from the node yet."))?;
        Ok(TransferCheck::Paid { block_timestamp: block.header.timestamp })
    }
}
