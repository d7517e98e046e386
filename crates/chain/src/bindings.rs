//! Contract bindings (`sol!`): the interfaces the EVM actions call, and the custom errors their
//! reverts are decoded with.

use alloy::sol;

sol! {
    /// ERC-20 (and the EIP-20 events).
    interface IERC20 {
        function balanceOf(address owner) external view returns (uint256);
        function allowance(address owner, address spender) external view returns (uint256);
        function approve(address spender, uint256 amount) external returns (bool);
        function transfer(address to, uint256 amount) external returns (bool);
        function decimals() external view returns (uint8);
        function name() external view returns (string);
        function symbol() external view returns (string);
        function totalSupply() external view returns (uint256);
        event Transfer(address indexed from, address indexed to, uint256 value);
    }

    /// WETH9.
    interface IWETH9 {
        function deposit() external payable;
        function withdraw(uint256 wad) external;
    }

    /// Uniswap V2 Router02.
    interface IUniswapV2Router02 {
        function getAmountsOut(uint256 amountIn, address[] calldata path) external view returns (uint256[] memory amounts);
        function swapExactTokensForTokens(uint256 amountIn, uint256 amountOutMin, address[] calldata path, address to, uint256 deadline) external returns (uint256[] memory amounts);
        function swapExactETHForTokens(uint256 amountOutMin, address[] calldata path, address to, uint256 deadline) external payable returns (uint256[] memory amounts);
        function swapExactTokensForETH(uint256 amountIn, uint256 amountOutMin, address[] calldata path, address to, uint256 deadline) external returns (uint256[] memory amounts);
    }

    /// Uniswap V3 QuoterV2 (its quote functions revert internally and are called with eth_call).
    interface IQuoterV2 {
        struct QuoteExactInputSingleParams {
            address tokenIn;
            address tokenOut;
            uint256 amountIn;
            uint24 fee;
            uint160 sqrtPriceLimitX96;
        }
        function quoteExactInputSingle(QuoteExactInputSingleParams memory params) external returns (uint256 amountOut, uint160 sqrtPriceX96After, uint32 initializedTicksCrossed, uint256 gasEstimate);
    }

    /// Uniswap SwapRouter02 (its V3 exact-input single-pool swap).
    interface ISwapRouter02 {
        struct ExactInputSingleParams {
            address tokenIn;
            address tokenOut;
            uint24 fee;
            address recipient;
            uint256 amountIn;
            uint256 amountOutMinimum;
            uint160 sqrtPriceLimitX96;
        }
        function exactInputSingle(ExactInputSingleParams calldata params) external payable returns (uint256 amountOut);
    }

    /// A Uniswap V3 pool: its tokens, fee, price, liquidity and price accumulator.
    interface IUniswapV3Pool {
        function token0() external view returns (address);
        function token1() external view returns (address);
        function fee() external view returns (uint24);
        function liquidity() external view returns (uint128);
        function slot0() external view returns (uint160 sqrtPriceX96, int24 tick, uint16 observationIndex, uint16 observationCardinality, uint16 observationCardinalityNext, uint8 feeProtocol, bool unlocked);
        function observe(uint32[] calldata secondsAgos) external view returns (int56[] memory tickCumulatives, uint160[] memory secondsPerLiquidityCumulativeX128s);
    }

    /// The Uniswap V3 factory: the pool of two tokens and a fee.
    interface IUniswapV3Factory {
        function getPool(address tokenA, address tokenB, uint24 fee) external view returns (address pool);
    }

    /// Chainlink's `AggregatorV3Interface`: the price feeds the gateway prices writes with.
    interface AggregatorV3Interface {
        function decimals() external view returns (uint8);
        function latestRoundData() external view returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound);
        function getRoundData(uint80 roundId) external view returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound);
    }

    /// A token or contract that can be paused (OpenZeppelin `Pausable`, Circle's FiatToken).
    interface IPausable {
        function paused() external view returns (bool);
    }

    /// ERC-4626 tokenized vault.
    interface IERC4626 {
        function asset() external view returns (address);
        function decimals() external view returns (uint8);
        function totalAssets() external view returns (uint256);
        function balanceOf(address owner) external view returns (uint256);
        function convertToAssets(uint256 shares) external view returns (uint256);
        function maxWithdraw(address owner) external view returns (uint256);
        function maxDeposit(address receiver) external view returns (uint256);
        function deposit(uint256 assets, address receiver) external returns (uint256 shares);
        function withdraw(uint256 assets, address receiver, address owner) external returns (uint256 shares);
        function redeem(uint256 shares, address receiver, address owner) external returns (uint256 assets);
    }

    /// Custom errors of OpenZeppelin 5 (ERC-20, ERC-4626, SafeERC20) and of the Delegation Framework
    /// that reverts are decoded with.
    interface KnownErrors {
        error ERC20InsufficientBalance(address sender, uint256 balance, uint256 needed);
        error ERC20InsufficientAllowance(address spender, uint256 allowance, uint256 needed);
        error ERC20InvalidReceiver(address receiver);
        error ERC20InvalidSender(address sender);
        error ERC4626ExceededMaxDeposit(address receiver, uint256 assets, uint256 max);
        error ERC4626ExceededMaxWithdraw(address owner, uint256 assets, uint256 max);
        error ERC4626ExceededMaxRedeem(address owner, uint256 shares, uint256 max);
        error SafeERC20FailedOperation(address token);
        // The MetaMask Delegation Framework's DelegationManager.
        error CannotUseADisabledDelegation();
        error InvalidDelegate();
        error InvalidDelegator();
        error InvalidAuthority();
        error InvalidEOASignature();
        error InvalidERC1271Signature();
        error EmptySignature();
        error BatchDataLengthMismatch();
        error EnforcedPause();
    }
}

