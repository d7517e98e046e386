//! Building and running the server: data directory, master key, store, mailer, catalog, router,
//! listener. `Application::build` binds the socket (port 0 picks a free one) before it returns, so
//! the caller can print the real address.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use actiongate_chain::payments::{ChainPayments, ChainSettler};
use actiongate_chain::sender::SendHooks;
use actiongate_chain::{
    ChainClients, ChainPrices, EarnReads, EvmProvider, FrameworkChains, MarketReads,
};
use actiongate_core::catalog::{BUILTIN_MANIFEST, Catalog};
use actiongate_core::clock::{Clock, SystemClock, rfc3339};
use actiongate_core::crypto::MasterKey;
use actiongate_core::delegations::DelegationChain;
use actiongate_core::execution::{Provider, Registry};
use actiongate_core::mail::Mailer;
use actiongate_core::personhood::{ProofVerifier, RpSigner};
use actiongate_core::prices::{PriceReads, Prices};
use actiongate_core::providers::internal::{BUILTIN_DATA, InternalData, InternalReads};
use actiongate_core::providers::orders::OrderBook;
use actiongate_core::purchases::{AuthorizationSettler, PaymentVerifier};
use actiongate_core::{Gateway, PersonhoodPorts, Ports};
use actiongate_store::SqlStore;
use tokio::net::TcpListener;

use crate::config::{Config, parse_smtp_url};
use crate::http::fixed::FixedBody;
use crate::http::{AppState, router};
use crate::mail::{OutboxMailer, SmtpMailer};
use crate::worldid::WorldIdVerifier;

/// Replaceable parts, for tests (a manual clock, say).
#[derive(Default, Clone)]
pub struct Deps {
    pub clock: Option<Arc<dyn Clock>>,
    pub mailer: Option<Arc<dyn Mailer>>,
    /// Providers beside the built-in ones (tests use stand-ins for venues that are not built yet).
    pub providers: Vec<Arc<dyn Provider>>,
    /// The personhood proof verifier; the World ID verify API when absent.
    pub verifier: Option<Arc<dyn ProofVerifier>>,
    /// The EVM sender's fault-injection points (tests kill the process right after a send, or take
    /// an intent's lease away between reserving and signing).
    pub send_hooks: SendHooks,
}

/// A built, bound server.
pub struct Application {
    listener: TcpListener,
    router: axum::Router,
    store: Arc<SqlStore>,
    addr: SocketAddr,
    gateway: Arc<Gateway>,
    workers: usize,
    /// The x402 settlement wallet's sender, swept in the background for unmined transactions
    /// every `sweep_every` (the bump interval, 1 to 60 s).
    settler: Option<Arc<ChainSettler>>,
    sweep_every: std::time::Duration,
    /// The agent wallets' sender, swept as often for unmined gap fills.
    evm: Arc<EvmProvider>,
    /// `metrics-listen`: `GET /metrics` on its own listener.
    metrics: Option<(TcpListener, axum::Router)>,
    /// Earn discovery, whose vault share prices are sampled in the background.
    earn: Arc<EarnReads>,
}

