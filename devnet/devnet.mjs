// The actiongate devnet: anvil (chain 84532) with fixture contracts deployed from published artifacts
// (WETH9 and Uniswap V2 from @uniswap/v2-core and v2-periphery; Uniswap V3's factory, position manager,
// QuoterV2 and SwapRouter02 from @uniswap/v3-core, v3-periphery and swap-router-contracts; the
// MetaMask Delegation Framework from @metamask/delegation-abis) and two contracts compiled here with
// solc against @openzeppelin/contracts (an EIP-3009 USDC with Base Sepolia's EIP-712 domain, and an
// ERC-4626 vault over it), and Chainlink's MockV3Aggregator (from @chainlink/contracts, see
// scripts/devnet) as the ETH/USD and USDC/USD price feeds; Aave v3 and Gnosis Conditional Tokens with
// three fixed-product prediction markets (packed by scripts/devnet); a peer chain 11155420 with Across
// V3 spokes on both chains and a relayer (across.mjs). Funds the test accounts, seeds a USDC/WETH pool, checks a swap, writes
// OUT/devnet.json and OUT/devnet.toml, prints "devnet ready", and runs until SIGINT/SIGTERM.
//
//   node devnet/devnet.mjs [--port 8545] [--out DIR]
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import solc from "solc";
import { createPublicClient, createWalletClient, getAddress, http, keccak256, parseEther, parseEventLogs, parseUnits, toHex, zeroAddress } from "viem";
import { mnemonicToAccount } from "viem/accounts";
import { deploySmartAccountsEnvironment } from "@metamask/smart-accounts-kit/utils";
import { Implementation, toMetaMaskSmartAccount } from "@metamask/smart-accounts-kit";
import { deployAcross } from "./across.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const argv = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const port = Number(arg("port", "8545"));
const out = path.resolve(arg("out", path.join(here, "..", ".devnet")));
const CHAIN_ID = 84532;
const MNEMONIC = "test test test test test test test test test test test junk";
const ACCOUNTS = 10;
const rpcUrl = `http://127.0.0.1:${port}`;

function fail(message) {
  console.error(`devnet: ${message}`);
  process.exit(1);
}
process.on("unhandledRejection", (e) => fail(e?.shortMessage || e?.message || String(e)));

// --- anvil -------------------------------------------------------------------------------------
const anvilBin = path.join(here, "node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil");
if (!fs.existsSync(anvilBin)) fail("anvil is not installed: run npm ci in devnet/ (scripts/devnet does)");
const anvil = spawn(anvilBin, ["--chain-id", String(CHAIN_ID), "--port", String(port), "--host", "127.0.0.1",
  "--accounts", String(ACCOUNTS), "--mnemonic", MNEMONIC, "--balance", "10000", ...(process.env.DEVNET_ANVIL_LOG ? [] : ["--silent"]),
  // More anvil flags, space-separated (scripts/bench fanout passes --prune-history). With
  // DEVNET_ANVIL_LOG=FILE anvil logs every call and mined transaction there (FILE.err: its stderr).
  // DEVNET_ANVIL_THREADS=K runs anvil's async runtime on K worker threads (TOKIO_WORKER_THREADS;
  // scripts/bench fanout's FANOUT_ANVIL_THREADS): on one, its block producer cannot poll the miner
  // while an RPC handler is still sending a run's ready notifications, the race behind its
  // empty-block storms (docs/benchmarks.md, stop 62).
  ...(process.env.DEVNET_ANVIL_ARGS ?? "").split(" ").filter(Boolean)], { env: { ...process.env, ...(process.env.DEVNET_ANVIL_THREADS ? { TOKIO_WORKER_THREADS: process.env.DEVNET_ANVIL_THREADS } : {}) }, stdio: process.env.DEVNET_ANVIL_LOG ? ["ignore", fs.openSync(process.env.DEVNET_ANVIL_LOG, "w"), fs.openSync(process.env.DEVNET_ANVIL_LOG + ".err", "w")] : ["ignore", "ignore", "inherit"] });
let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  anvil.kill("SIGTERM");
  process.exit(0);
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
process.on("SIGHUP", stop);
// Whatever ends this process ends anvil too.
process.on("exit", () => anvil.kill("SIGKILL"));
anvil.on("exit", (code) => {
  if (!stopping) fail(`anvil exited (${code})`);
});

const chain = { id: CHAIN_ID, name: "devnet", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } };
// Receipts polled every 20 ms (viem's default is 4 s): with automining they are there at once, and on
// a node that mines on a clock (DEVNET_ANVIL_ARGS="--block-time 0.1") each deployment waits a block.
const pub = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 20 });
for (let i = 0; ; i++) {
  try {
    await pub.getChainId();
    break;
  } catch {
    if (i > 100) fail("anvil does not answer");
    await new Promise((r) => setTimeout(r, 100));
  }
}

