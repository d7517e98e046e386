//! Shared by the chain tests: a devnet from `scripts/devnet`, the e2e gateway binary on it, an
//! onboarded agent, and balance reads through alloy.
#![allow(dead_code)] // Each test binary uses its part.
#![allow(clippy::expect_used)] // Test helpers fail with a message saying what did not happen.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use actiongate_core::store::CreditStore;
use actiongate_store::SqlStore;
use alloy::network::{EthereumWallet, TransactionBuilder};
use alloy::primitives::{Address, I256, U256};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::rpc::types::TransactionRequest;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol;
use serde_json::{Value, json};

pub const GATEWAY: &str = env!("CARGO_BIN_EXE_actiongate-venue-gateway");

sol! {
    #[sol(rpc)]
    interface IERC20 {
        function balanceOf(address owner) external view returns (uint256);
        function transfer(address to, uint256 amount) external returns (bool);
        function approve(address spender, uint256 amount) external returns (bool);
    }
    #[sol(rpc)]
    interface IWETH {
        function deposit() external payable;
    }
    #[sol(rpc)]
    interface IRouter {
        function getAmountsOut(uint256 amountIn, address[] calldata path) external view returns (uint256[] memory amounts);
    }
    /// Chainlink's `MockV3Aggregator`: the devnet's price feeds, moved by the tests.
    #[sol(rpc)]
    interface IMockV3Aggregator {
        function updateAnswer(int256 answer) external;
        function updateRoundData(uint80 roundId, int256 answer, uint256 timestamp, uint256 startedAt) external;
        function latestRound() external view returns (uint256);
    }
}

/// Sets the agent's policy as its owner.
pub async fn set_policy(gw: &Gateway, agent: &Agent, policy: Value) {
    let r = reqwest::Client::new()
        .put(format!(
            "{}/api/v1/agents/{}/policy",
            gw.url, agent.agent_id
        ))
        .bearer_auth(&agent.session)
        .json(&policy)
        .send()
        .await
        .expect("the gateway answers the policy change");
    assert_eq!(r.status().as_u16(), 200);
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Gives the feed a new round answering `answer` (8 decimals) two hours old: past the devnet's
/// max-age-seconds (3600).
pub async fn age_feed<P: Provider>(
    aggregator: &IMockV3Aggregator::IMockV3AggregatorInstance<P>,
    answer: i64,
) {
    let round = aggregator.latestRound().call().await.expect("latestRound");
    let old = U256::from(now_secs() - 7200);
    aggregator
        .updateRoundData(
            alloy::primitives::Uint::<80, 2>::from(round.to::<u64>() + 1),
            I256::try_from(answer).expect("fits"),
            old,
            old,
        )
        .send()
        .await
        .expect("updateRoundData is sent")
        .get_receipt()
        .await
        .expect("updateRoundData is mined");
}

/// The gateway keeps a feed's answer for a few seconds.
pub async fn past_the_price_cache() {
    tokio::time::sleep(std::time::Duration::from_millis(3_200)).await;
}

/// Stops a child process (SIGTERM, then waits) even when an assertion fails.
pub struct Stop(pub Child);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.0.wait();
    }
}

pub fn first_line(child: &mut Child) -> String {
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("the devnet prints its ready line");
    line.trim().to_owned()
}

pub struct Devnet {
    process: actiongate_testkit::devnet::DevnetProcess,
    pub dir: DevnetDir,
    pub url: String,
    pub spec: Value,
    pub provider: DynProvider,
}

/// Where the devnet keeps its files (devnet.json, devnet.toml) and the tests theirs.
pub struct DevnetDir(PathBuf);

impl DevnetDir {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Devnet {
    pub fn start() -> Self {
        let process = actiongate_testkit::devnet::DevnetProcess::start();
        let (url, spec, dir) = (
            process.url.clone(),
            process.spec.clone(),
            DevnetDir(process.path().to_owned()),
        );
        let provider = ProviderBuilder::new()
            .connect_http(url.parse().expect("the devnet URL parses"))
            .erased();
        Self {
            process,
            dir,
            url,
            spec,
            provider,
        }
    }

