// The fan-out benchmark's driver (`./scripts/bench fanout`): against a running gateway on the devnet,
// brings the agent's delegators up to N (fresh EOAs, funded by anvil_setBalance and the devnet
// USDC's mint, upgraded with EIP-7702 to the Delegation Framework's stateless DeleGator, each with
// an active `swap` delegation to the agent made through the gateway and signed with viem), submits
// one `swap` intent addressing all of them, and times it from the submit to `completed`.
//
//   node tests/e2e/fanout_bench.mjs --gateway URL --key AGENT_KEY --devnet devnet.json --n N
//        [--have K]   (K delegators exist already: only N - K are made)
//        [--pids gateway:PID,node:PID [--perf DIR]]   (CPU per side; with --perf, `perf record` of each)
//
// Then the node's own rates for the same transactions: the chain is put back to a snapshot taken
// before the submit and the gateway's own signed transactions are handed to it directly, three
// times: a block's worth at a time with automining off, each mined in a block as full as the gas
// limit allows (the node's capacity for them); one at a time with automining on, each mined before
// the next is sent (one transaction a block); and in the gateway's paced runs with automining on
// (the hand-over's protocol without the gateway). Not on a node mining on a clock: there the last
// two would measure the clock.
//
// Prints one JSON line: {n, made, setupMs, submitToCompletedMs, executions, distinctWallets,
// succeeded, failed, perSecond, gathered (the gateway's gathered batches by kind: how many, mean
// size), cpuMsPerDelegator (the CPU the gateway and the node spent on the
// fan-out, per delegator, with --pids gateway:PID,node:PID), rpcPerExecution (the gateway's node calls by method, per delegator),
// blocks (the node's blocks for the gateway's transactions), blockSizes (how many held how many), transactions, fullBlocks, rawMs,
// rawNodeCpuMsPerDelegator (the node's CPU for the full-block replay, with --pids),
// rawPerSecond, ratio, oneAtATimeMs, oneAtATimePerSecond, oneAtATimeRatio (not on a node mining on a
// clock), pacedReplay ({ms, perSecond, ratio, blocks, emptyBlocks}: the same transactions handed over as the gateway's paced
// hand-over does, with automining on; not on a clock), emptyBlockNodeCpuMs (the node's CPU for a block holding nothing, with --pids), mining ("automine" or "clock"), gasLimitPerTx and gasUsedPerTx (means),
// checkNodeCpuMsPerDelegator (the node's CPU for simulating the same redemptions as the gateway
// does before signing, with --pids) and checkedRatioBound (the full-block replay's node CPU over
// that plus the check's); with FANOUT_CHECK_SHAPES set, checkShapes: the check's node CPU a
// delegator in other shapes, "calls a request/calls a simulated block"}, and on stderr where the setup's time went (and, with FANOUT_TIMELINE set,
// the node's head and pool every 10 ms during the fan-out). Exits 1 if the intent does not complete with exactly N
// executions, one per delegator, each succeeded.
import fs from "node:fs";
import { spawn } from "node:child_process";
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

// Where setup time goes (ms summed over the delegators made), printed on stderr.
const phases = { upgrade: 0, create: 0, activate: 0 };
const timed = async (phase, work) => {
  const t = Date.now();
  try { return await work(); } finally { phases[phase] += Date.now() - t; }
};