// --- contracts ---------------------------------------------------------------------------------
const artifact = (pkg, name) => {
  const a = require(`${pkg}/build/${name}.json`);
  return { abi: a.abi, bytecode: a.bytecode.startsWith("0x") ? a.bytecode : `0x${a.bytecode}` };
};
// Chainlink's feed sources, extracted by scripts/devnet from the pinned @chainlink/contracts tarball.
const packs = path.join(here, "packs");
function compile() {
  const sources = {};
  for (const f of ["DevnetStablecoin.sol", "DevnetVault.sol"]) sources[f] = { content: fs.readFileSync(path.join(here, "contracts", f), "utf8") };
  const aggregator = "chainlink/mocks/MockV3Aggregator.sol";
  if (!fs.existsSync(path.join(packs, aggregator))) fail("Chainlink's MockV3Aggregator is missing: run ./scripts/devnet --install");
  sources[aggregator] = { content: fs.readFileSync(path.join(packs, aggregator), "utf8") };
  const input = {
    language: "Solidity",
    sources,
    settings: { optimizer: { enabled: true, runs: 200 }, evmVersion: "cancun", outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } } },
  };
  const findImports = (p) => {
    if (p.startsWith("chainlink/")) return { contents: fs.readFileSync(path.join(packs, p), "utf8") };
    try {
      return { contents: fs.readFileSync(require.resolve(p), "utf8") };
    } catch (e) {
      return { error: `not found: ${p}` };
    }
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
  const errors = (output.errors || []).filter((e) => e.severity === "error");
  if (errors.length) fail(errors.map((e) => e.formattedMessage).join("\n"));
  const get = (file, name) => ({ abi: output.contracts[file][name].abi, bytecode: `0x${output.contracts[file][name].evm.bytecode.object}` });
  return { stablecoin: get("DevnetStablecoin.sol", "DevnetStablecoin"), vault: get("DevnetVault.sol", "DevnetVault"), aggregator: get(aggregator, "MockV3Aggregator") };
}

const accounts = Array.from({ length: ACCOUNTS }, (_, i) => mnemonicToAccount(MNEMONIC, { addressIndex: i }));
const deployer = accounts[0];
const wallet = (account) => createWalletClient({ account, chain, transport: http(rpcUrl) });
const w = wallet(deployer);

async function deploy(art, args = []) {
  const hash = await w.deployContract({ abi: art.abi, bytecode: art.bytecode, args });
  const receipt = await pub.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success" || !receipt.contractAddress) fail("a deployment reverted");
  return getAddress(receipt.contractAddress);
}
// A fixed gas limit, not an estimate: an estimate made in one second and mined in the next misses the
// gas a Uniswap V2 pair spends on its price accumulators when time has passed, and the call reverts.
const SEND_GAS = 6_000_000n;
async function send(client, contract, fn, args, value) {
  const hash = await client.writeContract({ address: contract.address, abi: contract.abi, functionName: fn, args, value, gas: SEND_GAS });
  const receipt = await pub.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") fail(`${fn} reverted`);
  return receipt;
}

const compiled = compile();
const weth9 = artifact("@uniswap/v2-periphery", "WETH9");
const factoryArt = artifact("@uniswap/v2-core", "UniswapV2Factory");
const pairArt = artifact("@uniswap/v2-core", "UniswapV2Pair");
const routerArt = artifact("@uniswap/v2-periphery", "UniswapV2Router02");

const addr = {};
addr.WETH9 = await deploy(weth9);
addr.UniswapV2Factory = await deploy(factoryArt, [deployer.address]);
addr.UniswapV2Router02 = await deploy(routerArt, [addr.UniswapV2Factory, addr.WETH9]);
addr.USDC = await deploy(compiled.stablecoin, ["USD Coin", "USDC"]);
addr.EURC = await deploy(compiled.stablecoin, ["Euro Coin", "EURC"]);
addr.USDCVault = await deploy(compiled.vault, [addr.USDC]);

// Chainlink price feeds (8 decimals, as Chainlink's USD feeds): ETH/USD at 3000, USDC/USD at 1,
// EUR/USD at 1.08 (the EURC feed). The gateway prices writes from them; a test moves one with
// updateAnswer, or ages it with updateRoundData.
addr.ChainlinkFeed_ETH_USD = await deploy(compiled.aggregator, [8, 3000n * 10n ** 8n]);
addr.ChainlinkFeed_USDC_USD = await deploy(compiled.aggregator, [8, 10n ** 8n]);
addr.ChainlinkFeed_EUR_USD = await deploy(compiled.aggregator, [8, 108_000_000n]);

const usdc = { address: addr.USDC, abi: compiled.stablecoin.abi };
const eurc = { address: addr.EURC, abi: compiled.stablecoin.abi };
const weth = { address: addr.WETH9, abi: weth9.abi };
const router = { address: addr.UniswapV2Router02, abi: routerArt.abi };
const ONE_MILLION = parseUnits("1000000", 6);
for (const a of accounts) await send(w, usdc, "mint", [a.address, ONE_MILLION]);
for (const a of accounts) await send(w, eurc, "mint", [a.address, ONE_MILLION]);

// Seed USDC/WETH at 3000 USDC per WETH.
const poolUsdc = parseUnits("300000", 6);
const poolWeth = parseEther("100");
await send(w, usdc, "mint", [deployer.address, poolUsdc]);
await send(w, weth, "deposit", [], poolWeth);
await send(w, usdc, "approve", [addr.UniswapV2Router02, poolUsdc]);
await send(w, weth, "approve", [addr.UniswapV2Router02, poolWeth]);
const deadline = BigInt(Math.floor(Date.now() / 1000) + 3600);
await send(w, router, "addLiquidity", [addr.USDC, addr.WETH9, poolUsdc, poolWeth, 0n, 0n, deployer.address, deadline]);
addr.UniswapV2Pair_USDC_WETH = await pub.readContract({ address: addr.UniswapV2Factory, abi: factoryArt.abi, functionName: "getPair", args: [addr.USDC, addr.WETH9] });