    pub fn address(&self, path: &[&str]) -> Address {
        let mut v = &self.spec;
        for p in path {
            v = &v[*p];
        }
        v.as_str()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address at {path:?}"))
    }

    pub fn account(&self, i: usize) -> (Address, String) {
        let a = &self.spec["accounts"][i];
        (
            a["address"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("account {i}")),
            a["privateKey"].as_str().unwrap_or_default().to_owned(),
        )
    }

    pub fn usdc(&self) -> Address {
        self.address(&["tokens", "USDC", "address"])
    }

    pub fn weth(&self) -> Address {
        self.address(&["tokens", "WETH", "address"])
    }

    pub async fn balance(&self, token: Address, who: Address) -> U256 {
        IERC20::new(token, &self.provider)
            .balanceOf(who)
            .call()
            .await
            .expect("balanceOf")
    }

    /// The node's latest block header.
    pub async fn latest_header(&self) -> alloy::rpc::types::Header {
        self.provider
            .get_block_by_number(alloy::eips::BlockNumberOrTag::Latest)
            .await
            .expect("the devnet answers")
            .expect("a latest block")
            .header
    }

    pub async fn nonce(&self, who: Address) -> u64 {
        self.provider
            .get_transaction_count(who)
            .await
            .expect("the devnet answers the nonce")
    }

    /// Sends ETH and USDC from the devnet's first account (signed here with alloy; these are fixtures).
    pub async fn fund(&self, to: Address, eth: U256, usdc: U256) {
        let (_, key) = self.account(0);
        let signer: PrivateKeySigner = key.parse().expect("a devnet key parses");
        let wallet = ProviderBuilder::new()
            .wallet(EthereumWallet::from(signer))
            .connect_http(self.url.parse().expect("the devnet URL parses"));
        let tx = TransactionRequest::default().with_to(to).with_value(eth);
        wallet
            .send_transaction(tx)
            .await
            .expect("the funding ETH transfer is sent")
            .get_receipt()
            .await
            .expect("the funding ETH transfer is mined");
        IERC20::new(self.usdc(), &wallet)
            .transfer(to, usdc)
            .send()
            .await
            .expect("the funding USDC transfer is sent")
            .get_receipt()
            .await
            .expect("the funding USDC transfer is mined");
    }

    /// A signing provider for a devnet account (fixtures are sent with alloy; the tests check what
    /// the gateway makes of them).
    pub fn wallet(&self, i: usize) -> DynProvider {
        let (_, key) = self.account(i);
        let signer: PrivateKeySigner = key.parse().expect("a devnet key parses");
        ProviderBuilder::new()
            .wallet(EthereumWallet::from(signer))
            .connect_http(self.url.parse().expect("the devnet URL parses"))
            .erased()
    }

    /// An ERC-20 transfer from devnet account `from`, mined; its hash. With `gas`, no estimate is made
    /// (so a transfer that reverts is still sent and mined).
    pub async fn transfer(
        &self,
        from: usize,
        token: Address,
        to: Address,
        amount: U256,
        gas: Option<u64>,
    ) -> alloy::primitives::B256 {
        let wallet = self.wallet(from);
        let contract = IERC20::new(token, &wallet);
        let call = contract.transfer(to, amount);
        let call = match gas {
            Some(g) => call.gas(g),
            None => call,
        };
        let pending = call.send().await.expect("transfer");
        let hash = *pending.tx_hash();
        let _ = pending.get_receipt().await;
        hash
    }

    /// A gateway config: the devnet's devnet.toml with a data dir, a database and short leases.
    pub fn gateway_config(&self, name: &str, database_url: &str) -> PathBuf {
        self.gateway_config_with(name, database_url, "")
    }

    /// [`Devnet::gateway_config`] with more TOML appended.
    pub fn gateway_config_with(&self, name: &str, database_url: &str, extra: &str) -> PathBuf {
        self.gateway_config_edited(name, database_url, extra, |t| t)
    }