async function makeDelegator() {
  const account = privateKeyToAccount(generatePrivateKey());
  await pub.request({ method: "anvil_setBalance", params: [account.address, "0xDE0B6B3A7640000"] });
  const wallet = createWalletClient({ account, chain, transport: http(devnet.rpcUrl) });
  const authorization = await wallet.signAuthorization({ account, contractAddress: devnet.contracts.EIP7702StatelessDeleGatorImpl, executor: "self" });
  await timed("upgrade", async () => {
    const upgraded = await wallet.sendTransaction({ authorizationList: [authorization], to: account.address, data: "0x", gas: 200000n });
    const receipt = await pub.waitForTransactionReceipt({ hash: upgraded, pollingInterval: 20 });
    if (receipt.status !== "success") throw new Error("the EIP-7702 upgrade reverted");
  });
  const created = await timed("create", () => gateway("/api/v1/agent/delegation/create", { agentApiKey: args.key, delegator: account.address, chainId: devnet.chainId, action: "swap" }));
  const typed = created.data.typedData;
  const message = { ...typed.message, salt: BigInt(typed.message.salt) };
  const domain = { ...typed.domain, chainId: Number(typed.domain.chainId) };
  const types = Object.fromEntries(Object.entries(typed.types).filter(([name]) => name !== "EIP712Domain"));
  const signature = await account.signTypedData({ domain, types, primaryType: typed.primaryType, message });
  await timed("activate", () => gateway("/api/v1/agent/delegation/activate", { agentApiKey: args.key, delegation: { ...created.data.delegation, signature }, chainId: devnet.chainId }));
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
for (const hash of mints) await pub.waitForTransactionReceipt({ hash, pollingInterval: 20 });
const setupMs = Date.now() - setupStart;
console.error(JSON.stringify({ n, setupMsByPhase: phases }));

// The chain as it is before the fan-out: the same signed transactions are replayed on it below.
const snapshot = await pub.request({ method: "evm_snapshot", params: [] });
// Read from the node each time (viem caches the block number for a few seconds).
const blockNumber = async () => BigInt(await pub.request({ method: "eth_blockNumber", params: [] }));
const receiptOf = (hash) => pub.request({ method: "eth_getTransactionReceipt", params: [hash] });
const firstBlock = (await blockNumber()) + 1n;
// The gateway's RPC calls by method (its /metrics), read before and after the fan-out.
// Failed calls (retried or not) count under `failed:<method>`.
const rpcCalls = async () => {
  const text = await (await fetch(`${args.gateway}/metrics`)).text();
  const calls = {};
  for (const m of text.matchAll(/^actiongate_rpc_(calls|errors)_total\{([^}]*)\} (\d+)/gm)) {
    const method = /method="([^"]+)"/.exec(m[2])?.[1] ?? "?";
    const name = m[1] === "errors" ? `failed:${method}` : method;
    calls[name] = (calls[name] ?? 0) + Number(m[3]);
  }
  return calls;
};
// CPU time (ms) the gateway and the node used, from /proc (`--pids gateway:PID,node:PID`), read
// before and after the fan-out: what each side spent on it.
const pids = Object.fromEntries((args.pids ?? "").split(",").filter(Boolean).map((p) => p.split(":")));
const cpuMs = () => Object.fromEntries(Object.entries(pids).map(([who, pid]) => {
  try {
    // utime and stime, in clock ticks (100 a second on Linux), after the parenthesised command name.
    const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return [who, (Number(fields[11]) + Number(fields[12])) * 10];
  } catch { return [who, NaN]; }
}));
// The gateway's gathered batches by kind (its /metrics): how many ran and their total size.
const batches = async () => {
  const text = await (await fetch(`${args.gateway}/metrics`)).text();
  const kinds = {};
  for (const m of text.matchAll(/^actiongate_gathered_batch_size_(sum|count)\{kind="([^"]+)"\} ([0-9.e+]+)/gm)) {
    kinds[m[2]] = { ...(kinds[m[2]] ?? {}), [m[1]]: Number(m[3]) };
  }
  return kinds;
};
// The gateway's checks in its own EVM by result, and their state reads (read ahead, or asked while
// the EVM waited), from its /metrics (FANOUT_CHECK=local or shadow).
const localChecks = async () => {
  const text = await (await fetch(`${args.gateway}/metrics`)).text();
  const counts = {};
  for (const m of text.matchAll(/^actiongate_local_checks_total\{[^}]*result="([^"]+)"\} (\d+)/gm)) counts[m[1]] = Number(m[2]);
  for (const m of text.matchAll(/^actiongate_local_check_reads_total\{[^}]*read="([^"]+)"\} (\d+)/gm)) counts[`reads_${m[1]}`] = Number(m[2]);
  return counts;
};
// With --perf DIR (and --pids): each side sampled by `perf record` during the fan-out only, into
// DIR/<who>.data (read with `perf report -i`), to see where its CPU goes.
const profilers = args.perf
  ? Object.entries(pids).map(([who, pid]) => spawn("perf", ["record", "-q", "-F", "499", "-g", "-p", pid, "-o", `${args.perf}/${who}.data`], { stdio: "ignore" }))
  : [];