sol! {
    /// Aave v3's Pool (the calls the lending actions make).
    interface IAavePool {
        function supply(address asset, uint256 amount, address onBehalfOf, uint16 referralCode) external;
        function withdraw(address asset, uint256 amount, address to) external returns (uint256);
        function borrow(address asset, uint256 amount, uint256 interestRateMode, uint16 referralCode, address onBehalfOf) external;
        function repay(address asset, uint256 amount, uint256 interestRateMode, address onBehalfOf) external returns (uint256);
        function setUserUseReserveAsCollateral(address asset, bool useAsCollateral) external;
        function getReservesList() external view returns (address[] memory);
        function getUserAccountData(address user) external view returns (uint256 totalCollateralBase, uint256 totalDebtBase, uint256 availableBorrowsBase, uint256 currentLiquidationThreshold, uint256 ltv, uint256 healthFactor);
    }

    /// Aave v3's AaveProtocolDataProvider.
    interface IAaveDataProvider {
        function getReserveConfigurationData(address asset) external view returns (uint256 decimals, uint256 ltv, uint256 liquidationThreshold, uint256 liquidationBonus, uint256 reserveFactor, bool usageAsCollateralEnabled, bool borrowingEnabled, bool stableBorrowRateEnabled, bool isActive, bool isFrozen);
        function getReserveData(address asset) external view returns (uint256 unbacked, uint256 accruedToTreasuryScaled, uint256 totalAToken, uint256 totalStableDebt, uint256 totalVariableDebt, uint256 liquidityRate, uint256 variableBorrowRate, uint256 stableBorrowRate, uint256 averageStableBorrowRate, uint256 liquidityIndex, uint256 variableBorrowIndex, uint40 lastUpdateTimestamp);
        function getReserveCaps(address asset) external view returns (uint256 borrowCap, uint256 supplyCap);
        function getPaused(address asset) external view returns (bool isPaused);
        function getReserveTokensAddresses(address asset) external view returns (address aTokenAddress, address stableDebtTokenAddress, address variableDebtTokenAddress);
        function getUserReserveData(address asset, address user) external view returns (uint256 currentATokenBalance, uint256 currentStableDebt, uint256 currentVariableDebt, uint256 principalStableDebt, uint256 scaledVariableDebt, uint256 stableBorrowRate, uint256 liquidityRate, uint40 stableRateLastUpdated, bool usageAsCollateralEnabled);
    }

    /// Aave v3's AaveOracle (prices in the base currency: USD with 8 decimals here).
    interface IAaveOracle {
        function getAssetPrice(address asset) external view returns (uint256);
    }

    /// Aave v3's WrappedTokenGatewayV3 (native ETH in and out of the pool).
    interface IWrappedTokenGateway {
        function depositETH(address pool, address onBehalfOf, uint16 referralCode) external payable;
        function withdrawETH(address pool, uint256 amount, address to) external;
        function repayETH(address pool, uint256 amount, uint256 rateMode, address onBehalfOf) external payable;
        function borrowETH(address pool, uint256 amount, uint256 interestRateMode, uint16 referralCode) external;
    }

    /// Aave v3's debt tokens: credit delegation (a borrow for another, or through the gateway).
    interface IAaveDebtToken {
        function approveDelegation(address delegatee, uint256 amount) external;
        function borrowAllowance(address fromUser, address toUser) external view returns (uint256);
    }

    /// Gnosis Conditional Tokens (ERC-1155 outcome positions of conditions an oracle reports).
    interface IConditionalTokens {
        function getOutcomeSlotCount(bytes32 conditionId) external view returns (uint256);
        function getCollectionId(bytes32 parentCollectionId, bytes32 conditionId, uint256 indexSet) external view returns (bytes32);
        function getPositionId(address collateralToken, bytes32 collectionId) external pure returns (uint256);
        function balanceOf(address owner, uint256 id) external view returns (uint256);
        function balanceOfBatch(address[] owners, uint256[] ids) external view returns (uint256[]);
        function payoutNumerators(bytes32 conditionId, uint256 index) external view returns (uint256);
        function payoutDenominator(bytes32 conditionId) external view returns (uint256);
        function isApprovedForAll(address owner, address operator) external view returns (bool);
        function setApprovalForAll(address operator, bool approved) external;
        function redeemPositions(address collateralToken, bytes32 parentCollectionId, bytes32 conditionId, uint256[] indexSets) external;
    }

    /// Gnosis's FixedProductMarketMaker (one condition's outcomes against a collateral).
    interface IFixedProductMarketMaker {
        function calcBuyAmount(uint256 investmentAmount, uint256 outcomeIndex) external view returns (uint256);
        function calcSellAmount(uint256 returnAmount, uint256 outcomeIndex) external view returns (uint256);
        function buy(uint256 investmentAmount, uint256 outcomeIndex, uint256 minOutcomeTokensToBuy) external;
        function sell(uint256 returnAmount, uint256 outcomeIndex, uint256 maxOutcomeTokensToSell) external;
        event FPMMBuy(address indexed buyer, uint256 investmentAmount, uint256 feeAmount, uint256 indexed outcomeIndex, uint256 outcomeTokensBought);
        event FPMMSell(address indexed seller, uint256 returnAmount, uint256 feeAmount, uint256 indexed outcomeIndex, uint256 outcomeTokensSold);
    }

    /// Gnosis's FixedProductMarketMakerFactory: the markets are its creation events.
    interface IFPMMFactory {
        event FixedProductMarketMakerCreation(address indexed creator, address fixedProductMarketMaker, address indexed conditionalTokens, address indexed collateralToken, bytes32[] conditionIds, uint256 fee);
    }
}