impl Application {
    pub async fn build(config: &Config, deps: Deps) -> Result<Self, StartError> {
        tokio::fs::create_dir_all(&config.data_dir)
            .await
            .with_context(|| format!("cannot create data dir {}", config.data_dir.display()))?;
        let master = load_master_key(&config.master_key_file, config.dev).await?;

        let store = Arc::new(
            SqlStore::connect(&config.database_url)
                .await
                .context("cannot open the database")?,
        );
        store
            .migrate()
            .await
            .context("cannot apply database migrations")?;

        let mailer: Arc<dyn Mailer> = match (deps.mailer, &config.smtp_url) {
            (Some(m), _) => m,
            (None, Some(url)) => {
                let target = parse_smtp_url(url).context("invalid SMTP URL")?;
                let roots =
                    match &config.smtp_ca_file {
                        Some(file) => Some(tokio::fs::read(file).await.with_context(|| {
                            format!("cannot read smtp-ca-file {}", file.display())
                        })?),
                        None => None,
                    };
                Arc::new(
                    SmtpMailer::new(&target, roots.as_deref(), &config.mail_from)
                        .context("cannot set up SMTP")?,
                )
            }
            (None, None) => {
                let dir = config.data_dir.join("outbox");
                tokio::fs::create_dir_all(&dir)
                    .await
                    .context("cannot create the outbox")?;
                Arc::new(
                    OutboxMailer::new(dir, &config.mail_from)
                        .context("cannot set up the outbox")?,
                )
            }
        };
        let clock: Arc<dyn Clock> = deps.clock.unwrap_or_else(|| Arc::new(SystemClock));

        let internal_data = match &config.internal_data_file {
            Some(path) => tokio::fs::read_to_string(path)
                .await
                .with_context(|| format!("cannot read internal data {}", path.display()))?,
            None => BUILTIN_DATA.to_owned(),
        };
        let internal =
            InternalData::parse(&internal_data).context("internal data file is invalid")?;
        let chain_clients = ChainClients::connect(&config.settings.chains, config.evm.clone())
            .context("cannot set up the chain clients")?;
        let payments =
            ChainPayments::for_chain(chain_clients.clone(), config.settings.purchase.chain_id)
                .map(|p| Arc::new(p) as Arc<dyn PaymentVerifier>);
        let chain_settler = match chain_clients.get(config.settings.purchase.chain_id) {
            Some(_) => Some(Arc::new(
                ChainSettler::new(
                    chain_clients.clone(),
                    store.clone(),
                    clock.clone(),
                    &master.settlement_wallet_secret(),
                )
                .context("cannot set up the x402 settler")?,
            )),
            None => None,
        };
        let settler = chain_settler
            .clone()
            .map(|s| s as Arc<dyn AuthorizationSettler>);
        let delegations: Arc<dyn DelegationChain> = Arc::new(FrameworkChains::new(
            config.settings.chains.clone(),
            chain_clients.clone(),
        ));
        let reads: Arc<dyn PriceReads> = Arc::new(ChainPrices::new(chain_clients.clone()));
        let prices = Arc::new(Prices::new(config.settings.prices.clone(), Some(reads)));
        let market = MarketReads::new(chain_clients.clone(), prices.clone(), clock.clone());
        let earn = Arc::new(EarnReads::new(
            chain_clients.clone(),
            prices.clone(),
            clock.clone(),
            config.earn,
        ));
        let evm = Arc::new(EvmProvider::new(
            chain_clients,
            store.clone(),
            clock.clone(),
            master.keyring(),
            prices.clone(),
            deps.send_hooks,
        ));
        let mut providers: Vec<Arc<dyn Provider>> = vec![
            Arc::new(InternalReads::new(internal, config.settings.chains.clone())),
            Arc::new(OrderBook::new(store.clone(), clock.clone())),
            evm.clone(),
            Arc::new(market),
            earn.clone(),
        ];
        providers.extend(deps.providers);
        let registry = Arc::new(Registry::new(providers));
        let catalog = Arc::new(
            Catalog::from_manifest(BUILTIN_MANIFEST, rfc3339(clock.now()), registry.as_ref())
                .context("the built-in catalog is invalid")?,
        );
        let catalog_bytes =
            FixedBody::of(catalog.document()).context("cannot serialize the catalog")?;
        let verifier: Arc<dyn ProofVerifier> = match deps.verifier {
            Some(v) => v,
            None => Arc::new(
                WorldIdVerifier::new(&config.personhood_verify_url)
                    .context("cannot set up the World ID client")?,
            ),
        };
        let signer =
            RpSigner::new(&master.rp_signing_secret()).context("cannot derive the RP signer")?;
        tracing::info!(
            rp_id = config.settings.personhood.rp_id,
            signer = signer.address(),
            "personhood relying party"
        );
        let gateway = Arc::new(
            Gateway::new(
                Ports {
                    store: store.clone(),
                    mailer,
                    clock,
                    payments,
                    settler,
                    delegations: Some(delegations),
                    prices: Some(prices),
                    personhood: PersonhoodPorts { signer, verifier },
                    webhooks: Some(Arc::new(crate::webhooks::HttpTransport::new(
                        config.settings.webhooks_allow_private,
                    ))),
                },
                catalog,
                registry,
                master.keyring(),
                config.settings.clone(),
            )
            .context("cannot set up the gateway")?,
        );
        let state = AppState::new(crate::http::Shared {
            gateway: gateway.clone(),
            catalog_bytes,
            mcp_sessions: store.clone(),
            mcp: crate::mcp::GatewayMcp::new(gateway.clone())
                .context("cannot serialize the MCP tools")?,
            mcp_live: crate::mcp::LiveSessions::new(store.clone()),
        });

        let listener = TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let addr = listener
            .local_addr()
            .context("cannot read the bound address")?;
        // The recorder first: what the router and the core count from now on is kept.
        crate::metrics::handle();
        let metrics = match config.metrics_listen {
            Some(at) => {
                let listener = TcpListener::bind(at)
                    .await
                    .with_context(|| format!("cannot listen on {at} for metrics"))?;
                Some((listener, crate::http::metrics_router(state.clone())))
            }
            None => None,
        };
        let router = router(
            state,
            config.mcp_allowed_hosts.clone(),
            config.metrics_listen.is_some(),
        );
        Ok(Self {
            listener,
            router,
            store,
            addr,
            gateway,
            workers: config.runner_workers,
            settler: chain_settler,
            evm,
            metrics,
            earn,
            sweep_every: config.evm.bump_after.clamp(
                std::time::Duration::from_secs(1),
                std::time::Duration::from_secs(60),
            ),
        })
    }