if (profilers.length) await new Promise((resolve) => setTimeout(resolve, 500));
const batchesBefore = await batches();
const localBefore = await localChecks();
const callsBefore = await rpcCalls();
const cpuBefore = cpuMs();
// How the node mines: automining (each transaction as it arrives, anvil's default) or on a clock.
const automining = await pub.request({ method: "anvil_getAutomine", params: [] });
const submitted = Date.now();
// With FANOUT_TIMELINE set: the node's pool and head read every 10 ms during the fan-out, printed on
// stderr as {timeline: [[ms since the submit, head, pending, queued], ...]} (when the gateway's
// transactions reach the node, and when they are mined).
const timeline = [];
let watching = !!process.env.FANOUT_TIMELINE;
const watcher = (async () => {
  while (watching) {
    const [head, pool] = await Promise.all([blockNumber(), pub.request({ method: "txpool_status", params: [] })]);
    const row = [Date.now() - submitted, Number(head), Number(BigInt(pool.pending)), Number(BigInt(pool.queued))];
    const last = timeline[timeline.length - 1];
    if (!last || last[1] !== row[1] || last[2] !== row[2] || last[3] !== row[3]) timeline.push(row);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
})();
// With FANOUT_CPU set (and --pids): each side's CPU every 50 ms of the fan-out, from /proc alone (it
// asks nothing of the node or the gateway), printed on stderr as {cpu: [[ms since the submit,
// gateway ms, node ms], ...]}, each the CPU spent in that interval (100 = a whole core): when a
// core sits idle, and whose.
const cpuTimeline = [];
let sampling = !!process.env.FANOUT_CPU && Object.keys(pids).length > 0;
const sampler = (async () => {
  let last = cpuMs();
  while (sampling) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const now = cpuMs();
    cpuTimeline.push([Date.now() - submitted, ...["gateway", "node"].map((who) => (now[who] ?? 0) - (last[who] ?? 0))]);
    last = now;
  }
})();
const intent = await gateway("/api/v1/agent/execute-intent", {
  agentApiKey: args.key, action: "swap", chainId: devnet.chainId, idempotencyKey: `fanout-${n}-${Date.now()}`,
  params: { tokenIn: "USDC", tokenOut: "WETH", amountIn: "1", slippageBps: 500 },
});
// The end, waited for with the status route's long poll (waitSeconds): the gateway answers when its
// runner ends the intent, so the driver neither misses the moment nor costs the gateway a read of all
// N executions every few milliseconds (polling every 20 ms did: ~0.45 ms of the gateway's CPU a
// delegator at N=1,000). A gateway without it (an older binary: 400) is polled every 20 ms.
let status;
let longPoll = true;
for (;;) {
  const wait = longPoll ? "&waitSeconds=30" : "";
  const r = await fetch(`${args.gateway}/api/v1/agent/execute-intent/status?intentId=${intent.intentId}${wait}`, { headers: { "x-agent-api-key": args.key } });
  if (longPoll && r.status === 400) { longPoll = false; continue; }
  status = await r.json();
  if (status.status === "completed" || status.status === "failed") break;
  if (!longPoll) await new Promise((resolve) => setTimeout(resolve, 20));
}
const waitedBy = longPoll ? "long poll" : "polling every 20 ms";
watching = false;
sampling = false;
await Promise.all([watcher, sampler]);
if (timeline.length) console.error(JSON.stringify({ timeline }));
if (cpuTimeline.length) console.error(JSON.stringify({ cpu: cpuTimeline }));
const elapsed = Date.now() - submitted;
const cpuAfter = cpuMs();
await Promise.all(profilers.map((p) => new Promise((resolve) => { p.on("exit", resolve); p.kill("SIGINT"); })));
const results = status.results ?? status.executions ?? [];
const succeeded = results.filter((e) => e.success === true).length;
const distinct = new Set(results.map((e) => e.walletAddress.toLowerCase())).size;
const summary = {
  n, made: made.length, setupMs, mining: automining ? "automine" : "clock", submitToCompletedMs: elapsed, waitedBy, status: status.status,
  executions: status.total, distinctWallets: distinct, succeeded, failed: results.length - succeeded,
  perSecond: Number((n / (elapsed / 1000)).toFixed(1)),
  cpuMsPerDelegator: Object.fromEntries(Object.keys(pids).map((who) => [who, Number(((cpuAfter[who] - cpuBefore[who]) / n).toFixed(2))])),
  localChecks: Object.fromEntries(Object.entries(await localChecks()).map(([r, c]) => [r, c - (localBefore[r] ?? 0)])),
};
if (status.status !== "completed" || summary.executions !== n || succeeded !== n || distinct !== n) {
  console.log(JSON.stringify(summary));
  // Why executions failed: each code with the end of its message (the reason; the start names the
  // user), how many times (the intent's body holds all N).
  const reasons = {};
  for (const e of results.filter((e) => e.success !== true)) {
    const why = `${e.code ?? e.error}: ...${String(e.message ?? "").slice(-240)}`;
    reasons[why] = (reasons[why] ?? 0) + 1;
  }
  console.error(JSON.stringify({ status: status.status, failures: reasons }));
  process.exit(1);
}
const callsAfter = await rpcCalls();
summary.rpcPerExecution = Object.fromEntries(Object.entries(callsAfter)
  .map(([m, c]) => [m, Number(((c - (callsBefore[m] ?? 0)) / n).toFixed(2))])
  .filter(([, c]) => c > 0));
