// A delegating user of the devnet, driven by viem (a library that is not actiongate's): an EOA
// upgraded with EIP-7702 to the Delegation Framework's EIP7702StatelessDeleGator, which signs
// delegations with eth_signTypedData_v4 semantics and sends its own transactions (a revocation).
//
//   node devnet/delegator.mjs upgrade DEVNET_JSON PRIVATE_KEY        -> {"address", "code"}
//   node devnet/delegator.mjs sign PRIVATE_KEY < typed-data.json     -> {"signature"}
//   node devnet/delegator.mjs send DEVNET_JSON PRIVATE_KEY TO DATA   -> {"hash", "status"}
//   node devnet/delegator.mjs sign-kit DEVNET_JSON OWNER_KEY ACCOUNT < delegation.json -> {"signature"}
//     (a HybridDeleGator of the devnet signs with @metamask/smart-accounts-kit's signDelegation)
import fs from "node:fs";
import { createPublicClient, createWalletClient, http, defineChain } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { Implementation, toMetaMaskSmartAccount } from "@metamask/smart-accounts-kit";

const [command, ...args] = process.argv.slice(2);
const stdin = () => new Promise((resolve) => {
  let text = "";
  process.stdin.on("data", (d) => (text += d));
  process.stdin.on("end", () => resolve(text));
});
const clients = (devnetJson, key) => {
  const devnet = JSON.parse(fs.readFileSync(devnetJson, "utf8"));
  const chain = defineChain({ id: devnet.chainId, name: "devnet", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [devnet.rpcUrl] } } });
  const account = privateKeyToAccount(key);
  return {
    devnet,
    account,
    pub: createPublicClient({ chain, transport: http(devnet.rpcUrl) }),
    wallet: createWalletClient({ account, chain, transport: http(devnet.rpcUrl) }),
  };
};

if (command === "upgrade") {
  const [devnetJson, key] = args;
  const { devnet, account, pub, wallet } = clients(devnetJson, key);
  const impl = devnet.contracts.EIP7702StatelessDeleGatorImpl;
  const authorization = await wallet.signAuthorization({ account, contractAddress: impl, executor: "self" });
  const hash = await wallet.sendTransaction({ authorizationList: [authorization], to: account.address, data: "0x", gas: 200000n });
  const receipt = await pub.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new Error("the EIP-7702 upgrade reverted");
  const code = await pub.getCode({ address: account.address });
  console.log(JSON.stringify({ address: account.address, code }));
} else if (command === "sign") {
  const [key] = args;
  const typed = JSON.parse(await stdin());
  const account = privateKeyToAccount(key);
  // eth_signTypedData_v4 takes uint256 as decimal strings; viem wants bigints.
  const message = { ...typed.message, salt: BigInt(typed.message.salt) };
  const domain = { ...typed.domain, chainId: Number(typed.domain.chainId) };
  const types = Object.fromEntries(Object.entries(typed.types).filter(([name]) => name !== "EIP712Domain"));
  const signature = await account.signTypedData({ domain, types, primaryType: typed.primaryType, message });
  console.log(JSON.stringify({ signature }));
} else if (command === "send") {
  const [devnetJson, key, to, data] = args;
  const { pub, wallet } = clients(devnetJson, key);
  const hash = await wallet.sendTransaction({ to, data, gas: 300000n });
  const receipt = await pub.waitForTransactionReceipt({ hash });
  console.log(JSON.stringify({ hash, status: receipt.status }));
} else if (command === "sign-kit") {
  const [devnetJson, key, address] = args;
  const { devnet, account, pub } = clients(devnetJson, key);
  const c = devnet.contracts;
  const environment = {
    DelegationManager: c.DelegationManager, EntryPoint: c.EntryPoint, SimpleFactory: c.SimpleFactory,
    implementations: { MultiSigDeleGatorImpl: c.MultiSigDeleGatorImpl, HybridDeleGatorImpl: c.HybridDeleGatorImpl,
      EIP7702StatelessDeleGatorImpl: c.EIP7702StatelessDeleGatorImpl },
    caveatEnforcers: Object.fromEntries(Object.entries(c).filter(([name]) => name.endsWith("Enforcer"))),
  };
  const smart = await toMetaMaskSmartAccount({ client: pub, implementation: Implementation.Hybrid, address, signer: { account }, environment });
  const delegation = JSON.parse(await stdin());
  const signature = await smart.signDelegation({ delegation, chainId: devnet.chainId });
  console.log(JSON.stringify({ signature }));
} else {
  throw new Error(`unknown command ${command}`);
}
