//! Execution goes through one provider trait, one implementation per provider family, so that a new
//! venue plugs in without touching the runner. The registry tells the catalog which lanes are live.

use std::collections::HashMap;
use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use async_trait::async_trait;

use crate::catalog::{Implemented, Lane};

/// Who an execution runs for.
#[derive(Debug, Clone, PartialEq)]
pub struct Subject {
    /// `did:pkh:eip155:<chainId>:<address>`.
    pub user_did: String,
    pub wallet_address: String,
}

/// Everything a provider needs to run (or re-identify) one execution.
#[derive(Debug, Clone)]
pub struct ExecutionContext {
    pub intent_id: String,
    /// Deterministic and unique per (intent, user): a venue's client order id, a nonce reservation
    /// key. A provider uses it to find an execution again after a crash.
    pub execution_key: String,
    pub action: String,
    pub params: serde_json::Value,
    pub chain_id: u64,
    pub lane: Lane,
    pub subject: Subject,
    pub agent_id: String,
    pub agent_address: String,
}

/// How one execution ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionOutcome {
    pub success: bool,
    pub tx_hash: Option<String>,
    /// What a read read.
    pub data: Option<serde_json::Value>,
    pub error: Option<(ErrorCode, String)>,
}

impl ExecutionOutcome {
    pub fn read(data: serde_json::Value) -> Self {
        Self { success: true, tx_hash: None, data: Some(data), error: None }
    }

    pub fn failed(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { success: false, tx_hash: None, data: None, error: Some((code, message.into())) }
    }
}

/// What a provider knows of an execution that was started but never recorded as ended (the process
/// running it died).
#[derive(Debug, Clone, PartialEq)]
pub enum Reconciled {
    /// It ended; here is how.
    Done(ExecutionOutcome),
    /// Nothing was sent (or the action is a read, safe to run again): run it now.
    NotSent,
}

/// One provider family's execution.
#[async_trait]
pub trait Provider: Send + Sync + 'static {
    /// The (action, lane) pairs this provider runs.
    fn lanes(&self) -> Vec<(&'static str, Lane)>;

    /// Runs one execution. Never panics; a failure is an outcome with a code.
    async fn execute(&self, ctx: &ExecutionContext) -> ExecutionOutcome;

    /// Finds an execution that was started but not recorded as ended. Answer `NotSent` only when
    /// certain that nothing was, or will still be, sent for this execution key (a nonce reserved in the
    /// database and unused, a venue that dedupes on the key, or a read); the runner then runs it.
    async fn reconcile(&self, ctx: &ExecutionContext) -> Reconciled;
}

/// Every provider of this build, by action.
#[derive(Default)]
pub struct Registry {
    by_action: HashMap<String, (Arc<dyn Provider>, Vec<Lane>)>,
}

impl Registry {
    pub fn new(providers: Vec<Arc<dyn Provider>>) -> Self {
        let mut by_action: HashMap<String, (Arc<dyn Provider>, Vec<Lane>)> = HashMap::new();
        for provider in providers {
            for (action, lane) in provider.lanes() {
                let entry = by_action.entry(action.to_owned()).or_insert_with(|| (provider.clone(), Vec::new()));
                entry.1.push(lane);
            }
        }
        Self { by_action }
    }

    pub fn provider(&self, action: &str) -> Option<&Arc<dyn Provider>> {
        self.by_action.get(action).map(|(p, _)| p)
    }
}

impl Implemented for Registry {
    fn implements(&self, action: &str, lane: Lane) -> bool {
        self.by_action.get(action).is_some_and(|(_, lanes)| lanes.contains(&lane))
    }
}

impl Lane {
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::ExecuteIntent => "executeIntent",
            Lane::Execute => "execute",
            Lane::BuildTx => "buildTx",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "executeIntent" => Some(Lane::ExecuteIntent),
            "execute" => Some(Lane::Execute),
            "buildTx" => Some(Lane::BuildTx),
            _ => None,
        }
    }
}