const batchesAfter = await batches();
// Per kind: batches run during the fan-out and their mean size.
summary.gathered = Object.fromEntries(Object.entries(batchesAfter).map(([kind, a]) => {
  const b = batchesBefore[kind] ?? { sum: 0, count: 0 };
  const count = a.count - (b.count ?? 0);
  return [kind, { batches: count, mean: count ? Number(((a.sum - (b.sum ?? 0)) / count).toFixed(1)) : 0 }];
}).filter(([, v]) => v.batches > 0));
// The median and largest gathered batch by kind (the gateway's summary since it started): a mean
// of 2 can be all pairs, or singles and a few large ones (plan reads at N=100: median 1, largest 31).
{
  const text = await (await fetch(`${args.gateway}/metrics`)).text();
  const sizes = {};
  for (const m of text.matchAll(/^actiongate_gathered_batch_size\{kind="([^"]+)",quantile="(0\.5|1)"\} ([0-9.e+]+)/gm)) {
    sizes[m[1]] = { ...(sizes[m[1]] ?? {}), [m[2] === "1" ? "largest" : "median"]: Math.round(Number(m[3])) };
  }
  for (const [kind, q] of Object.entries(sizes)) if (summary.gathered?.[kind]) Object.assign(summary.gathered[kind], q);
}
// The gateway's side, on stderr, before the replay (which can fail on its own).
console.error(JSON.stringify(summary));
// The node's own rates for the same transactions: the chain put back as it was before the fan-out,
// the gateway's signed redeemDelegations (the same bytes, the same nonces) handed straight to it.
// Every transaction mined since the snapshot is the gateway's (one per delegator: its approval and
// its swap redeemed together), in the order it sent them.
const lastBlock = await blockNumber();
const hashes = [];
const sizes = [];
const baseFees = [];
for (let b = firstBlock; b <= lastBlock; b++) {
  const block = await pub.getBlock({ blockNumber: b });
  hashes.push(...block.transactions);
  sizes.push(block.transactions.length);
  baseFees.push(Number(block.baseFeePerGas ?? 0n));
}
// How many blocks the node made of them (a block per transaction, or several a block), and how
// full they were: how many blocks held none (a node mining on a clock mines empty ones), 1, 2-4, 5-16,
// 17-64 and more of them.
summary.blocks = Number(lastBlock - firstBlock + 1n);
const bands = [[0, 0], [1, 1], [2, 4], [5, 16], [17, 64], [65, Infinity]];
summary.blockSizes = Object.fromEntries(bands.map(([lo, hi]) => [hi === Infinity ? `${lo}+` : lo === hi ? `${lo}` : `${lo}-${hi}`, sizes.filter((s) => s >= lo && s <= hi).length]));
// In nonce order, and checked to be the agent wallet's consecutive nonces (a gap would stall the
// replay, and would mean the gateway's transactions are not all here).
const txs = [];
for (const hash of hashes) txs.push(await pub.request({ method: "eth_getTransactionByHash", params: [hash] }));
txs.sort((a, b) => Number(BigInt(a.nonce) - BigInt(b.nonce)));
const senders = new Set(txs.map((t) => t.from.toLowerCase()));
for (let i = 1; i < txs.length; i++) {
  if (BigInt(txs[i].nonce) !== BigInt(txs[i - 1].nonce) + 1n || senders.size !== 1) {
    throw new Error(`the mined transactions are not one wallet's consecutive nonces: senders ${[...senders]}, nonce ${BigInt(txs[i - 1].nonce)} then ${BigInt(txs[i].nonce)}`);
  }
}
// The gas each redemption was given (its limit: what a block is packed by) and used (its mined
// receipt), on average.
const gasUsed = [];
for (const t of txs) gasUsed.push(BigInt((await receiptOf(t.hash)).gasUsed));
summary.gasLimitPerTx = Number(txs.reduce((sum, t) => sum + BigInt(t.gas), 0n) / BigInt(txs.length));
summary.gasUsedPerTx = Number(gasUsed.reduce((sum, g) => sum + g, 0n) / BigInt(txs.length));
// With FANOUT_TIMELINE set: each of the fan-out's blocks as [transactions, base fee], and the
// lowest and highest fee cap the gateway signed, on stderr.
if (process.env.FANOUT_TIMELINE) {
  const caps = txs.map((t) => Number(BigInt(t.maxFeePerGas ?? t.gasPrice)));
  console.error(JSON.stringify({ blocks: sizes.map((size, i) => [size, baseFees[i]]), feeCaps: [Math.min(...caps), Math.max(...caps)] }));
}
const raws = [];
for (const t of txs) raws.push(await pub.request({ method: "eth_getRawTransactionByHash", params: [t.hash] }));
const reverted = await pub.request({ method: "evm_revert", params: [snapshot] });
if (!reverted) throw new Error("the chain was not put back before the fan-out");
// A revert leaves anvil's pool as it was: whatever an earlier replay left unmined goes.
const emptyPool = () => pub.request({ method: "anvil_dropAllTransactions", params: [] });
await emptyPool();
// The node's CPU for the check the gateway makes before it signs anything: the same redemptions
// simulated at the state before the fan-out, as the gateway simulates them (eth_simulateV1, requests
// of 64 calls in simulated blocks of 32, one request at a time). A sender that signs without checking
// (the replays below) never pays it; the gateway pays it on the same node that mines.
if ("node" in pids) {
  const calls = txs.map((t) => ({ from: t.from, to: t.to, input: t.input, value: t.value }));
  const at = Math.floor(Date.now() / 1000) + 5;
  // The node's CPU a delegator for simulating them all, `perRequest` calls a request in simulated
  // blocks of `perBlock`, one request at a time; every redemption must succeed, as it did.
  const simulated = async (perRequest, perBlock) => {
    const before = cpuMs().node;
    for (let i = 0; i < calls.length; i += perRequest) {
      const chunk = calls.slice(i, i + perRequest);
      const blocks = [];
      for (let j = 0; j < chunk.length; j += perBlock) blocks.push({ blockOverrides: { time: `0x${(at + blocks.length).toString(16)}` }, calls: chunk.slice(j, j + perBlock) });
      const answer = await pub.request({ method: "eth_simulateV1", params: [{ blockStateCalls: blocks }, "latest"] });
      if (answer.flatMap((b) => b.calls).some((c) => c.status !== "0x1")) throw new Error("a simulated redemption reverted");
    }
    return Number(((cpuMs().node - before) / n).toFixed(2));
  };
  summary.checkNodeCpuMsPerDelegator = await simulated(64, 32);
  if (process.env.FANOUT_CHECK_SHAPES) {
    // The same check in other shapes ("calls a request/calls a simulated block"); a shape the node
    // refuses says why.
    summary.checkShapes = {};
    for (const [perRequest, perBlock] of [[64, 64], [64, 16], [64, 8], [128, 32], [16, 16], [1, 1]]) {
      summary.checkShapes[`${perRequest}/${perBlock}`] = await simulated(perRequest, perBlock)
        .catch((e) => String(e.shortMessage ?? e.message).slice(0, 80));
    }
  }
}
// Taken again for the second replay (a snapshot is used up when reverted to).
const again = await pub.request({ method: "evm_snapshot", params: [] });
/// Waits until `hash` is mined, polling every millisecond straight to the node; false after a minute.
const minedBy = async (hash) => {
  const deadline = Date.now() + 60000;
  while (!(await receiptOf(hash))) {
    if (Date.now() > deadline) {
      const mined = (await pub.getTransactionCount({ address: txs[0].from, blockTag: "latest" })) - Number(BigInt(txs[0].nonce));
      console.error(JSON.stringify({ unmined: hash, mined, of: txs.length }));
      return false;
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return true;
};
// Every replayed redemption must succeed, as the gateway's did.
const checkReceipts = async (hashes) => {
  for (const hash of hashes) {
    const receipt = await receiptOf(hash);
    if (!receipt || receipt.status !== "0x1") throw new Error(`a replayed redemption did not succeed: ${hash}`);
  }
};
// First, the node's capacity for these transactions: automining off, the transactions handed to
// the pool in JSON-RPC batches of 50 (nonce order), a block's worth at a time (below), each
// block's worth mined (`evm_mine`, as full as the block gas limit allows) before the next is
// handed over, until the last one is in. With automining on, anvil at N=1,000 dropped part of a
// fast replay from its pool (transactions handed over while a block was being mined vanished,
// `txpool_content` empty, nonces behind them stuck): the earlier replays that never ended. On a
// node mining on a clock (FANOUT_BLOCK_TIME) the clock keeps mining beside the `evm_mine`s: the
// blocks are as full as the pool allows either way.
//
// The pool is given a block's worth at a time, as the node packs a block: a transaction goes in
// while the gas its block's earlier ones used (their receipts' through the gateway: the same
// transactions on the same state) plus its own limit is within the block's gas limit. Handed all
// 1,000 at once, anvil 1.7.1's block builder skipped the first that did not fit, kept trying the
// ones after it, and when a later one with a slightly lower limit did fit, refused it as "nonce
// too high" and dropped it from the pool with every later nonce (read in its executor and pool:
// `remove_invalid` takes a transaction's descendants with it): the replays that ended with the pool
// empty and 252-434 of 1,000 mined.
const blockGasLimit = BigInt((await pub.getBlock({ blockTag: "latest" })).gasLimit);
const chunks = [];
{
  let start = 0;
  let used = 0n;
  for (let i = 0; i < raws.length; i++) {
    if (i > start && used + BigInt(txs[i].gas) > blockGasLimit) {
      chunks.push([start, i]);
      start = i;
      used = 0n;
    }
    used += gasUsed[i];
  }
  chunks.push([start, raws.length]);
}
if (automining) await pub.request({ method: "evm_setAutomine", params: [false] });
// Full blocks raise the base fee 12.5 % each; after six or seven of them it passes the fee cap the
// gateway signed for (seen: cap 15 wei, base fee 7 at the snapshot) and anvil drops the rest from
// its pool. The replay measures mining, not the fee market: each block's base fee is held at the
// snapshot's.
const baseFee = (await pub.getBlock({ blockTag: "latest" })).baseFeePerGas;
let fullBlocks = 0;
const mine = async () => {
  if (baseFee !== null && baseFee !== undefined) {
    await pub.request({ method: "anvil_setNextBlockBaseFeePerGas", params: [`0x${baseFee.toString(16)}`] });
  }
  await pub.request({ method: "evm_mine", params: [] });
  fullBlocks++;
};
const rawCpuBefore = cpuMs();
const rawStart = Date.now();
const sent = [];
for (const [from, to] of chunks) {
  for (let i = from; i < to; i += 50) {
    const batch = raws.slice(i, Math.min(i + 50, to)).map((raw, j) => ({ jsonrpc: "2.0", id: i + j, method: "eth_sendRawTransaction", params: [raw] }));
    const r = await fetch(devnet.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(batch) });
    const answers = (await r.json()).sort((a, b) => a.id - b.id);
    for (const a of answers) {
      if (a.error) throw new Error(`the node refused a replayed transaction: ${JSON.stringify(a.error)}`);
      sent.push(a.result);
    }
  }
  await mine();
}
// Whatever a block left over (a transaction that used more gas here than through the gateway).
while (!(await receiptOf(sent[sent.length - 1]))) {
  await mine();
  if (fullBlocks > raws.length) {
    // Why: how many were mined, what the pool holds, and the fees against the base fee now.
    const mined = (await pub.getTransactionCount({ address: txs[0].from, blockTag: "latest" })) - Number(BigInt(txs[0].nonce));
    const pool = await pub.request({ method: "txpool_status", params: [] });
    const base = (await pub.getBlock({ blockTag: "latest" })).baseFeePerGas;
    const next = txs[mined];
    console.error(JSON.stringify({ replayStuck: { mined, of: txs.length, pool, baseFee: String(base), nextMaxFee: next ? String(BigInt(next.maxFeePerGas ?? next.gasPrice)) : null, lowestMaxFee: String(txs.reduce((m, t) => { const f = BigInt(t.maxFeePerGas ?? t.gasPrice); return f < m ? f : m; }, BigInt(txs[0].maxFeePerGas ?? txs[0].gasPrice))) } }));
    throw new Error("the replayed transactions were not mined");
  }
}
const rawMs = Date.now() - rawStart;
// The node's CPU per delegator for the replay (sending, pooling and mining in full blocks): the
// floor under what it spends on the same transactions through the gateway.
const rawCpuAfter = cpuMs();
if ("node" in pids) {
  summary.rawNodeCpuMsPerDelegator = Number(((rawCpuAfter.node - rawCpuBefore.node) / n).toFixed(2));
  // The ratio a checking sender could reach if the node did the mining and the checks one after
  // the other at these costs, with nothing else (no receipts read, no block but full ones): the
  // node's full-block CPU over that plus the check's.
  if (summary.checkNodeCpuMsPerDelegator) {
    summary.checkedRatioBound = Number((summary.rawNodeCpuMsPerDelegator / (summary.rawNodeCpuMsPerDelegator + summary.checkNodeCpuMsPerDelegator)).toFixed(3));
  }
}
if (automining) await pub.request({ method: "evm_setAutomine", params: [true] });
await checkReceipts(sent);
summary.fullBlocks = fullBlocks;
// Then the node mining the same transactions one a block, as it mines the gateway's (automining,
// each transaction handed over once the one before it is mined: what the node does with a wallet's
// transactions handed to it one at a time).
if (!(await pub.request({ method: "evm_revert", params: [again] }))) throw new Error("the chain was not put back for the second replay");
await emptyPool();
// Taken again for the paced replay below.
const third = await pub.request({ method: "evm_snapshot", params: [] });
let oneMs = null;
if (automining) {
  const oneStart = Date.now();
  const oneByOne = [];
  for (const raw of raws) {
    const hash = await pub.request({ method: "eth_sendRawTransaction", params: [raw] });
    oneByOne.push(hash);
    if (!(await minedBy(hash))) break;
  }
  if (oneByOne.length === raws.length && (await receiptOf(oneByOne[oneByOne.length - 1]))) {
    oneMs = Date.now() - oneStart;
    await checkReceipts(oneByOne);
  }
}
// Then the gateway's own paced hand-over without the gateway (outbox.rs, `hand-over = "paced"`):
// automining on, runs of 64 in nonce order, each run's rest in one JSON-RPC batch highest nonce
// first as soon as the run before has its first with the node (so the node takes the rest in while
// it mines the run before: none of it is executable before its own first arrives), then its first
// alone once the wallet's nonce at the latest block says the run before is mined (asked every 2 ms).
// What the node's mining and the hand-over's protocol cost with nothing of the gateway around them
// (no checks, no receipts, no store): the floor under the fan-out for this protocol on this node.
// Its blocks and empty blocks beside it. With FANOUT_PACED_VARIANTS=K, K more of it alternated with
// K of the protocol before stop 62 (`between`: each run's rest handed over only once the run
// before is mined), on stderr as {pacedVariants: [[protocol, ms, blocks, empty blocks], ...]}.
const pacedReplay = async (overlap) => {
  const wallet = txs[0].from;
  const base = Number(BigInt(txs[0].nonce));
  const minedNonce = async () => Number(await pub.request({ method: "eth_getTransactionCount", params: [wallet, "latest"] }));
  const send = async (batch) => {
    const body = batch.map((raw, j) => ({ jsonrpc: "2.0", id: j, method: "eth_sendRawTransaction", params: [raw] }));
    const r = await fetch(devnet.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    for (const a of await r.json()) if (a.error) throw new Error(`the node refused a paced transaction: ${JSON.stringify(a.error)}`);
  };
  const until = async (nonce) => {
    const deadline = Date.now() + 60000;
    while ((await minedNonce()) < nonce) {
      if (Date.now() > deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    return true;
  };
  const fromBlock = Number(await pub.request({ method: "eth_blockNumber", params: [] }));
  const start = Date.now();
  let done = true;
  const runs = [];
  for (let i = 0; i < raws.length; i += 64) runs.push([i, raws.slice(i, Math.min(i + 64, raws.length))]);
  for (let k = 0; k < runs.length && done; k++) {
    const [i, run] = runs[k];
    // The rest before the wait (overlap) or after it (between); the first after it.
    if (!overlap && !(done = await until(base + i))) break;
    if (run.length > 1) await send(run.slice(1).reverse());
    if (overlap && !(done = await until(base + i))) break;
    await send([run[0]]);
  }
  done = done && (await until(base + raws.length));
  const ms = Date.now() - start;
  const toBlock = Number(await pub.request({ method: "eth_blockNumber", params: [] }));
  let empty = 0;
  for (let b = fromBlock + 1; b <= toBlock; b++) {
    const block = await pub.request({ method: "eth_getBlockByNumber", params: [`0x${b.toString(16)}`, false] });
    if (block.transactions.length === 0) empty++;
  }
  return done ? { ms, perSecond: Number((n / (ms / 1000)).toFixed(1)), ratio: Number(elapsedRatio(ms, elapsed).toFixed(3)), blocks: toBlock - fromBlock, emptyBlocks: empty } : { unmined: true, blocks: toBlock - fromBlock };
};
let paced = null;
if (automining) {
  if (!(await pub.request({ method: "evm_revert", params: [third] }))) throw new Error("the chain was not put back for the paced replay");
  await emptyPool();
  let fourth = process.env.FANOUT_PACED_VARIANTS ? await pub.request({ method: "evm_snapshot", params: [] }) : null;
  paced = await pacedReplay(true);
  if (fourth) {
    const variants = [];
    for (let rep = 0; rep < Number(process.env.FANOUT_PACED_VARIANTS); rep++) {
      for (const overlap of [false, true]) {
        if (!(await pub.request({ method: "evm_revert", params: [fourth] }))) throw new Error("the chain was not put back for a paced variant");
        await emptyPool();
        fourth = await pub.request({ method: "evm_snapshot", params: [] });
        const r = await pacedReplay(overlap);
        variants.push([overlap ? "overlap" : "between", r.ms, r.blocks, r.emptyBlocks, r.unmined ? "UNMINED" : ""]);
      }
    }
    console.error(JSON.stringify({ pacedVariants: variants }));
  }
}
summary.pacedReplay = paced;
summary.transactions = raws.length;
summary.rawMs = rawMs;
// Rates in delegators a second: the gateway's, and the node's for the same transactions.
summary.rawPerSecond = rawMs === null ? null : Number((n / (rawMs / 1000)).toFixed(1));
summary.ratio = rawMs === null ? null : Number((elapsedRatio(rawMs, elapsed)).toFixed(3));
summary.oneAtATimeMs = oneMs;
summary.oneAtATimePerSecond = oneMs === null ? null : Number((n / (oneMs / 1000)).toFixed(1));
summary.oneAtATimeRatio = oneMs === null ? null : Number((elapsedRatio(oneMs, elapsed)).toFixed(3));
// What a block costs the node whatever it holds (anvil computes each block's state root over the
// whole state, and keeps a copy of the state per block it keeps): 20 empty blocks mined on the
// state after the fan-out, the node's CPU a block. A fan-out that needs more blocks than the
// replay's full ones pays this for each.
if ("node" in pids) {
  const before = cpuMs().node;
  for (let i = 0; i < 20; i++) await pub.request({ method: "evm_mine", params: [] });
  summary.emptyBlockNodeCpuMs = Number(((cpuMs().node - before) / 20).toFixed(1));
}
console.log(JSON.stringify(summary));
