//! Personhood for delegation (World ID 4.0): proof requests signed the way World ID relying parties
//! sign them, proofs checked by a verifier behind a trait, organizations and agents locked to the
//! first verified nullifier, and single-use deposit receipts (SPEC "Personhood").

use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use actiongate_api_types::personhood::{
    DepositReceipt, PersonhoodState, PersonhoodStatus, ProofBegun, ProofRequest, RpContext,
};
use async_trait::async_trait;
use k256::ecdsa::SigningKey;
use serde_json::{Value, json};
use sha3::{Digest, Keccak256};

use crate::clock::{Clock, from_millis, rfc3339, to_millis};
use crate::crypto::{self, address_of};
use crate::error::{Error, Result};
use crate::store::{
    ConsumeOutcome, PersonhoodChallenge, PersonhoodEffect, PersonhoodOutcome, Store,
};

/// World ID's hash to a field element: keccak-256 shifted right by 8 bits (the top byte is zero).
pub fn hash_to_field(bytes: &[u8]) -> [u8; 32] {
    let h = Keccak256::digest(bytes);
    let mut out = [0u8; 32];
    out[1..].copy_from_slice(&h[..31]);
    out
}

/// IDKit's `hashSignal`: a signal written as 0x-hex (even length) is hashed as the bytes it spells,
/// any other signal as its UTF-8 bytes.
pub fn signal_hash(signal: &str) -> String {
    let bytes = signal
        .strip_prefix("0x")
        .filter(|h| h.len() % 2 == 0)
        .and_then(|h| hex::decode(h).ok())
        .unwrap_or_else(|| signal.as_bytes().to_vec());
    hex0x(&hash_to_field(&bytes))
}

fn hex0x(bytes: &[u8]) -> String {
    format!("0x{}", hex::encode(bytes))
}

/// `[personhood]`.
#[derive(Debug, Clone)]
pub struct PersonhoodSettings {
    pub rp_id: String,
    pub app_id: String,
    /// production or staging.
    pub environment: String,
    pub ttl: time::Duration,
}

impl Default for PersonhoodSettings {
    fn default() -> Self {
        Self {
            rp_id: "rp_actiongate".into(),
            app_id: "app_actiongate".into(),
            environment: "production".into(),
            ttl: time::Duration::seconds(300),
        }
    }
}

/// Signs proof requests as the relying party: a secp256k1 key (derived from the master key).
pub struct RpSigner {
    key: SigningKey,
}

impl RpSigner {
    pub fn new(secret: &[u8; 32]) -> Result<Self> {
        let key = SigningKey::from_slice(secret)
            .map_err(|_| Error::internal("invalid RP signing key"))?;
        Ok(Self { key })
    }

    /// The signer's address, registered with the World ID developer portal for the rp_id.
    pub fn address(&self) -> String {
        address_of(&self.key)
    }

    /// The message: `0x01 ‖ nonce ‖ created_at (u64 BE) ‖ expires_at (u64 BE) ‖ hashToField(action)`.
    pub fn message(nonce: &[u8; 32], created_at: u64, expires_at: u64, action: &str) -> Vec<u8> {
        let mut m = Vec::with_capacity(1 + 32 + 8 + 8 + 32);
        m.push(0x01);
        m.extend_from_slice(nonce);
        m.extend_from_slice(&created_at.to_be_bytes());
        m.extend_from_slice(&expires_at.to_be_bytes());
        m.extend_from_slice(&hash_to_field(action.as_bytes()));
        m
    }

    /// EIP-191 personal-sign of the message: 65 bytes r ‖ s ‖ v (v 27 or 28), 0x-hex.
    pub fn sign(
        &self,
        nonce: &[u8; 32],
        created_at: u64,
        expires_at: u64,
        action: &str,
    ) -> Result<String> {
        let message = Self::message(nonce, created_at, expires_at, action);
        let digest = crate::crypto::eip191_digest(&message);
        let (sig, recid) = self
            .key
            .sign_prehash_recoverable(&digest)
            .map_err(|e| Error::internal(format!("RP signature: {e}")))?;
        let mut out = sig.to_bytes().to_vec();
        out.push(27 + recid.to_byte());
        Ok(hex0x(&out))
    }
}

