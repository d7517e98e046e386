//! Secrets: the master key, the keyed hashes that stand in for API keys, session tokens and e-mail
//! codes, and the execution wallets whose private keys are sealed with the master key.
//!
//! Invariant: no type here implements `Display` or `Debug` with secret contents.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use hmac::{Hmac, Mac};
use k256::ecdsa::SigningKey;
use sha2::Sha256;
use sha3::{Digest, Keccak256};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

type HmacSha256 = Hmac<Sha256>;

/// Prefix of an agent API key (SPEC).
pub const AGENT_KEY_PREFIX: &str = "agent-";
/// Prefix of an owner session token (CONTRACT).
pub const OWNER_SESSION_PREFIX: &str = "owner-";

/// A failure of the platform's random source or of sealing: never expected, always internal.
#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    #[error("the operating system's random source failed")]
    Random,
    #[error("the master key must be 32 bytes written as 64 hex characters")]
    MasterKeyFormat,
    #[error("a sealed wallet key could not be opened (wrong master key or tampered row)")]
    Unseal,
    #[error("sealing a wallet key failed")]
    Seal,
}

/// 32 random bytes from the operating system.
pub fn random_bytes<const N: usize>() -> Result<[u8; N], CryptoError> {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).map_err(|_| CryptoError::Random)?;
    Ok(buf)
}

/// The gateway's master key. Sub-keys for each purpose are derived from it, so one file backs
/// every secret the gateway keeps.
pub struct MasterKey(Zeroizing<[u8; 32]>);

impl MasterKey {
    pub fn generate() -> Result<Self, CryptoError> {
        Ok(Self(Zeroizing::new(random_bytes::<32>()?)))
    }

    /// Parses the file form: 64 hex characters, surrounding whitespace ignored.
    pub fn from_hex(text: &str) -> Result<Self, CryptoError> {
        let bytes =
            Zeroizing::new(hex::decode(text.trim()).map_err(|_| CryptoError::MasterKeyFormat)?);
        let key: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| CryptoError::MasterKeyFormat)?;
        Ok(Self(Zeroizing::new(key)))
    }

    /// The file form. The caller writes it to a 0600 file and nowhere else.
    pub fn to_hex(&self) -> Zeroizing<String> {
        Zeroizing::new(hex::encode(self.0.as_slice()))
    }

    fn derive(&self, purpose: &str) -> Zeroizing<[u8; 32]> {
        let mut mac = <HmacSha256 as Mac>::new_from_slice(self.0.as_slice())
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
        mac.update(b"actiongate/v1/");
        mac.update(purpose.as_bytes());
        Zeroizing::new(mac.finalize().into_bytes().into())
    }

    /// The secp256k1 secret the gateway signs personhood proof requests with (the World ID relying
    /// party key), derived so that every process sharing the master key signs alike.
    pub fn rp_signing_secret(&self) -> Zeroizing<[u8; 32]> {
        self.derive("personhood-rp-key")
    }

    /// The secp256k1 key of the gateway's x402 settlement wallet (it submits EIP-3009 authorizations).
    pub fn settlement_wallet_secret(&self) -> Zeroizing<[u8; 32]> {
        self.derive("x402-settlement-wallet")
    }

    /// The keys the gateway works with, derived once at start.
    pub fn keyring(&self) -> Keyring {
        Keyring {
            pepper: self.derive("secret-hash-pepper"),
            wallet: self.derive("wallet-seal"),
        }
    }
}

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(<redacted>)")
    }
}

/// Sub-keys derived from the master key.
#[derive(Clone)]
pub struct Keyring {
    pepper: Zeroizing<[u8; 32]>,
    wallet: Zeroizing<[u8; 32]>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keyring(<redacted>)")
    }
}

/// A keyed hash of a secret: what the database stores instead of the secret.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SecretHash(pub [u8; 32]);

impl SecretHash {
    /// Constant-time comparison.
    pub fn matches(&self, other: &SecretHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl std::fmt::Debug for SecretHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretHash(..)")
    }
}

impl Keyring {
    /// HMAC-SHA-256 with the server pepper, domain-separated by `kind`. Keys and tokens are
    /// high-entropy, so a keyed hash is enough and lets the database index it.
    pub fn hash_secret(&self, kind: &str, secret: &str) -> SecretHash {
        let mut mac = <HmacSha256 as Mac>::new_from_slice(self.pepper.as_slice())
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
        mac.update(kind.as_bytes());
        mac.update(&[0]);
        mac.update(secret.as_bytes());
        SecretHash(mac.finalize().into_bytes().into())
    }