    /// [`Devnet::gateway_config_with`] with the devnet's devnet.toml passed through `edit` first.
    pub fn gateway_config_edited(
        &self,
        name: &str,
        database_url: &str,
        extra: &str,
        edit: impl FnOnce(String) -> String,
    ) -> PathBuf {
        let data = self.dir.path().join(format!("data-{name}"));
        let text = format!(
            "listen = \"127.0.0.1:0\"\ndata-dir = \"{}\"\ndatabase-url = \"{database_url}\"\n{}\n[intents]\nlease-seconds = 2\ndirect-timeout-seconds = 5\n[evm]\nbump-after-seconds = 2\n{}{extra}",
            data.display(),
            edit(self.process.toml()),
            actiongate_testkit::NO_LIMITS
        );
        let path = self.dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).expect("the gateway config is written");
        path
    }
}

/// A series of the gateway's `/metrics` (the exact name with its labels), if it is there.
pub async fn metric(gw: &Gateway, series: &str) -> Option<f64> {
    let metrics = reqwest::get(format!("{}/metrics", gw.url))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

pub struct Gateway {
    pub process: Stop,
    pub url: String,
    pub outbox: PathBuf,
}

pub fn start_gateway(config: &Path, crash_after_send: bool) -> Gateway {
    start_gateway_env(
        config,
        if crash_after_send {
            &[("CRASH_AFTER_SEND", "1")]
        } else {
            &[]
        },
    )
}

/// [`start_gateway`] with the test gateway's switches (`src/main.rs`) in its environment.
pub fn start_gateway_env(config: &Path, env: &[(&str, &str)]) -> Gateway {
    let mut cmd = Command::new(GATEWAY);
    cmd.arg("--config")
        .arg(config)
        .env("ACTIONGATE_LOG", "warn")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("the gateway starts");
    let line = first_line(&mut child);
    let url = line
        .strip_prefix("actiongate listening on ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_owned();
    let text = std::fs::read_to_string(config).unwrap_or_default();
    let data = text
        .lines()
        .find_map(|l| l.strip_prefix("data-dir = "))
        .unwrap_or_default()
        .trim_matches('"')
        .to_owned();
    Gateway {
        process: Stop(child),
        url,
        outbox: Path::new(&data).join("outbox"),
    }
}

pub struct Agent {
    pub key: String,
    pub agent_id: String,
    pub address: Address,
    pub account_id: String,
    /// The owner's session.
    pub session: String,
}

pub async fn post(url: String, body: Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("the gateway answers");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Onboards an owner by e-mail, allows `actions`, and grants credits beside the gateway.
pub async fn onboard(gw: &Gateway, database_url: &str, email: &str, actions: &[&str]) -> Agent {
    post(
        format!("{}/api/v1/onboarding/email/start", gw.url),
        json!({"email": email}),
    )
    .await;
    let outbox = [gw.outbox.clone()];
    let code = actiongate_testkit::wait_for_code(
        || actiongate_testkit::messages_in(&outbox, email),
        email,
        1,
    )
    .await;
    let (_, done) = post(
        format!("{}/api/v1/onboarding/email/complete", gw.url),
        json!({"email": email, "code": code, "acceptTerms": true}),
    )
    .await;
    let s = |v: &Value| v.as_str().unwrap_or_else(|| panic!("{done}")).to_owned();
    let (key, agent_id, session) = (
        s(&done["data"]["bootstrap"]["agentApiKey"]),
        s(&done["data"]["bootstrap"]["agentId"]),
        s(&done["data"]["session"]["token"]),
    );
    let address: Address = s(&done["data"]["bootstrap"]["agentAddress"])
        .parse()
        .expect("the bootstrap's agent address parses");
    let account_id = s(&done["data"]["account"]["accountId"]);
    let policy = reqwest::Client::new()
        .put(format!("{}/api/v1/agents/{agent_id}/policy", gw.url))
        .bearer_auth(&session)
        .json(&json!({"allowedActions": actions, "dailyLimitUsd": 100000}))
        .send()
        .await
        .expect("the gateway answers the policy change");
    assert_eq!(policy.status().as_u16(), 200);
    let store = SqlStore::connect(database_url)
        .await
        .expect("the gateway's database opens");
    store
        .grant_credits(&account_id, 10_000, "grant", "test grant", 0)
        .await
        .expect("the test grant is written");
    store.close().await;
    Agent {
        key,
        agent_id,
        address,
        account_id,
        session,
    }
}

/// A direct execution on the devnet's chain (`POST /agent/execute`) stating `usd`.
pub async fn execute_stating(
    gw: &Gateway,
    agent: &Agent,
    action: &str,
    params: Value,
    key: &str,
    usd: f64,
) -> (u16, Value) {
    post(
        format!("{}/api/v1/agent/execute", gw.url),
        json!({"agentApiKey": agent.key, "action": action, "params": params, "chainId": 84532,
               "idempotencyKey": key, "estimatedAmountUsd": usd}),
    )
    .await
}

/// Submits a read for the agent itself on the devnet's chain and waits for its intent to end.
pub async fn read_for(gw: &Gateway, agent: &Agent, action: &str, params: Value) -> Value {
    read_with(gw, agent, action, params, None).await
}

/// [`read_for`] under its own idempotency key: a fresh reading each time (a read repeated within the
/// derived key's window answers the first reading).
pub async fn read_keyed(
    gw: &Gateway,
    agent: &Agent,
    action: &str,
    params: Value,
    key: &str,
) -> Value {
    read_with(gw, agent, action, params, Some(key)).await
}

async fn read_with(
    gw: &Gateway,
    agent: &Agent,
    action: &str,
    params: Value,
    key: Option<&str>,
) -> Value {
    let mut body =
        json!({"agentApiKey": agent.key, "action": action, "chainId": 84532, "params": params});
    if let Some(key) = key {
        body["idempotencyKey"] = json!(key);
    }
    let (_, intent) = post(format!("{}/api/v1/agent/execute-intent", gw.url), body).await;
    let id = intent["intentId"]
        .as_str()
        .unwrap_or_else(|| panic!("{intent}"))
        .to_owned();
    wait_intent(gw, agent, &id, 20).await
}

/// Polls an intent's status until it is no longer `queued` (within `seconds`); its last status body.
pub async fn wait_intent(gw: &Gateway, agent: &Agent, id: &str, seconds: u64) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        let r = reqwest::Client::new()
            .get(format!(
                "{}/api/v1/agent/execute-intent/status?intentId={id}",
                gw.url
            ))
            .header("x-agent-api-key", &agent.key)
            .send()
            .await
            .expect("send");
        let body: Value = r.json().await.unwrap_or(Value::Null);
        if body["status"] != "queued" {
            return body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the intent did not end: {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

pub fn usdc(units: u64) -> U256 {
    U256::from(units) * U256::from(1_000_000u64)
}

pub async fn credits(gw: &Gateway, agent: &Agent) -> i64 {
    let r = reqwest::Client::new()
        .get(format!("{}/api/v1/agent/credits/balance", gw.url))
        .header("x-agent-api-key", &agent.key)
        .send()
        .await
        .expect("the gateway answers");
    let body: Value = r.json().await.unwrap_or(Value::Null);
    body["data"]["balance"]
        .as_i64()
        .unwrap_or_else(|| panic!("{body}"))
}

/// The gateway's x402 settlement wallet (from the metadata), funded with 1 ETH for gas.
pub async fn funded_settlement_wallet(devnet: &Devnet, gw: &Gateway) -> Address {
    let meta: Value = reqwest::get(format!("{}/api/v1/credits/x402-metadata", gw.url))
        .await
        .expect("get")
        .json()
        .await
        .unwrap_or(Value::Null);
    let settlement: Address = meta["data"]["settlementAddress"]
        .as_str()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("{meta}"));
    devnet
        .fund(
            settlement,
            U256::from(10u64).pow(U256::from(18u64)),
            U256::ZERO,
        )
        .await;
    settlement
}

/// A JSON-RPC call to the devnet's node (anvil's own methods included).
pub async fn rpc(devnet: &Devnet, method: &str, params: Value) -> Value {
    let (status, body) = post(
        devnet.url.clone(),
        json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
    )
    .await;
    assert!(
        status == 200 && body.get("error").is_none(),
        "{method}: {body}"
    );
    body["result"].clone()
}

/// Runs `devnet/delegator.mjs` (viem and the MetaMask kit: upgrades, signatures) with `args` and
/// `stdin`; its JSON answer.
pub fn node(args: &[&str], stdin: Option<&str>) -> Value {
    use std::io::Write;
    let mut child = Command::new("node")
        .arg(actiongate_testkit::repo_root().join("devnet/delegator.mjs"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("node: {e}"));
    if let Some(mut input) = child.stdin.take() {
        input
            .write_all(stdin.unwrap_or("").as_bytes())
            .expect("write all");
    }
    let out = child.wait_with_output().expect("wait with output");
    assert!(out.status.success(), "delegator.mjs {args:?} failed");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("delegator.mjs {args:?}: {e}"))
}

/// Has viem sign and send a build-tx answer's `data` with `key` (`devnet/sign-and-send.mjs`); its
/// JSON answer (`results`: each transaction's hash and status).
pub fn sign_and_send(devnet: &Devnet, key: &str, data: &Value) -> Value {
    use std::io::Write;
    let mut signer = Command::new("node")
        .arg(actiongate_testkit::repo_root().join("devnet/sign-and-send.mjs"))
        .args([devnet.url.as_str(), key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn");
    if let Some(mut input) = signer.stdin.take() {
        input
            .write_all(data.to_string().as_bytes())
            .expect("write all");
    }
    let out = signer.wait_with_output().expect("wait with output");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("viem said {:?}: {e}", String::from_utf8_lossy(&out.stdout)))
}

/// A GET with the agent key in `x-agent-api-key`: (status, body).
pub async fn get(url: String, key: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .get(url)
        .header("x-agent-api-key", key)
        .send()
        .await
        .expect("send");
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// Waits for an intent to end (completed or failed), asking the gateway at `url`; its status body.
pub async fn wait_ended(url: &str, key: &str, id: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let (_, body) = get(
            format!("{url}/api/v1/agent/execute-intent/status?intentId={id}"),
            key,
        )
        .await;
        if body["status"] == "completed" || body["status"] == "failed" {
            return body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the intent did not end: {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Creates an agent's delegation for `action` by `delegator` and activates it, signed with viem
/// (`sign`, an EIP-7702 EOA) or the MetaMask kit (`sign-kit`, a HybridDeleGator through its owner
/// `key`).
pub async fn delegate(
    gw: &Gateway,
    agent: &Agent,
    devnet_json: &str,
    (delegator, action): (Address, &str),
    key: &str,
    kit: bool,
) {
    let (status, created) = post(
        format!("{}/api/v1/agent/delegation/create", gw.url),
        json!({"agentApiKey": agent.key, "delegator": delegator, "chainId": 84532, "action": action}),
    )
    .await;
    assert_eq!(status, 200, "{created}");
    let mut delegation = created["data"]["delegation"].clone();
    let signed = if kit {
        node(
            &["sign-kit", devnet_json, key, &delegator.to_string()],
            Some(&delegation.to_string()),
        )
    } else {
        node(
            &["sign", key],
            Some(&created["data"]["typedData"].to_string()),
        )
    };
    delegation["signature"] = signed["signature"].clone();
    let (status, body) = post(
        format!("{}/api/v1/agent/delegation/activate", gw.url),
        json!({"agentApiKey": agent.key, "delegation": delegation, "chainId": 84532}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

/// Devnet account 4 upgraded to the stateless DeleGator (EIP-7702) and sent 100 USDC: its address
/// and key.
pub async fn upgraded_eoa(devnet: &Devnet, devnet_json: &str) -> (Address, String) {
    let (eoa, eoa_key) = devnet.account(4);
    let up = node(&["upgrade", devnet_json, &eoa_key], None);
    assert!(
        up["code"]
            .as_str()
            .is_some_and(|c| c.starts_with("0xef0100")),
        "{up}"
    );
    devnet.fund(eoa, U256::ZERO, usdc(100)).await;
    (eoa, eoa_key)
}
