//! Swaps: Uniswap V2 through its router, V3 through SwapRouter02 with QuoterV2 quotes; the terms
//! (amounts, slippage, deadline, recipient) both share.

use actiongate_api_types::ErrorCode;
use actiongate_core::error::Error;
use alloy::primitives::{Address, U256};
use serde_json::{Value, json};

use super::{
    Plan, Token, V2_ROUTER, V3_QUOTER, V3_ROUTER, address, approval_of, call, contract, invalid,
    now_seconds, opt_str, opt_u64, param_str, resolve_token, units, view, weth,
};
use crate::amount::format_units;
use crate::bindings::{IQuoterV2, ISwapRouter02, IUniswapV2Router02};
use crate::client::ChainClient;

/// A Uniswap V2 swap through its router (an approval first when the allowance is short).
pub(super) async fn plan_swap(
    client: &ChainClient,
    params: &Value,
    signer: Address,
) -> Result<Plan, Error> {
    let router = contract(client, V2_ROUTER)?;
    let token_in = resolve_token(client, "tokenIn", param_str(params, "tokenIn")?).await?;
    let token_out = resolve_token(client, "tokenOut", param_str(params, "tokenOut")?).await?;
    let weth = weth(client)?;
    let leg = |t: &Token| match t {
        Token::Native => weth,
        Token::Erc20 { address, .. } => *address,
    };
    let path = vec![leg(&token_in), leg(&token_out)];
    if path[0] == path[1] {
        return Err(invalid("tokenOut", "must differ from tokenIn"));
    }
    let amount_in = units(
        "amountIn",
        param_str(params, "amountIn")?,
        token_in.decimals(),
    )?;
    // The quote and the allowance side by side: one round of a fan-out's gathered reads.
    let (amounts, approve) = tokio::try_join!(
        view(
            client,
            router,
            IUniswapV2Router02::getAmountsOutCall {
                amountIn: amount_in,
                path: path.clone(),
            },
        ),
        approval_of(client, &token_in, signer, router, amount_in),
    )?;
    let quoted = amounts.last().copied().unwrap_or_default();
    let terms = swap_terms(params, signer, &token_in, &token_out, amount_in, quoted, "")?;
    let (min_out, recipient, description) =
        (terms.min_out, terms.recipient, terms.description.clone());
    let deadline = U256::from(now_seconds() + opt_u64(params, "deadlineSeconds")?.unwrap_or(600));
    let mut calls: Vec<_> = approve.into_iter().collect();
    let swap = match (&token_in, &token_out) {
        (Token::Native, _) => call(
            router,
            IUniswapV2Router02::swapExactETHForTokensCall {
                amountOutMin: min_out,
                path,
                to: recipient,
                deadline,
            },
            amount_in,
            description,
        ),
        (Token::Erc20 { .. }, out) => {
            if *out == Token::Native {
                call(
                    router,
                    IUniswapV2Router02::swapExactTokensForETHCall {
                        amountIn: amount_in,
                        amountOutMin: min_out,
                        path,
                        to: recipient,
                        deadline,
                    },
                    U256::ZERO,
                    description,
                )
            } else {
                call(
                    router,
                    IUniswapV2Router02::swapExactTokensForTokensCall {
                        amountIn: amount_in,
                        amountOutMin: min_out,
                        path,
                        to: recipient,
                        deadline,
                    },
                    U256::ZERO,
                    description,
                )
            }
        }
    };
    calls.push(swap);
    Ok(Plan {
        calls,
        summary: terms.summary,
    })
}

