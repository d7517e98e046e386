//! ERC-7710 delegation on the real MetaMask Delegation Framework (deployed on the devnet from the
//! published bytecode). Users are EOAs upgraded with EIP-7702 to the framework's
//! EIP7702StatelessDeleGator; they sign delegations with viem (not our code). The gateway's hash is
//! checked against `getDelegationHash`; refusals each have their code; a swap fans out to the users
//! by `redeemDelegations` sent from the agent wallet and moves tokens out of each user's account; a
//! user whose caveat cap is below the amount fails alone with DELEGATION_CAVEAT_REFUSED; a user who
//! disabled the delegation onchain is skipped by the runner and by verify; revocation round trip; a
//! HybridDeleGator signs with the MetaMask kit; a codeless delegator is checked by ECDSA; a transfer
//! delegation carries the policy's per-action cap per token (MultiTokenPeriodEnforcer), which holds onchain
//! after the policy is raised.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use std::time::{Duration, Instant};

use actiongate_api_types::delegation::Delegation;
use actiongate_chain::delegation::{IDelegationManager, Parsed};
use alloy::primitives::{Address, U256};
use alloy::providers::Provider;
use alloy::rpc::types::TransactionRequest;
use alloy::sol_types::SolCall;
use serde_json::{Value, json};

use common::*;

struct User {
    address: Address,
    key: String,
}