    /// Seals a wallet private key with AES-256-GCM; `binding` (the agent id) is authenticated so a
    /// sealed key cannot be moved to another row.
    pub fn seal_wallet_key(
        &self,
        secret: &[u8; 32],
        binding: &str,
    ) -> Result<Vec<u8>, CryptoError> {
        let cipher =
            Aes256Gcm::new_from_slice(self.wallet.as_slice()).map_err(|_| CryptoError::Seal)?;
        let nonce_bytes = random_bytes::<12>()?;
        let ciphertext = cipher
            .encrypt(
                Nonce::from_slice(&nonce_bytes),
                Payload {
                    msg: secret,
                    aad: binding.as_bytes(),
                },
            )
            .map_err(|_| CryptoError::Seal)?;
        let mut sealed = Vec::with_capacity(12 + ciphertext.len());
        sealed.extend_from_slice(&nonce_bytes);
        sealed.extend_from_slice(&ciphertext);
        Ok(sealed)
    }

    /// Opens a key sealed by [`Keyring::seal_wallet_key`].
    pub fn open_wallet_key(
        &self,
        sealed: &[u8],
        binding: &str,
    ) -> Result<Zeroizing<[u8; 32]>, CryptoError> {
        if sealed.len() < 12 {
            return Err(CryptoError::Unseal);
        }
        let (nonce, ciphertext) = sealed.split_at(12);
        let cipher =
            Aes256Gcm::new_from_slice(self.wallet.as_slice()).map_err(|_| CryptoError::Unseal)?;
        let plain = Zeroizing::new(
            cipher
                .decrypt(
                    Nonce::from_slice(nonce),
                    Payload {
                        msg: ciphertext,
                        aad: binding.as_bytes(),
                    },
                )
                .map_err(|_| CryptoError::Unseal)?,
        );
        let key: [u8; 32] = plain
            .as_slice()
            .try_into()
            .map_err(|_| CryptoError::Unseal)?;
        Ok(Zeroizing::new(key))
    }
}

/// A new high-entropy token with a prefix: 32 random bytes, hex.
pub fn new_token(prefix: &str) -> Result<Zeroizing<String>, CryptoError> {
    let bytes = Zeroizing::new(random_bytes::<32>()?);
    Ok(Zeroizing::new(format!(
        "{prefix}{}",
        hex::encode(bytes.as_slice())
    )))
}

/// A uniformly random 6-digit code.
pub fn new_email_code() -> Result<Zeroizing<String>, CryptoError> {
    loop {
        let n = u32::from_le_bytes(random_bytes::<4>()?);
        // Reject the top sliver so that `% 1_000_000` is uniform.
        if n < u32::MAX - (u32::MAX % 1_000_000) {
            return Ok(Zeroizing::new(format!("{:06}", n % 1_000_000)));
        }
    }
}

/// A freshly generated EVM account.
pub struct NewWallet {
    pub address: String,
    pub secret: Zeroizing<[u8; 32]>,
}

/// Generates a secp256k1 key and its EIP-55 address.
pub fn new_wallet() -> Result<NewWallet, CryptoError> {
    loop {
        let secret = Zeroizing::new(random_bytes::<32>()?);
        if let Ok(key) = SigningKey::from_slice(secret.as_slice()) {
            return Ok(NewWallet {
                address: address_of(&key),
                secret,
            });
        }
    }
}

/// The EIP-55 checksummed address of a signing key.
pub fn address_of(key: &SigningKey) -> String {
    address_of_verifying(key.verifying_key())
}

/// The checksummed address of a public key.
pub fn address_of_verifying(key: &k256::ecdsa::VerifyingKey) -> String {
    let point = key.to_encoded_point(false);
    let hash = Keccak256::digest(&point.as_bytes()[1..]);
    to_checksum(&hash[12..])
}

/// The EIP-191 `personal_sign` digest of `message`.
pub fn eip191_digest(message: &[u8]) -> [u8; 32] {
    let mut hasher = Keccak256::new();
    hasher.update(format!("\x19Ethereum Signed Message:\n{}", message.len()).as_bytes());
    hasher.update(message);
    hasher.finalize().into()
}