/// What a proof must be checked against.
#[derive(Debug, Clone)]
pub struct ProofCheck {
    pub rp_id: String,
    pub action: String,
    pub signal_hash: String,
    pub nonce: String,
    pub proof: Value,
}

/// What the verifier vouches for.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedProof {
    pub nullifier: String,
    pub action: String,
    pub signal_hash: String,
    pub nonce: String,
}

/// Why a proof was not verified.
#[derive(Debug, Clone, thiserror::Error)]
pub enum VerifyError {
    #[error("the proof was rejected: {0}")]
    Rejected(String),
    #[error("the verifier could not be reached: {0}")]
    Unavailable(String),
}

/// Verifies a proof (production: the World ID developer portal's v4 verify API).
#[async_trait]
pub trait ProofVerifier: Send + Sync + 'static {
    async fn verify(&self, check: &ProofCheck) -> std::result::Result<VerifiedProof, VerifyError>;
}

/// Who is asking: the account the proof requests belong to.
#[derive(Debug, Clone)]
pub struct Principal {
    pub account_id: String,
}

/// The personhood use cases.
pub struct Personhood {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    signer: RpSigner,
    verifier: Arc<dyn ProofVerifier>,
    settings: PersonhoodSettings,
}

const ORG: &str = "org";
const AGENT: &str = "agent";
const DEPOSIT: &str = "deposit";

fn rejected(code: ErrorCode, message: impl Into<String>) -> Error {
    Error::new(code, message)
}

fn check_id(field: &str, id: &str) -> Result<()> {
    if id.is_empty() || id.len() > 128 || id.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(Error::invalid(format!(
            "{field} must be 1 to 128 printable characters without spaces"
        )));
    }
    Ok(())
}

/// What a proof request is for.
struct Begin<'a> {
    kind: &'a str,
    subject: &'a str,
    action: String,
    signal: String,
    /// challengeId, idempotencyKey, details (deposits).
    extra: (Option<String>, Option<String>, Option<String>),
}

/// A deposit's optional fields (SPEC "deposit/begin").
#[derive(Debug, Clone, Default)]
pub struct DepositBegin {
    pub deposit_signal: Option<String>,
    pub runtime_id: Option<String>,
    pub amount_usd: Option<f64>,
    pub destination_address: Option<String>,
    pub idempotency_key: Option<String>,
}