/// Creates a delegation for `user` through the gateway, has viem sign its typed data, and answers
/// (the signed delegation, the create answer).
async fn signed_delegation(
    gw: &Gateway,
    agent: &Agent,
    user: &User,
    extra: Value,
) -> (Value, Value) {
    let mut body = json!({"agentApiKey": agent.key, "delegator": user.address, "chainId": 84532, "action": "swap"});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let (status, created) = post(format!("{}/api/v1/agent/delegation/create", gw.url), body).await;
    assert_eq!(status, 200, "{created}");
    let typed = created["data"]["typedData"].to_string();
    let signature = node(&["sign", &user.key], Some(&typed))["signature"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut delegation = created["data"]["delegation"].clone();
    delegation["signature"] = json!(signature);
    (delegation, created)
}

async fn activate(gw: &Gateway, agent: &Agent, delegation: &Value) -> (u16, Value) {
    post(
        format!("{}/api/v1/agent/delegation/activate", gw.url),
        json!({"agentApiKey": agent.key, "delegation": delegation, "chainId": 84532}),
    )
    .await
}

#[tokio::test]
async fn delegations_are_signed_by_viem_checked_and_redeemed_in_a_fan_out() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    // The revocation sweep is off here: the runner itself must meet the delegation disabled onchain.
    let gw = start_gateway(
        &devnet.gateway_config_with("main", &database_url, "[delegation]\nsweep-seconds = 0\n"),
        false,
    );
    let agent = onboard(&gw, &database_url, "delegation@example.com", &["swap"]).await;
    let devnet_json = devnet.dir.path().join("devnet.json").display().to_string();
    let manager = devnet.address(&["contracts", "DelegationManager"]);
    let (usdc_addr, weth_addr) = (devnet.usdc(), devnet.weth());
    // The agent pays the gas of the redemptions.
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            U256::ZERO,
        )
        .await;

    // Five users: EOAs upgraded to the stateless DeleGator, each holding USDC.
    let mut users = Vec::new();
    for i in 2..7 {
        let (address, key) = devnet.account(i);
        let up = node(&["upgrade", &devnet_json, &key], None);
        assert!(
            up["code"]
                .as_str()
                .is_some_and(|c| c.starts_with("0xef0100")),
            "{up}"
        );
        devnet.fund(address, U256::ZERO, usdc(100)).await;
        users.push(User { address, key });
    }

    // A HybridDeleGator of the devnet (deployed through the framework's factory), owned by account 7.
    let hybrid = User {
        address: devnet.spec["smartAccounts"][0]["address"]
            .as_str()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no smart account")),
        key: devnet
            .account(
                devnet.spec["smartAccounts"][0]["ownerIndex"]
                    .as_u64()
                    .unwrap_or(7) as usize,
            )
            .1,
    };

    // --- activation: a delegation signed by viem is accepted (ERC-1271 on the user's account), and
    // our hash is the framework's.
    let (delegation, created) = signed_delegation(&gw, &agent, &users[0], json!({})).await;
    let caveats: Vec<String> = created["data"]["caveatsDecoded"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["kind"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        caveats,
        [
            "AllowedTargetsEnforcer",
            "AllowedMethodsEnforcer",
            "ValueLteEnforcer"
        ],
        "{created}"
    );
    let wire: Delegation = serde_json::from_value(delegation.clone()).expect("from value");
    let parsed = Parsed::from_wire(&wire).unwrap_or_else(|e| panic!("{e:?}"));
    let call = IDelegationManager::getDelegationHashCall {
        delegation: parsed.abi(),
    };
    let out = devnet
        .provider
        .call(
            TransactionRequest::default()
                .to(manager)
                .input(call.abi_encode().into()),
        )
        .await
        .unwrap_or_else(|e| panic!("getDelegationHash: {e}"));
    let framework_hash = IDelegationManager::getDelegationHashCall::abi_decode_returns(&out)
        .expect("abi decode returns");
    assert_eq!(
        created["data"]["delegationHash"],
        json!(framework_hash.to_string()),
        "our hash is getDelegationHash"
    );
    let (status, activated) = activate(&gw, &agent, &delegation).await;
    assert_eq!(status, 200, "{activated}");
    assert_eq!(
        (
            activated["data"]["status"].clone(),
            activated["data"]["signatureKind"].clone()
        ),
        (json!("active"), json!("erc1271"))
    );
    // The swap delegation covers the Uniswap V2 venue's fan-out, not the ERC-20 transfers'.
    let readiness = |venue: &str| {
        get(
            format!(
                "{}/api/v1/agent/venues/readiness?venue={venue}&chainId=84532&lane=executeIntent",
                gw.url
            ),
            &agent.key,
        )
    };
    let (_, r) = readiness("uniswap-v2").await;
    assert_eq!(r["data"]["ready"], json!(true), "{r}");
    let (_, r) = readiness("erc20").await;
    assert_eq!(
        r["data"]["blockingReasons"][0]["code"],
        json!("DELEGATION_MISSING"),
        "{r}"
    );

    // --- refusals, each with its own code; none is stored.
    let mut tampered = delegation.clone();
    let sig = tampered["signature"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let flipped = if sig.ends_with("1b") {
        format!("{}1c", &sig[..sig.len() - 2])
    } else {
        format!("{}1b", &sig[..sig.len() - 2])
    };
    tampered["signature"] = json!(flipped);
    let (status, body) = activate(&gw, &agent, &tampered).await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("DELEGATION_SIGNATURE_INVALID")),
        "{body}"
    );

    // Signed by the user, but to another delegate.
    let (_, created) = signed_delegation(&gw, &agent, &users[1], json!({})).await;
    let mut typed = created["data"]["typedData"].clone();
    let stranger = devnet.account(1).0;
    typed["message"]["delegate"] = json!(stranger);
    let signature = node(&["sign", &users[1].key], Some(&typed.to_string()))["signature"].clone();
    let mut other = created["data"]["delegation"].clone();
    other["delegate"] = json!(stranger);
    other["signature"] = signature;
    let (status, body) = activate(&gw, &agent, &other).await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("DELEGATION_WRONG_DELEGATE")),
        "{body}"
    );

    // Signed for Base's DelegationManager (chain 8453), submitted for the devnet's chain.
    let mut typed = created["data"]["typedData"].clone();
    typed["domain"]["chainId"] = json!(8453);
    typed["domain"]["verifyingContract"] = json!("0xdb9B1e94B5b69Df7e401DDbedE43491141047dB3");
    let signature = node(&["sign", &users[1].key], Some(&typed.to_string()))["signature"].clone();
    let mut other = created["data"]["delegation"].clone();
    other["signature"] = signature;
    let (status, body) = activate(&gw, &agent, &other).await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("DELEGATION_WRONG_CHAIN")),
        "{body}"
    );

    // A time window that has closed by the time it is activated.
    let soon = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
        + 2;
    let (expiring, _) = signed_delegation(&gw, &agent, &users[1], json!({"expiresAt": soon})).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (status, body) = activate(&gw, &agent, &expiring).await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("DELEGATION_EXPIRED")),
        "{body}"
    );
    let (_, check) = get(
        format!("{}/api/v1/agent/delegation/check?chainId=84532", gw.url),
        &agent.key,
    )
    .await;
    assert_eq!(
        check["data"]["delegations"].as_array().map(Vec::len),
        Some(1),
        "only the valid delegation is stored: {check}"
    );

    // --- the other users delegate: user 1 like user 0; user 2 with a 60 USDC spend cap (above the
    // swap's 50: its approval and its swap, two redemptions in one transaction, each pass the
    // balance-change caveat around its own call); user 3 with a 10 USDC spend cap (below the swap's
    // 50); user 4 then disables its delegation onchain with the transaction revoke builds.
    let mut hashes = vec![created_hash(&activated)];
    for (i, extra) in [
        (1, json!({})),
        (
            2,
            json!({"caveats": {"erc20SpendCaps": [{"token": "USDC", "amount": "60"}]}}),
        ),
        (
            3,
            json!({"caveats": {"erc20SpendCaps": [{"token": "USDC", "amount": "10"}]}}),
        ),
        (4, json!({})),
    ] {
        let (d, _) = signed_delegation(&gw, &agent, &users[i], extra).await;
        let (status, body) = activate(&gw, &agent, &d).await;
        assert_eq!(status, 200, "user {i}: {body}");
        hashes.push(created_hash(&body));
    }
    // The HybridDeleGator signs with the MetaMask kit's own signDelegation (ERC-1271 through its owner).
    let (status, created) = post(
        format!("{}/api/v1/agent/delegation/create", gw.url),
        json!({"agentApiKey": agent.key, "delegator": hybrid.address, "chainId": 84532, "action": "swap"}),
    )
    .await;
    assert_eq!(status, 200, "{created}");
    let mut kit_delegation = created["data"]["delegation"].clone();
    let signed = node(
        &[
            "sign-kit",
            &devnet_json,
            &hybrid.key,
            &hybrid.address.to_string(),
        ],
        Some(&kit_delegation.to_string()),
    );
    kit_delegation["signature"] = signed["signature"].clone();
    let (status, body) = activate(&gw, &agent, &kit_delegation).await;
    assert_eq!(
        (status, body["data"]["signatureKind"].clone()),
        (200, json!("erc1271")),
        "{body}"
    );

    let (status, revoke) = post(
        format!("{}/api/v1/agent/delegation/revoke", gw.url),
        json!({"agentApiKey": agent.key, "delegationHash": hashes[4]}),
    )
    .await;
    assert_eq!(
        (status, revoke["data"]["status"].clone()),
        (200, json!("active")),
        "{revoke}"
    );
    let tx = &revoke["data"]["transaction"];
    let sent = node(
        &[
            "send",
            &devnet_json,
            &users[4].key,
            tx["to"].as_str().unwrap_or_default(),
            tx["data"].as_str().unwrap_or_default(),
        ],
        None,
    );
    assert_eq!(
        sent["status"], "success",
        "the owner's disableDelegation was mined: {sent}"
    );
    let (_, check) = get(
        format!("{}/api/v1/agent/delegation/check?chainId=84532", gw.url),
        &agent.key,
    )
    .await;
    assert_eq!(
        check["data"]["delegations"].as_array().map(Vec::len),
        Some(6),
        "{check}"
    );

    // --- fan-out of a swap: 50 USDC -> WETH from each user's account.
    let before: Vec<(U256, U256)> = balances(&devnet, &users, usdc_addr, weth_addr).await;
    let hybrid_before = (
        devnet.balance(usdc_addr, hybrid.address).await,
        devnet.balance(weth_addr, hybrid.address).await,
    );
    let status = fan_out(
        &gw,
        &agent,
        "swap",
        json!({"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": "50", "slippageBps": 100}),
        50.0,
    )
    .await;
    assert_eq!(
        (
            status["status"].clone(),
            status["total"].clone(),
            status["executed"].clone()
        ),
        (json!("completed"), json!(6), json!(6)),
        "{status}"
    );
    let results = status["results"].as_array().cloned().unwrap_or_default();
    let result_of = |u: &User| {
        results
            .iter()
            .find(|r| {
                r["walletAddress"]
                    .as_str()
                    .and_then(|a| a.parse::<Address>().ok())
                    == Some(u.address)
            })
            .cloned()
            .unwrap_or_else(|| panic!("no result for {}: {status}", u.address))
    };
    let after = balances(&devnet, &users, usdc_addr, weth_addr).await;
    for i in 0..3 {
        let r = result_of(&users[i]);
        assert_eq!(r["success"], json!(true), "user {i}: {r}");
        assert_eq!(
            r["userDid"],
            json!(format!("did:pkh:eip155:84532:{}", users[i].address)),
            "{r}"
        );
        assert!(r["txHash"].as_str().is_some_and(|h| h.len() == 66), "{r}");
        assert_eq!(
            before[i].0 - after[i].0,
            usdc(50),
            "user {i} paid 50 USDC from its own account"
        );
        assert!(after[i].1 > before[i].1, "user {i} received WETH");
    }
    let r = result_of(&hybrid);
    assert_eq!(r["success"], json!(true), "the HybridDeleGator: {r}");
    assert_eq!(
        hybrid_before.0 - devnet.balance(usdc_addr, hybrid.address).await,
        usdc(50),
        "the HybridDeleGator paid 50 USDC"
    );
    assert!(
        devnet.balance(weth_addr, hybrid.address).await > hybrid_before.1,
        "the HybridDeleGator received WETH"
    );
    refused_by_caveat(
        &result_of(&users[3]),
        "ERC20BalanceChangeEnforcer:exceeded-balance-decrease",
    );
    assert_eq!(
        after[3], before[3],
        "the capped user's balances did not move"
    );
    let disabled = result_of(&users[4]);
    assert_eq!(
        (disabled["success"].clone(), disabled["code"].clone()),
        (json!(false), json!("DELEGATION_REVOKED")),
        "{disabled}"
    );
    assert_eq!(
        after[4], before[4],
        "the user who disabled the delegation was skipped"
    );
    let (_, check) = get(
        format!(
            "{}/api/v1/agent/delegation/check?delegator={}",
            gw.url, users[4].address
        ),
        &agent.key,
    )
    .await;
    assert_eq!(
        check["data"]["delegations"][0]["status"],
        json!("revoked"),
        "the runner recorded the revocation it met: {check}"
    );
    // Credits: 6 reserved at 10 each, the 4 successes captured.
    assert_eq!(credits(&gw, &agent).await, 10_000 - 40);

    // --- redeem: one execution within user 1's delegation; a retry with the same key sends nothing.
    let redeem = json!({"agentApiKey": agent.key, "delegationHash": hashes[1], "action": "swap", "idempotencyKey": "r-1",
                        "params": {"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": "10", "slippageBps": 100}});
    let (status, redeemed) = post(
        format!("{}/api/v1/agent/delegation/redeem", gw.url),
        redeem.clone(),
    )
    .await;
    assert_eq!(
        (
            status,
            redeemed["data"]["status"].clone(),
            redeemed["data"]["success"].clone()
        ),
        (200, json!("succeeded"), json!(true)),
        "{redeemed}"
    );
    let paid = devnet.balance(usdc_addr, users[1].address).await;
    assert_eq!(
        after[1].0 - paid,
        usdc(10),
        "the redemption moved 10 USDC out of user 1's account"
    );
    let (status, again) = post(format!("{}/api/v1/agent/delegation/redeem", gw.url), redeem).await;
    assert_eq!(
        (status, again["data"]["txHash"].clone()),
        (200, redeemed["data"]["txHash"].clone()),
        "{again}"
    );
    assert_eq!(
        devnet.balance(usdc_addr, users[1].address).await,
        paid,
        "a retry paid nothing twice"
    );
    // The agent cannot send a delegator's output elsewhere.
    let (status, body) = post(
        format!("{}/api/v1/agent/delegation/redeem", gw.url),
        json!({"agentApiKey": agent.key, "delegationHash": hashes[1], "action": "swap", "idempotencyKey": "r-3",
               "params": {"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": "10", "recipient": agent.address}}),
    )
    .await;
    // Refused when submitted, before anything is written or sent.
    assert_eq!(
        (status, body["code"].clone()),
        (400, json!("INVALID_PARAMS")),
        "{body}"
    );
    assert_eq!(
        devnet.balance(usdc_addr, users[1].address).await,
        paid,
        "nothing moved"
    );
    let (status, body) = post(
        format!("{}/api/v1/agent/delegation/redeem", gw.url),
        json!({"agentApiKey": agent.key, "delegationHash": hashes[4], "action": "swap", "idempotencyKey": "r-2",
               "params": {"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": "10"}}),
    )
    .await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("DELEGATION_REVOKED")),
        "{body}"
    );

    // --- verify: the disabled one is not valid; an active one passes every check.
    let (_, verified) = get(
        format!(
            "{}/api/v1/agent/delegation/verify?delegationHash={}",
            gw.url, hashes[4]
        ),
        &agent.key,
    )
    .await;
    assert_eq!(
        (
            verified["data"]["valid"].clone(),
            verified["data"]["status"].clone()
        ),
        (json!(false), json!("revoked")),
        "{verified}"
    );
    let (_, verified) = get(
        format!(
            "{}/api/v1/agent/delegation/verify?delegationHash={}",
            gw.url, hashes[0]
        ),
        &agent.key,
    )
    .await;
    assert_eq!(verified["data"]["valid"], json!(true), "{verified}");
    let names: Vec<&str> = verified["data"]["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "delegationManager",
            "delegatorCode",
            "notDisabled",
            "signature",
            "enforcersDeployed",
            "timeWindow"
        ]
    );

    // --- revocation round trip: revoke now reports it revoked, and so does check.
    let (status, revoke) = post(
        format!("{}/api/v1/agent/delegation/revoke", gw.url),
        json!({"agentApiKey": agent.key, "delegationHash": hashes[4]}),
    )
    .await;
    assert_eq!(
        (
            status,
            revoke["data"]["status"].clone(),
            revoke["data"].get("transaction").cloned()
        ),
        (200, json!("revoked"), None),
        "{revoke}"
    );
    let (_, check) = get(
        format!(
            "{}/api/v1/agent/delegation/check?chainId=84532&delegator={}",
            gw.url, users[4].address
        ),
        &agent.key,
    )
    .await;
    assert_eq!(
        (
            check["data"]["active"].clone(),
            check["data"]["delegations"][0]["status"].clone()
        ),
        (json!(false), json!("revoked")),
        "{check}"
    );

    // --- inspect and balance.
    let (_, inspected) = get(
        format!(
            "{}/api/v1/agent/delegation/inspect?delegationHash={}",
            gw.url, hashes[3]
        ),
        &agent.key,
    )
    .await;
    let cap = inspected["data"]["caveats"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|c| c["kind"] == "ERC20BalanceChangeEnforcer")
                .cloned()
        })
        .unwrap_or(Value::Null);
    assert_eq!(
        (
            cap["terms"]["change"].clone(),
            cap["terms"]["limit"]["amount"].clone()
        ),
        (json!("decrease"), json!("10")),
        "{inspected}"
    );
    let (_, balance) = get(
        format!(
            "{}/api/v1/agent/delegation/balance?delegationHash={}",
            gw.url, hashes[0]
        ),
        &agent.key,
    )
    .await;
    let usdc_row = balance["data"]["tokens"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["token"] == "USDC").cloned())
        .unwrap_or(Value::Null);
    assert_eq!(usdc_row["raw"], json!(after[0].0.to_string()), "{balance}");
    let other_agent = onboard(&gw, &database_url, "other@example.com", &["swap"]).await;
    let (status, _) = get(
        format!(
            "{}/api/v1/agent/delegation/inspect?delegationHash={}",
            gw.url, hashes[0]
        ),
        &other_agent.key,
    )
    .await;
    assert_eq!(
        status, 404,
        "another agent does not see this agent's delegations"
    );

    // verify and revoke each record a revocation made onchain behind the gateway's back (the sweep
    // is off here): active in the database until one of them looks.
    let status_of = |i: usize| {
        let (url, key) = (
            format!(
                "{}/api/v1/agent/delegation/check?delegator={}",
                gw.url, users[i].address
            ),
            agent.key.clone(),
        );
        async move { get(url, &key).await.1["data"]["delegations"][0]["status"].clone() }
    };
    for (i, route) in [(2, "verify"), (1, "revoke")] {
        let (_, revoke) = post(
            format!("{}/api/v1/agent/delegation/revoke", gw.url),
            json!({"agentApiKey": agent.key, "delegationHash": hashes[i]}),
        )
        .await;
        let tx = &revoke["data"]["transaction"];
        let sent = node(
            &[
                "send",
                &devnet_json,
                &users[i].key,
                tx["to"].as_str().unwrap_or_default(),
                tx["data"].as_str().unwrap_or_default(),
            ],
            None,
        );
        assert_eq!(sent["status"], "success", "{sent}");
        assert_eq!(
            status_of(i).await,
            json!("active"),
            "user {i}: nobody looked yet"
        );
        let answer = if route == "verify" {
            get(
                format!(
                    "{}/api/v1/agent/delegation/verify?delegationHash={}",
                    gw.url, hashes[i]
                ),
                &agent.key,
            )
            .await
            .1
        } else {
            post(
                format!("{}/api/v1/agent/delegation/revoke", gw.url),
                json!({"agentApiKey": agent.key, "delegationHash": hashes[i]}),
            )
            .await
            .1
        };
        assert_eq!(
            answer["data"]["status"],
            json!("revoked"),
            "{route}: {answer}"
        );
        assert_eq!(status_of(i).await, json!("revoked"), "{route} recorded it");
    }

    // A codeless delegator (a plain EOA) is checked by ECDSA recovery.
    let (eoa, eoa_key) = devnet.account(9);
    let (status, created) = post(
        format!("{}/api/v1/agent/delegation/create", gw.url),
        json!({"agentApiKey": other_agent.key, "delegator": eoa, "chainId": 84532, "action": "swap"}),
    )
    .await;
    assert_eq!(status, 200, "{created}");
    let signature = node(
        &["sign", &eoa_key],
        Some(&created["data"]["typedData"].to_string()),
    )["signature"]
        .clone();
    let mut d = created["data"]["delegation"].clone();
    d["signature"] = signature;
    let (status, body) = activate(&gw, &other_agent, &d).await;
    assert_eq!(
        (status, body["data"]["signatureKind"].clone()),
        (200, json!("ecdsa")),
        "{body}"
    );
}