/// Across's SpokePool: its deposit and events carry more than seven fields, as Across wrote them.
#[allow(clippy::too_many_arguments)]
mod across {
    alloy::sol! {
        /// Across V3's SpokePool (5.x: bytes32 addresses, uint256 deposit ids): deposits, fills,
        /// relayer refunds.
        interface IAcrossSpokePool {
            struct V3RelayData {
                bytes32 depositor;
                bytes32 recipient;
                bytes32 exclusiveRelayer;
                bytes32 inputToken;
                bytes32 outputToken;
                uint256 inputAmount;
                uint256 outputAmount;
                uint256 originChainId;
                uint256 depositId;
                uint32 fillDeadline;
                uint32 exclusivityDeadline;
                bytes message;
            }
            struct V3RelayExecutionEventInfo {
                bytes32 updatedRecipient;
                bytes32 updatedMessageHash;
                uint256 updatedOutputAmount;
                uint8 fillType;
            }
            function deposit(bytes32 depositor, bytes32 recipient, bytes32 inputToken, bytes32 outputToken, uint256 inputAmount, uint256 outputAmount, uint256 destinationChainId, bytes32 exclusiveRelayer, uint32 quoteTimestamp, uint32 fillDeadline, uint32 exclusivityParameter, bytes message) external payable;
            function getV3RelayHash(V3RelayData relayData) external view returns (bytes32);
            function fillStatuses(bytes32 relayHash) external view returns (uint256);
            function pausedDeposits() external view returns (bool);
            event FundsDeposited(bytes32 inputToken, bytes32 outputToken, uint256 inputAmount, uint256 outputAmount, uint256 indexed destinationChainId, uint256 indexed depositId, uint32 quoteTimestamp, uint32 fillDeadline, uint32 exclusivityDeadline, bytes32 indexed depositor, bytes32 recipient, bytes32 exclusiveRelayer, bytes message);
            event FilledRelay(bytes32 inputToken, bytes32 outputToken, uint256 inputAmount, uint256 outputAmount, uint256 repaymentChainId, uint256 indexed originChainId, uint256 indexed depositId, uint32 fillDeadline, uint32 exclusivityDeadline, bytes32 exclusiveRelayer, bytes32 indexed relayer, bytes32 depositor, bytes32 recipient, bytes32 messageHash, V3RelayExecutionEventInfo relayExecutionInfo);
            event ExecutedRelayerRefundRoot(uint256 amountToReturn, uint256 indexed chainId, uint256[] refundAmounts, uint32 indexed rootBundleId, uint32 indexed leafId, address l2TokenAddress, address[] refundAddresses, bool deferredRefunds, address caller);
        }
    }
}
pub use across::IAcrossSpokePool;