// Check that a swap really works with the published router (its pair init-code hash must match).
const checker = accounts[ACCOUNTS - 1];
const wc = wallet(checker);
await send(wc, usdc, "approve", [addr.UniswapV2Router02, parseUnits("100", 6)]);
const before = await pub.readContract({ ...weth, functionName: "balanceOf", args: [checker.address] });
await send(wc, router, "swapExactTokensForTokens", [parseUnits("100", 6), 1n, [addr.USDC, addr.WETH9], checker.address, deadline]);
const after = await pub.readContract({ ...weth, functionName: "balanceOf", args: [checker.address] });
if (after <= before) fail("the check swap received no WETH");

// --- Uniswap V3 (published hardhat artifacts; the pool init-code hash of v3-core matches periphery's)
const hardhat = (pkg, file) => {
  const a = require(`${pkg}/artifacts/contracts/${file}`);
  return { abi: a.abi, bytecode: a.bytecode };
};
const v3FactoryArt = hardhat("@uniswap/v3-core", "UniswapV3Factory.sol/UniswapV3Factory.json");
const positionsArt = hardhat("@uniswap/v3-periphery", "NonfungiblePositionManager.sol/NonfungiblePositionManager.json");
const quoterArt = hardhat("@uniswap/v3-periphery", "lens/QuoterV2.sol/QuoterV2.json");
const router02Art = hardhat("@uniswap/swap-router-contracts", "SwapRouter02.sol/SwapRouter02.json");
addr.UniswapV3Factory = await deploy(v3FactoryArt);
addr.NonfungiblePositionManager = await deploy(positionsArt, [addr.UniswapV3Factory, addr.WETH9, zeroAddress]);
addr.QuoterV2 = await deploy(quoterArt, [addr.UniswapV3Factory, addr.WETH9]);
addr.SwapRouter02 = await deploy(router02Art, [addr.UniswapV2Factory, addr.UniswapV3Factory, addr.NonfungiblePositionManager, addr.WETH9]);

// Seed a full-range USDC/WETH 0.3 % pool at 3000 USDC per WETH.
const v3Usdc = parseUnits("300000", 6);
const v3Weth = parseEther("100");
await send(w, usdc, "mint", [deployer.address, v3Usdc]);
await send(w, weth, "deposit", [], v3Weth);
const positions = { address: addr.NonfungiblePositionManager, abi: positionsArt.abi };
await send(w, usdc, "approve", [addr.NonfungiblePositionManager, v3Usdc]);
await send(w, weth, "approve", [addr.NonfungiblePositionManager, v3Weth]);
const [token0, token1] = BigInt(addr.USDC) < BigInt(addr.WETH9) ? [addr.USDC, addr.WETH9] : [addr.WETH9, addr.USDC];
const [amount0, amount1] = token0 === addr.USDC ? [v3Usdc, v3Weth] : [v3Weth, v3Usdc];
const isqrt = (n) => {
  if (n < 2n) return n;
  let x = n, y = (x + 1n) / 2n;
  while (y < x) { x = y; y = (x + n / x) / 2n; }
  return x;
};
const sqrtPriceX96 = isqrt((amount1 << 192n) / amount0);
await send(w, positions, "createAndInitializePoolIfNecessary", [token0, token1, 3000, sqrtPriceX96]);
await send(w, positions, "mint", [{ token0, token1, fee: 3000, tickLower: -887220, tickUpper: 887220, amount0Desired: amount0,
  amount1Desired: amount1, amount0Min: 0n, amount1Min: 0n, recipient: deployer.address, deadline }]);
addr.UniswapV3Pool_USDC_WETH_3000 = await pub.readContract({ address: addr.UniswapV3Factory, abi: v3FactoryArt.abi, functionName: "getPool", args: [addr.USDC, addr.WETH9, 3000] });

// Check a quote and a swap through the published SwapRouter02.
const router02 = { address: addr.SwapRouter02, abi: router02Art.abi };
const quote = await pub.simulateContract({ address: addr.QuoterV2, abi: quoterArt.abi, functionName: "quoteExactInputSingle",
  args: [{ tokenIn: addr.USDC, tokenOut: addr.WETH9, amountIn: parseUnits("100", 6), fee: 3000, sqrtPriceLimitX96: 0n }] });
if (!(quote.result[0] > 0n)) fail("QuoterV2 quoted nothing");
await send(wc, usdc, "approve", [addr.SwapRouter02, parseUnits("100", 6)]);
const beforeV3 = await pub.readContract({ ...weth, functionName: "balanceOf", args: [checker.address] });
await send(wc, router02, "exactInputSingle", [{ tokenIn: addr.USDC, tokenOut: addr.WETH9, fee: 3000, recipient: checker.address,
  amountIn: parseUnits("100", 6), amountOutMinimum: 1n, sqrtPriceLimitX96: 0n }]);
const afterV3 = await pub.readContract({ ...weth, functionName: "balanceOf", args: [checker.address] });
if (afterV3 <= beforeV3) fail("the V3 check swap received no WETH");