impl Personhood {
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        signer: RpSigner,
        verifier: Arc<dyn ProofVerifier>,
        settings: PersonhoodSettings,
    ) -> Self {
        Self {
            store,
            clock,
            signer,
            verifier,
            settings,
        }
    }

    pub fn signer_address(&self) -> String {
        self.signer.address()
    }

    /// The relying party proofs are made for: its ids and the address its requests are signed by.
    pub fn relying_party(&self) -> actiongate_api_types::personhood::RelyingParty {
        actiongate_api_types::personhood::RelyingParty {
            rp_id: self.settings.rp_id.clone(),
            app_id: self.settings.app_id.clone(),
            environment: self.settings.environment.clone(),
            signer_address: self.signer_address(),
            ttl_seconds: self.settings.ttl.whole_seconds(),
        }
    }

    pub fn settings(&self) -> &PersonhoodSettings {
        &self.settings
    }

    /// Mints a nonce, stores the challenge, and answers the signed proof request.
    async fn begin(
        &self,
        who: &Principal,
        what: Begin<'_>,
        chain_id: u64,
    ) -> Result<(ProofRequest, PersonhoodChallenge)> {
        let Begin {
            kind,
            subject,
            action,
            signal,
            extra,
        } = what;
        let nonce = hash_to_field(&crypto::random_bytes::<32>()?);
        let now = self.clock.now();
        let created = u64::try_from(now.unix_timestamp()).unwrap_or(0);
        let expires_at = now + self.settings.ttl;
        let expires = u64::try_from(expires_at.unix_timestamp()).unwrap_or(0);
        let signature = self.signer.sign(&nonce, created, expires, &action)?;
        let (challenge_id, idempotency_key, details) = extra;
        let challenge = PersonhoodChallenge {
            nonce: hex0x(&nonce),
            kind: kind.into(),
            account_id: who.account_id.clone(),
            subject: subject.into(),
            action,
            signal,
            chain_id,
            challenge_id,
            idempotency_key,
            details,
            created_at: to_millis(now),
            expires_at: to_millis(expires_at),
            used_at: None,
        };
        self.store.insert_personhood_challenge(&challenge).await?;
        let request = self.proof_request(&challenge, &signature);
        Ok((request, challenge))
    }

    fn proof_request(&self, c: &PersonhoodChallenge, signature: &str) -> ProofRequest {
        ProofRequest {
            action: c.action.clone(),
            app_id: self.settings.app_id.clone(),
            environment: self.settings.environment.clone(),
            signal: c.signal.clone(),
            rp_context: RpContext {
                rp_id: self.settings.rp_id.clone(),
                nonce: c.nonce.clone(),
                created_at: c.created_at.div_euclid(1000),
                expires_at: c.expires_at.div_euclid(1000),
                signature: signature.to_owned(),
            },
        }
    }

    /// Org begin: action `delegate-org:{orgId}`, signal the org id.
    pub async fn begin_org(
        &self,
        who: &Principal,
        org_id: &str,
        chain_id: u64,
    ) -> Result<ProofBegun> {
        check_id("orgId", org_id)?;
        let what = Begin {
            kind: ORG,
            subject: org_id,
            action: format!("delegate-org:{org_id}"),
            signal: org_id.into(),
            extra: (None, None, None),
        };
        let (proof_request, _) = self.begin(who, what, chain_id).await?;
        Ok(ProofBegun {
            proof_request,
            challenge_id: None,
        })
    }

    /// Agent-scoped begin: action `delegate-agent:{agentId}`, signal the agent id.
    pub async fn begin_agent(
        &self,
        who: &Principal,
        agent_id: &str,
        chain_id: u64,
    ) -> Result<ProofBegun> {
        let what = Begin {
            kind: AGENT,
            subject: agent_id,
            action: format!("delegate-agent:{agent_id}"),
            signal: agent_id.into(),
            extra: (None, None, None),
        };
        let (proof_request, _) = self.begin(who, what, chain_id).await?;
        Ok(ProofBegun {
            proof_request,
            challenge_id: None,
        })
    }

    /// Deposit begin: action `delegate-org:{orgId}`, signal `deposit:{challengeId}` (or the caller's
    /// `deposit:` signal). The same idempotency key answers the same challenge.
    pub async fn begin_deposit(
        &self,
        who: &Principal,
        org_id: &str,
        chain_id: u64,
        d: &DepositBegin,
    ) -> Result<ProofBegun> {
        check_id("orgId", org_id)?;
        if let Some(sig) = &d.deposit_signal
            && (!sig.starts_with("deposit:") || sig.len() <= "deposit:".len() || sig.len() > 256)
        {
            return Err(Error::invalid(
                "depositSignal must start with deposit: and be at most 256 characters",
            ));
        }
        if let Some(a) = d.amount_usd {
            crate::money::usd_to_micros("amountUsd", a)?;
        }
        if let Some(key) = &d.idempotency_key {
            crate::acceptance::check_idempotency_key(key)?;
            if let Some(existing) = self
                .store
                .find_personhood_challenge_by_key(&who.account_id, key)
                .await?
            {
                if existing.kind != DEPOSIT || existing.subject != org_id {
                    return Err(rejected(
                        ErrorCode::IdempotencyKeyReused,
                        "This idempotencyKey was used for another request.",
                    ));
                }
                let created = u64::try_from(existing.created_at.div_euclid(1000)).unwrap_or(0);
                let expires = u64::try_from(existing.expires_at.div_euclid(1000)).unwrap_or(0);
                let nonce =
                    hex::decode(existing.nonce.trim_start_matches("0x")).unwrap_or_default();
                let nonce: [u8; 32] = nonce
                    .try_into()
                    .map_err(|_| Error::internal("stored nonce"))?;
                let signature = self
                    .signer
                    .sign(&nonce, created, expires, &existing.action)?;
                return Ok(ProofBegun {
                    proof_request: self.proof_request(&existing, &signature),
                    challenge_id: existing.challenge_id.clone(),
                });
            }
        }
        let challenge_id = uuid::Uuid::now_v7().to_string();
        let signal = d
            .deposit_signal
            .clone()
            .unwrap_or_else(|| format!("deposit:{challenge_id}"));
        let details = json!({
            "runtimeId": d.runtime_id,
            "amountUsd": d.amount_usd,
            "destinationAddress": d.destination_address,
        })
        .to_string();
        let what = Begin {
            kind: DEPOSIT,
            subject: org_id,
            action: format!("delegate-org:{org_id}"),
            signal,
            extra: (
                Some(challenge_id.clone()),
                d.idempotency_key.clone(),
                Some(details),
            ),
        };
        let (proof_request, _) = self.begin(who, what, chain_id).await?;
        Ok(ProofBegun {
            proof_request,
            challenge_id: Some(challenge_id),
        })
    }

    /// Finds the challenge a proof answers (by the nonce it carries, else the subject's open one),
    /// verifies it, and checks the verifier vouched for our action, signal hash and nonce.
    async fn verified(
        &self,
        who: &Principal,
        kind: &str,
        subject: &str,
        proof: &Value,
    ) -> Result<(PersonhoodChallenge, String)> {
        let now = to_millis(self.clock.now());
        let nonce = proof
            .get("nonce")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let challenge = match nonce {
            Some(n) => self.store.get_personhood_challenge(&n).await?,
            None => {
                self.store
                    .open_personhood_challenge(&who.account_id, kind, subject, now)
                    .await?
            }
        };
        let Some(challenge) = challenge
            .filter(|c| c.account_id == who.account_id && c.kind == kind && c.subject == subject)
        else {
            return Err(rejected(
                ErrorCode::PersonhoodChallengeInvalid,
                "No proof request of ours matches this proof: begin again.",
            ));
        };
        if challenge.used_at.is_some() {
            return Err(rejected(
                ErrorCode::PersonhoodChallengeInvalid,
                "This proof request was already answered: begin again.",
            ));
        }
        if challenge.expires_at <= now {
            return Err(rejected(
                ErrorCode::PersonhoodChallengeInvalid,
                "This proof request has expired: begin again.",
            ));
        }
        let check = ProofCheck {
            rp_id: self.settings.rp_id.clone(),
            action: challenge.action.clone(),
            signal_hash: signal_hash(&challenge.signal),
            nonce: challenge.nonce.clone(),
            proof: proof.clone(),
        };
        let verified = match self.verifier.verify(&check).await {
            Ok(v) => v,
            Err(VerifyError::Rejected(why)) => {
                return Err(rejected(
                    ErrorCode::PersonhoodProofInvalid,
                    format!("The proof was not verified: {why}"),
                ));
            }
            Err(VerifyError::Unavailable(why)) => {
                return Err(Error::new(
                    ErrorCode::NotAvailable,
                    "The proof verifier cannot be reached; try again.",
                )
                .with_detail(why));
            }
        };
        let same = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
        if !same(&verified.action, &check.action)
            || !same(&verified.signal_hash, &check.signal_hash)
            || !same(&verified.nonce, &check.nonce)
        {
            return Err(rejected(
                ErrorCode::PersonhoodProofInvalid,
                "The verified proof is for another action, signal or request than the one we issued.",
            ));
        }
        Ok((challenge, verified.nullifier))
    }

    async fn lock(
        &self,
        who: &Principal,
        kind: &str,
        subject: &str,
        proof: &Value,
    ) -> Result<PersonhoodStatus> {
        let (challenge, nullifier) = self.verified(who, kind, subject, proof).await?;
        let effect = PersonhoodEffect::Lock {
            kind: kind.into(),
            subject: scoped(who, subject),
            nullifier,
        };
        match self
            .store
            .complete_personhood(&challenge.nonce, to_millis(self.clock.now()), &effect)
            .await?
        {
            PersonhoodOutcome::Locked { locked_at } => Ok(locked(locked_at)),
            PersonhoodOutcome::Mismatch => Err(rejected(
                ErrorCode::PersonhoodOrgNullifierMismatch,
                "This is locked to a different verified person; nothing changed.",
            )),
            _ => Err(rejected(
                ErrorCode::PersonhoodChallengeInvalid,
                "This proof request was already answered: begin again.",
            )),
        }
    }

    pub async fn complete_org(
        &self,
        who: &Principal,
        org_id: &str,
        proof: &Value,
    ) -> Result<PersonhoodStatus> {
        check_id("orgId", org_id)?;
        self.lock(who, ORG, org_id, proof).await
    }

    pub async fn complete_agent(
        &self,
        who: &Principal,
        agent_id: &str,
        proof: &Value,
    ) -> Result<PersonhoodStatus> {
        self.lock(who, AGENT, agent_id, proof).await
    }

    /// `data.personhood` of an organization: `unverified` or `locked` with `lockedAt`; never the nullifier.
    pub async fn check_org(&self, who: &Principal, org_id: &str) -> Result<PersonhoodStatus> {
        check_id("orgId", org_id)?;
        let lock = self
            .store
            .personhood_lock(ORG, &scoped(who, org_id))
            .await?;
        Ok(match lock {
            Some(at) => locked(at),
            None => PersonhoodStatus {
                personhood: PersonhoodState {
                    status: "unverified".into(),
                    locked_at: None,
                },
            },
        })
    }

    pub async fn complete_deposit(
        &self,
        who: &Principal,
        org_id: &str,
        proof: &Value,
    ) -> Result<DepositReceipt> {
        check_id("orgId", org_id)?;
        let (challenge, nullifier) = self.verified(who, DEPOSIT, org_id, proof).await?;
        let receipt_id = format!("rcpt_{}", uuid::Uuid::new_v4().simple());
        let effect = PersonhoodEffect::Receipt {
            receipt_id,
            lock_kind: ORG.into(),
            subject: scoped(who, org_id),
            challenge_id: challenge.challenge_id.clone().unwrap_or_default(),
            nullifier,
        };
        match self
            .store
            .complete_personhood(&challenge.nonce, to_millis(self.clock.now()), &effect)
            .await?
        {
            PersonhoodOutcome::Receipt { receipt_id } => Ok(DepositReceipt {
                receipt_id,
                consumed_at: None,
            }),
            PersonhoodOutcome::Mismatch => Err(rejected(
                ErrorCode::PersonhoodDepositNullifierMismatch,
                "The deposit proof is from a different person than the one the organization is locked to.",
            )),
            PersonhoodOutcome::NotLocked => Err(rejected(
                ErrorCode::PersonhoodOrgNotLocked,
                "The organization has no verified person yet: complete the org enrollment first.",
            )),
            _ => Err(rejected(
                ErrorCode::PersonhoodChallengeInvalid,
                "This proof request was already answered: begin again.",
            )),
        }
    }

    pub async fn consume_deposit(
        &self,
        who: &Principal,
        org_id: &str,
        receipt_id: &str,
        runtime_id: Option<&str>,
        amount_usd: Option<f64>,
    ) -> Result<DepositReceipt> {
        check_id("orgId", org_id)?;
        if let Some(a) = amount_usd {
            crate::money::usd_to_micros("amountUsd", a)?;
        }
        let details = json!({"runtimeId": runtime_id, "amountUsd": amount_usd}).to_string();
        let now = to_millis(self.clock.now());
        match self
            .store
            .consume_receipt(receipt_id, &scoped(who, org_id), &details, now)
            .await?
        {
            ConsumeOutcome::Consumed { consumed_at } => Ok(DepositReceipt {
                receipt_id: receipt_id.to_owned(),
                consumed_at: Some(rfc3339(from_millis(consumed_at))),
            }),
            ConsumeOutcome::AlreadyUsed => Err(rejected(
                ErrorCode::PersonhoodDepositReceiptAlreadyUsed,
                "This deposit receipt was consumed before; a receipt is single-use.",
            )),
            ConsumeOutcome::NotFound => Err(Error::not_found(format!(
                "No deposit receipt {receipt_id} for this organization."
            ))),
        }
    }
}

