// Across V3 on the devnet: a peer anvil chain (11155420) beside the devnet's own, with its own USDC
// (the devnet's EIP-3009 stablecoin) and WETH9; on each chain Across's published Ethereum_SpokePool
// (from @across-protocol/contracts 5.0.27, packed and checked by scripts/devnet) behind an ERC1967Proxy
// initialised by the devnet's deployer (the spoke's admin); and a relayer, as Across's relayers are
// permissionless: it watches FundsDeposited on each chain and calls fillRelay on the destination from
// its own funded account after a delay. Its control endpoint (HTTP, JSON):
//   GET  /status                       {paused, delayMs, pending, filled}
//   POST /pause, POST /resume          stop and start filling (deposits seen meanwhile wait)
//   POST /delay {ms}                   the delay before a fill
//   POST /refund {chainId, depositId}  refunds an expired, unfilled deposit to its depositor through the
//                                      origin spoke's admin path: relayRootBundle with a one-leaf relayer
//                                      refund root, then executeRelayerRefundLeaf; {txHash, rootBundleId}
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import {
  createPublicClient, createWalletClient, encodeAbiParameters, encodeFunctionData, getAddress, http as transport,
  keccak256, maxUint256, pad, parseEther, parseEventLogs, parseUnits, toHex, zeroAddress,
} from "viem";
import { mnemonicToAccount } from "viem/accounts";

export const PEER_CHAIN_ID = 11155420;
// The spoke's buffers, as Across deploys Ethereum_SpokePool: quotes up to an hour old, fills up to six
// hours after the deposit.
const QUOTE_TIME_BUFFER = 3600;
const FILL_DEADLINE_BUFFER = 21600;
// The relayer's account: an index no test account uses.
const RELAYER_INDEX = 101;
const SEND_GAS = 6_000_000n;

const b32 = (a) => pad(a, { size: 32 });
const addressOf = (word) => getAddress(`0x${word.slice(-40)}`);

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function artifacts(here, fail) {
  const read = (name) => {
    const file = path.join(here, "packs", "across", `${name}.json`);
    if (!fs.existsSync(file)) fail(`Across's ${name} artifact is missing: run ./scripts/devnet --install`);
    const a = JSON.parse(fs.readFileSync(file, "utf8"));
    return { abi: a.abi, bytecode: a.bytecode };
  };
  return { spoke: read("Ethereum_SpokePool"), proxy: read("ERC1967Proxy") };
}

// One chain's clients and send helpers.
function chainOf(chainId, rpcUrl, fail) {
  const chain = { id: chainId, name: `devnet-${chainId}`, nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } };
  const pub = createPublicClient({ chain, transport: transport(rpcUrl), pollingInterval: 20 });
  const wallet = (account) => createWalletClient({ account, chain, transport: transport(rpcUrl) });
  const deploy = async (w, art, args = []) => {
    const hash = await w.deployContract({ abi: art.abi, bytecode: art.bytecode, args, gas: 29_000_000n });
    const r = await pub.waitForTransactionReceipt({ hash });
    if (r.status !== "success" || !r.contractAddress) fail(`a deployment on chain ${chainId} reverted`);
    return getAddress(r.contractAddress);
  };
  const send = async (w, address, abi, functionName, args = [], value) => {
    const hash = await w.writeContract({ address, abi, functionName, args, value, gas: SEND_GAS });
    const r = await pub.waitForTransactionReceipt({ hash });
    if (r.status !== "success") throw new Error(`${functionName} reverted on chain ${chainId}`);
    return r;
  };
  return { chainId, rpcUrl, pub, wallet, deploy, send };
}