// An FX pool: USDC/EURC, fee 0.01 % (tick spacing 1), full range at 1.08 USDC per EURC (the EUR/USD
// feed's rate), 1,080,000 USDC and 1,000,000 EURC. Its observation buffer holds 64 entries, so a
// time-weighted average (`observe`) reaches back past the swaps of a test.
const fxUsdc = parseUnits("1080000", 6);
const fxEurc = parseUnits("1000000", 6);
await send(w, usdc, "mint", [deployer.address, fxUsdc]);
await send(w, eurc, "mint", [deployer.address, fxEurc]);
await send(w, usdc, "approve", [addr.NonfungiblePositionManager, fxUsdc]);
await send(w, eurc, "approve", [addr.NonfungiblePositionManager, fxEurc]);
// The published factory enables fees 0.05, 0.3 and 1 %; 0.01 % is enabled by its owner, as on Base.
await send(w, { address: addr.UniswapV3Factory, abi: v3FactoryArt.abi }, "enableFeeAmount", [100, 1]);
{
  const [t0, t1] = BigInt(addr.USDC) < BigInt(addr.EURC) ? [addr.USDC, addr.EURC] : [addr.EURC, addr.USDC];
  const [a0, a1] = t0 === addr.USDC ? [fxUsdc, fxEurc] : [fxEurc, fxUsdc];
  await send(w, positions, "createAndInitializePoolIfNecessary", [t0, t1, 100, isqrt((a1 << 192n) / a0)]);
  await send(w, positions, "mint", [{ token0: t0, token1: t1, fee: 100, tickLower: -887272, tickUpper: 887272, amount0Desired: a0,
    amount1Desired: a1, amount0Min: 0n, amount1Min: 0n, recipient: deployer.address, deadline }]);
}
addr.UniswapV3Pool_USDC_EURC_100 = await pub.readContract({ address: addr.UniswapV3Factory, abi: v3FactoryArt.abi, functionName: "getPool", args: [addr.USDC, addr.EURC, 100] });
const v3PoolArt = hardhat("@uniswap/v3-core", "UniswapV3Pool.sol/UniswapV3Pool.json");
await send(w, { address: addr.UniswapV3Pool_USDC_EURC_100, abi: v3PoolArt.abi }, "increaseObservationCardinalityNext", [64]);

// --- Aave v3 (lending): @aave/core-v3 1.19.3 and @aave/periphery-v3 3.0.1's artifacts, extracted by
// scripts/devnet, deployed the way Aave's own deploy does: the addresses provider and ACL, the logic
// libraries linked into Pool and PoolConfigurator (each `linkReferences` offset replaced by the
// library's address), both behind the provider's proxies (each implementation initialised first),
// the data provider, AaveOracle reading the devnet's Chainlink feeds (USD base, 8 decimals), the token
// implementations, an interest rate strategy per kind of asset, `initReserves` for USDC, WETH and
// EURC with Aave v3 Base's risk parameters, and liquidity supplied by the deployer.
const aaveArtifact = (part, file) => {
  const a = JSON.parse(fs.readFileSync(path.join(packs, "aave", part, `${file}.sol`, `${path.basename(file)}.json`), "utf8"));
  return { abi: a.abi, bytecode: a.bytecode, linkReferences: a.linkReferences ?? {} };
};
if (!fs.existsSync(path.join(packs, "aave", "periphery"))) fail("Aave v3's artifacts are missing: run ./scripts/devnet --install");
const aaveArt = {
  provider: aaveArtifact("core", "protocol/configuration/PoolAddressesProvider"),
  acl: aaveArtifact("core", "protocol/configuration/ACLManager"),
  pool: aaveArtifact("core", "protocol/pool/Pool"),
  configurator: aaveArtifact("core", "protocol/pool/PoolConfigurator"),
  rates: aaveArtifact("core", "protocol/pool/DefaultReserveInterestRateStrategy"),
  dataProvider: aaveArtifact("core", "misc/AaveProtocolDataProvider"),
  oracle: aaveArtifact("core", "misc/AaveOracle"),
  aToken: aaveArtifact("core", "protocol/tokenization/AToken"),
  variableDebt: aaveArtifact("core", "protocol/tokenization/VariableDebtToken"),
  stableDebt: aaveArtifact("core", "protocol/tokenization/StableDebtToken"),
  ui: aaveArtifact("periphery", "misc/UiPoolDataProviderV3"),
  gateway: aaveArtifact("periphery", "misc/WrappedTokenGatewayV3"),
};
/// The artifact's bytecode with each library reference replaced by the library's address.
function linked(art, libraries) {
  let code = art.bytecode.slice(2);
  for (const refs of Object.values(art.linkReferences)) {
    for (const [name, places] of Object.entries(refs)) {
      const at = libraries[name];
      if (!at) fail(`library ${name} is not deployed`);
      for (const { start, length } of places) {
        code = code.slice(0, start * 2) + at.slice(2).toLowerCase() + code.slice((start + length) * 2);
      }
    }
  }
  return `0x${code}`;
}
async function deployLinked(art, args = [], libraries = {}) {
  const hash = await w.deployContract({ abi: art.abi, bytecode: linked(art, libraries), args, gas: 29_000_000n });
  const receipt = await pub.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success" || !receipt.contractAddress) fail("an Aave deployment reverted");
  return getAddress(receipt.contractAddress);
}
const at = (address, art) => ({ address, abi: art.abi });
const aave = {};
aave.PoolAddressesProvider = await deployLinked(aaveArt.provider, ["Devnet", deployer.address]);
const provider = at(aave.PoolAddressesProvider, aaveArt.provider);
await send(w, provider, "setACLAdmin", [deployer.address]);
aave.ACLManager = await deployLinked(aaveArt.acl, [aave.PoolAddressesProvider]);
await send(w, provider, "setACLManager", [aave.ACLManager]);
const acl = at(aave.ACLManager, aaveArt.acl);
await send(w, acl, "addPoolAdmin", [deployer.address]);
await send(w, acl, "addRiskAdmin", [deployer.address]);
const libraries = {};
for (const name of ["SupplyLogic", "BorrowLogic", "LiquidationLogic", "EModeLogic", "BridgeLogic", "PoolLogic", "ConfiguratorLogic"]) {
  libraries[name] = await deployLinked(aaveArtifact("core", `protocol/libraries/logic/${name}`));
}
// FlashLoanLogic links BorrowLogic.
libraries.FlashLoanLogic = await deployLinked(aaveArtifact("core", "protocol/libraries/logic/FlashLoanLogic"), [], libraries);
const poolImpl = await deployLinked(aaveArt.pool, [aave.PoolAddressesProvider], libraries);
await send(w, at(poolImpl, aaveArt.pool), "initialize", [aave.PoolAddressesProvider]);
await send(w, provider, "setPoolImpl", [poolImpl]);
aave.Pool = getAddress(await pub.readContract({ ...provider, functionName: "getPool" }));
const configuratorImpl = await deployLinked(aaveArt.configurator, [], libraries);
await send(w, at(configuratorImpl, aaveArt.configurator), "initialize", [aave.PoolAddressesProvider]);
await send(w, provider, "setPoolConfiguratorImpl", [configuratorImpl]);
aave.PoolConfigurator = getAddress(await pub.readContract({ ...provider, functionName: "getPoolConfigurator" }));
aave.PoolDataProvider = await deployLinked(aaveArt.dataProvider, [aave.PoolAddressesProvider]);
await send(w, provider, "setPoolDataProvider", [aave.PoolDataProvider]);
aave.Oracle = await deployLinked(aaveArt.oracle, [aave.PoolAddressesProvider,
  [addr.USDC, addr.WETH9, addr.EURC], [addr.ChainlinkFeed_USDC_USD, addr.ChainlinkFeed_ETH_USD, addr.ChainlinkFeed_EUR_USD],
  zeroAddress, zeroAddress, 10n ** 8n]);
