// Pays actiongate's buy-with-x402 with the official x402 v2 client (@x402/fetch with @x402/evm's
// exact EVM scheme: an EIP-3009 authorization signed by viem), then checks that a replayed
// authorization and an authorization for another amount are refused. Prints one JSON line.
//
//   node tests/e2e/x402_client.mjs GATEWAY_URL RPC_URL CHAIN_ID PRIVATE_KEY ASSET
// (ASSET: the devnet's stablecoin, which the client's spend controls must allow: it is not one of the
// client's built-in default assets.)
import { wrapFetchWithPayment, decodePaymentResponseHeader } from "@x402/fetch";
import { x402Client } from "@x402/core/client";
import { registerExactEvmScheme } from "@x402/evm/exact/client";
import { privateKeyToAccount } from "viem/accounts";

const [gateway, , chainId, key, asset] = process.argv.slice(2);
const account = privateKeyToAccount(key);
const client = new x402Client();
registerExactEvmScheme(client, { signer: account });
client.setSpendControls({ allowedAssets: [{ network: `eip155:${chainId}`, asset }] });
let sentSignature;
const capture = async (input, init) => {
  const request = new Request(input, init);
  const sig = request.headers.get("PAYMENT-SIGNATURE");
  if (sig) sentSignature = sig;
  return fetch(request);
};
const pay = wrapFetchWithPayment(capture, client);
const url = `${gateway}/api/v1/credits/buy-with-x402`;
const body = (sku) => JSON.stringify({ sku, userAddress: account.address });
const post = (sku, headers = {}) => fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: body(sku) });
const out = {};

// 1. The official client pays.
const paid = await pay(url, { method: "POST", headers: { "content-type": "application/json" }, body: body("credits_100") });
out.paid = { status: paid.status, body: await paid.json(), response: paid.headers.get("PAYMENT-RESPONSE") ? decodePaymentResponseHeader(paid.headers.get("PAYMENT-RESPONSE")) : null };

// 2. The same authorization again.
const replay = await post("credits_100", { "PAYMENT-SIGNATURE": sentSignature });
out.replay = { status: replay.status, body: await replay.json() };

// 3. An authorization for another amount, signed like the client signs (viem signTypedData).
const challenge = await post("credits_100");
const required = JSON.parse(Buffer.from(challenge.headers.get("PAYMENT-REQUIRED"), "base64").toString("utf8"));
const accepted = required.accepts[0];
const authorization = {
  from: account.address,
  to: accepted.payTo,
  value: (BigInt(accepted.amount) + 1n).toString(),
  validAfter: "0",
  validBefore: (Math.floor(Date.now() / 1000) + 300).toString(),
  nonce: `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex")}`,
};
const signature = await account.signTypedData({
  domain: { name: accepted.extra.name, version: accepted.extra.version, chainId: Number(chainId), verifyingContract: accepted.asset },
  types: {
    TransferWithAuthorization: [
      { name: "from", type: "address" }, { name: "to", type: "address" }, { name: "value", type: "uint256" },
      { name: "validAfter", type: "uint256" }, { name: "validBefore", type: "uint256" }, { name: "nonce", type: "bytes32" },
    ],
  },
  primaryType: "TransferWithAuthorization",
  message: { ...authorization, value: BigInt(authorization.value), validAfter: 0n, validBefore: BigInt(authorization.validBefore) },
});
const payload = { x402Version: 2, resource: required.resource, accepted, payload: { authorization, signature } };
const other = await post("credits_100", { "PAYMENT-SIGNATURE": Buffer.from(JSON.stringify(payload)).toString("base64") });
out.otherAmount = { status: other.status, body: await other.json() };
console.log(JSON.stringify(out));