async function startPeer({ anvilBin, mnemonic, accounts, fail }) {
  const port = await freePort();
  const proc = spawn(anvilBin, ["--chain-id", String(PEER_CHAIN_ID), "--port", String(port), "--host", "127.0.0.1",
    "--accounts", String(accounts), "--mnemonic", mnemonic, "--balance", "10000", "--silent",
    ...(process.env.DEVNET_ANVIL_ARGS ?? "").split(" ").filter(Boolean)], { stdio: ["ignore", "ignore", "inherit"] });
  process.on("exit", () => proc.kill("SIGKILL"));
  let stopping = false;
  process.on("SIGTERM", () => { stopping = true; });
  process.on("SIGINT", () => { stopping = true; });
  proc.on("exit", (code) => {
    if (!stopping) fail(`the peer anvil exited (${code})`);
  });
  const c = chainOf(PEER_CHAIN_ID, `http://127.0.0.1:${port}`, fail);
  for (let i = 0; ; i++) {
    try {
      await c.pub.getChainId();
      break;
    } catch {
      if (i > 100) fail("the peer anvil does not answer");
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return c;
}

// Deploys a spoke behind its proxy on chain `c`, initialised by `admin`.
async function deploySpoke(c, admin, art, weth) {
  const w = c.wallet(admin);
  const impl = await c.deploy(w, art.spoke, [weth, QUOTE_TIME_BUFFER, FILL_DEADLINE_BUFFER, zeroAddress]);
  const init = encodeFunctionData({ abi: art.spoke.abi, functionName: "initialize", args: [0, admin.address] });
  return c.deploy(w, art.proxy, [impl, init]);
}

const REFUND_LEAF = {
  type: "tuple",
  components: [
    { name: "amountToReturn", type: "uint256" },
    { name: "chainId", type: "uint256" },
    { name: "refundAmounts", type: "uint256[]" },
    { name: "leafId", type: "uint32" },
    { name: "l2TokenAddress", type: "address" },
    { name: "refundAddresses", type: "address[]" },
  ],
};

// The relayer and its control endpoint over the chains `chains` (chain id -> {c, spoke, usdc}).
async function startRelayer({ chains, relayer, admin, art, fail }) {
  const state = { paused: false, delayMs: Number(process.env.DEVNET_RELAYER_DELAY_MS ?? 1000), filled: 0 };
  const waiting = []; // deposits seen, not filled yet: {origin, event, dueAt}
  const lastBlock = new Map();
  // One send at a time per chain (one account, ordered nonces).
  const queues = new Map();
  const onChain = (chainId, job) => {
    const next = (queues.get(chainId) ?? Promise.resolve()).then(job, job);
    queues.set(chainId, next.catch(() => {}));
    return next;
  };
  const relayData = (origin, a) => ({
    depositor: a.depositor, recipient: a.recipient, exclusiveRelayer: a.exclusiveRelayer,
    inputToken: a.inputToken, outputToken: a.outputToken, inputAmount: a.inputAmount, outputAmount: a.outputAmount,
    originChainId: BigInt(origin), depositId: a.depositId, fillDeadline: a.fillDeadline,
    exclusivityDeadline: a.exclusivityDeadline, message: a.message,
  });
  const fill = async (origin, a) => {
    const dest = chains.get(Number(a.destinationChainId));
    if (!dest) return true; // not a chain of this devnet: never filled here
    const { c, spoke } = dest;
    const data = relayData(origin, a);
    const hash = await c.pub.readContract({ address: spoke, abi: art.spoke.abi, functionName: "getV3RelayHash", args: [data] });
    const status = await c.pub.readContract({ address: spoke, abi: art.spoke.abi, functionName: "fillStatuses", args: [hash] });
    if (status !== 0n && status !== 0) return true;
    // The time the next block would have (an idle chain's latest block is older).
    const now = (await c.pub.getBlock({ blockTag: "pending" })).timestamp;
    if (now > BigInt(a.fillDeadline)) return true; // expired: left for the refund
    await onChain(c.chainId, () => c.send(c.wallet(relayer), spoke, art.spoke.abi, "fillRelay", [data, BigInt(c.chainId), b32(relayer.address)]));
    state.filled += 1;
    return true;
  };
  const poll = async () => {
    for (const [chainId, { c, spoke }] of chains) {
      const head = await c.pub.getBlockNumber();
      const from = (lastBlock.get(chainId) ?? -1n) + 1n;
      if (from > head) continue;
      const logs = await c.pub.getContractEvents({ address: spoke, abi: art.spoke.abi, eventName: "FundsDeposited", fromBlock: from, toBlock: head });
      lastBlock.set(chainId, head);
      for (const log of logs) {
        waiting.push({ origin: chainId, args: log.args, dueAt: Date.now() + state.delayMs });
      }
    }
    if (state.paused) return;
    const due = waiting.filter((d) => d.dueAt <= Date.now());
    for (const d of due) {
      try {
        await fill(d.origin, d.args);
        waiting.splice(waiting.indexOf(d), 1);
      } catch (e) {
        console.error(`devnet relayer: fill of deposit ${d.args.depositId} from ${d.origin} failed: ${e?.shortMessage || e?.message}`);
        d.dueAt = Date.now() + 1000;
      }
    }
  };
  for (const [chainId] of chains) lastBlock.set(chainId, -1n);
  let busy = false;
  setInterval(async () => {
    if (busy) return;
    busy = true;
    try {
      await poll();
    } catch (e) {
      console.error(`devnet relayer: ${e?.shortMessage || e?.message}`);
    } finally {
      busy = false;
    }
  }, 200).unref();

  // The refund of an expired, unfilled deposit on its origin spoke, through the admin's root bundle
  // (once: a second ask is refused).
  const refunded = new Set();
  const refund = async (chainId, depositId) => {
    const origin = chains.get(chainId);
    const [found] = origin
      ? await origin.c.pub.getContractEvents({ address: origin.spoke, abi: art.spoke.abi, eventName: "FundsDeposited",
        args: { depositId: BigInt(depositId) }, fromBlock: 0n })
      : [];
    if (!found) return { status: 404, body: { error: `no deposit ${depositId} on chain ${chainId}'s spoke` } };
    if (refunded.has(`${chainId}:${depositId}`)) return { status: 409, body: { error: "the deposit was refunded already" } };
    const a = found.args;
    const dest = chains.get(Number(a.destinationChainId));
    if (!dest) return { status: 404, body: { error: `the deposit's destination ${a.destinationChainId} is not a chain of this devnet` } };
    const data = relayData(chainId, a);
    const hash = await dest.c.pub.readContract({ address: dest.spoke, abi: art.spoke.abi, functionName: "getV3RelayHash", args: [data] });
    const status = await dest.c.pub.readContract({ address: dest.spoke, abi: art.spoke.abi, functionName: "fillStatuses", args: [hash] });
    const now = (await dest.c.pub.getBlock({ blockTag: "pending" })).timestamp;
    if (Number(status) === 2) return { status: 409, body: { error: "the deposit was filled" } };
    if (now <= BigInt(a.fillDeadline)) return { status: 409, body: { error: "the deposit has not expired on its destination yet" } };
    const leaf = {
      amountToReturn: 0n, chainId: BigInt(chainId), refundAmounts: [a.inputAmount], leafId: 0,
      l2TokenAddress: addressOf(a.inputToken), refundAddresses: [addressOf(a.depositor)],
    };
    const root = keccak256(encodeAbiParameters([REFUND_LEAF], [leaf]));
    const w = origin.c.wallet(admin);
    const relayed = await onChain(chainId, () => origin.c.send(w, origin.spoke, art.spoke.abi, "relayRootBundle", [root, `0x${"0".repeat(64)}`]));
    const [bundle] = parseEventLogs({ abi: art.spoke.abi, logs: relayed.logs, eventName: "RelayedRootBundle" });
    const executed = await onChain(chainId, () => origin.c.send(w, origin.spoke, art.spoke.abi, "executeRelayerRefundLeaf", [bundle.args.rootBundleId, leaf, []]));
    refunded.add(`${chainId}:${depositId}`);
    return { status: 200, body: { txHash: executed.transactionHash, rootBundleId: bundle.args.rootBundleId } };
  };

  const port = await freePort();
  const server = http.createServer(async (req, res) => {
    const answer = (status, body) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body, (_, v) => (typeof v === "bigint" ? v.toString() : v)));
    };
    let text = "";
    for await (const chunk of req) text += chunk;
    let body = {};
    try {
      body = text ? JSON.parse(text) : {};
    } catch {
      return answer(400, { error: "the body is not JSON" });
    }
    try {
      if (req.method === "GET" && req.url === "/status") {
        return answer(200, { paused: state.paused, delayMs: state.delayMs, pending: waiting.length, filled: state.filled });
      }
      if (req.method === "POST" && req.url === "/pause") {
        state.paused = true;
        return answer(200, { paused: true });
      }
      if (req.method === "POST" && req.url === "/resume") {
        state.paused = false;
        return answer(200, { paused: false });
      }
      if (req.method === "POST" && req.url === "/delay" && Number.isFinite(body.ms) && body.ms >= 0) {
        state.delayMs = body.ms;
        return answer(200, { delayMs: state.delayMs });
      }
      if (req.method === "POST" && req.url === "/refund") {
        const r = await refund(Number(body.chainId), String(body.depositId));
        return answer(r.status, r.body);
      }
      return answer(404, { error: "no such control route" });
    } catch (e) {
      return answer(500, { error: e?.shortMessage || e?.message || String(e) });
    }
  });
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  server.unref();
  return { url: `http://127.0.0.1:${port}`, address: relayer.address };
}

