//! Linking a wallet to an account with an EIP-4361 (Sign-In with Ethereum) message: the gateway
//! issues the message (with a single-use nonce and an expiry), the wallet signs it with
//! `personal_sign` (EIP-191), and the signature must recover to the wallet. Credits the wallet bought
//! before it was linked join the account's balance then.

use actiongate_api_types::ErrorCode;
use actiongate_api_types::credits::{
    WalletLinkBegin, WalletLinkChallenge, WalletLinkRequest, WalletLinked,
};
use k256::ecdsa::{RecoveryId, Signature, VerifyingKey};
use time::Duration;

use crate::clock::{rfc3339, to_millis};
use crate::crypto::{address_of_verifying, eip191_digest, random_bytes};
use crate::error::{Error, Result};
use crate::gateway::{Gateway, OwnerContext};
use crate::purchases::checksum_address;

/// How long an issued sign-in message can be used.
const LINK_TTL: Duration = Duration::minutes(10);

/// The address whose key made an EIP-191 `personal_sign` signature of `message`.
pub fn recover_personal_sign(message: &str, signature: &str) -> Option<String> {
    recover_personal_sign_bytes(message.as_bytes(), signature)
}

/// [`recover_personal_sign`] of a message given as bytes.
pub fn recover_personal_sign_bytes(message: &[u8], signature: &str) -> Option<String> {
    let bytes = hex::decode(signature.strip_prefix("0x").unwrap_or(signature)).ok()?;
    if bytes.len() != 65 {
        return None;
    }
    let digest = eip191_digest(message);
    let v = match bytes[64] {
        27 | 28 => bytes[64] - 27,
        0 | 1 => bytes[64],
        _ => return None,
    };
    let sig = Signature::from_slice(&bytes[..64]).ok()?;
    let key = VerifyingKey::recover_from_prehash(&digest, &sig, RecoveryId::from_byte(v)?).ok()?;
    Some(address_of_verifying(&key))
}

impl Gateway {
    /// Issues the EIP-4361 message that links `address` to the owner's account once signed.
    pub async fn begin_wallet_link(
        &self,
        owner: &OwnerContext,
        req: &WalletLinkBegin,
    ) -> Result<WalletLinkChallenge> {
        let address = checksum_address("address", &req.address)?;
        let chain_id = req.chain_id.unwrap_or(crate::chains::DEFAULT_CHAIN_ID);
        let nonce = hex::encode(random_bytes::<16>()?);
        let now = self.now();
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
        self.store()
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
            .store()
            .take_link_challenge(&nonce, &owner.account_id, to_millis(self.now()))
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
            .store()
            .link_wallet(&address, &owner.account_id, to_millis(self.now()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_personal_sign_recovers_to_its_signer() {
        // Made outside this code: viem's `signMessage({message: "hello"})` with the key 0x4646…46.
        let signature = "0xf63c93dc642a4839770b35abf9cb304ac2f1b5463d9a9abd87546feaa0af992e659cf087c433e45c45f6135cb819ab1922c6359dbb1b8c8d7a54141de2cd4beb1b";
        let signer = "0x9d8A62f656a8d1615C1294fd71e9CFb3E4855A4F";
        assert_eq!(
            recover_personal_sign("hello", signature).as_deref(),
            Some(signer)
        );
        assert_eq!(
            crate::crypto::address_of(
                &k256::ecdsa::SigningKey::from_slice(&[0x46; 32]).expect("from slice")
            ),
            signer
        );
        assert_ne!(
            recover_personal_sign("hellO", signature).as_deref(),
            Some(signer)
        );
        assert_eq!(recover_personal_sign("hello", "0x1234"), None);
    }
}