    /// Where `GET /metrics` is served when it has a listener of its own (`metrics-listen`).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics
            .as_ref()
            .and_then(|(listener, _)| listener.local_addr().ok())
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The core, for tests and tools that run beside the server.
    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    /// Serves until `shutdown` resolves, then lets in-flight requests finish, lets each intent
    /// runner worker finish the intent in hand, and closes the store.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), StartError> {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let workers = self.gateway.runner().spawn(self.workers, stop_rx.clone());
        let sweep = spawn_delegation_sweep(self.gateway.clone(), stop_rx.clone());
        let approvals = spawn_approval_sweep(self.gateway.clone(), stop_rx.clone());
        let audit = spawn_audit_chain(self.gateway.clone(), stop_rx.clone());
        let deliveries = spawn_deliveries(self.gateway.clone(), stop_rx.clone());
        let legs = spawn_leg_watch(self.gateway.clone(), stop_rx.clone());
        let settlements = spawn_wallet_sweeps(
            self.settler.clone(),
            self.evm.clone(),
            self.sweep_every,
            stop_rx.clone(),
        );
        let prune = spawn_pruning(self.store.clone(), self.gateway.clone(), stop_rx.clone());
        let upkeep = crate::metrics::spawn_upkeep(stop_rx.clone());
        let sampler = self.earn.spawn_sampler(stop_rx.clone());
        let metrics = self.metrics.map(|(listener, router)| {
            let mut stop = stop_rx.clone();
            tokio::spawn(async move {
                let stopped = async move {
                    let _ = stop.changed().await;
                };
                if let Err(e) = crate::serve::serve(listener, router, stopped).await {
                    tracing::error!(error = %e, "the metrics listener failed");
                }
            })
        });
        let served = crate::serve::serve(self.listener, self.router, shutdown).await;
        let _ = stop_tx.send(true);
        for worker in workers {
            let _ = worker.await;
        }
        let _ = sweep.await;
        let _ = approvals.await;
        let _ = audit.await;
        let _ = deliveries.await;
        let _ = legs.await;
        let _ = settlements.await;
        let _ = prune.await;
        let _ = upkeep.await;
        let _ = sampler.await;
        if let Some(metrics) = metrics {
            let _ = metrics.await;
        }
        served.context("server failed")?;
        self.store.close().await;
        Ok(())
    }
}