/// Organizations and agents are scoped to the account, so that one account cannot lock another's.
fn scoped(who: &Principal, subject: &str) -> String {
    format!("{}/{subject}", who.account_id)
}

/// A subject locked since `at` (Unix ms).
fn locked(at: i64) -> PersonhoodStatus {
    PersonhoodStatus {
        personhood: PersonhoodState {
            status: "locked".into(),
            locked_at: Some(rfc3339(from_millis(at))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_hashes_match_idkit_vectors() {
        // From World ID's developer docs (signatures.mdx).
        assert_eq!(
            signal_hash(""),
            "0x00c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a4"
        );
        assert_eq!(signal_hash("0x"), signal_hash(""), "0x-hex is decoded");
        assert_ne!(
            signal_hash("0xabc"),
            signal_hash("0x0abc"),
            "odd-length hex is text"
        );
    }

    #[test]
    fn the_rp_signature_matches_the_documented_vector() {
        // developer-docs world-id/idkit/signatures.mdx: key 0xabab…ab, random bytes 0x00..0x1f,
        // created_at 1700000000, ttl 300, action "test-action".
        let signer = RpSigner::new(&[0xab; 32]).expect("rp signer");
        let random: Vec<u8> = (0u8..32).collect();
        let nonce = hash_to_field(&random);
        let message = RpSigner::message(&nonce, 1_700_000_000, 1_700_000_300, "test-action");
        assert_eq!(message.len(), 81);
        let sig = signer
            .sign(&nonce, 1_700_000_000, 1_700_000_300, "test-action")
            .unwrap_or_default();
        assert!(
            sig.starts_with("0x05594adb") && sig.ends_with("056f1b"),
            "{sig}"
        );
    }

    #[test]
    fn hash_to_field_zeroes_the_top_byte() {
        let h = hash_to_field(b"");
        assert_eq!(h[0], 0);
        // keccak256("") = c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470
        assert_eq!(hex::encode(&h[1..4]), "c5d246");
    }

    #[test]
    fn the_rp_signature_recovers_to_the_signer() {
        let signer = RpSigner::new(&[7u8; 32]).expect("rp signer");
        let nonce = hash_to_field(b"n");
        let sig = signer
            .sign(&nonce, 1000, 1300, "delegate-org:acme")
            .unwrap_or_default();
        let bytes = hex::decode(sig.trim_start_matches("0x")).unwrap_or_default();
        assert_eq!(bytes.len(), 65);
        assert!(bytes[64] == 27 || bytes[64] == 28);
        let message = RpSigner::message(&nonce, 1000, 1300, "delegate-org:acme");
        // An RP signature is a personal_sign of the message: it recovers like any wallet's (whose
        // recovery is checked against a signature made by viem).
        assert_eq!(
            crate::crypto::recover_personal_sign_bytes(&message, &sig).as_deref(),
            Some(signer.address().as_str())
        );
        assert_eq!(message.len(), 81);
    }
}