/// A fan-out result refused by a caveat: DELEGATION_CAVEAT_REFUSED with the enforcer's `reason`.
#[track_caller]
fn refused_by_caveat(result: &Value, reason: &str) {
    assert_eq!(
        (result["success"].clone(), result["code"].clone()),
        (json!(false), json!("DELEGATION_CAVEAT_REFUSED")),
        "{result}"
    );
    assert!(
        result["message"]
            .as_str()
            .is_some_and(|m| m.contains(reason)),
        "the enforcer's reason {reason:?}: {result}"
    );
}

fn created_hash(body: &Value) -> String {
    body["data"]["delegationHash"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .to_owned()
}

async fn balances(
    devnet: &Devnet,
    users: &[User],
    usdc: Address,
    weth: Address,
) -> Vec<(U256, U256)> {
    let mut out = Vec::new();
    for u in users {
        out.push((
            devnet.balance(usdc, u.address).await,
            devnet.balance(weth, u.address).await,
        ));
    }
    out
}

/// A gateway killed right after it sent a redemption (before recording anything), then another on the
/// same database: every delegator's swap runs exactly once and the intent completes.
#[tokio::test]
async fn a_fan_out_killed_after_a_send_redeems_each_delegation_once() {
    let devnet = Devnet::start();
    let database_url = actiongate_testkit::fresh_postgres_url()
        .await
        .expect("fresh postgres url");
    let config =
        devnet.gateway_config_with("crash", &database_url, "[delegation]\nsweep-seconds = 1\n");
    // One execution at a time: the outbox hands transactions queued together to the node in one
    // request, so with the fan-out's executions side by side the crash could come after several
    // users' sends instead of exactly one.
    let text = std::fs::read_to_string(&config).expect("the gateway config is read");
    std::fs::write(
        &config,
        text.replacen("[intents]\n", "[intents]\nfanout-concurrency = 1\n", 1),
    )
    .expect("the gateway config is written");
    let mut a = start_gateway(&config, true);
    let agent = onboard(&a, &database_url, "crash@example.com", &["swap"]).await;
    let devnet_json = devnet.dir.path().join("devnet.json").display().to_string();
    let (usdc_addr, weth_addr) = (devnet.usdc(), devnet.weth());
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            U256::ZERO,
        )
        .await;
    let users = delegators(&devnet, &a, &agent, 2..5).await;
    let before = balances(&devnet, &users, usdc_addr, weth_addr).await;
    let nonce = devnet.nonce(agent.address).await;
    let (status, submitted) = post(
        format!("{}/api/v1/agent/execute-intent", a.url),
        json!({"agentApiKey": agent.key, "action": "swap", "chainId": 84532, "estimatedAmountUsd": 50,
               "params": {"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": "50", "slippageBps": 100}}),
    )
    .await;
    assert_eq!(status, 200, "{submitted}");
    let intent_id = submitted["intentId"]
        .as_str()
        .unwrap_or_else(|| panic!("{submitted}"))
        .to_owned();
    let exited = a.process.0.wait().expect("wait");
    assert!(
        !exited.success(),
        "the gateway was to die right after its first send"
    );
    assert_eq!(
        devnet.nonce(agent.address).await,
        nonce + 1,
        "one user's transaction reached the chain before the crash"
    );

    // A second process takes the fan-out over.
    let b = start_gateway(&config, false);
    let status = wait_ended(&b.url, &agent.key, &intent_id).await;
    assert_eq!(
        (status["status"].clone(), status["executed"].clone()),
        (json!("completed"), json!(3)),
        "{status}"
    );
    let results = status["results"].as_array().cloned().unwrap_or_default();
    assert!(
        results.len() == 3 && results.iter().all(|x| x["success"] == json!(true)),
        "{status}"
    );
    let after = balances(&devnet, &users, usdc_addr, weth_addr).await;
    for i in 0..3 {
        assert_eq!(before[i].0 - after[i].0, usdc(50), "user {i} paid once");
    }
    // Each user: an approval and a swap, two redemptions in one transaction; nothing was sent twice.
    assert_eq!(devnet.nonce(agent.address).await, nonce + 3);

    // A user disables its delegation onchain and nobody asks the gateway: the sweep records it.
    let (_, check) = get(
        format!(
            "{}/api/v1/agent/delegation/check?delegator={}",
            b.url, users[0].address
        ),
        &agent.key,
    )
    .await;
    let hash = check["data"]["delegations"][0]["delegationHash"]
        .as_str()
        .unwrap_or_else(|| panic!("{check}"))
        .to_owned();
    let (_, revoke) = post(
        format!("{}/api/v1/agent/delegation/revoke", b.url),
        json!({"agentApiKey": agent.key, "delegationHash": hash}),
    )
    .await;
    let tx = &revoke["data"]["transaction"];
    node(
        &[
            "send",
            &devnet_json,
            &users[0].key,
            tx["to"].as_str().unwrap_or_default(),
            tx["data"].as_str().unwrap_or_default(),
        ],
        None,
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, check) = get(
            format!(
                "{}/api/v1/agent/delegation/check?delegator={}",
                b.url, users[0].address
            ),
            &agent.key,
        )
        .await;
        if check["data"]["delegations"][0]["status"] == "revoked" {
            assert_eq!(check["data"]["active"], json!(false));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sweep did not record the revocation: {check}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The agent's wallet used elsewhere (its nonce moved on 100 on the chain behind the gateway's
/// back) before a fan-out: the reservations start above the chain's nonce (read before each
/// reservation), every user is paid once, and no transaction of the agent waits in the node above a
/// gap.
#[tokio::test]
async fn a_wallet_used_elsewhere_leaves_no_nonce_gap() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("refused", &database_url), false);
    let agent = onboard(&gw, &database_url, "refused@example.com", &["swap"]).await;
    let (usdc_addr, weth_addr) = (devnet.usdc(), devnet.weth());
    let users = delegators(&devnet, &gw, &agent, 2..8).await;
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            U256::ZERO,
        )
        .await;
    let before = balances(&devnet, &users, usdc_addr, weth_addr).await;
    // The wallet's nonce moves on 100 on the chain before the fan-out (the gateway's own record
    // says less).
    let moved = devnet.nonce(agent.address).await + 100;
    devnet
        .provider
        .raw_request::<_, Value>("anvil_setNonce".into(), (agent.address, U256::from(moved)))
        .await
        .expect("the devnet sets a nonce");
    let (status, submitted) = post(
        format!("{}/api/v1/agent/execute-intent", gw.url),
        json!({"agentApiKey": agent.key, "action": "swap", "chainId": 84532, "estimatedAmountUsd": 10,
               "params": {"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": "10", "slippageBps": 100}}),
    )
    .await;
    assert_eq!(status, 200, "{submitted}");
    let ended = wait_ended(
        &gw.url,
        &agent.key,
        submitted["intentId"].as_str().unwrap_or_default(),
    )
    .await;
    assert_eq!(
        (ended["status"].clone(), ended["executed"].clone()),
        (json!("completed"), json!(users.len())),
        "{ended}"
    );
    let after = balances(&devnet, &users, usdc_addr, weth_addr).await;
    for i in 0..users.len() {
        assert_eq!(before[i].0 - after[i].0, usdc(10), "user {i} paid once");
    }
    // The runner started the six executions together: one start (one store transaction) for all
    // of them, not one each.
    let starts = |part: &str| format!("actiongate_gathered_batch_size_{part}{{kind=\"starts\"}}");
    assert_eq!(
        (
            metric(&gw, &starts("count")).await,
            metric(&gw, &starts("sum")).await
        ),
        (Some(1.0), Some(users.len() as f64)),
        "the fan-out's executions started in one batch"
    );
    // Each user's redemption (an EIP-7702 account redeeming a swap delegation through the
    // Delegation Framework) was checked by the node and in the gateway's own EVM, and the two
    // agreed (the devnet's gateways run `fanout-check = "shadow"`; a disagreement fails the test
    // when the gateway is dropped).
    let agreed = metric(
        &gw,
        r#"actiongate_local_checks_total{chain="84532",result="agreed"}"#,
    )
    .await
    .unwrap_or_default();
    assert!(agreed >= users.len() as f64, "{agreed}");
    // Every redemption mined right above the moved nonce: none waits behind a gap.
    assert_eq!(
        devnet.nonce(agent.address).await,
        moved + users.len() as u64
    );
    let pool: Value = devnet
        .provider
        .raw_request("txpool_status".into(), ())
        .await
        .expect("the pool's status");
    assert_eq!(
        (pool["pending"].clone(), pool["queued"].clone()),
        (json!("0x0"), json!("0x0")),
        "{pool}"
    );
}

