// SPDX-License-Identifier: MIT
// An ERC-4626 vault over the devnet stablecoin (OpenZeppelin's implementation, unchanged).
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {ERC4626} from "@openzeppelin/contracts/token/ERC20/extensions/ERC4626.sol";

contract DevnetVault is ERC4626 {
    constructor(IERC20 asset_) ERC20("Devnet USDC Vault", "dvUSDC") ERC4626(asset_) {}
}