/// Every hour (and at start), deletes what has outlived its use: the core's expired rows
/// ([`Gateway::prune`]) and MCP sessions past their TTL.
fn spawn_pruning(
    store: Arc<SqlStore>,
    gateway: Arc<Gateway>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !*stop.borrow() {
            match gateway.prune().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(rows = n, "expired rows pruned"),
                Err(e) => tracing::warn!(code = %e.code, "expired rows were not pruned"),
            }
            match crate::mcp::prune_sessions(store.as_ref(), &gateway).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(sessions = n, "expired MCP sessions pruned"),
                Err(e) => tracing::warn!(error = %e, "MCP sessions were not pruned"),
            }
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_secs(3600)) => {}
                _ = stop.changed() => {}
            }
        }
    })
}

/// The sweeps of unmined transactions, every `every` (each row claimed by one process): the x402
/// settlement wallet's (a settlement whose client went away while it was not mined yet: re-sent and
/// bumped at its nonce until mined, so that the wallet's later settlements do not queue behind one
/// forever), and the agent wallets' gap fills (signed before a crash, dropped by the node:
/// `EvmProvider::sweep_fills`).
fn spawn_wallet_sweeps(
    settler: Option<Arc<ChainSettler>>,
    evm: Arc<EvmProvider>,
    every: std::time::Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !*stop.borrow() {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                _ = stop.changed() => break,
            }
            if let Some(settler) = &settler {
                match settler.sweep().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(transactions = n, "unmined settlements taken up"),
                    Err(e) => tracing::warn!(code = %e.code, "the settlement sweep failed"),
                }
            }
            let n = evm.sweep_fills().await;
            if n > 0 {
                tracing::info!(transactions = n, "unmined gap fills taken up");
            }
        }
    })
}

/// Checks active delegations onchain every `[delegation] sweep-seconds`, so that a revocation made
/// anywhere is recorded without anyone asking (`check` and the fan-out gate read the database).
fn spawn_delegation_sweep(
    gateway: Arc<Gateway>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let every = gateway.settings().delegation_sweep.unsigned_abs();
        if every.is_zero() {
            return;
        }
        while !*stop.borrow() {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                _ = stop.changed() => break,
            }
            if let Err(e) = gateway.delegations().sweep_delegations().await {
                tracing::warn!(code = %e.code, detail = e.detail.as_deref().unwrap_or(""), "delegation sweep failed");
            }
        }
    })
}

/// Moves the audit events every decision wrote into their accounts' chains, every 200 ms (at once
/// again while there is a backlog), on every process.
fn spawn_audit_chain(
    gateway: Arc<Gateway>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !*stop.borrow() {
            let more = match gateway.audit().chain().await {
                Ok(added) => added.len() >= 1000,
                Err(e) => {
                    tracing::warn!(code = %e.code, detail = e.detail.as_deref().unwrap_or(""), "audit chaining failed");
                    false
                }
            };
            if more {
                continue;
            }
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}
                _ = stop.changed() => break,
            }
        }
    })
}

/// Posts the webhook deliveries that are due, every 500 ms (at once again while there were some),
/// on every process (each claimed by one).
fn spawn_deliveries(
    gateway: Arc<Gateway>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !*stop.borrow() {
            let more = match gateway.webhooks().deliver_due().await {
                Ok(n) => n > 0,
                Err(e) => {
                    tracing::warn!(code = %e.code, detail = e.detail.as_deref().unwrap_or(""), "webhook deliveries failed");
                    false
                }
            };
            if more {
                continue;
            }
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
                _ = stop.changed() => break,
            }
        }
    })
}

