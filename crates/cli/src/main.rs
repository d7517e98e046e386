//! `actiongate`: one binary for the gateway server (`actiongate server`), its operations
//! (`migrate`, `master-key`, `admin`), and the agent CLI (`login`, `actions`, `run`, …).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

mod agent;
mod credentials;
mod output;
mod pay;

use actiongate_core::store::CreditStore;
use actiongate_server::{Application, Config, Deps, Overrides};
use anyhow::Context;
use clap::{Args, CommandFactory, Parser, Subcommand};

/// mimalloc instead of the system allocator: under load glibc's malloc and free were ~13 % of the
/// gateway's CPU samples (perf, 3400 submits/s), and the submit path is bound by CPU on small machines.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "actiongate",
    version,
    about = "Gateway through which AI agents act on onchain and off-chain finance under an owner's policy.",
    after_help = "Agent commands read the key from ACTIONGATE_API_KEY or the stored login (actiongate login), and \
                  the gateway from --base-url / ACTIONGATE_BASE_URL. Exit status: 0 success, 2 refused by the \
                  gateway, 1 any other failure."
)]
struct Cli {
    #[command(flatten)]
    global: agent::Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    #[command(flatten)]
    Agent(agent::AgentCommand),
    /// Shell completions.
    ///
    /// Example: `actiongate completions bash > /etc/bash_completion.d/actiongate`
    Completions { shell: clap_complete::Shell },
    /// Run the gateway.
    ///
    /// Example: `actiongate server --dev` (SQLite, dev outbox and a generated master key under
    /// ./.actiongate, listening on 127.0.0.1:8080).
    Server(ServerArgs),
    /// Apply the database migrations and exit.
    ///
    /// Example: `actiongate migrate --database-url postgres://gateway@db/actiongate`
    Migrate(ServerArgs),
    /// Operator tasks run against the database.
    #[command(subcommand)]
    Admin(AdminCommand),
    /// Write a new random master key to a file (mode 0600); refuses to overwrite.
    ///
    /// Example: `actiongate master-key --out /etc/actiongate/master.key`
    MasterKey {
        /// File to create.
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Add credits to an account's ledger (support grants, before payments are set up).
    ///
    /// Example: `actiongate admin grant-credits --account-id 01a2… --credits 500 --reason "pilot"`
    GrantCredits {
        #[command(flatten)]
        db: ServerArgs,
        /// The account (owner) id, as in `data.account.accountId`.
        #[arg(long)]
        account_id: String,
        /// How many credits (a positive integer).
        #[arg(long, value_parser = clap::value_parser!(i64).range(1..))]
        credits: i64,
        /// Why; kept in the ledger.
        #[arg(long)]
        reason: String,
    },
}

/// Flags of `server` and `migrate`; each is also `ACTIONGATE_<NAME>` and a key of the TOML file.
#[derive(Debug, Args)]
struct ServerArgs {
    /// TOML configuration file.
    #[arg(long, env = "ACTIONGATE_CONFIG")]
    config: Option<PathBuf>,
    /// Embedded defaults: SQLite, dev outbox, generated master key.
    #[arg(long, env = "ACTIONGATE_DEV", value_parser = clap::builder::FalseyValueParser::new(), default_value_t = false, num_args = 0, default_missing_value = "true")]
    dev: bool,
    /// Address to listen on (port 0 picks a free port). Default 127.0.0.1:8080.
    #[arg(long, env = "ACTIONGATE_LISTEN")]
    listen: Option<SocketAddr>,
    /// Directory for the SQLite database, the outbox and the dev master key. Default ./.actiongate.
    #[arg(long, env = "ACTIONGATE_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// sqlite://… or postgres://… (TLS: its sslmode; without one verify-full, prefer on loopback).
    /// Default sqlite://<data-dir>/actiongate.db.
    #[arg(long, env = "ACTIONGATE_DATABASE_URL")]
    database_url: Option<String>,
    /// smtps://host:port (TLS), smtp+starttls://host:port (STARTTLS required) or smtp://host:port
    /// (plain); mail goes there instead of the outbox.
    #[arg(long, env = "ACTIONGATE_SMTP_URL")]
    smtp_url: Option<String>,
    /// Master key file. Default <data-dir>/master.key.
    #[arg(long, env = "ACTIONGATE_MASTER_KEY_FILE")]
    master_key_file: Option<PathBuf>,
    /// Serve the Prometheus metrics (GET /metrics) on this address only, instead of on --listen.
    #[arg(long, env = "ACTIONGATE_METRICS_LISTEN")]
    metrics_listen: Option<SocketAddr>,
    /// Log lines as text (default) or as JSON objects (one per line, with the request id).
    #[arg(long, env = "ACTIONGATE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

impl From<ServerArgs> for Overrides {
    fn from(a: ServerArgs) -> Self {
        Overrides {
            config: a.config,
            dev: a.dev,
            listen: a.listen,
            data_dir: a.data_dir,
            database_url: a.database_url,
            smtp_url: a.smtp_url,
            master_key_file: a.master_key_file,
            metrics_listen: a.metrics_listen,
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // Help and version are successes; a usage error is a failure (exit 1), not a refusal.
            return if e.use_stderr() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if let Command::Agent(command) = cli.command {
        let json_mode = cli.global.json;
        return match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt
                .block_on(agent::run(cli.global, command))
                .finish(json_mode),
            Err(e) => output::Outcome::failed("LOCAL", e.to_string()).finish(json_mode),
        };
    }
    if let Command::Completions { shell } = cli.command {
        clap_complete::generate(
            shell,
            &mut Cli::command(),
            "actiongate",
            &mut std::io::stdout(),
        );
        return ExitCode::SUCCESS;
    }
    let log_format = match &cli.command {
        Command::Server(a) | Command::Migrate(a) => a.log_format,
        Command::Admin(AdminCommand::GrantCredits { db, .. }) => db.log_format,
        _ => LogFormat::Text,
    };
    init_tracing(log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Agent(_) | Command::Completions { .. } => Ok(()),
        Command::Server(args) => {
            let config = Config::load(args.into())?;
            let app = Application::build(&config, Deps::default()).await?;
            let mut stdout = std::io::stdout().lock();
            writeln!(
                stdout,
                "actiongate listening on http://{}",
                app.local_addr()
            )?;
            stdout.flush()?;
            drop(stdout);
            app.run(shutdown_signal()).await?;
            tracing::info!("stopped");
            Ok(())
        }
        Command::Migrate(args) => {
            let config = Config::load(args.into())?;
            if config.database_url.starts_with("sqlite:") {
                tokio::fs::create_dir_all(&config.data_dir).await?;
            }
            let store = actiongate_store::SqlStore::connect(&config.database_url).await?;
            store.migrate().await?;
            store.close().await;
            println!("migrations applied");
            Ok(())
        }
        Command::Admin(AdminCommand::GrantCredits {
            db,
            account_id,
            credits,
            reason,
        }) => {
            let config = Config::load(db.into())?;
            let store = actiongate_store::SqlStore::connect(&config.database_url).await?;
            store.migrate().await?;
            if store.get_account_exists(&account_id).await? {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
                    .unwrap_or(0);
                let account = store
                    .grant_credits(&account_id, credits, "grant", &reason, now)
                    .await?;
                println!(
                    "granted {credits} credits to {account_id}; balance {}",
                    account.balance
                );
                store.close().await;
                Ok(())
            } else {
                store.close().await;
                anyhow::bail!("no account {account_id}")
            }
        }
        Command::MasterKey { out } => {
            let key = actiongate_server::app::new_master_key_hex()?;
            actiongate_server::app::write_private(&out, key.as_bytes())
                .await
                .with_context(|| format!("cannot create {}", out.display()))?;
            println!("master key written to {}", out.display());
            Ok(())
        }
    }
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown signal received; finishing in-flight requests");
}

/// Crates whose `debug` and `trace` events print whole messages (MCP requests and results carry
/// agent keys, owner sessions and e-mail codes): held at `info` whatever the filter says.
const VERBATIM_AT_DEBUG: &[&str] = &["rmcp"];

/// Logs go to stderr (stdout carries only the listening line); `ACTIONGATE_LOG` or `RUST_LOG`
/// sets the filter, except that the crates of [`VERBATIM_AT_DEBUG`] never log below `info`. In JSON
/// each line is one object: its fields, the message, and the request span (with the request id)
/// of a line logged while a request is served.
fn init_tracing(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let mut filter = std::env::var("ACTIONGATE_LOG")
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .or_else(|| EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| EnvFilter::new("info,sqlx=warn"));
    for target in VERBATIM_AT_DEBUG {
        if let Ok(cap) = format!("{target}=info").parse() {
            filter = filter.add_directive(cap);
        }
    }
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    match format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(ansi)
            .with_writer(std::io::stderr)
            .init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init(),
    }
}