await send(w, provider, "setPriceOracle", [aave.Oracle]);
const aTokenImpl = await deployLinked(aaveArt.aToken, [aave.Pool]);
const variableDebtImpl = await deployLinked(aaveArt.variableDebt, [aave.Pool]);
const stableDebtImpl = await deployLinked(aaveArt.stableDebt, [aave.Pool]);
// Rates in ray: (optimal usage, base, slope 1, slope 2, stable slope 1, stable slope 2, stable offset,
// stable excess offset, optimal stable-to-total debt), Aave v3's stablecoin and ETH curves.
const RAY = 10n ** 27n;
const pct = (n) => (RAY * BigInt(Math.round(n * 100))) / 10000n;
aave.RateStrategyStable = await deployLinked(aaveArt.rates, [aave.PoolAddressesProvider,
  pct(90), 0n, pct(4), pct(60), pct(0.5), pct(60), pct(1), pct(8), pct(20)]);
aave.RateStrategyWETH = await deployLinked(aaveArt.rates, [aave.PoolAddressesProvider,
  pct(80), 0n, pct(3.3), pct(80), pct(4), pct(80), pct(2), pct(8), pct(20)]);
const reserveInput = (asset, decimals, symbol, rates) => ({
  aTokenImpl: aTokenImpl, stableDebtTokenImpl: stableDebtImpl, variableDebtTokenImpl: variableDebtImpl,
  underlyingAssetDecimals: decimals, interestRateStrategyAddress: rates, underlyingAsset: asset,
  treasury: deployer.address, incentivesController: zeroAddress,
  aTokenName: `Aave Devnet ${symbol}`, aTokenSymbol: `aDev${symbol}`,
  variableDebtTokenName: `Aave Devnet Variable Debt ${symbol}`, variableDebtTokenSymbol: `variableDebtDev${symbol}`,
  stableDebtTokenName: `Aave Devnet Stable Debt ${symbol}`, stableDebtTokenSymbol: `stableDebtDev${symbol}`, params: "0x" });
