//! The action catalog: parsed from the manifest in `catalog/manifest.toml`, checked, and turned into
//! the catalog document of SPEC once at start. Lookups resolve any alias to the canonical name.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use actiongate_api_types::catalog::{
    CatalogAction, CatalogDocument, EditorConfig, OptionSource, ProviderFamily,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::prices::{PositionSide, ValueRule};

/// The manifest shipped in the repository and compiled into the binary.
pub const BUILTIN_MANIFEST: &str = include_str!("../../../catalog/manifest.toml");

const PROVIDER_KINDS: &[&str] = &[
    "internal",
    "evmDex",
    "vault",
    "cex",
    "bridge",
    "earn",
    "offchainPerp",
    "prediction",
];
const CAPABILITIES: &[&str] = &["quote", "execute", "readOnly", "fanoutSafe", "buildTx"];
const CUSTODY_MODES: &[&str] = &["mixed", "managed", "byow"];
const BILLING_TIERS: &[&str] = &["write", "read_offchain", "read_rpc"];
const RISK_LEVELS: &[&str] = &["managed", "offchain_trading"];
const IMPLEMENTATIONS: &[&str] = &["agentkit", "internal"];
const COMPOSITION_CATEGORIES: &[&str] = &["yield", "prediction", "shared"];
const SIZING_MODES: &[&str] = &[
    "fixed_usd",
    "fixed_token",
    "percent_of_upstream",
    "max_notional",
];
const PARAM_TYPES: &[&str] = &[
    "string", "number", "integer", "boolean", "array", "object", "any",
];

/// An execution lane of SPEC: fan-out intent (Model A), direct execution, unsigned transactions
/// (Model B).
pub use crate::states::Lane;

/// Tells the catalog which lanes of which actions this build can really run. An action none of
/// whose lanes is implemented is listed with `enabled: false`.
pub trait Implemented {
    fn implements(&self, action: &str, lane: Lane) -> bool;

    /// The chains the action really runs on in this deployment, when its providers know (an EVM
    /// action runs only where its contracts are configured); `None` keeps the family's list.
    fn chains(&self, _action: &str) -> Option<Vec<u64>> {
        None
    }
}

/// Nothing implemented: every action is listed disabled.
pub struct NothingImplemented;

