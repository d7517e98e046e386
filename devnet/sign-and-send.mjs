// Signs unsigned transactions from actiongate's build-tx locally with viem (a library that is not
// actiongate's) and sends them, in order, waiting for each receipt. Used by the chain tests to prove
// that what build-tx answers is what a self-custody wallet signs.
//
//   node devnet/sign-and-send.mjs RPC_URL PRIVATE_KEY < build-tx-data.json
// prints {"results": [{"hash", "status", "nonce"}]}.
import { createPublicClient, http, defineChain } from "viem";
import { privateKeyToAccount } from "viem/accounts";

const [rpcUrl, privateKey] = process.argv.slice(2);
const input = JSON.parse(await new Promise((resolve) => {
  let text = "";
  process.stdin.on("data", (d) => (text += d));
  process.stdin.on("end", () => resolve(text));
}));
const chain = defineChain({ id: input.chainId, name: "devnet", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } });
const client = createPublicClient({ chain, transport: http(rpcUrl) });
const account = privateKeyToAccount(privateKey);
if (input.from && input.from.toLowerCase() !== account.address.toLowerCase()) {
  throw new Error(`build-tx was for ${input.from}, the key is ${account.address}`);
}
const results = [];
for (const tx of input.transactions) {
  const signed = await account.signTransaction({
    type: "eip1559",
    chainId: input.chainId,
    to: tx.to,
    data: tx.data,
    value: BigInt(tx.value),
    gas: BigInt(tx.gas),
    maxFeePerGas: BigInt(tx.maxFeePerGas),
    maxPriorityFeePerGas: BigInt(tx.maxPriorityFeePerGas),
    nonce: Number(BigInt(tx.nonce)),
  });
  const hash = await client.request({ method: "eth_sendRawTransaction", params: [signed] });
  const receipt = await client.waitForTransactionReceipt({ hash });
  results.push({ hash, status: receipt.status, nonce: Number(BigInt(tx.nonce)), gasUsed: Number(receipt.gasUsed), gas: Number(BigInt(tx.gas)) });
}
console.log(JSON.stringify({ results }));