/// The devnet's accounts `range`, upgraded with EIP-7702, each with an active delegation to the
/// agent made through the gateway.
async fn delegators(
    devnet: &Devnet,
    gw: &Gateway,
    agent: &Agent,
    range: std::ops::Range<usize>,
) -> Vec<User> {
    let devnet_json = devnet.dir.path().join("devnet.json").display().to_string();
    let mut users = Vec::new();
    for i in range {
        let (address, key) = devnet.account(i);
        node(&["upgrade", &devnet_json, &key], None);
        let user = User { address, key };
        let (d, _) = signed_delegation(gw, agent, &user, json!({})).await;
        let (status, body) = activate(gw, agent, &d).await;
        assert_eq!(status, 200, "{body}");
        users.push(user);
    }
    users
}

/// Submits a fan-out and waits for it to end; its status body.
async fn fan_out(gw: &Gateway, agent: &Agent, action: &str, params: Value, usd: f64) -> Value {
    let (status, submitted) = post(
        format!("{}/api/v1/agent/execute-intent", gw.url),
        json!({"agentApiKey": agent.key, "action": action, "chainId": 84532,
               "estimatedAmountUsd": usd, "params": params}),
    )
    .await;
    assert_eq!(status, 200, "{submitted}");
    let id = submitted["intentId"]
        .as_str()
        .unwrap_or_else(|| panic!("{submitted}"));
    wait_ended(&gw.url, &agent.key, id).await
}