const configurator = at(aave.PoolConfigurator, aaveArt.configurator);
// Each reserve deploys three token proxies: more gas than the devnet's usual send.
const initReserves = await w.writeContract({ ...configurator, functionName: "initReserves", gas: 20_000_000n, args: [[
  reserveInput(addr.USDC, 6, "USDC", aave.RateStrategyStable),
  reserveInput(addr.WETH9, 18, "WETH", aave.RateStrategyWETH),
  reserveInput(addr.EURC, 6, "EURC", aave.RateStrategyStable),
]] });
if ((await pub.waitForTransactionReceipt({ hash: initReserves })).status !== "success") fail("initReserves reverted");
// Risk parameters (basis points; caps in whole tokens), as Aave v3 on Base sets them.
const risk = [
  { asset: addr.USDC, symbol: "USDC", ltv: 7500n, threshold: 7800n, bonus: 10500n, factor: 1000n, supplyCap: 10_000_000n, borrowCap: 9_000_000n },
  { asset: addr.WETH9, symbol: "WETH", ltv: 8000n, threshold: 8300n, bonus: 10500n, factor: 1500n, supplyCap: 5_000n, borrowCap: 4_500n },
  { asset: addr.EURC, symbol: "EURC", ltv: 7500n, threshold: 7800n, bonus: 10500n, factor: 1000n, supplyCap: 5_000_000n, borrowCap: 4_000_000n },
];
for (const r of risk) {
  await send(w, configurator, "configureReserveAsCollateral", [r.asset, r.ltv, r.threshold, r.bonus]);
  await send(w, configurator, "setReserveBorrowing", [r.asset, true]);
  await send(w, configurator, "setReserveFactor", [r.asset, r.factor]);
  await send(w, configurator, "setSupplyCap", [r.asset, r.supplyCap]);
  await send(w, configurator, "setBorrowCap", [r.asset, r.borrowCap]);
}
aave.UiPoolDataProvider = await deployLinked(aaveArt.ui, [addr.ChainlinkFeed_ETH_USD, addr.ChainlinkFeed_USDC_USD]);
aave.WrappedTokenGateway = await deployLinked(aaveArt.gateway, [addr.WETH9, deployer.address, aave.Pool]);
const aavePool = at(aave.Pool, aaveArt.pool);
const dataProvider = at(aave.PoolDataProvider, aaveArt.dataProvider);
aave.reserves = {};
for (const r of risk) {
  const [aToken, stableDebtToken, variableDebtToken] = await pub.readContract({ ...dataProvider, functionName: "getReserveTokensAddresses", args: [r.asset] });
  aave.reserves[r.symbol] = { asset: r.asset, aToken: getAddress(aToken), variableDebtToken: getAddress(variableDebtToken), stableDebtToken: getAddress(stableDebtToken) };
}
// Liquidity from the deployer: 1,000,000 USDC, 200 WETH and 1,000,000 EURC, minted or wrapped for it.
const seeds = [[usdc, parseUnits("1000000", 6)], [eurc, parseUnits("1000000", 6)], [weth, parseEther("200")]];
await send(w, usdc, "mint", [deployer.address, parseUnits("1000000", 6)]);
await send(w, eurc, "mint", [deployer.address, parseUnits("1000000", 6)]);
await send(w, weth, "deposit", [], parseEther("200"));
for (const [token, amount] of seeds) {
  await send(w, token, "approve", [aave.Pool, amount]);
  await send(w, aavePool, "supply", [token.address, amount, deployer.address, 0]);
}

