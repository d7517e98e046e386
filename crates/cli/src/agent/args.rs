//! The agent CLI's commands and arguments (clap).

use clap::{Args, Subcommand};

#[derive(Debug, Args, Clone)]
pub struct Global {
    /// The gateway's base URL.
    #[arg(
        long,
        env = "ACTIONGATE_BASE_URL",
        hide_env_values = true,
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub base_url: String,
    /// Use the test environment: ACTIONGATE_TESTNET_URL as the base URL and chain 84532.
    #[arg(long, global = true)]
    pub testnet: bool,
    /// Print {"success", "code", "data"} and nothing else on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// Send writes; without it a write prints what it would send and sends nothing.
    #[arg(long, global = true)]
    pub confirm_writes: bool,
}

impl Global {
    pub(super) fn base(&self) -> String {
        if self.testnet {
            std::env::var("ACTIONGATE_TESTNET_URL").unwrap_or_else(|_| self.base_url.clone())
        } else {
            self.base_url.clone()
        }
    }

    pub(super) fn default_chain(&self) -> u64 {
        if self.testnet { 84532 } else { 8453 }
    }
}

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Discover actions. `actiongate actions` lists what this agent may call; `actions catalog` the whole catalog.
    ///
    /// Example: `actiongate actions catalog --json`
    Actions {
        #[command(subcommand)]
        which: Option<ActionsCommand>,
    },
    /// Run an action (execute-intent; `--direct` runs it from the agent's own wallet).
    ///
    /// Example: `actiongate run get-earn-provider --param providerId=earn-router --wait`
    Run(RunArgs),
    /// The status of an intent; `--wait` polls until it ends.
    ///
    /// Example: `actiongate intent-status 01a2… --wait`
    IntentStatus {
        intent_id: String,
        #[arg(long)]
        wait: bool,
    },
    /// Every check a run would make (key, allowlist, enabled, params, chain, limits, delegation,
    /// credits, venue), each with its verdict. Sends nothing that writes.
    ///
    /// Example: `actiongate preflight swap --param tokenIn=USDC --param tokenOut=WETH --param amountIn=10`
    Preflight(PreflightArgs),
    /// Build unsigned transactions for local signing (Model B): in order, an approval first when
    /// needed, nonce and fees filled for --wallet-address, each simulated. Signs and sends nothing.
    ///
    /// Example: `actiongate build-tx swap --param tokenIn=USDC --param tokenOut=WETH --param amountIn=10 --wallet-address 0x…`
    BuildTx(BuildTxArgs),
    /// ERC-7710 delegation: create (or grant), activate, status, inspect, balance, redeem, revoke.
    ///
    /// Example: `actiongate delegation status`
    Delegation {
        #[command(subcommand)]
        command: DelegationCommand,
    },
    /// Venue checks before a trade, deposit or order: what blocks a venue (a providerId of the
    /// catalog) for this agent now, and what fixes it.
    ///
    /// Example: `actiongate venue readiness uniswap-v2 --lane execute --token USDC --amount 25`
    Venue {
        #[command(subcommand)]
        command: VenueCommand,
    },
    /// Sign in by e-mail: sends a code, asks for it (or takes --code) and for acceptance of the terms,
    /// and stores the agent key (mode 0600) for the other commands. The key is never printed.
    ///
    /// Example: `actiongate login --email you@example.com`
    Login {
        #[arg(long)]
        email: String,
        /// The 6-digit code from the e-mail; asked on the terminal when omitted.
        #[arg(long)]
        code: Option<String>,
        /// Accept the terms without being asked.
        #[arg(long)]
        accept_terms: bool,
    },
    /// Forget the stored login.
    ///
    /// Example: `actiongate logout`
    Logout,
    /// Which agent the key belongs to (never the key).
    ///
    /// Example: `actiongate whoami --json`
    Whoami,
    /// Personhood for delegation (World ID): org and agent enrollment, deposit receipts. Takes the owner
    /// session of the stored login; `complete` and `consume` are writes.
    ///
    /// Example: `actiongate personhood org begin --org-id acme`
    Personhood {
        #[command(subcommand)]
        command: PersonhoodCommand,
    },
    /// The owner's approval queue: writes priced above the policy's approvalAboveUsd wait here
    /// until approved or rejected. Takes the owner session of the stored login; approve and reject
    /// are writes.
    ///
    /// Example: `actiongate approvals list --state pending`
    Approvals {
        #[command(subcommand)]
        command: ApprovalsCommand,
    },
    /// The account's audit trail: every decision, hash-chained. `export` streams it (JSON lines or
    /// CSV) to stdout or --output; `verify` checks the chain. Takes the owner session of the stored
    /// login.
    ///
    /// Example: `actiongate audit export --format csv --output audit.csv`
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Credits: balance, and buying credits.
    ///
    /// Example: `actiongate credits balance`
    Credits {
        #[command(subcommand)]
        command: CreditsCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Stream the entries, in order.
    Export {
        /// Entries at or after this instant (RFC 3339).
        #[arg(long)]
        from: Option<String>,
        /// Entries before this instant (RFC 3339).
        #[arg(long)]
        to: Option<String>,
        /// jsonl (default) or csv.
        #[arg(long)]
        format: Option<String>,
        /// Write to this file instead of stdout.
        #[arg(long)]
        output: Option<std::path::PathBuf>,
    },
    /// Check that every entry follows the one before and matches its hash.
    Verify,
}

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// The account's approvals in one state, newest first.
    List {
        /// pending (default), approved, rejected or expired.
        #[arg(long)]
        state: Option<String>,
    },
    /// Approve a pending intent: it runs at once.
    Approve { intent_id: String },
    /// Reject a pending intent: it ends failed (APPROVAL_REJECTED), nothing sent.
    Reject {
        intent_id: String,
        /// Shown to the agent in the intent's message.
        #[arg(long)]
        reason: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum PersonhoodCommand {
    /// The organization's enrollment.
    #[command(subcommand)]
    Org(OrgCommand),
    /// The agent's own enrollment (the stored agent).
    #[command(subcommand)]
    Agent(AgentPersonhoodCommand),
    /// Single-use deposit receipts.
    #[command(subcommand)]
    Deposit(DepositCommand),
}

#[derive(Debug, Subcommand)]
pub enum OrgCommand {
    /// The proof request for the organization.
    Begin {
        #[arg(long)]
        org_id: String,
        #[arg(long)]
        chain_id: Option<u64>,
    },
    /// Lock the organization with the proof client's result (JSON, or @file). A write.
    Complete {
        #[arg(long)]
        org_id: String,
        #[arg(long)]
        proof: String,
    },
    /// unverified or locked.
    Check {
        #[arg(long)]
        org_id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum AgentPersonhoodCommand {
    /// The proof request for the agent.
    Begin {
        #[arg(long)]
        chain_id: Option<u64>,
    },
    /// Lock the agent with the proof client's result (JSON, or @file). A write.
    Complete {
        #[arg(long)]
        proof: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum DepositCommand {
    /// A deposit challenge and its proof request.
    Begin {
        #[arg(long)]
        org_id: String,
        #[arg(long)]
        deposit_signal: Option<String>,
        #[arg(long)]
        runtime_id: Option<String>,
        #[arg(long)]
        amount_usd: Option<f64>,
        #[arg(long)]
        destination_address: Option<String>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Issue the receipt with the proof client's result (JSON, or @file). A write.
    Complete {
        #[arg(long)]
        org_id: String,
        #[arg(long)]
        proof: String,
    },
    /// Consume a receipt, once. A write.
    Consume {
        #[arg(long)]
        org_id: String,
        #[arg(long)]
        receipt_id: String,
        #[arg(long)]
        runtime_id: Option<String>,
        #[arg(long)]
        amount_usd: Option<f64>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ActionsCommand {
    /// The whole catalog (no key needed).
    Catalog,
}

#[derive(Debug, Subcommand)]
pub enum VenueCommand {
    /// ready and blockingReasons (each with its fix) for a venue on a chain and a lane, read live.
    Readiness {
        /// A providerId of the catalog (`venue list` shows them).
        venue: String,
        /// The chain (default 8453; 84532 with --testnet).
        #[arg(long = "chain")]
        chain_id: Option<u64>,
        /// executeIntent (fan-out, the default), execute (the agent's wallet) or buildTx.
        #[arg(long)]
        lane: Option<String>,
        /// A token symbol or 0x address whose price, balance and allowance are checked.
        #[arg(long)]
        token: Option<String>,
        /// With --token: the amount, in token units, the balance and allowance must cover.
        #[arg(long)]
        amount: Option<String>,
        /// buildTx (required there): the wallet that signs.
        #[arg(long = "wallet")]
        wallet_address: Option<String>,
    },
    /// Every venue with its actions through the lane and whether it is ready.
    List {
        #[arg(long = "chain")]
        chain_id: Option<u64>,
        #[arg(long)]
        lane: Option<String>,
        /// buildTx: the wallet that signs.
        #[arg(long = "wallet")]
        wallet_address: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum CreditsCommand {
    /// Balance, reserved credits and today's free requests.
    Balance,
    /// Buy a credit package (the gateway's packages: `credits_100`, … in its x402 metadata) with x402. A write. Without a
    /// payment, prints the challenge; with --pay-key-file and --rpc-url, pays it from that local key
    /// (a stablecoin transfer) and retries with the receipt; with --pay-key-file and --x402, signs an
    /// EIP-3009 authorization that the gateway settles; with --invoice-id and --receipt, retries a
    /// payment made elsewhere.
    ///
    /// Example: `actiongate credits buy credits_100 --pay-key-file ~/.payer.key --rpc-url https://… --confirm-writes`
    Buy {
        sku: String,
        /// The paying wallet (default: the key's address, else the agent's wallet).
        #[arg(long)]
        user_address: Option<String>,
        /// A file holding the paying wallet's private key (hex); it is read, never printed.
        #[arg(long)]
        pay_key_file: Option<std::path::PathBuf>,
        /// The payment chain's RPC URL, to send the transfer.
        #[arg(long)]
        rpc_url: Option<String>,
        /// Pay the standard x402 v2 way instead: sign an EIP-3009 authorization with --pay-key-file
        /// (no transaction from the key; the gateway settles it).
        #[arg(long, requires = "pay_key_file")]
        x402: bool,
        /// The challenge's invoice, for a payment made elsewhere.
        #[arg(long, requires = "receipt")]
        invoice_id: Option<String>,
        /// The payment transaction's hash.
        #[arg(long, requires = "invoice_id")]
        receipt: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum DelegationCommand {
    /// Build a delegation for the owner to sign.
    Create(Passthrough),
    /// Same as create.
    Grant(Passthrough),
    /// Store a signed delegation. A write.
    Activate(Passthrough),
    /// Whether delegations to this agent are active.
    Status(Passthrough),
    /// A delegation's caveats and usage.
    Inspect(Passthrough),
    /// What a delegator holds of the tokens the caveats name.
    Balance(Passthrough),
    /// Redeem one execution within a delegation. A write.
    Redeem(Passthrough),
    /// Build the revocation for the owner to sign. A write.
    Revoke(Passthrough),
}

#[derive(Debug, Args)]
pub struct Passthrough {
    /// Arguments, as JSON.
    #[arg(long)]
    pub body: Option<String>,
}

#[derive(Debug, Args)]
pub struct ActionArgs {
    /// Action name (any alias).
    pub action: String,
    /// A param as key=value (repeatable); typed by the action's paramsSchema.
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// All params as a JSON object (merged under --param).
    #[arg(long = "params", value_name = "JSON")]
    pub params_json: Option<String>,
    #[arg(long)]
    pub chain_id: Option<u64>,
    /// USD estimate for policy limits.
    #[arg(long)]
    pub estimated_amount_usd: Option<f64>,
}

#[derive(Debug, Args)]
pub struct BuildTxArgs {
    #[command(flatten)]
    pub action: ActionArgs,
    /// The wallet that will sign (needed by every EVM write: balances, allowances, nonce).
    #[arg(long)]
    pub wallet_address: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub action: ActionArgs,
    /// Reuse it to retry without running twice; a new one (UUIDv7) is generated and printed when omitted.
    #[arg(long)]
    pub idempotency_key: Option<String>,
    /// Run from the agent's own execution wallet (POST /agent/execute).
    #[arg(long)]
    pub direct: bool,
    /// Poll the intent until it ends.
    #[arg(long)]
    pub wait: bool,
}

#[derive(Debug, Args)]
pub struct PreflightArgs {
    #[command(flatten)]
    pub action: ActionArgs,
    /// Check the direct-execution lane.
    #[arg(long)]
    pub direct: bool,
}
