//! Paying an x402 challenge from a local key: a stablecoin transfer signed here and sent to the
//! payment chain's RPC URL. The key is read from a file and never printed.

use std::path::Path;

use actiongate_chain::bindings::IERC20;
use alloy::network::EthereumWallet;
use alloy::network::TransactionBuilder;
use alloy::primitives::{Address, U256};
use alloy::providers::Provider;
use alloy::providers::ProviderBuilder;
use alloy::rpc::types::TransactionRequest;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::SolCall;

/// A decimal amount of a token with `decimals` decimals in base units ("2.004217" of a 6-decimal
/// token is "2004217"); more decimals than the token has is an error, never a rounding.
pub fn atomic_units(amount: &str, decimals: u8) -> Result<String, String> {
    let bad = || {
        format!("the challenge amount {amount:?} is not a decimal of at most {decimals} decimals")
    };
    let (whole, frac) = amount.split_once('.').unwrap_or((amount, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(frac) || frac.len() > usize::from(decimals) {
        return Err(bad());
    }
    let units = format!("{whole}{frac:0<width$}", width = usize::from(decimals));
    U256::from_str_radix(&units, 10)
        .map(|u| u.to_string())
        .map_err(|_| bad())
}

/// A local paying wallet.
pub struct Payer {
    signer: PrivateKeySigner,
}

impl Payer {
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the key file {}: {e}", path.display()))?;
        let signer: PrivateKeySigner = text
            .trim()
            .parse()
            .map_err(|_| format!("{} does not hold a private key (hex)", path.display()))?;
        Ok(Self { signer })
    }

    pub fn address(&self) -> String {
        self.signer.address().to_string()
    }

    /// Transfers `atomic` base units of `token` to `to`; answers the transaction hash once mined.
    pub async fn transfer(
        &self,
        rpc_url: &str,
        token: &str,
        to: &str,
        atomic: &str,
    ) -> Result<String, String> {
        let url = rpc_url
            .parse()
            .map_err(|_| "--rpc-url is not a URL".to_owned())?;
        let (token, to): (Address, Address) = (
            token.parse().map_err(|_| "bad token address")?,
            to.parse().map_err(|_| "bad recipient address")?,
        );
        let amount = U256::from_str_radix(atomic, 10).map_err(|_| "bad amount".to_owned())?;
        let wallet = ProviderBuilder::new()
            .wallet(EthereumWallet::from(self.signer.clone()))
            .connect_http(url);
        let transfer = TransactionRequest::default()
            .with_to(token)
            .with_input(IERC20::transferCall { to, amount }.abi_encode());
        let pending = wallet.send_transaction(transfer).await.map_err(|e| {
            format!(
                "the transfer was not sent: {}",
                redact(&e.to_string(), rpc_url)
            )
        })?;
        let hash = *pending.tx_hash();
        let receipt = pending
            .get_receipt()
            .await
            .map_err(|e| format!("transfer {hash} was sent but its receipt did not come ({}); finish with --receipt {hash}", redact(&e.to_string(), rpc_url)))?;
        if !receipt.status() {
            return Err(format!(
                "the transfer {} reverted",
                receipt.transaction_hash
            ));
        }
        Ok(receipt.transaction_hash.to_string())
    }
}

impl Payer {
    /// The x402 v2 `PAYMENT-SIGNATURE` answering `required` (a fresh random authorization nonce).
    pub fn x402_payment(&self, required: &serde_json::Value) -> Result<String, String> {
        let mut nonce = [0u8; 32];
        getrandom::fill(&mut nonce).map_err(|e| format!("no randomness: {e}"))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        actiongate_chain::payments::x402_payment_header(&self.signer, required, nonce.into(), now)
    }
}

impl Payer {
    /// The wallet's EIP-191 (`personal_sign`) signature of a message, hex.
    pub fn sign_message(&self, message: &str) -> Result<String, String> {
        use alloy::signers::SignerSync;
        let sig = self
            .signer
            .sign_message_sync(message.as_bytes())
            .map_err(|e| format!("signing: {e}"))?;
        Ok(format!(
            "0x{}",
            alloy::primitives::hex::encode(sig.as_bytes())
        ))
    }
}

/// An RPC URL may carry a key: never in a message.
fn redact(text: &str, url: &str) -> String {
    text.replace(url, "<rpc-url>")
        .replace(url.trim_end_matches('/'), "<rpc-url>")
}

#[cfg(test)]
mod tests {
    #[test]
    fn challenge_amounts_read_as_base_units() {
        assert_eq!(super::atomic_units("2.004217", 6).as_deref(), Ok("2004217"));
        assert_eq!(super::atomic_units("18.00", 6).as_deref(), Ok("18000000"));
        assert!(super::atomic_units("1.0000001", 6).is_err());
        assert!(super::atomic_units("two", 6).is_err());
    }
}
