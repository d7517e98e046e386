//! `scripts/devnet`: anvil with the fixture contracts, the accounts funded, devnet.json and a
//! devnet.toml the gateway starts with; stopping it stops anvil.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use sha3::{Digest, Keccak256};

const GATEWAY: &str = env!("CARGO_BIN_EXE_actiongate-venue-gateway");

/// Stops the devnet even when an assertion fails.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

async fn rpc(url: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let resp: Value = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("send")
        .json()
        .await
        .unwrap_or(Value::Null);
    resp["result"].clone()
}

fn word(hex_addr: &str) -> String {
    format!(
        "{:0>64}",
        hex_addr.trim_start_matches("0x").to_ascii_lowercase()
    )
}

#[tokio::test]
async fn the_devnet_deploys_funds_and_configures_the_gateway() {
    let root = actiongate_testkit::repo_root();
    let out = tempfile::tempdir().expect("tempdir");
    let port = actiongate_testkit::free_port();
    let mut devnet = Command::new(root.join("scripts/devnet"))
        .args(["--port", &port.to_string(), "--out"])
        .arg(out.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start scripts/devnet: {e}"));
    let stdout = devnet.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut devnet = KillOnDrop(devnet);
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read line");
    assert_eq!(
        line.trim(),
        "devnet ready",
        "the devnet's stdout carries only its ready line"
    );

    let spec: Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("devnet.json")).unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("devnet.json: {e}"));
    let url = spec["rpcUrl"].as_str().unwrap_or_default().to_owned();
    assert_eq!(spec["chainId"], json!(84532));
    assert_eq!(rpc(&url, "eth_chainId", json!([])).await, json!("0x14a34"));
    for name in [
        "WETH9",
        "UniswapV2Factory",
        "UniswapV2Router02",
        "USDC",
        "USDCVault",
        "UniswapV2Pair_USDC_WETH",
        "UniswapV3Factory",
        "NonfungiblePositionManager",
        "QuoterV2",
        "SwapRouter02",
        "UniswapV3Pool_USDC_WETH_3000",
        "DelegationManager",
        "EntryPoint",
        "SimpleFactory",
        "HybridDeleGatorImpl",
        "EIP7702StatelessDeleGatorImpl",
        "AllowedTargetsEnforcer",
        "AllowedMethodsEnforcer",
        "ValueLteEnforcer",
        "ERC20TransferAmountEnforcer",
        "ERC20PeriodTransferEnforcer",
        "TimestampEnforcer",
        "LimitedCallsEnforcer",
    ] {
        let address = spec["contracts"][name]
            .as_str()
            .unwrap_or_else(|| panic!("no {name}"));
        let code = rpc(&url, "eth_getCode", json!([address, "latest"])).await;
        assert!(
            code.as_str().is_some_and(|c| c.len() > 2),
            "{name} has no code"
        );
    }
    let usdc = spec["tokens"]["USDC"]["address"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(spec["tokens"]["USDC"]["decimals"], json!(6));
    // Every account holds ETH and 1,000,000 USDC.
    let accounts = spec["accounts"].as_array().cloned().unwrap_or_default();
    assert_eq!(accounts.len(), 10);
    for a in &accounts[1..9] {
        let address = a["address"].as_str().unwrap_or_default();
        let data = format!("0x70a08231{}", word(address));
        let balance = rpc(
            &url,
            "eth_call",
            json!([{"to": usdc, "data": data}, "latest"]),
        )
        .await;
        assert_eq!(
            u128::from_str_radix(
                balance.as_str().unwrap_or("0x0").trim_start_matches("0x"),
                16
            )
            .ok(),
            Some(1_000_000_000_000)
        );
        let eth = rpc(&url, "eth_getBalance", json!([address, "latest"])).await;
        assert!(
            eth.as_str().is_some_and(|e| e.len() > 18),
            "{address} has no ETH"
        );
    }
    // Two funded test DeleGator accounts (HybridDeleGator proxies) with code, ETH and 10 000 USDC.
    let smart = spec["smartAccounts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(smart.len(), 2, "{spec}");
    for a in &smart {
        let address = a["address"].as_str().unwrap_or_default();
        let code = rpc(&url, "eth_getCode", json!([address, "latest"])).await;
        assert!(
            code.as_str().is_some_and(|c| c.len() > 2),
            "{address} has no code"
        );
        let data = format!("0x70a08231{}", word(address));
        let balance = rpc(
            &url,
            "eth_call",
            json!([{"to": usdc, "data": data}, "latest"]),
        )
        .await;
        assert_eq!(
            u128::from_str_radix(
                balance.as_str().unwrap_or("0x0").trim_start_matches("0x"),
                16
            )
            .ok(),
            Some(10_000_000_000)
        );
    }
    // The stablecoin's EIP-712 domain is Base Sepolia's USDC: name "USDC", version "2".
    let type_hash = Keccak256::digest(
        b"EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)",
    );
    let mut encoded = Vec::new();
    encoded.extend_from_slice(&type_hash);
    encoded.extend_from_slice(&Keccak256::digest(b"USDC"));
    encoded.extend_from_slice(&Keccak256::digest(b"2"));
    encoded.extend_from_slice(&hex::decode(format!("{:064x}", 84532)).unwrap_or_default());
    encoded.extend_from_slice(&hex::decode(word(&usdc)).unwrap_or_default());
    let expected = format!("0x{}", hex::encode(Keccak256::digest(&encoded)));
    let separator = rpc(
        &url,
        "eth_call",
        json!([{"to": usdc, "data": "0x3644e515"}, "latest"]),
    )
    .await;
    assert_eq!(separator, json!(expected));
    // The pool is seeded.
    let pair = spec["contracts"]["UniswapV2Pair_USDC_WETH"]
        .as_str()
        .unwrap_or_default();
    let reserves = rpc(
        &url,
        "eth_call",
        json!([{"to": pair, "data": "0x0902f1ac"}, "latest"]),
    )
    .await;
    assert!(
        reserves
            .as_str()
            .is_some_and(|r| r.len() == 2 + 64 * 3 && r[2..130].chars().any(|c| c != '0')),
        "{reserves}"
    );

    // Aave v3: every contract has code; the pool lists USDC, WETH and EURC; the oracle reads the
    // devnet's Chainlink feeds; the deployer's seed liquidity is supplied.
    let aave = &spec["contracts"]["aave"];
    for name in [
        "PoolAddressesProvider",
        "ACLManager",
        "Pool",
        "PoolConfigurator",
        "PoolDataProvider",
        "Oracle",
        "UiPoolDataProvider",
        "WrappedTokenGateway",
    ] {
        let address = aave[name]
            .as_str()
            .unwrap_or_else(|| panic!("no aave.{name}: {aave}"));
        let code = rpc(&url, "eth_getCode", json!([address, "latest"])).await;
        assert!(
            code.as_str().is_some_and(|c| c.len() > 2),
            "aave.{name} has no code"
        );
    }
    let call = |to: &str, signature: &str, args: &[&str]| {
        let mut data = format!(
            "0x{}",
            hex::encode(&Keccak256::digest(signature.as_bytes())[..4])
        );
        for a in args {
            data.push_str(&word(a));
        }
        let (url, to) = (url.clone(), to.to_owned());
        async move {
            let out = rpc(
                &url,
                "eth_call",
                json!([{"to": to, "data": data}, "latest"]),
            )
            .await;
            out.as_str()
                .unwrap_or_default()
                .trim_start_matches("0x")
                .to_owned()
        }
    };
    let pool = aave["Pool"].as_str().unwrap_or_default();
    let listed = call(pool, "getReservesList()", &[]).await;
    let token = |symbol: &str| {
        spec["tokens"][symbol]["address"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let expected: String = [token("USDC"), token("WETH"), token("EURC")]
        .iter()
        .map(|a| word(a))
        .collect();
    assert_eq!(
        listed,
        format!("{:064x}{:064x}{expected}", 32, 3),
        "the reserves, in order"
    );
    let price = call(
        aave["Oracle"].as_str().unwrap_or_default(),
        "getAssetPrice(address)",
        &[&token("WETH")],
    )
    .await;
    assert_eq!(
        u128::from_str_radix(&price, 16).ok(),
        Some(3000 * 100_000_000)
    );
    let a_usdc = aave["reserves"]["USDC"]["aToken"]
        .as_str()
        .unwrap_or_default();
    let supplied = call(a_usdc, "totalSupply()", &[]).await;
    assert_eq!(
        u128::from_str_radix(&supplied, 16).ok(),
        Some(1_000_000_000_000)
    );
    // The deployer's collateral, in USD with 8 decimals: 1,000,000 USDC + 200 WETH at 3,000 +
    // 1,000,000 EURC at 1.08.
    let deployer = accounts[0]["address"].as_str().unwrap_or_default();
    let data = call(pool, "getUserAccountData(address)", &[deployer]).await;
    assert_eq!(
        u128::from_str_radix(data.get(..64).unwrap_or_default(), 16).ok(),
        Some(2_680_000 * 100_000_000)
    );

    // Prediction markets: Conditional Tokens and the market maker factory have code; three markets
    // with their questions, each a market maker of the factory holding 10,000 of each outcome.
    let prediction = &spec["prediction"];
    for name in ["conditionalTokens", "factory"] {
        let address = prediction[name].as_str().unwrap_or_default();
        let code = rpc(&url, "eth_getCode", json!([address, "latest"])).await;
        assert!(
            code.as_str().is_some_and(|c| c.len() > 2),
            "prediction.{name} has no code"
        );
    }
    let markets = prediction["markets"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(markets.len(), 3, "{prediction}");
    for m in &markets {
        assert!(
            m["question"].as_str().is_some_and(|q| q.ends_with('?')),
            "{m}"
        );
        let market = m["marketId"].as_str().unwrap_or_default();
        let ct = call(market, "conditionalTokens()", &[]).await;
        assert_eq!(
            ct,
            word(prediction["conditionalTokens"].as_str().unwrap_or_default()),
            "{m}"
        );
        let condition = call(market, "conditionIds(uint256)", &["0x0"]).await;
        assert_eq!(
            format!("0x{condition}"),
            m["conditionId"].as_str().unwrap_or_default(),
            "{m}"
        );
        // 10,000 USDC of funding at even odds: 10,000 pool shares.
        let shares = call(market, "totalSupply()", &[]).await;
        assert_eq!(
            u128::from_str_radix(&shares, 16).ok(),
            Some(10_000_000_000),
            "{m}"
        );
    }

    // devnet.toml is a complete gateway config for this chain.
    // Top-level keys first, then the devnet's file as it is.
    let config = format!(
        "listen = \"127.0.0.1:0\"\ndata-dir = \"{}\"\n{}\n{}",
        out.path().join("data").display(),
        std::fs::read_to_string(out.path().join("devnet.toml")).unwrap_or_default(),
        actiongate_testkit::NO_LIMITS
    );
    std::fs::write(out.path().join("gateway.toml"), config).expect("write");
    let mut gateway = Command::new(GATEWAY)
        .arg("--config")
        .arg(out.path().join("gateway.toml"))
        .env("STANDIN_LOG", out.path().join("venue.log"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    BufReader::new(gateway.stdout.take().unwrap_or_else(|| panic!("no stdout")))
        .read_line(&mut line)
        .expect("read line");
    assert!(line.starts_with("actiongate listening on "), "{line}");
    let _ = gateway.kill();
    let _ = gateway.wait();

    // Stopping the devnet stops anvil.
    let _ = Command::new("kill")
        .args(["-TERM", &devnet.0.id().to_string()])
        .status();
    let _ = devnet.0.wait();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "anvil still listens after the devnet stopped"
    );
}
