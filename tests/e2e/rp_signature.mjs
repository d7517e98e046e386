// Checks a gateway proof request's RP signature with libraries that are not the gateway's: the
// message bytes from World ID's own @worldcoin/idkit-server (computeRpSignatureMessage), the EIP-191
// hash and the signer recovery from @noble. Exits 1 unless the recovered signer is the expected one.
//
//   node tests/e2e/rp_signature.mjs '<proofRequest JSON>' <expected signer address>
import { computeRpSignatureMessage } from "@worldcoin/idkit-server";
import { secp256k1 } from "@noble/curves/secp256k1";
import { keccak_256 } from "@noble/hashes/sha3";
import { bytesToHex, concatBytes, hexToBytes, utf8ToBytes } from "@noble/hashes/utils";

const [requestJson, expected] = process.argv.slice(2);
const request = JSON.parse(requestJson);
const ctx = request.rpContext;
const message = computeRpSignatureMessage(hexToBytes(ctx.nonce.slice(2)), ctx.created_at, ctx.expires_at, request.action);
const digest = keccak_256(concatBytes(utf8ToBytes(`\x19Ethereum Signed Message:\n${message.length}`), message));
const sig = hexToBytes(ctx.signature.slice(2));
if (sig.length !== 65 || (sig[64] !== 27 && sig[64] !== 28)) {
  console.log(JSON.stringify({ ok: false, why: "not a 65-byte signature with v 27/28" }));
  process.exit(1);
}
const signature = secp256k1.Signature.fromCompact(sig.slice(0, 64)).addRecoveryBit(sig[64] - 27);
const publicKey = signature.recoverPublicKey(digest).toRawBytes(false);
const address = "0x" + bytesToHex(keccak_256(publicKey.slice(1)).slice(12));
const ok = address.toLowerCase() === expected.toLowerCase();
console.log(JSON.stringify({ ok, recovered: address, message: bytesToHex(message) }));
process.exit(ok ? 0 : 1);