/// EIP-55 mixed-case checksum of a 20-byte address.
pub fn to_checksum(address: &[u8]) -> String {
    let lower = hex::encode(address);
    let hash = Keccak256::digest(lower.as_bytes());
    let mut out = String::with_capacity(42);
    out.push_str("0x");
    for (i, c) in lower.chars().enumerate() {
        let nibble = (hash[i / 2] >> if i % 2 == 0 { 4 } else { 0 }) & 0x0f;
        if c.is_ascii_alphabetic() && nibble >= 8 {
            out.push(c.to_ascii_uppercase());
        } else {
            out.push(c);
        }
    }
    out
}

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
    let sig = k256::ecdsa::Signature::from_slice(&bytes[..64]).ok()?;
    let key = k256::ecdsa::VerifyingKey::recover_from_prehash(
        &digest,
        &sig,
        k256::ecdsa::RecoveryId::from_byte(v)?,
    )
    .ok()?;
    Some(address_of_verifying(&key))
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
            address_of(&k256::ecdsa::SigningKey::from_slice(&[0x46; 32]).expect("from slice")),
            signer
        );
        assert_ne!(
            recover_personal_sign("hellO", signature).as_deref(),
            Some(signer)
        );
        assert_eq!(recover_personal_sign("hello", "0x1234"), None);
    }

    #[test]
    fn eip55_matches_the_reference_vectors() {
        // From EIP-55.
        for addr in [
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
            "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
        ] {
            let bytes = hex::decode(&addr[2..]).unwrap_or_default();
            assert_eq!(to_checksum(&bytes), addr);
        }
    }

    #[test]
    fn address_of_a_known_key() {
        // anvil's first default account.
        let secret =
            hex::decode("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")
                .unwrap_or_default();
        let key = SigningKey::from_slice(&secret).map_err(|e| e.to_string());
        assert_eq!(
            key.map(|k| address_of(&k)),
            Ok("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266".to_owned())
        );
    }

    #[test]
    fn sealed_wallet_keys_open_only_with_the_same_key_and_binding() {
        let ring = MasterKey::generate().map(|m| m.keyring());
        let Ok(ring) = ring else {
            panic!("no randomness")
        };
        let other = MasterKey::generate().map(|m| m.keyring());
        let Ok(other) = other else {
            panic!("no randomness")
        };
        let secret = [7u8; 32];
        let sealed = ring.seal_wallet_key(&secret, "agent-1").unwrap_or_default();
        assert!(
            !sealed.windows(32).any(|w| w == secret),
            "the plaintext must not appear in the sealed form"
        );
        assert_eq!(
            ring.open_wallet_key(&sealed, "agent-1").map(|k| *k).ok(),
            Some(secret)
        );
        assert!(ring.open_wallet_key(&sealed, "agent-2").is_err());
        assert!(other.open_wallet_key(&sealed, "agent-1").is_err());
    }

    #[test]
    fn secret_hashes_are_keyed_and_domain_separated() {
        let a = MasterKey::from_hex(&"11".repeat(32)).map(|m| m.keyring());
        let b = MasterKey::from_hex(&"22".repeat(32)).map(|m| m.keyring());
        let (Ok(a), Ok(b)) = (a, b) else {
            panic!("bad hex")
        };
        assert!(
            a.hash_secret("agent-key", "x")
                .matches(&a.hash_secret("agent-key", "x"))
        );
        assert!(
            !a.hash_secret("agent-key", "x")
                .matches(&b.hash_secret("agent-key", "x"))
        );
        assert!(
            !a.hash_secret("agent-key", "x")
                .matches(&a.hash_secret("session", "x"))
        );
    }

    #[test]
    fn codes_are_six_digits() {
        for _ in 0..100 {
            let code = new_email_code().map(|c| c.to_string()).unwrap_or_default();
            assert_eq!(code.len(), 6);
            assert!(code.chars().all(|c| c.is_ascii_digit()));
        }
    }

    #[test]
    fn master_key_round_trips_and_rejects_bad_input() {
        let Ok(key) = MasterKey::generate() else {
            panic!("no randomness")
        };
        let hex = key.to_hex();
        assert!(MasterKey::from_hex(&format!("{}\n", hex.as_str())).is_ok());
        assert!(MasterKey::from_hex("abcd").is_err());
        assert!(MasterKey::from_hex(&"zz".repeat(32)).is_err());
        assert_eq!(format!("{key:?}"), "MasterKey(<redacted>)");
    }
}
