// The fan-out benchmark's driver (`./scripts/bench fanout`): against a running gateway on the devnet,
// brings the agent's delegators up to N (fresh EOAs, funded by anvil_setBalance and the devnet
// USDC's mint, upgraded with EIP-7702 to the Delegation Framework's stateless DeleGator, each with
// an active `swap` delegation to the agent made through the gateway and signed with viem), submits
// one `swap` intent addressing all of them, and times it from the submit to `completed`.
//
//   node tests/e2e/fanout_bench.mjs --gateway URL --key AGENT_KEY --devnet devnet.json --n N
//        [--have K]   (K delegators exist already: only N - K are made)
//
// Then the node's raw rate for the same transactions: the chain is put back to a snapshot taken
// before the submit and the gateway's own signed transactions are sent to it directly.
//
// Prints one JSON line: {n, made, setupMs, submitToCompletedMs, executions, distinctWallets,
// succeeded, failed, perSecond, transactions, rawMs, rawPerSecond, ratio}. Exits 1 if the intent
// does not complete with exactly N executions, one per delegator, each succeeded.
import fs from "node:fs";
import { createPublicClient, createWalletClient, http, defineChain, parseAbi, parseUnits } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, v, i, all) => (i % 2 === 0 ? [...pairs, [v.replace(/^--/, ""), all[i + 1]]] : pairs), []),
);
const n = Number(args.n);
const have = Number(args.have ?? 0);
const devnet = JSON.parse(fs.readFileSync(args.devnet, "utf8"));
const chain = defineChain({ id: devnet.chainId, name: "devnet", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [devnet.rpcUrl] } } });
const pub = createPublicClient({ chain, transport: http(devnet.rpcUrl) });
const deployer = privateKeyToAccount(devnet.accounts[0].privateKey);
const minter = createWalletClient({ account: deployer, chain, transport: http(devnet.rpcUrl) });
const usdc = devnet.tokens.USDC.address;
const mintAbi = parseAbi(["function mint(address to, uint256 amount)"]);

/// The gateway's rate over the node's raw rate for the same work.
const elapsedRatio = (rawMs, gatewayMs) => rawMs / gatewayMs;

async function gateway(path, body) {
  const r = await fetch(`${args.gateway}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const json = await r.json().catch(() => null);
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${JSON.stringify(json)}`);
  return json;
}

/// Runs `work` over `items`, `width` at a time.
async function pool(items, width, work) {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) {
      const i = next++;
      await work(items[i], i);
    }
  }));
}

async function makeDelegator() {
  const account = privateKeyToAccount(generatePrivateKey());
  await pub.request({ method: "anvil_setBalance", params: [account.address, "0xDE0B6B3A7640000"] });
  const wallet = createWalletClient({ account, chain, transport: http(devnet.rpcUrl) });
  const authorization = await wallet.signAuthorization({ account, contractAddress: devnet.contracts.EIP7702StatelessDeleGatorImpl, executor: "self" });
  const upgraded = await wallet.sendTransaction({ authorizationList: [authorization], to: account.address, data: "0x", gas: 200000n });
  const receipt = await pub.waitForTransactionReceipt({ hash: upgraded });
  if (receipt.status !== "success") throw new Error("the EIP-7702 upgrade reverted");
  const created = await gateway("/api/v1/agent/delegation/create", { agentApiKey: args.key, delegator: account.address, chainId: devnet.chainId, action: "swap" });
  const typed = created.data.typedData;
  const message = { ...typed.message, salt: BigInt(typed.message.salt) };
  const domain = { ...typed.domain, chainId: Number(typed.domain.chainId) };
  const types = Object.fromEntries(Object.entries(typed.types).filter(([name]) => name !== "EIP712Domain"));
  const signature = await account.signTypedData({ domain, types, primaryType: typed.primaryType, message });
  await gateway("/api/v1/agent/delegation/activate", { agentApiKey: args.key, delegation: { ...created.data.delegation, signature }, chainId: devnet.chainId });
  return account.address;
}

const setupStart = Date.now();
const made = [];
await pool(Array.from({ length: Math.max(0, n - have) }), 8, async () => {
  made.push(await makeDelegator());
});
// Their USDC, minted by the devnet's owner one after another (its nonce), mined as they arrive.
let nonce = await pub.getTransactionCount({ address: deployer.address });
const mints = [];
for (const address of made) {
  mints.push(await minter.writeContract({ address: usdc, abi: mintAbi, functionName: "mint", args: [address, parseUnits("100", 6)], nonce: nonce++ }));
}
for (const hash of mints) await pub.waitForTransactionReceipt({ hash });
const setupMs = Date.now() - setupStart;