// The peer chain, the spokes and the relayer. `main` is the devnet's own chain: {chainId, rpcUrl,
// weth, usdc}; `stablecoin` and `weth9` the artifacts the devnet deploys its USDC and WETH from.
export async function deployAcross({ here, fail, anvilBin, mnemonic, accountCount, main, stablecoin, weth9 }) {
  const art = artifacts(here, fail);
  const accounts = Array.from({ length: accountCount }, (_, i) => mnemonicToAccount(mnemonic, { addressIndex: i }));
  const admin = accounts[0];
  const relayer = mnemonicToAccount(mnemonic, { addressIndex: RELAYER_INDEX });
  const home = chainOf(main.chainId, main.rpcUrl, fail);
  const peer = await startPeer({ anvilBin, mnemonic, accounts: accountCount, fail });

  // The peer's tokens: WETH9 and the devnet's EIP-3009 USDC, 1,000,000 USDC to each test account.
  const pw = peer.wallet(admin);
  const peerWeth = await peer.deploy(pw, weth9);
  const peerUsdc = await peer.deploy(pw, stablecoin, ["USD Coin", "USDC"]);
  const ONE_MILLION = parseUnits("1000000", 6);
  for (const a of accounts) await peer.send(pw, peerUsdc, stablecoin.abi, "mint", [a.address, ONE_MILLION]);

  const homeSpoke = await deploySpoke(home, admin, art, main.weth);
  const peerSpoke = await deploySpoke(peer, admin, art, peerWeth);

  // The relayer: gas and USDC on both chains, its spokes allowed to take the USDC it fills with.
  const FLOAT = parseUnits("10000000", 6);
  for (const [c, usdc, spoke] of [[home, main.usdc, homeSpoke], [peer, peerUsdc, peerSpoke]]) {
    await c.pub.request({ method: "anvil_setBalance", params: [relayer.address, toHex(parseEther("1000"))] });
    await c.send(c.wallet(admin), usdc, stablecoin.abi, "mint", [relayer.address, FLOAT]);
    await c.send(c.wallet(relayer), usdc, stablecoin.abi, "approve", [spoke, maxUint256]);
  }
  const chains = new Map([
    [main.chainId, { c: home, spoke: homeSpoke, usdc: main.usdc }],
    [PEER_CHAIN_ID, { c: peer, spoke: peerSpoke, usdc: peerUsdc }],
  ]);
  const control = await startRelayer({ chains, relayer, admin, art, fail });
  return {
    spoke: homeSpoke,
    spokeAbi: art.spoke.abi,
    relayer: control,
    peer: {
      chainId: PEER_CHAIN_ID,
      rpcUrl: peer.rpcUrl,
      contracts: { WETH9: peerWeth, AcrossSpokePool: peerSpoke },
      tokens: { USDC: { address: peerUsdc, decimals: 6 }, WETH: { address: peerWeth, decimals: 18 } },
    },
  };
}
