//! Paying an x402 challenge from a local key: a stablecoin transfer signed here and sent to the
//! payment chain's RPC URL. The key is read from a file and never printed.

use std::path::Path;

use alloy::network::EthereumWallet;
use alloy::primitives::{Address, U256};
use alloy::providers::ProviderBuilder;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol;

sol! {
    #[sol(rpc)]
    interface IERC20 {
        function transfer(address to, uint256 amount) external returns (bool);
    }
}

/// A local paying wallet.
pub struct Payer {
    signer: PrivateKeySigner,
}

impl Payer {
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the key file {}: {e}", path.display()))?;
        let signer: PrivateKeySigner = text.trim().parse().map_err(|_| format!("{} does not hold a private key (hex)", path.display()))?;
        Ok(Self { signer })
    }

    pub fn address(&self) -> String {
        self.signer.address().to_string()
    }

    /// Transfers `atomic` base units of `token` to `to`; answers the transaction hash once mined.
    pub async fn transfer(&self, rpc_url: &str, token: &str, to: &str, atomic: &str) -> Result<String, String> {
        let url = rpc_url.parse().map_err(|_| "--rpc-url is not a URL".to_owned())?;
        let (token, to): (Address, Address) = (token.parse().map_err(|_| "bad token address")?, to.parse().map_err(|_| "bad recipient address")?);
        let amount = U256::from_str_radix(atomic, 10).map_err(|_| "bad amount".to_owned())?;
        let wallet = ProviderBuilder::new().wallet(EthereumWallet::from(self.signer.clone())).connect_http(url);
        let pending = IERC20::new(token, &wallet).transfer(to, amount).send().await.map_err(|e| format!("the transfer was not sent: {}", redact(&e.to_string(), rpc_url)))?;
        let receipt = pending.get_receipt().await.map_err(|e| format!("the transfer's receipt: {}", redact(&e.to_string(), rpc_url)))?;
        if !receipt.status() {
            return Err(format!("the transfer {} reverted", receipt.transaction_hash));
        }
        Ok(receipt.transaction_hash.to_string())
    }
}

/// An RPC URL may carry a key: never in a message.
fn redact(text: &str, url: &str) -> String {
    text.replace(url, "<rpc-url>").replace(url.trim_end_matches('/'), "<rpc-url>")
}
