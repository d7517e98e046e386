// Shows anvil's automine race without the gateway (docs/benchmarks.md, stop 53): one wallet's runs of
// USDC mints handed to an automining devnet node in a given pattern, and the blocks that mined each
// run (how many transactions each held; a 0 is an empty block).
//
//   node tests/e2e/anvil_race.mjs --devnet devnet.json --pattern A|B|C|P|Q [--runs 4]
//
// A: the run without its first, last first, then its first alone (the outbox's hand-over);
// B: the same in one request; C: the first alone, then the rest in nonce order;
// P: two half runs, the second handed over (as A) right after the first; Q: the same, the second
// once the first is mined.
import fs from "node:fs";
import { createWalletClient, http, defineChain, encodeFunctionData, parseAbi } from "viem";
import { privateKeyToAccount, generatePrivateKey } from "viem/accounts";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, v, i, all) => (i % 2 === 0 ? [...pairs, [v.replace(/^--/, ""), all[i + 1]]] : pairs), []),
);
const dn = JSON.parse(fs.readFileSync(args.devnet, "utf8"));
const url = dn.rpcUrl;
const rpc = async (body) => (await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })).json();
const one = async (method, params) => {
  const r = await rpc({ jsonrpc: "2.0", id: 1, method, params });
  if (r.error) throw new Error(JSON.stringify(r.error));
  return r.result;
};
const chain = defineChain({ id: dn.chainId, name: "devnet", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [url] } } });
const usdc = dn.tokens.USDC.address;
const account = privateKeyToAccount(dn.accounts[0].privateKey);
const wallet = createWalletClient({ account, chain, transport: http(url) });
const mint = parseAbi(["function mint(address to, uint256 amount)"]);
let nonce = Number(await one("eth_getTransactionCount", [account.address, "latest"]));
const sign = () =>
  wallet.signTransaction({
    to: usdc,
    data: encodeFunctionData({ abi: mint, functionName: "mint", args: [privateKeyToAccount(generatePrivateKey()).address, 1n] }),
    nonce: nonce++,
    gas: 100000n,
    maxFeePerGas: 10n ** 11n,
    maxPriorityFeePerGas: 1n,
  });
const send = (raws) => rpc(raws.map((r, i) => ({ jsonrpc: "2.0", id: i, method: "eth_sendRawTransaction", params: [r] })));
const minedTo = async (n) => {
  for (let t = 0; t < 2000; t++) {
    if (Number(await one("eth_getTransactionCount", [account.address, "latest"])) >= n) return;
    await new Promise((s) => setTimeout(s, 1));
  }
  throw new Error("not mined");
};
const patterns = {
  A: async (run) => { await send(run.slice(1).reverse()); await send([run[0]]); },
  B: async (run) => { await send([...run.slice(1).reverse(), run[0]]); },
  C: async (run) => { await send([run[0]]); await send(run.slice(1)); },
  P: async (run) => { await patterns.A(run.slice(0, 32)); await patterns.A(run.slice(32)); },
  Q: async (run) => { await patterns.A(run.slice(0, 32)); await minedTo(nonce - 32); await patterns.A(run.slice(32)); },
};
for (let r = 0; r < Number(args.runs ?? 4); r++) {
  const start = Number(await one("eth_blockNumber", []));
  const run = [];
  for (let i = 0; i < 64; i++) run.push(await sign());
  await patterns[args.pattern](run);
  await minedTo(nonce);
  // Empty blocks come after the run's own: give them time to be mined.
  await new Promise((s) => setTimeout(s, 300));
  const end = Number(await one("eth_blockNumber", []));
  const sizes = [];
  for (let b = start + 1; b <= end; b++) sizes.push((await one("eth_getBlockByNumber", [`0x${b.toString(16)}`, false])).transactions.length);
  console.log(args.pattern, JSON.stringify(sizes));
}
