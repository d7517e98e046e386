//! Linking a wallet to an account with an EIP-4361 (Sign-In with Ethereum) message: the gateway
//! issues the message (with a single-use nonce and an expiry), the wallet signs it with
//! `personal_sign` (EIP-191), and the signature must recover to the wallet. Credits the wallet bought
//! before it was linked join the account's balance then.

use actiongate_api_types::ErrorCode;
use actiongate_api_types::credits::{
    WalletLinkBegin, WalletLinkChallenge, WalletLinkRequest, WalletLinked,
};
use time::Duration;

use super::{Credits, checksum_address};
use crate::clock::{rfc3339, to_millis};
use crate::crypto::{random_bytes, recover_personal_sign};
use crate::error::{Error, Result};
use crate::identity::OwnerContext;

/// How long an issued sign-in message can be used.
const LINK_TTL: Duration = Duration::minutes(10);

impl Credits {
    /// Issues the EIP-4361 message that links `address` to the owner's account once signed.
    pub async fn begin_wallet_link(
        &self,
        owner: &OwnerContext,
        req: &WalletLinkBegin,
    ) -> Result<WalletLinkChallenge> {
        let address = checksum_address("address", &req.address)?;
        let chain_id = req.chain_id.unwrap_or(crate::chains::DEFAULT_CHAIN_ID);
        let nonce = hex::encode(random_bytes::<16>()?);
        let now = self.clock.now();
        let expires = now + LINK_TTL;
        let message = format!(
            "actiongate wants you to sign in with your Ethereum account:\n{address}\n\n\
             Link this wallet to actiongate account {account}: credits it buys go to that account.\n\n\
             URI: actiongate:wallets/link\nVersion: 1\nChain ID: {chain_id}\nNonce: {nonce}\n\
             Issued At: {issued}\nExpiration Time: {expiry}",
            account = owner.account_id,
            issued = rfc3339(now),
            expiry = rfc3339(expires),
        );
        self.store
            .put_link_challenge(
                &nonce,
                &owner.account_id,
                &address,
                &message,
                to_millis(expires),
            )
            .await?;
        Ok(WalletLinkChallenge {
            message,
            nonce,
            expires_at: rfc3339(expires),
        })
    }

    /// Links the wallet that signed an issued message to the owner's account.
    pub async fn complete_wallet_link(
        &self,
        owner: &OwnerContext,
        req: &WalletLinkRequest,
    ) -> Result<WalletLinked> {
        let invalid = || {
            Error::new(
                ErrorCode::WalletLinkInvalid,
                "This sign-in message was not issued to this account, was used, or expired; begin again.",
            )
        };
        let nonce = req
            .message
            .lines()
            .find_map(|l| l.strip_prefix("Nonce: "))
            .ok_or_else(invalid)?
            .trim()
            .to_owned();
        let (address, issued) = self
            .store
            .take_link_challenge(&nonce, &owner.account_id, to_millis(self.clock.now()))
            .await?
            .ok_or_else(invalid)?;
        if issued != req.message {
            return Err(invalid());
        }
        if recover_personal_sign(&req.message, &req.signature).as_deref() != Some(address.as_str())
        {
            return Err(Error::new(
                ErrorCode::WalletSignatureInvalid,
                format!("The signature is not {address}'s signature of the issued message."),
            ));
        }
        let moved = self
            .store
            .link_wallet(&address, &owner.account_id, to_millis(self.clock.now()))
            .await?
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::WalletLinkedElsewhere,
                    format!("{address} is linked to another account."),
                )
            })?;
        tracing::info!(
            account_id = owner.account_id,
            address,
            credits_moved = moved,
            "wallet linked"
        );
        Ok(WalletLinked {
            address,
            account_id: owner.account_id.clone(),
            credits_moved: moved,
        })
    }
}
