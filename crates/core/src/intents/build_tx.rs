//! Unsigned transactions for a wallet to sign locally (Model B).

use actiongate_api_types::ErrorCode;
use actiongate_api_types::chain::{BuildTxData, BuildTxRequest};

use super::Intents;
use super::refusal;
use crate::acceptance::user_did;
use crate::catalog::Lane;
use crate::error::{Error, Result};
use crate::execution::{ExecutionContext, Subject};

impl Intents {
    /// Builds the unsigned transactions of an action for a wallet to sign locally (Model B). The
    /// checks of a submission up to the amount limit run first, in CONTRACT order; then the action's
    /// provider plans and simulates the transactions. Nothing is written and nothing is charged: the
    /// gateway moves nothing, the wallet's owner signs and pays the gas.
    pub async fn build_tx(&self, req: &BuildTxRequest) -> Result<BuildTxData> {
        self.build_unsigned(req)
            .await
            .map_err(Error::intent_rejection)
    }

    async fn build_unsigned(&self, req: &BuildTxRequest) -> Result<BuildTxData> {
        let agent = self
            .identity
            .authenticate_agent(Some(&req.agent_api_key))
            .await?;
        let spec = self.catalog.resolve(&req.action).ok_or_else(|| {
            refusal(
                ErrorCode::UnknownAction,
                format!("No action named {:?} is in the catalog.", req.action),
            )
        })?;
        if !req.params.is_object() {
            return Err(refusal(
                ErrorCode::InvalidParams,
                "params must be a JSON object.",
            ));
        }
        let policy = self.identity.policy_of(&agent.agent.id).await?;
        let (params, chain_id, estimated) = (&req.params, req.chain_id, req.estimated_amount_usd);
        let holder = req.wallet_address.as_deref();
        self.policy_checks(
            spec,
            Lane::BuildTx,
            params,
            chain_id,
            estimated,
            &policy,
            holder,
        )
        .await
        .first_refusal()?;
        if let Some(refused @ Err(_)) = self
            .health_check(spec, Lane::BuildTx, params, chain_id, &policy, holder)
            .await
        {
            refused?;
        }
        let provider = self
            .registry
            .provider(spec.name(), Lane::BuildTx)
            .ok_or_else(|| {
                refusal(
                    ErrorCode::ActionDisabled,
                    format!(
                        "{} is not available through buildTx in this deployment.",
                        spec.name()
                    ),
                )
            })?;
        let wallet = req.wallet_address.clone().unwrap_or_default();
        let ctx = ExecutionContext {
            intent_id: String::new(),
            execution_key: String::new(),
            action: spec.name().to_owned(),
            params: req.params.clone(),
            chain_id: req.chain_id,
            lane: Lane::BuildTx,
            lease: None,
            read: spec.is_read(),
            subject: Subject {
                user_did: user_did(req.chain_id, &wallet),
                wallet_address: wallet,
            },
            agent_id: agent.agent.id.clone(),
            agent_address: agent.agent.wallet_address.clone(),
            grant: None,
        };
        let built = provider
            .build_tx(&ctx, req.wallet_address.as_deref())
            .await?;
        tracing::info!(
            agent_id = agent.agent.id,
            action = spec.name(),
            chain_id = req.chain_id,
            transactions = built.transactions.len(),
            "transactions built"
        );
        Ok(built)
    }
}