/// A transfer delegation carries the policy's per-action cap of each priced token, at the gateway's
/// price when it was created (MultiTokenPeriodEnforcer): raising the policy later does not raise what
/// the signed delegation lets the agent move, the enforcer refuses it onchain and nothing moves.
#[tokio::test]
async fn a_transfer_delegation_holds_the_policys_cap_onchain() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("cap", &database_url), false);
    let agent = onboard(&gw, &database_url, "cap@example.com", &["transfer"]).await;
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            U256::ZERO,
        )
        .await;
    let devnet_json = devnet.dir.path().join("devnet.json").display().to_string();
    let (address, key) = devnet.account(2);
    let up = node(&["upgrade", &devnet_json, &key], None);
    assert!(
        up["code"]
            .as_str()
            .is_some_and(|c| c.starts_with("0xef0100")),
        "{up}"
    );
    devnet.fund(address, U256::ZERO, usdc(500)).await;
    let user = User { address, key };

    // 100 USD per action: 100 USDC (USDC/USD 1), 92.592592 EURC (EUR/USD 1.08).
    set_policy(&gw, &agent, json!({"allowedActions": ["transfer"], "dailyLimitUsd": 100000, "maxAmountUsdPerAction": 100})).await;
    let (delegation, created) =
        signed_delegation(&gw, &agent, &user, json!({"action": "transfer"})).await;
    let caveats = created["data"]["caveatsDecoded"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let cap = caveats
        .iter()
        .find(|c| c["kind"] == "MultiTokenPeriodEnforcer")
        .unwrap_or_else(|| panic!("no per-token cap: {created}"));
    let per_token = |symbol: &str| {
        cap["terms"]["perPeriod"]
            .as_array()
            .and_then(|p| p.iter().find(|x| x["cap"]["token"] == symbol).cloned())
            .map(|x| (x["cap"]["amount"].clone(), x["periodSeconds"].clone()))
    };
    assert_eq!(per_token("USDC"), Some((json!("100"), json!("1"))), "{cap}");
    assert_eq!(
        per_token("EURC"),
        Some((json!("92.592592"), json!("1"))),
        "{cap}"
    );
    let (status, body) = activate(&gw, &agent, &delegation).await;
    assert_eq!(status, 200, "{body}");

    // Within the cap it is redeemed onchain.
    let to = user.address.to_string();
    let agent_nonce = devnet.nonce(agent.address).await;
    let done = fan_out(
        &gw,
        &agent,
        "transfer",
        json!({"token": "USDC", "to": to, "amount": "60"}),
        60.0,
    )
    .await;
    let r = &done["results"][0];
    assert_eq!(r["success"], json!(true), "{done}");
    assert!(
        r["txHash"].as_str().is_some_and(|h| h.len() == 66),
        "{done}"
    );
    assert_eq!(devnet.nonce(agent.address).await, agent_nonce + 1);

    // The owner raises the policy afterwards: the gateway now allows 150, the signed cap does not.
    set_policy(&gw, &agent, json!({"allowedActions": ["transfer"], "dailyLimitUsd": 100000, "maxAmountUsdPerAction": 1000})).await;
    let before = devnet.balance(devnet.usdc(), user.address).await;
    let agent_nonce = devnet.nonce(agent.address).await;
    let done = fan_out(
        &gw,
        &agent,
        "transfer",
        json!({"token": "USDC", "to": to, "amount": "150"}),
        150.0,
    )
    .await;
    refused_by_caveat(
        &done["results"][0],
        "MultiTokenPeriodEnforcer:transfer-amount-exceeded",
    );
    assert_eq!(
        devnet.nonce(agent.address).await,
        agent_nonce,
        "refused in simulation: nothing sent"
    );
    assert_eq!(devnet.balance(devnet.usdc(), user.address).await, before);

    // An FX conversion fans out too: the user's newest delegation, for fx-swap (SwapRouter02 and the
    // listed tokens), converts 10 of its EURC into at least the oracle's 10.8 USDC less 50 bps.
    let actions = ["transfer", "fx-swap"];
    set_policy(
        &gw,
        &agent,
        json!({"allowedActions": actions, "dailyLimitUsd": 100000, "maxAmountUsdPerAction": 1000}),
    )
    .await;
    let (delegation, _) = signed_delegation(&gw, &agent, &user, json!({"action": "fx-swap"})).await;
    let (status, body) = activate(&gw, &agent, &delegation).await;
    assert_eq!(status, 200, "{body}");
    let eurc = devnet.address(&["tokens", "EURC", "address"]);
    let (usdc_before, eurc_before) = (
        devnet.balance(devnet.usdc(), user.address).await,
        devnet.balance(eurc, user.address).await,
    );
    let done = fan_out(
        &gw,
        &agent,
        "fx-swap",
        json!({"from": "EURC", "to": "USDC", "amount": "10"}),
        10.8,
    )
    .await;
    assert_eq!(done["results"][0]["success"], json!(true), "{done}");
    assert_eq!(
        eurc_before - devnet.balance(eurc, user.address).await,
        usdc(10)
    );
    let got = devnet.balance(devnet.usdc(), user.address).await - usdc_before;
    assert!(
        got >= U256::from(10_746_000u64) && got <= U256::from(10_800_000u64),
        "the user received {got}: {done}"
    );
}
