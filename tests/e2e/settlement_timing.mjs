// Times x402 credit purchases against a gateway on the devnet, from the paid retry to the 200: the
// SPEC flow (the transfer is mined first; the retry names its hash) and the standard x402 v2 flow (the
// retry carries an EIP-3009 authorization that the gateway settles onchain before answering).
// Used by scripts/bench. Prints one JSON line: {spec: {n, p50Ms, p99Ms, maxMs}, standard: {...}}.
//
//   node tests/e2e/settlement_timing.mjs GATEWAY_URL RPC_URL CHAIN_ID FUNDER_KEY PAYER_KEY N
import { createPublicClient, createWalletClient, defineChain, http, parseAbi } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { x402Client } from "@x402/core/client";
import { registerExactEvmScheme } from "@x402/evm/exact/client";

const [gateway, rpcUrl, chainIdText, funderKey, payerKey, nText] = process.argv.slice(2);
const chainId = Number(chainIdText);
const n = Number(nText || "20");
const chain = defineChain({ id: chainId, name: "devnet", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } });
const pub = createPublicClient({ chain, transport: http(rpcUrl) });
const payer = privateKeyToAccount(payerKey);
const wallet = createWalletClient({ account: payer, chain, transport: http(rpcUrl) });
const erc20 = parseAbi(["function transfer(address to, uint256 amount) returns (bool)"]);
const url = `${gateway}/api/v1/credits/buy-with-x402`;
const post = (headers = {}) => fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify({ sku: "credits_100", userAddress: payer.address }) });
const meta = (await (await fetch(`${gateway}/api/v1/credits/x402-metadata`)).json()).data;

// The settlement wallet pays gas for standard payments.
const funder = createWalletClient({ account: privateKeyToAccount(funderKey), chain, transport: http(rpcUrl) });
await pub.waitForTransactionReceipt({ hash: await funder.sendTransaction({ to: meta.settlementAddress, value: 10n ** 18n }) });

const stats = (ms) => {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
  return { n: s.length, p50Ms: +at(0.5).toFixed(1), p99Ms: +at(0.99).toFixed(1), maxMs: +s[s.length - 1].toFixed(1) };
};

const spec = [];
for (let i = 0; i < n; i++) {
  const challenge = (await (await post()).json()).x402Challenge;
  const hash = await wallet.writeContract({ address: meta.currency.address, abi: erc20, functionName: "transfer", args: [challenge.recipient, BigInt(meta.packages[0].priceAtomic)] });
  await pub.waitForTransactionReceipt({ hash });
  const t0 = performance.now();
  for (;;) {
    const r = await post({ "X-Payment-Receipt": hash, "X-Invoice-Id": challenge.invoiceId });
    if (r.status === 200) break;
    if (r.status !== 402) throw new Error(`SPEC retry answered ${r.status}: ${await r.text()}`);
    await new Promise((ok) => setTimeout(ok, 100));
  }
  spec.push(performance.now() - t0);
}

const client = new x402Client();
registerExactEvmScheme(client, { signer: payer });
client.setSpendControls({ allowedAssets: [{ network: `eip155:${chainId}`, asset: meta.currency.address }] });
const standard = [];
for (let i = 0; i < n; i++) {
  const first = await post();
  const required = JSON.parse(Buffer.from(first.headers.get("PAYMENT-REQUIRED"), "base64").toString("utf8"));
  const payload = await client.createPaymentPayload(required);
  const header = Buffer.from(JSON.stringify(payload)).toString("base64");
  const t0 = performance.now();
  const r = await post({ "PAYMENT-SIGNATURE": header });
  if (r.status !== 200) throw new Error(`standard retry answered ${r.status}: ${await r.text()}`);
  standard.push(performance.now() - t0);
}
console.log(JSON.stringify({ spec: stats(spec), standard: stats(standard) }));