/// A Uniswap V3 swap through SwapRouter02, its minimum out from QuoterV2 (an approval first when the
/// allowance is short).
pub(super) async fn plan_swap_v3(
    client: &ChainClient,
    params: &Value,
    signer: Address,
) -> Result<Plan, Error> {
    let router = contract(client, V3_ROUTER)?;
    let quoter = contract(client, V3_QUOTER)?;
    let token_in = resolve_token(client, "tokenIn", param_str(params, "tokenIn")?).await?;
    let token_out = resolve_token(client, "tokenOut", param_str(params, "tokenOut")?).await?;
    let Token::Erc20 {
        address: out_addr, ..
    } = &token_out
    else {
        return Err(invalid(
            "tokenOut",
            "the native coin is not an output of swap-v3 here; swap to WETH and unwrap-native",
        ));
    };
    let in_addr = match &token_in {
        Token::Native => weth(client)?,
        Token::Erc20 { address, .. } => *address,
    };
    if in_addr == *out_addr {
        return Err(invalid("tokenOut", "must differ from tokenIn"));
    }
    let fee = opt_u64(params, "fee")?.unwrap_or(3000);
    let fee_u24 = alloy::primitives::Uint::<24, 1>::try_from(fee)
        .map_err(|_| invalid("fee", "is not a fee tier"))?;
    let amount_in = units(
        "amountIn",
        param_str(params, "amountIn")?,
        token_in.decimals(),
    )?;
    let quote = IQuoterV2::quoteExactInputSingleCall {
        params: IQuoterV2::QuoteExactInputSingleParams {
            tokenIn: in_addr,
            tokenOut: *out_addr,
            amountIn: amount_in,
            fee: fee_u24,
            sqrtPriceLimitX96: Default::default(),
        },
    };
    let quoted = async {
        view(client, quoter, quote).await.map_err(|e| {
            if e.code == ErrorCode::ExecutionReverted || e.code == ErrorCode::NotAvailable {
                Error::new(
                    ErrorCode::ExecutionReverted,
                    format!(
                        "No {} / {} pool with fee {fee} can quote this swap.",
                        token_in.symbol(),
                        token_out.symbol()
                    ),
                )
            } else {
                e
            }
        })
    };
    // The quote and the allowance side by side: one round of a fan-out's gathered reads.
    let (quoted, approve) = tokio::try_join!(
        quoted,
        approval_of(client, &token_in, signer, router, amount_in)
    )?;
    let quoted = quoted.amountOut;
    let terms = swap_terms(
        params,
        signer,
        &token_in,
        &token_out,
        amount_in,
        quoted,
        &format!(" through the V3 pool with fee {fee}"),
    )?;
    let (min_out, recipient) = (terms.min_out, terms.recipient);
    let swap = ISwapRouter02::exactInputSingleCall {
        params: ISwapRouter02::ExactInputSingleParams {
            tokenIn: in_addr,
            tokenOut: *out_addr,
            fee: fee_u24,
            recipient,
            amountIn: amount_in,
            amountOutMinimum: min_out,
            sqrtPriceLimitX96: Default::default(),
        },
    };
    let mut calls: Vec<_> = approve.into_iter().collect();
    let value = match &token_in {
        Token::Native => amount_in,
        Token::Erc20 { .. } => U256::ZERO,
    };
    calls.push(call(router, swap, value, terms.description));
    let mut summary = terms.summary;
    summary["fee"] = json!(fee);
    Ok(Plan { calls, summary })
}

/// What both swap venues share: the output bound (`amountOutMin`, else the quote less
/// `slippageBps`), the recipient (the signer by default), the description and the summary.
pub(super) struct SwapTerms {
    min_out: U256,
    recipient: Address,
    description: String,
    summary: Value,
}

pub(super) fn swap_terms(
    params: &Value,
    signer: Address,
    token_in: &Token,
    token_out: &Token,
    amount_in: U256,
    quoted: U256,
    venue: &str,
) -> Result<SwapTerms, Error> {
    let (din, dout) = (token_in.decimals(), token_out.decimals());
    let slippage = opt_u64(params, "slippageBps")?.unwrap_or(50);
    if slippage > 5000 {
        return Err(invalid("slippageBps", "must be at most 5000"));
    }
    let min_out = match opt_str(params, "amountOutMin") {
        Some(text) => units("amountOutMin", text, dout)?,
        None => quoted * U256::from(10_000 - slippage) / U256::from(10_000u64),
    };
    let recipient = match opt_str(params, "recipient") {
        Some(r) => address("recipient", r)?,
        None => signer,
    };
    let description = format!(
        "Swap {} {} for at least {} {} (quoted {}){venue} to {recipient}",
        format_units(amount_in, din),
        token_in.symbol(),
        format_units(min_out, dout),
        token_out.symbol(),
        format_units(quoted, dout)
    );
    let summary = json!({
        "tokenIn": token_in.symbol(),
        "tokenOut": token_out.symbol(),
        "amountIn": format_units(amount_in, din),
        "quotedAmountOut": format_units(quoted, dout),
        "amountOutMin": format_units(min_out, dout),
        "recipient": recipient,
    });
    Ok(SwapTerms {
        min_out,
        recipient,
        description,
        summary,
    })
}