impl Implemented for NothingImplemented {
    fn implements(&self, _action: &str, _lane: Lane) -> bool {
        false
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Manifest {
    version: u32,
    provider_manifest_version: u32,
    provider: Vec<ProviderEntry>,
    action: Vec<ActionEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ProviderEntry {
    provider_id: String,
    provider_kind: String,
    capabilities: Vec<String>,
    supported_chains: Vec<u64>,
    custody_mode: String,
    description: String,
    domain: String,
    category: String,
    capital_profile_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ActionEntry {
    action: String,
    provider: String,
    description: String,
    #[serde(default)]
    aliases: Vec<String>,
    max_amount_usd: Option<f64>,
    billing_tier: Option<String>,
    requires_subscription: bool,
    implementation: String,
    risk_level: Option<String>,
    #[serde(default = "default_rails")]
    rails: Vec<String>,
    #[serde(default = "default_metadata_source")]
    metadata_source: String,
    lanes: Vec<Lane>,
    composition_categories: Vec<String>,
    composition_ready: bool,
    params: Vec<ParamEntry>,
    editor_config: Option<EditorEntry>,
    /// How the gateway prices a write: `"nothing"` (it moves no value), `{ token, amount }`,
    /// `{ native }` (an amount of the native coin or its wrapped token), `{ vault, amount }`.
    /// A write without one cannot be priced, and an enabled write must have one.
    value: Option<ValueEntry>,
    /// The params that name who receives an action's output, which under a delegation must be the
    /// delegator; omitted: `recipient`, `receiver`, `to`, `onBehalfOf` (an action whose `to` is a
    /// token, as fx-swap's, says `[]`).
    recipients: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ValueEntry {
    Word(String),
    Position(PositionValueEntry),
    Market(MarketValueEntry),
    Token(TokenValueEntry),
    Native(NativeValueEntry),
    Vault(VaultValueEntry),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenValueEntry {
    token: String,
    amount: String,
}

/// `{ token, amount, max = "supplied" | "debt", owner? }`: an amount of a token whose `max` is a
/// lending position in it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PositionValueEntry {
    token: String,
    amount: String,
    max: String,
    owner: Option<String>,
}

/// `{ market, amount }`: an amount of a prediction market's collateral.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MarketValueEntry {
    market: String,
    amount: String,
    /// A price per unit of `amount` (an order's size in shares at its limit price).
    #[serde(default)]
    price: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NativeValueEntry {
    native: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VaultValueEntry {
    vault: String,
    amount: String,
}

fn default_rails() -> Vec<String> {
    vec!["agent_runtime".to_owned()]
}

fn default_metadata_source() -> String {
    "explicit".to_owned()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ParamEntry {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    required: bool,
    description: String,
    #[serde(rename = "enum")]
    one_of: Option<Vec<toml::Value>>,
    default: Option<toml::Value>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    pattern: Option<String>,
    items: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EditorEntry {
    allowed_sizing_modes: Vec<String>,
    product_fields: Vec<String>,
    hidden_runtime_fields: Vec<String>,
    option_source: Option<OptionSourceEntry>,
    basis_copy: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OptionSourceEntry {
    #[serde(rename = "type")]
    kind: String,
    route: String,
}

/// A manifest that does not hold together. Found at start (and by the tests), never at request time.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("catalog manifest is not valid TOML of the expected shape: {0}")]
    Parse(#[from] toml::de::Error),
    #[error("catalog manifest: {0}")]
    Invalid(String),
}

/// What the policy and intent checks need to know of one action, beside its wire entry.
#[derive(Debug)]
pub struct ActionSpec {
    pub entry: CatalogAction,
    /// The compiled JSON Schema of params.
    pub validator: jsonschema::Validator,
    /// How the gateway prices it (a write); `None`: it cannot (a write so is refused with
    /// `PRICE_UNAVAILABLE`; a read moves no value).
    pub value: Option<ValueRule>,
    /// The params that name who receives the output (`acceptance::recipients`).
    pub recipients: Vec<String>,
}

impl ActionSpec {
    pub fn name(&self) -> &str {
        &self.entry.action
    }

    /// A read moves no value ([`CatalogAction::is_read`]).
    pub fn is_read(&self) -> bool {
        self.entry.is_read()
    }

    /// Whether the action through `lane` runs for every user who delegated to the agent (an
    /// intent of an action that requires a subscription), not for the agent's own wallet.
    pub fn fans_out(&self, lane: Lane) -> bool {
        self.entry.requires_subscription && lane == Lane::ExecuteIntent
    }
}

/// The catalog in memory: the document, its serialized bytes, and the alias index.
#[derive(Debug)]
pub struct Catalog {
    document: CatalogDocument,
    actions: Vec<ActionSpec>,
    by_name: HashMap<String, usize>,
}

impl Catalog {
    /// Parses and checks a manifest and computes the document, stamped with `generated_at`.
    pub fn from_manifest(
        manifest: &str,
        generated_at: String,
        implemented: &dyn Implemented,
    ) -> Result<Self, CatalogError> {
        let manifest: Manifest = toml::from_str(manifest)?;
        build(manifest, generated_at, implemented)
    }

    pub fn document(&self) -> &CatalogDocument {
        &self.document
    }

    /// Whether `id` is a provider family (a venue) of the catalog.
    pub fn is_provider(&self, id: &str) -> bool {
        self.document
            .provider_families
            .iter()
            .any(|f| f.provider_id == id)
    }

    pub fn actions(&self) -> impl Iterator<Item = &ActionSpec> {
        self.actions.iter()
    }

    /// Resolves a canonical name or any alias (case-insensitive, `_` and `-` alike).
    pub fn resolve(&self, name: &str) -> Option<&ActionSpec> {
        self.by_name
            .get(&lookup_key(name))
            .map(|&i| &self.actions[i])
    }
}

/// The manifest's `value` of an action, checked against its params.
fn value_rule(
    name: &str,
    value: Option<ValueEntry>,
    params: &[ParamEntry],
) -> Result<Option<ValueRule>, CatalogError> {
    let rule = match value {
        None => return Ok(None),
        Some(ValueEntry::Word(w)) if w == "nothing" => ValueRule::Nothing,
        Some(ValueEntry::Word(w)) => {
            return Err(invalid(format!(
                "action {name}: value {w:?} is not \"nothing\" or a table"
            )));
        }
        Some(ValueEntry::Token(t)) => ValueRule::Token {
            token: t.token,
            amount: t.amount,
        },
        Some(ValueEntry::Native(n)) => ValueRule::Native { amount: n.native },
        Some(ValueEntry::Market(m)) => ValueRule::MarketCollateral {
            market: m.market,
            amount: m.amount,
            price: m.price,
        },
        Some(ValueEntry::Position(p)) => ValueRule::Position {
            token: p.token,
            amount: p.amount,
            side: match p.max.as_str() {
                "supplied" => PositionSide::Supplied,
                "debt" => PositionSide::Debt,
                other => {
                    return Err(invalid(format!(
                        "action {name}: value.max {other:?} is not \"supplied\" or \"debt\""
                    )));
                }
            },
            owner: p.owner,
        },
        Some(ValueEntry::Vault(v)) => ValueRule::VaultAsset {
            vault: v.vault,
            amount: v.amount,
        },
    };
    for param in rule.params() {
        if !params.iter().any(|p| p.name == param && p.required) {
            return Err(invalid(format!(
                "action {name}: its value reads params.{param}, which is not a required param"
            )));
        }
    }
    Ok(Some(rule))
}

fn lookup_key(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace('_', "-")
}

fn invalid(msg: impl Into<String>) -> CatalogError {
    CatalogError::Invalid(msg.into())
}

fn check_one_of(what: &str, value: &str, allowed: &[&str]) -> Result<(), CatalogError> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(invalid(format!(
            "{what} {value:?} is not one of {allowed:?}"
        )))
    }
}

fn is_kebab(name: &str) -> bool {
    !name.is_empty()
        && name.split('-').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

fn build(
    manifest: Manifest,
    generated_at: String,
    implemented: &dyn Implemented,
) -> Result<Catalog, CatalogError> {
    let mut families = BTreeMap::new();
    let mut provider_families = Vec::new();
    for p in manifest.provider {
        check_one_of("providerKind", &p.provider_kind, PROVIDER_KINDS)?;
        check_one_of("custodyMode", &p.custody_mode, CUSTODY_MODES)?;
        for c in &p.capabilities {
            check_one_of("capability", c, CAPABILITIES)?;
        }
        let family = ProviderFamily {
            provider_id: p.provider_id.clone(),
            provider_kind: p.provider_kind,
            capabilities: p.capabilities,
            supported_chains: p.supported_chains,
            custody_mode: p.custody_mode,
            description: p.description,
            domain: p.domain,
            category: p.category,
            capital_profile_id: p.capital_profile_id,
        };
        if families
            .insert(p.provider_id.clone(), family.clone())
            .is_some()
        {
            return Err(invalid(format!(
                "provider {} is listed twice",
                p.provider_id
            )));
        }
        provider_families.push(family);
    }

    let mut actions = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for a in manifest.action {
        let family = families.get(&a.provider).ok_or_else(|| {
            invalid(format!(
                "action {} names unknown provider {}",
                a.action, a.provider
            ))
        })?;
        let spec = build_action(a, family, implemented)?;
        let index = actions.len();
        let mut names = vec![spec.entry.action.clone()];
        names.extend(spec.entry.aliases.iter().cloned());
        for name in names {
            if let Some(&other) = by_name.get(&lookup_key(&name))
                && other != index
            {
                let other: &ActionSpec = &actions[other];
                return Err(invalid(format!(
                    "name {name} is used by both {} and {}",
                    other.entry.action, spec.entry.action
                )));
            }
            by_name.insert(lookup_key(&name), index);
        }
        actions.push(spec);
    }

    let document = CatalogDocument {
        generated_at,
        source: "action_catalog".to_owned(),
        version: manifest.version,
        provider_manifest_version: manifest.provider_manifest_version,
        provider_families,
        actions: actions.iter().map(|a| a.entry.clone()).collect(),
    };
    Ok(Catalog {
        document,
        actions,
        by_name,
    })
}

fn build_action(
    a: ActionEntry,
    family: &ProviderFamily,
    implemented: &dyn Implemented,
) -> Result<ActionSpec, CatalogError> {
    let name = a.action.clone();
    if !is_kebab(&name) {
        return Err(invalid(format!("action name {name:?} is not kebab-case")));
    }
    check_one_of("implementation", &a.implementation, IMPLEMENTATIONS)?;
    check_one_of(
        "metadataSource",
        &a.metadata_source,
        &["explicit", "inferred"],
    )?;
    if let Some(tier) = &a.billing_tier {
        check_one_of("billingTier", tier, BILLING_TIERS)?;
    }
    if let Some(risk) = &a.risk_level {
        check_one_of("riskLevel", risk, RISK_LEVELS)?;
    }
    for c in &a.composition_categories {
        check_one_of("compositionCategory", c, COMPOSITION_CATEGORIES)?;
    }
    if a.lanes.is_empty() {
        return Err(invalid(format!("action {name} has no lane")));
    }
    match a.max_amount_usd {
        Some(v) if !(v.is_finite() && v >= 0.0) => {
            return Err(invalid(format!(
                "action {name}: maxAmountUsd must be a number ≥ 0"
            )));
        }
        _ => {}
    }
    let is_read = a.max_amount_usd == Some(0.0);
    if is_read && a.billing_tier.as_deref() == Some("write") {
        return Err(invalid(format!(
            "action {name} is read-only (maxAmountUsd 0) but billed as write"
        )));
    }

    let value = value_rule(&name, a.value, &a.params)?;
    if let Some(unknown) = a
        .recipients
        .iter()
        .flatten()
        .find(|r| !a.params.iter().any(|p| &p.name == *r))
    {
        return Err(invalid(format!(
            "action {name}: recipients names {unknown:?}, which is not one of its params"
        )));
    }
    let recipients = a
        .recipients
        .unwrap_or_else(crate::acceptance::default_recipient_fields);
    if is_read && value.is_some() {
        return Err(invalid(format!(
            "action {name} is read-only (maxAmountUsd 0) and moves no value: it takes no value rule"
        )));
    }

    let (schema, required) = params_schema(&name, &a.params)?;
    let validator = jsonschema::validator_for(&schema)
        .map_err(|e| invalid(format!("action {name}: paramsSchema does not compile: {e}")))?;

    let snake = name.replace('-', "_");
    let mut aliases: Vec<String> = Vec::new();
    for alias in std::iter::once(snake.clone()).chain(
        a.aliases
            .iter()
            .flat_map(|al| [al.clone(), al.replace('-', "_")]),
    ) {
        if alias != name && !aliases.contains(&alias) {
            aliases.push(alias);
        }
    }

    let lanes: BTreeSet<Lane> = a.lanes.iter().copied().collect();
    // Where a provider names the chains it runs on, those are the action's chains, and an action
    // that runs on none is not live.
    let live_chains = implemented.chains(&name);
    let on_some_chain = live_chains.as_ref().is_none_or(|c| !c.is_empty());
    let lane_live =
        |lane: Lane| lanes.contains(&lane) && on_some_chain && implemented.implements(&name, lane);
    let supports_execute_intent = lane_live(Lane::ExecuteIntent);
    let supports_execute = lane_live(Lane::Execute);
    let supports_build_tx = lane_live(Lane::BuildTx);

    let editor_config = match a.editor_config {
        None => None,
        Some(e) => {
            for m in &e.allowed_sizing_modes {
                check_one_of("sizing mode", m, SIZING_MODES)?;
            }
            for m in e.basis_copy.keys() {
                check_one_of("basisCopy sizing mode", m, SIZING_MODES)?;
            }
            Some(EditorConfig {
                allowed_sizing_modes: e.allowed_sizing_modes,
                product_fields: e.product_fields,
                hidden_runtime_fields: e.hidden_runtime_fields,
                option_source: e.option_source.map(|o| OptionSource {
                    kind: o.kind,
                    route: o.route,
                }),
                basis_copy: e.basis_copy,
            })
        }
    };

    let entry = CatalogAction {
        action: name,
        aliases,
        description: a.description,
        required_params: required,
        params_schema: Some(schema),
        max_amount_usd: a.max_amount_usd,
        requires_subscription: a.requires_subscription,
        implementation: a.implementation,
        enabled: supports_execute_intent || supports_execute || supports_build_tx,
        supports_execute_intent,
        supports_execute,
        supports_build_tx,
        provider_id: family.provider_id.clone(),
        provider_kind: family.provider_kind.clone(),
        domain: family.domain.clone(),
        category: family.category.clone(),
        supported_chains: live_chains.unwrap_or_else(|| family.supported_chains.clone()),
        custody_mode: family.custody_mode.clone(),
        metadata_source: a.metadata_source,
        risk_level: a.risk_level,
        rails: a.rails,
        billing_tier: a.billing_tier,
        agentkit_action: snake,
        composition_categories: a.composition_categories,
        composition_ready: a.composition_ready,
        editor_config,
    };
    if entry.enabled && !is_read && value.is_none() {
        return Err(invalid(format!(
            "action {} runs here but has no value rule: the gateway could not price it",
            entry.action
        )));
    }
    Ok(ActionSpec {
        entry,
        validator,
        value,
        recipients,
    })
}

fn params_schema(
    action: &str,
    params: &[ParamEntry],
) -> Result<(Value, Vec<String>), CatalogError> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for p in params {
        check_one_of(
            &format!("action {action} param {} type", p.name),
            &p.kind,
            PARAM_TYPES,
        )?;
        let mut prop = Map::new();
        if p.kind != "any" {
            prop.insert("type".into(), json!(p.kind));
        }
        prop.insert("description".into(), json!(p.description));
        if let Some(values) = &p.one_of {
            prop.insert(
                "enum".into(),
                toml_to_json(&toml::Value::Array(values.clone()))?,
            );
        }
        if let Some(d) = &p.default {
            prop.insert("default".into(), toml_to_json(d)?);
        }
        if let Some(m) = p.minimum {
            prop.insert("minimum".into(), json!(m));
        }
        if let Some(m) = p.maximum {
            prop.insert("maximum".into(), json!(m));
        }
        if let Some(pattern) = &p.pattern {
            prop.insert("pattern".into(), json!(pattern));
        }
        if let Some(items) = &p.items {
            prop.insert("items".into(), json!({ "type": items }));
        }
        if properties
            .insert(p.name.clone(), Value::Object(prop))
            .is_some()
        {
            return Err(invalid(format!(
                "action {action} lists param {} twice",
                p.name
            )));
        }
        if p.required {
            required.push(p.name.clone());
        }
    }
    let schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    Ok((schema, required))
}

fn toml_to_json(v: &toml::Value) -> Result<Value, CatalogError> {
    serde_json::to_value(v).map_err(|e| invalid(format!("value {v} has no JSON form: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> Catalog {
        match Catalog::from_manifest(
            BUILTIN_MANIFEST,
            "2026-01-01T00:00:00Z".into(),
            &NothingImplemented,
        ) {
            Ok(c) => c,
            Err(e) => panic!("builtin manifest is invalid: {e}"),
        }
    }

    #[test]
    fn builtin_manifest_is_valid_and_covers_every_provider_kind() {
        let catalog = builtin();
        let kinds: BTreeSet<&str> = catalog
            .document()
            .provider_families
            .iter()
            .map(|f| f.provider_kind.as_str())
            .collect();
        for kind in PROVIDER_KINDS {
            assert!(kinds.contains(kind), "no provider family of kind {kind}");
        }
    }

    #[test]
    fn every_neutral_action_of_spec_is_present_with_its_key_params() {
        let catalog = builtin();
        let expect: &[(&str, &[&str])] = &[
            ("swap", &["tokenIn", "tokenOut", "amountIn"]),
            ("vote", &["gaugeAddress", "weight"]),
            ("claim-rewards", &["gaugeAddress"]),
            ("claim-agent-gauge-emissions", &[]),
            (
                "deposit-earn-position",
                &["providerId", "opportunityId", "amount"],
            ),
            ("get-earn-opportunities", &[]),
            ("get-earning-opportunities", &[]),
            ("get-earn-position", &["providerId"]),
            ("get-earn-provider", &["providerId"]),
            ("check-bridge-status", &["fromChain"]),
            ("get-bridge-tokens", &[]),
            ("get-chain-market-overview", &[]),
            ("cancel-prediction-order", &["orderId"]),
            ("get-governance-v2-overview", &[]),
            ("get-governance-v2-timeseries", &[]),
            ("get-governance-v2-breakdowns", &[]),
            ("get-fx-supported-assets", &[]),
        ];
        for (name, required) in expect {
            let Some(spec) = catalog.resolve(name) else {
                panic!("{name} missing")
            };
            assert_eq!(&spec.entry.required_params, required, "{name}");
            let schema = spec
                .entry
                .params_schema
                .as_ref()
                .map(|s| s["additionalProperties"].clone());
            assert_eq!(schema, Some(json!(false)), "{name}");
        }
        let optional: &[(&str, &[&str])] = &[
            ("cancel-prediction-order", &["providerId"]),
            (
                "get-earn-position",
                &["chainId", "opportunityId", "walletAddress"],
            ),
            (
                "check-bridge-status",
                &[
                    "provider",
                    "depositAddress",
                    "depositMemo",
                    "transactionHash",
                ],
            ),
            ("get-governance-v2-timeseries", &["days", "interval"]),
            (
                "get-earn-opportunities",
                &[
                    "asset",
                    "limit",
                    "minApr",
                    "chainId",
                    "minTvlUsd",
                    "providerId",
                    "strategyType",
                    "executionSupport",
                ],
            ),
        ];
        for (name, keys) in optional {
            let Some(spec) = catalog.resolve(name) else {
                panic!("{name} missing")
            };
            let props = &spec
                .entry
                .params_schema
                .as_ref()
                .map(|s| s["properties"].clone());
            for key in *keys {
                assert!(
                    props.as_ref().is_some_and(|p| p.get(key).is_some()),
                    "{name} lacks {key}"
                );
            }
        }
        let days = catalog
            .resolve("get-governance-v2-timeseries")
            .and_then(|s| {
                s.entry.params_schema.as_ref().map(|p| {
                    (
                        p["properties"]["days"]["default"].clone(),
                        p["properties"]["interval"]["default"].clone(),
                    )
                })
            });
        assert_eq!(days, Some((json!(30), json!("day"))));
    }

    #[test]
    fn aliases_resolve_to_the_canonical_name() {
        let catalog = builtin();
        for spec in catalog.actions() {
            let snake = spec.name().replace('-', "_");
            if snake != spec.name() {
                assert!(
                    spec.entry.aliases.contains(&snake),
                    "{} lacks its snake_case alias",
                    spec.name()
                );
            }
            for alias in &spec.entry.aliases {
                assert_eq!(
                    catalog.resolve(alias).map(ActionSpec::name),
                    Some(spec.name())
                );
            }
        }
        assert_eq!(
            catalog.resolve("CLAIM_REWARDS").map(ActionSpec::name),
            Some("claim-rewards")
        );
        assert!(catalog.resolve("no-such-action").is_none());
    }

    #[test]
    fn nothing_implemented_means_nothing_enabled() {
        let catalog = builtin();
        assert!(
            catalog
                .actions()
                .all(|a| !a.entry.enabled && !a.entry.supports_execute)
        );
    }

    struct Only(&'static str, Lane);
    impl Implemented for Only {
        fn implements(&self, action: &str, lane: Lane) -> bool {
            action == self.0 && lane == self.1
        }
    }

    #[test]
    fn a_lane_is_reported_only_where_declared_and_implemented() {
        let c = Catalog::from_manifest(
            BUILTIN_MANIFEST,
            String::new(),
            &Only("get-fx-supported-assets", Lane::ExecuteIntent),
        );
        let Ok(c) = c else { panic!("manifest invalid") };
        let fx = c.resolve("get-fx-supported-assets").map(|a| {
            (
                a.entry.enabled,
                a.entry.supports_execute_intent,
                a.entry.supports_build_tx,
            )
        });
        assert_eq!(fx, Some((true, true, false)));
        // Declared lanes bound what an implementation can switch on.
        let c = Catalog::from_manifest(
            BUILTIN_MANIFEST,
            String::new(),
            &Only("get-fx-supported-assets", Lane::BuildTx),
        );
        let Ok(c) = c else { panic!("manifest invalid") };
        assert_eq!(
            c.resolve("get-fx-supported-assets")
                .map(|a| a.entry.enabled),
            Some(false)
        );
    }

    #[test]
    fn an_action_says_which_params_name_who_receives() {
        let catalog = builtin();
        let of = |name: &str| catalog.resolve(name).map(|a| a.recipients.clone());
        // fx-swap's `to` is a token, not a wallet.
        assert_eq!(of("fx-swap"), Some(vec![]));
        assert_eq!(
            of("transfer"),
            Some(crate::acceptance::default_recipient_fields())
        );
        let bad = BUILTIN_MANIFEST.replacen("recipients = []", "recipients = [\"payee\"]", 1);
        assert_ne!(bad, BUILTIN_MANIFEST);
        let c = Catalog::from_manifest(&bad, String::new(), &NothingImplemented);
        assert!(
            matches!(&c, Err(CatalogError::Invalid(m)) if m.contains("payee")),
            "a recipient that is not a param is refused"
        );
    }

    #[test]
    fn every_write_says_how_it_is_priced_and_one_that_runs_must() {
        let catalog = builtin();
        let swap = catalog.resolve("swap").and_then(|a| a.value.clone());
        assert_eq!(
            swap,
            Some(ValueRule::Token {
                token: "tokenIn".into(),
                amount: "amountIn".into()
            })
        );
        let vote = catalog.resolve("vote").and_then(|a| a.value.clone());
        assert_eq!(vote, Some(ValueRule::Nothing));
        assert!(
            catalog
                .actions()
                .filter(|a| a.is_read())
                .all(|a| a.value.is_none())
        );
        // A write that runs here without a rule is refused at start: it could not be priced.
        let unpriced = BUILTIN_MANIFEST.replacen(
            "value = { token = \"token\", amount = \"amount\" }\nlanes",
            "lanes",
            1,
        );
        assert_ne!(unpriced, BUILTIN_MANIFEST);
        let built =
            Catalog::from_manifest(&unpriced, String::new(), &Only("transfer", Lane::Execute));
        assert!(
            matches!(&built, Err(CatalogError::Invalid(m)) if m.contains("transfer")),
            "{built:?}"
        );
    }

    #[test]
    fn broken_manifests_are_refused() {
        let cases = [
            (
                "unknown kind",
                BUILTIN_MANIFEST.replacen(
                    "providerKind = \"internal\"",
                    "providerKind = \"casino\"",
                    1,
                ),
            ),
            (
                "unknown provider",
                BUILTIN_MANIFEST.replacen("provider = \"uniswap-v2\"", "provider = \"nobody\"", 1),
            ),
            (
                "duplicate alias",
                BUILTIN_MANIFEST.replacen("aliases = [\"gauge-vote\"]", "aliases = [\"swap\"]", 1),
            ),
            (
                "bad tier",
                BUILTIN_MANIFEST.replacen(
                    "billingTier = \"read_rpc\"",
                    "billingTier = \"cheap\"",
                    1,
                ),
            ),
            (
                "a value rule naming a param the action does not have",
                BUILTIN_MANIFEST.replacen(
                    "value = { token = \"tokenIn\", amount = \"amountIn\" }",
                    "value = { token = \"tokenIn\", amount = \"size\" }",
                    1,
                ),
            ),
            (
                "a value rule of no known shape",
                BUILTIN_MANIFEST.replacen("value = \"nothing\"", "value = \"free\"", 1),
            ),
        ];
        for (what, text) in cases {
            assert_ne!(
                text, BUILTIN_MANIFEST,
                "{what}: the case did not change the manifest"
            );
            assert!(
                Catalog::from_manifest(&text, String::new(), &NothingImplemented).is_err(),
                "{what} accepted"
            );
        }
    }

    #[test]
    fn params_are_validated_by_the_schema() {
        let catalog = builtin();
        let Some(swap) = catalog.resolve("swap") else {
            panic!("swap missing")
        };
        assert!(
            swap.validator
                .is_valid(&json!({"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": "10"}))
        );
        assert!(
            !swap
                .validator
                .is_valid(&json!({"tokenIn": "USDC", "tokenOut": "WETH"}))
        );
        assert!(!swap.validator.is_valid(
            &json!({"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": "10", "extra": 1})
        ));
        assert!(
            !swap
                .validator
                .is_valid(&json!({"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": 10}))
        );
    }
}