// --- Prediction markets: Gnosis Conditional Tokens and the fixed-product market maker factory, from
// the truffle builds (solc 0.5.10) in @gnosis.pm/conditional-tokens-contracts 1.0.3 and
// @gnosis.pm/conditional-tokens-market-makers 1.8.1 (packed and checked by scripts/devnet). Three
// binary conditions prepared for a devnet oracle account, each with its FPMM from the factory (2 %
// fee) funded with 10,000 USDC at even odds.
const gnosis = (name) => {
  const file = path.join(packs, "gnosis", `${name}.json`);
  if (!fs.existsSync(file)) fail(`Gnosis's ${name} artifact is missing: run ./scripts/devnet --install`);
  const a = JSON.parse(fs.readFileSync(file, "utf8"));
  return { abi: a.abi, bytecode: a.bytecode };
};
const ctArt = gnosis("ConditionalTokens");
const fpmmFactoryArt = gnosis("FixedProductMarketMakerFactory");
const fpmmArt = gnosis("FixedProductMarketMaker");
addr.ConditionalTokens = await deploy(ctArt);
addr.FPMMFactory = await deploy(fpmmFactoryArt);
const conditionalTokens = { address: addr.ConditionalTokens, abi: ctArt.abi };
const fpmmFactory = { address: addr.FPMMFactory, abi: fpmmFactoryArt.abi };
const ORACLE_INDEX = 6;
const oracle = accounts[ORACLE_INDEX];
const FPMM_FUNDING = parseUnits("10000", 6);
const endsAt = new Date((Math.floor(Date.now() / 1000) + 30 * 86_400) * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
const questions = [
  "Will ETH close above 4,000 USD on 2026-12-31?",
  "Will the ECB cut its deposit rate at its January 2027 meeting?",
  "Will Base process more than 10 million transactions on 2027-01-15?",
];
await send(w, usdc, "mint", [deployer.address, FPMM_FUNDING * BigInt(questions.length)]);
const predictionMarkets = [];
for (const question of questions) {
  const questionId = keccak256(toHex(question));
  await send(w, conditionalTokens, "prepareCondition", [oracle.address, questionId, 2n]);
  const conditionId = await pub.readContract({ ...conditionalTokens, functionName: "getConditionId", args: [oracle.address, questionId, 2n] });
  const created = await send(w, fpmmFactory, "createFixedProductMarketMaker", [addr.ConditionalTokens, addr.USDC, [conditionId], parseUnits("0.02", 18)]);
  const [event] = parseEventLogs({ abi: fpmmFactoryArt.abi, logs: created.logs, eventName: "FixedProductMarketMakerCreation" });
  if (!event) fail("the FPMM factory created no market");
  const marketId = getAddress(event.args.fixedProductMarketMaker);
  const market = { address: marketId, abi: fpmmArt.abi };
  await send(w, usdc, "approve", [marketId, FPMM_FUNDING]);
  await send(w, market, "addFunding", [FPMM_FUNDING, [1n, 1n]]);
  predictionMarkets.push({ marketId, conditionId, questionId, question, outcomes: ["Yes", "No"], endsAt });
}
const prediction = { conditionalTokens: addr.ConditionalTokens, factory: addr.FPMMFactory, oracle: oracle.address, oracleIndex: ORACLE_INDEX, markets: predictionMarkets };

// --- MetaMask Delegation Framework (ERC-7710): DelegationManager, the DeleGator implementations, the
// factory and every caveat enforcer, from the bytecode @metamask/delegation-abis publishes (deployed
// by @metamask/smart-accounts-kit's own helper).
const framework = await deploySmartAccountsEnvironment(w, pub, chain);
addr.DelegationManager = getAddress(framework.DelegationManager);
addr.EntryPoint = getAddress(framework.EntryPoint);
addr.SimpleFactory = getAddress(framework.SimpleFactory);
for (const [name, a] of Object.entries(framework.implementations)) addr[name] = getAddress(a);
for (const [name, a] of Object.entries(framework.caveatEnforcers)) addr[name] = getAddress(a);
const managerCode = await pub.getCode({ address: addr.DelegationManager });
if (!managerCode || managerCode === "0x") fail("the DelegationManager has no code");

// Funded test DeleGator accounts: HybridDeleGator proxies owned by accounts 7 and 8, deployed through
// the framework's SimpleFactory with the kit's own factory data; 1 ETH and 10 000 USDC each.
const smartAccounts = [];
for (const ownerIndex of [7, 8]) {
  const owner = accounts[ownerIndex];
  const account = await toMetaMaskSmartAccount({ client: pub, implementation: Implementation.Hybrid,
    deployParams: [owner.address, [], [], []], deploySalt: "0x", signer: { account: owner }, environment: framework });
  const { factory, factoryData } = await account.getFactoryArgs();
  const hash = await w.sendTransaction({ to: factory, data: factoryData, gas: SEND_GAS });
  if ((await pub.waitForTransactionReceipt({ hash })).status !== "success") fail("deploying a HybridDeleGator reverted");
  const code = await pub.getCode({ address: account.address });
  if (!code || code === "0x") fail("the HybridDeleGator has no code");
  const fund = await w.sendTransaction({ to: account.address, value: parseUnits("1", 18), gas: 100_000n });
  await pub.waitForTransactionReceipt({ hash: fund });
  await send(w, usdc, "mint", [account.address, parseUnits("10000", 6)]);
  smartAccounts.push({ address: getAddress(account.address), implementation: "HybridDeleGator", ownerIndex, owner: owner.address });
}

// --- Across V3 (bridges): a peer chain 11155420 with its own USDC and WETH, a SpokePool behind an
// ERC1967Proxy on each chain, and the devnet's relayer (see across.mjs).
const across = await deployAcross({
  here, fail, anvilBin, mnemonic: MNEMONIC, accountCount: ACCOUNTS,
  main: { chainId: CHAIN_ID, rpcUrl, weth: addr.WETH9, usdc: addr.USDC },
  stablecoin: compiled.stablecoin, weth9,
});
addr.AcrossSpokePool = across.spoke;

// --- outputs -----------------------------------------------------------------------------------
// Credit purchases (x402) are paid to an address no test account uses.
const x402Recipient = mnemonicToAccount(MNEMONIC, { addressIndex: 100 }).address;
const keyOf = (i) => `0x${Buffer.from(mnemonicToAccount(MNEMONIC, { addressIndex: i }).getHdKey().privateKey).toString("hex")}`;
const devnet = {
  rpcUrl,
  chainId: CHAIN_ID,
  contracts: { ...addr, aave },
  tokens: { USDC: { address: addr.USDC, decimals: 6 }, WETH: { address: addr.WETH9, decimals: 18 }, EURC: { address: addr.EURC, decimals: 6 } },
  vaults: { "usdc-vault": addr.USDCVault },
  priceFeeds: { WETH: addr.ChainlinkFeed_ETH_USD, USDC: addr.ChainlinkFeed_USDC_USD, EURC: addr.ChainlinkFeed_EUR_USD },
  fx: { "EURC/USDC": addr.UniswapV3Pool_USDC_EURC_100 },
  feedAbi: compiled.aggregator.abi,
  x402: { recipient: x402Recipient },
  accounts: accounts.map((a, i) => ({ address: a.address, privateKey: keyOf(i) })),
  smartAccounts,
  prediction,
  // The peer chain and the bridge's relayer (its control endpoint: across.mjs).
  peers: [across.peer],
  across: { relayer: across.relayer, spokeAbi: across.spokeAbi },
};
fs.mkdirSync(out, { recursive: true });
fs.writeFileSync(path.join(out, "devnet.json"), JSON.stringify(devnet, null, 2));
const toml = [
  "# Written by scripts/devnet: actiongate server --dev --config <this file> runs against the devnet.",
  "dev = true",
  "",
  `[chains.${CHAIN_ID}]`,
  'name = "devnet"',
  `rpc-url = "${rpcUrl}"`,
  // Every check at the latest block run both by the node and in the gateway's own EVM, each
  // disagreement counted (the e2e tests assert none); DEVNET_FANOUT_CHECK=local|node otherwise
  // (scripts/bench fanout runs local).
  `fanout-check = "${process.env.DEVNET_FANOUT_CHECK || "shadow"}"`,
  // anvil automines: a wallet's next run of transactions handed over once its earlier ones are
  // mined (anvil 1.7.1 mines empty blocks for what reaches its pool while a block is being mined);
  // DEVNET_HAND_OVER=eager otherwise.
  `hand-over = "${process.env.DEVNET_HAND_OVER || "paced"}"`,
  `[chains.${CHAIN_ID}.tokens.USDC]`,
  `address = "${addr.USDC}"`,
  "decimals = 6",
  `[chains.${CHAIN_ID}.tokens.WETH]`,
  `address = "${addr.WETH9}"`,
  "decimals = 18",
  `[chains.${CHAIN_ID}.tokens.EURC]`,
  `address = "${addr.EURC}"`,
  "decimals = 6",
  `[chains.${CHAIN_ID}.contracts]`,
  ...Object.entries(addr).map(([k, v]) => `${k} = "${v}"`),
  // Aave v3's, flat: Aave<Name>, and each reserve's tokens as Aave<AToken|VariableDebtToken|StableDebtToken>_<SYMBOL>.
  ...Object.entries(aave).filter(([k]) => k !== "reserves").map(([k, v]) => `Aave${k} = "${v}"`),
  ...Object.entries(aave.reserves).flatMap(([symbol, r]) => [
    `AaveAToken_${symbol} = "${r.aToken}"`,
    `AaveVariableDebtToken_${symbol} = "${r.variableDebtToken}"`,
    `AaveStableDebtToken_${symbol} = "${r.stableDebtToken}"`,
  ]),
  `[chains.${CHAIN_ID}.vaults]`,
  `usdc-vault = "${addr.USDCVault}"`,
  `[chains.${CHAIN_ID}.price-feeds.WETH]`,
  `feed = "${addr.ChainlinkFeed_ETH_USD}"`,
  "max-age-seconds = 3600",
  `[chains.${CHAIN_ID}.price-feeds.USDC]`,
  `feed = "${addr.ChainlinkFeed_USDC_USD}"`,
  "max-age-seconds = 86400",
  `[chains.${CHAIN_ID}.price-feeds.EURC]`,
  `feed = "${addr.ChainlinkFeed_EUR_USD}"`,
  "max-age-seconds = 86400",
  // EURC's time-weighted price in the FX pool: used only where no feed or fixed price is configured.
  `[chains.${CHAIN_ID}.price-pools.EURC]`,
  `pool = "${addr.UniswapV3Pool_USDC_EURC_100}"`,
  "twap-seconds = 60",
  `[chains.${CHAIN_ID}.fx-pairs]`,
  `"EURC/USDC" = "${addr.UniswapV3Pool_USDC_EURC_100}"`,
  // The prediction markets' questions, by condition id.
  ...predictionMarkets.flatMap((m) => [
    `[chains.${CHAIN_ID}.prediction-questions."${m.conditionId}"]`,
    `question = ${JSON.stringify(m.question)}`,
    `outcomes = ${JSON.stringify(m.outcomes)}`,
    `ends-at = "${m.endsAt}"`,
  ]),
  // Across routes both ways: USDC for USDC, a 5 bps fee, fills in about two seconds.
  ...[
    [CHAIN_ID, across.peer.chainId, across.peer.contracts.AcrossSpokePool, across.peer.tokens.USDC.address],
    [across.peer.chainId, CHAIN_ID, addr.AcrossSpokePool, addr.USDC],
  ].flatMap(([from, to, spoke, usdcOut]) => [
    `[chains.${from}.bridge-routes.${to}]`,
    `destination-spoke = "${spoke}"`,
    "fee-bps = 5",
    "fill-seconds = 2",
    `[chains.${from}.bridge-routes.${to}.tokens]`,
    `USDC = "${usdcOut}"`,
  ]),
  "",
  `[chains.${across.peer.chainId}]`,
  'name = "devnet-peer"',
  `rpc-url = "${across.peer.rpcUrl}"`,
  ...Object.entries(across.peer.tokens).flatMap(([symbol, t]) => [
    `[chains.${across.peer.chainId}.tokens.${symbol}]`,
    `address = "${t.address}"`,
    `decimals = ${t.decimals}`,
  ]),
  `[chains.${across.peer.chainId}.contracts]`,
  ...Object.entries(across.peer.contracts).map(([k, v]) => `${k} = "${v}"`),
  "",
  "[x402]",
  `chain-id = ${CHAIN_ID}`,
  `recipient = "${x402Recipient}"`,
  "",
].join("\n");
fs.writeFileSync(path.join(out, "devnet.toml"), toml);
console.log("devnet ready");