/// Follows the legs venues run elsewhere (a bridge's fill) every few seconds on every process,
/// ending each once with its `bridge.*` audit event.
fn spawn_leg_watch(
    gateway: Arc<Gateway>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !*stop.borrow() {
            tokio::select! {
                () = tokio::time::sleep(actiongate_core::legs::WATCH_EVERY) => {}
                _ = stop.changed() => break,
            }
            match gateway.legs().watch().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(legs = n, "venue legs ended"),
                Err(e) => {
                    tracing::warn!(code = %e.code, detail = e.detail.as_deref().unwrap_or(""), "leg watch failed")
                }
            }
        }
    })
}

/// Ends the approvals whose time ran out (APPROVAL_EXPIRED), every few seconds on every process
/// (at least as often as the approval time itself).
fn spawn_approval_sweep(
    gateway: Arc<Gateway>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let every = actiongate_core::approvals::SWEEP_EVERY
            .min(gateway.settings().approval_ttl.unsigned_abs());
        while !*stop.borrow() {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                _ = stop.changed() => break,
            }
            match gateway.approvals().expire_due().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(intents = n, "approvals expired"),
                Err(e) => {
                    tracing::warn!(code = %e.code, detail = e.detail.as_deref().unwrap_or(""), "approval sweep failed")
                }
            }
        }
    })
}

/// Reads the master key; in dev mode creates it (0600) when missing.
async fn load_master_key(path: &Path, dev: bool) -> Result<MasterKey, StartError> {
    // The file's text is the key itself: wiped from memory once parsed.
    match tokio::fs::read_to_string(path)
        .await
        .map(zeroize::Zeroizing::new)
    {
        Ok(text) => {
            warn_if_readable_by_others(path);
            MasterKey::from_hex(&text)
                .with_context(|| format!("master key file {} is invalid", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && dev => {
            let key = MasterKey::generate().context("cannot make a master key")?;
            write_private(path, key.to_hex().as_bytes())
                .await
                .with_context(|| format!("cannot write master key {}", path.display()))?;
            tracing::info!(path = %path.display(), "generated a new master key (dev mode)");
            Ok(key)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StartError::new(format!(
            "no master key at {}: create one with `actiongate master-key --out {}` (and keep it safe), \
             or run with --dev",
            path.display(),
            path.display()
        ))),
        Err(e) => Err(e).with_context(|| format!("cannot read master key {}", path.display())),
    }
}

/// A fresh master key in its file form.
pub fn new_master_key_hex() -> Result<String, StartError> {
    let key = MasterKey::generate().context("cannot make a master key")?;
    Ok(key.to_hex().to_string())
}

/// Writes a new file readable by its owner only; fails if it exists.
pub async fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let path = path.to_owned();
    let contents = contents.to_vec();
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&path)?;
        file.write_all(&contents)?;
        file.sync_all()
    })
    .await
    .map_err(std::io::Error::other)?
}

fn warn_if_readable_by_others(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(path = %path.display(), "the master key file is readable by group or others; chmod 600 it");
        }
    }
}

/// Why the server could not start, or stopped: what it was doing, and the cause (kept as the
/// error's source).
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct StartError {
    what: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl StartError {
    fn new(what: impl Into<String>) -> Self {
        StartError {
            what: what.into(),
            source: None,
        }
    }
}

/// Names what was being done when an error happened ([`StartError`]).
trait Context<T> {
    fn context(self, what: &str) -> Result<T, StartError>;
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, StartError>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Context<T> for Result<T, E> {
    fn context(self, what: &str) -> Result<T, StartError> {
        self.with_context(|| what.to_owned())
    }

    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, StartError> {
        self.map_err(|e| StartError {
            what: what(),
            source: Some(Box::new(e)),
        })
    }
}