// The chain as it is before the fan-out: the same signed transactions are replayed on it below.
const snapshot = await pub.request({ method: "evm_snapshot", params: [] });
// Read from the node each time (viem caches the block number for a few seconds).
const blockNumber = async () => BigInt(await pub.request({ method: "eth_blockNumber", params: [] }));
const firstBlock = (await blockNumber()) + 1n;
const submitted = Date.now();
const intent = await gateway("/api/v1/agent/execute-intent", {
  agentApiKey: args.key, action: "swap", chainId: devnet.chainId, idempotencyKey: `fanout-${n}-${Date.now()}`,
  params: { tokenIn: "USDC", tokenOut: "WETH", amountIn: "1", slippageBps: 500 },
});
let status;
for (;;) {
  const r = await fetch(`${args.gateway}/api/v1/agent/execute-intent/status?intentId=${intent.intentId}`, { headers: { "x-agent-api-key": args.key } });
  status = await r.json();
  if (status.status === "completed" || status.status === "failed") break;
  await new Promise((resolve) => setTimeout(resolve, 20));
}
const elapsed = Date.now() - submitted;
const results = status.results ?? status.executions ?? [];
const succeeded = results.filter((e) => e.success === true).length;
const distinct = new Set(results.map((e) => e.walletAddress.toLowerCase())).size;
const summary = {
  n, made: made.length, setupMs, submitToCompletedMs: elapsed, status: status.status,
  executions: status.total, distinctWallets: distinct, succeeded, failed: results.length - succeeded,
  perSecond: Number((n / (elapsed / 1000)).toFixed(1)),
};
if (status.status !== "completed" || summary.executions !== n || succeeded !== n || distinct !== n) {
  console.log(JSON.stringify(summary));
  console.error(JSON.stringify(status).slice(0, 2000));
  process.exit(1);
}
// The gateway's side, on stderr, before the replay (which can fail on its own).
console.error(JSON.stringify(summary));
// The node's raw rate for the same transactions: the chain put back as it was before the fan-out,
// the gateway's signed redeemDelegations (the same bytes, the same nonces) sent straight to the
// node, back to back, then the last one's receipt awaited.
// Every transaction mined since the snapshot is the gateway's (the approvals and the swaps it
// redeemed for each delegator), in the order it sent them.
const lastBlock = await blockNumber();
const hashes = [];
for (let b = firstBlock; b <= lastBlock; b++) {
  hashes.push(...(await pub.getBlock({ blockNumber: b })).transactions);
}
const raws = [];
for (const hash of hashes) raws.push(await pub.request({ method: "eth_getRawTransactionByHash", params: [hash] }));
const reverted = await pub.request({ method: "evm_revert", params: [snapshot] });
if (!reverted) throw new Error("the chain was not put back before the fan-out");
const rawStart = Date.now();
const sent = [];
for (const raw of raws) sent.push(await pub.request({ method: "eth_sendRawTransaction", params: [raw] }));
for (const hash of sent) {
  const receipt = await pub.waitForTransactionReceipt({ hash, pollingInterval: 5, timeout: 15000 }).catch(async (e) => {
    const pool = await pub.request({ method: "txpool_inspect", params: [] }).catch(() => null);
    const tx = await pub.request({ method: "eth_getTransactionByHash", params: [hash] });
    const block = await pub.getBlock();
    console.error(JSON.stringify({ pool, tx, baseFee: String(block.baseFeePerGas), number: String(block.number) }, null, 1).slice(0, 3000));
    throw e;
  });
  if (receipt.status !== "success") throw new Error(`a replayed redemption reverted: ${hash}`);
}
const rawMs = Date.now() - rawStart;
summary.transactions = raws.length;
summary.rawMs = rawMs;
// Rates in delegators a second: the gateway's, and the node's for the same transactions.
summary.rawPerSecond = Number((n / (rawMs / 1000)).toFixed(1));
summary.ratio = Number((elapsedRatio(rawMs, elapsed)).toFixed(3));
console.log(JSON.stringify(summary));
