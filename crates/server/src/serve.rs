//! Wiring of `tessera serve`: logging, the HTTP listener, opening the database in the background,
//! periodic metadata persistence, and graceful shutdown.
//!
//! Order of events: bind the listener and serve at once (`/-/healthy` 200, `/-/ready` 503); open the
//! data directory on a blocking thread (WAL replay); publish it (`/-/ready` 200). On SIGINT/SIGTERM:
//! stop accepting, let in-flight requests finish (bounded by [`DRAIN_TIMEOUT`]), close the database
//! (flushing and syncing the WAL), save the metadata.

use crate::config::{LogFormat, Settings};
use anyhow::Context;
use axum::serve::ListenerExt;
use parking_lot::RwLock;
use std::sync::Arc;
use std::time::Duration;
use tessera_api::access::Access;
use tessera_api::{AppState, ApiOptions};
use tessera_tsdb::{Db, Options};
use tokio::sync::watch;

/// How long in-flight requests may take to finish after a shutdown signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the metadata store is written to disk (if it changed).
const METADATA_SAVE_INTERVAL: Duration = Duration::from_secs(60);
/// How often the web configuration file is checked for changes.
const WEB_CONFIG_POLL: Duration = Duration::from_secs(2);
/// How often the allocator is asked to give its free pages back ([`tessera_tsdb::release_free_heap`]).
const HEAP_TRIM_INTERVAL: Duration = Duration::from_secs(30);
/// A heap trim taking longer than this is logged as a warning.
const HEAP_TRIM_SLOW: Duration = Duration::from_millis(100);

pub fn init_logging(s: &Settings) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&s.log_level));
    use std::io::IsTerminal;
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match s.log_format {
        LogFormat::Json => b.json().init(),
        LogFormat::Text => b.init(),
    }
}

/// Raises the soft limit on open files to the hard one, as Go programs (Prometheus, VictoriaMetrics) do at
/// start: a shard keeps its WAL segment, its blocks' files and its head chunk files open, and the head's
/// grow with the data it holds. Returns the limit in force.
pub fn raise_open_files_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut l = getrlimit(Resource::Nofile);
    if l.current < l.maximum {
        let before = l.current;
        l.current = l.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, l) {
            tracing::warn!(error = %e, soft = ?before, "could not raise the open files limit");
            return before;
        }
    }
    l.current
}

pub fn run(settings: Settings) -> anyhow::Result<()> {
    let files = raise_open_files_limit();
    tracing::debug!(limit = ?files, "open files");
    // Queries are evaluated on rayon's pool (see the api's `on_query_pool`): the same stack room as the
    // runtime's threads.
    if let Err(e) =
        rayon::ThreadPoolBuilder::new().stack_size(8 << 20).thread_name(|i| format!("tessera-query-{i}")).build_global()
    {
        tracing::warn!(error = %e, "query worker pool already set up; keeping its stack size");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        // Queries are parsed and evaluated recursively on these threads (the blocking pool too); the
        // parser bounds a tree's height, and 8 MiB leaves room for it even in an unoptimised build.
        .thread_stack_size(8 << 20)
        .enable_all()
        .build().context("starting the async runtime")?;
    rt.block_on(serve(settings))
}

/// The shard count to open with: the flag, else what the directory records (validated: a damaged or
/// edited `tessera.json` stops the start), else the core count.
fn shard_count(s: &Settings) -> anyhow::Result<usize> {
    if let Some(n) = s.shards {
        return Ok(n);
    }
    Ok(tessera_tsdb::db::recorded_shards(&s.data_dir)?.unwrap_or_else(|| tessera_tsdb::Options::default().shards))
}

async fn serve(s: Settings) -> anyhow::Result<()> {
    let api_opts = ApiOptions {
        data_dir: s.data_dir.clone(),
        max_request_bytes: s.max_request_bytes,
        max_inflight_write_bytes: s.max_inflight_write_bytes,
        write_limits: tessera_protocol::remote_write::Limits {
            max_decoded_bytes: s.max_decoded_bytes,
            max_labels_per_series: s.max_labels_per_series,
            max_label_name_bytes: s.max_label_name_bytes,
            max_label_value_bytes: s.max_label_value_bytes,
        },
        retention_description: s.retention_description(),
        lookback_delta_ms: s.lookback_delta_ms,
        query_timeout_ms: s.query_timeout_ms,
        query_max_samples: s.query_max_samples,
        remote_read_max_bytes_in_frame: s.remote_read_max_bytes_in_frame,
        remote_read_concurrent_limit: s.remote_read_concurrent_limit,
        remote_read_sample_limit: s.remote_read_sample_limit,
        promql: s.features.promql,
        max_new_series_per_request: s.max_new_series_per_request,
        query_max_concurrency: s.query_max_concurrency,
        api_result_limit: s.api_result_limit,
        results_cache: tessera_promql::cache::CacheOptions {
            max_bytes: s.results_cache_max_bytes,
            // Out-of-order writes land within their window all the time: steps there are never kept.
            freshness_ms: s.results_cache_freshness_ms.max(s.ooo_window_ms),
            // The API sets its JSON renderer itself.
            render: None,
        },
        align_to_step: s.align_to_step,
        enable_admin_api: s.enable_admin_api,
        enable_lifecycle: s.enable_lifecycle,
    };
    s.features.log_notes();
    let state = AppState::new(api_opts, s.flags.clone());
    let mut tls = None;
    if let Some(path) = &s.web_config_file {
        let p = path.clone();
        let (a, cfg) = tokio::task::spawn_blocking(move || load_web_config(&p)).await.context("loading the web configuration")??;
        tls = cfg.map(|c| Arc::new(RwLock::new(c)));
        state.set_access(Some(a));
        watch_web_config(path.clone(), state.clone(), tls.clone());
    }
    let listener = tokio::net::TcpListener::bind(&s.listen_address)
        .await
        .with_context(|| format!("listening on {}", s.listen_address))?;
    let local = listener.local_addr().context("reading the bound address")?;
    if !local.ip().is_loopback() && !state.access().is_some_and(|a| a.has_credentials()) {
        tracing::warn!(
            address = %local,
            "no credentials configured (--web.config.file): anyone who can reach this address can write, read and delete data"
        );
    }
    tracing::info!(address = %local, tls = tls.is_some(), version = env!("CARGO_PKG_VERSION"), "listening; opening the data directory");

    // `fatal` carries an error that must stop the server (the data directory could not be opened).
    let (fatal_tx, mut fatal_rx) = watch::channel::<Option<String>>(None);
    std::fs::create_dir_all(&s.data_dir).with_context(|| format!("creating {}", s.data_dir.display()))?;
    let opts = Options {
        shards: shard_count(&s).context("checking the data directory")?,
        retention_ms: s.retention_ms,
        retention_bytes: s.retention_bytes,
        ooo_window_ms: s.ooo_window_ms,
        fsync: s.fsync,
        cold_codec: s.cold_codec,
        max_future_ms: s.max_future_ms,
        max_series: s.max_series,
        max_exemplars: s.max_exemplars,
        repair_future: s.repair_future,
        wal_compression: s.wal_compression,
        tiers: s.tiers.clone(),
        ..Options::default()
    };
    state.default_store().set_limits(s.limits);
    spawn_open(state.default_store().clone(), opts.clone(), Some(fatal_tx));
    // The config file's other stores, each in `<data>/stores/<name>/`, and its unions.
    apply_stores(&state, &s, &s.stores, &s.unions, &opts).map_err(|e| anyhow::anyhow!(e))?;
    // Reloads: `POST /-/reload` (with --web.enable-lifecycle) and SIGHUP.
    {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<tokio::sync::oneshot::Sender<Result<(), String>>>(4);
        *state.reload.lock() = Some(tx.clone());
        let (state, base, opts) = (state.clone(), Arc::new(s.clone()), opts.clone());
        let tls = tls.clone();
        tokio::spawn(async move {
            while let Some(done) = rx.recv().await {
                let r = reload(&state, &base, &opts, tls.as_ref()).await;
                match &r {
                    Ok(()) => tracing::info!("configuration reloaded"),
                    Err(e) => tracing::error!(error = %e, "configuration not reloaded; keeping the previous one"),
                }
                let _ = done.send(r);
            }
        });
        #[cfg(unix)]
        tokio::spawn(async move {
            let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else { return };
            while hup.recv().await.is_some() {
                let (done, _) = tokio::sync::oneshot::channel();
                if tx.send(done).await.is_err() {
                    return;
                }
            }
        });
    }
    {
        let state = state.clone();
        tokio::spawn(async move {
            let mut t = tokio::time::interval(METADATA_SAVE_INTERVAL);
            t.tick().await;
            loop {
                t.tick().await;
                for store in state.all_stores() {
                    if store.db().is_none() {
                        continue;
                    }
                    let name = store.name.clone();
                    match tokio::task::spawn_blocking(move || store.metadata.save(&store.dir)).await {
                        Ok(Err(e)) => tracing::warn!(store = %name, error = %e, "saving metadata.json failed"),
                        Err(e) => tracing::warn!(store = %name, error = %e, "saving metadata.json: task failed"),
                        Ok(Ok(_)) => {}
                    }
                }
            }
        });
    }

    // The allocator's free pages back to the kernel now and then (glibc keeps them; see the function).
    tokio::spawn(async move {
        let mut t = tokio::time::interval(HEAP_TRIM_INTERVAL);
        t.tick().await;
        loop {
            t.tick().await;
            let start = std::time::Instant::now();
            match tokio::task::spawn_blocking(tessera_tsdb::release_free_heap).await {
                // glibc locks each arena while trimming it: threads allocating there wait that long.
                Ok(released) if start.elapsed() >= HEAP_TRIM_SLOW => {
                    tracing::warn!(released, took = ?start.elapsed(), "heap trim was slow")
                }
                Ok(released) => tracing::debug!(released, took = ?start.elapsed(), "heap trimmed"),
                Err(e) => tracing::warn!(error = %e, "heap trim: task failed"),
            }
        }
    });

    // Shutdown: a signal, or a fatal error while opening.
    let (stop_tx, stop_rx) = watch::channel(false);
    let fatal_for_signal = fatal_rx.clone();
    let state_for_quit = state.clone();
    tokio::spawn(async move {
        let mut fatal = fatal_for_signal;
        tokio::select! {
            sig = shutdown_signal() => tracing::info!(signal = sig, "shutting down: no new connections, finishing in-flight requests"),
            _ = state_for_quit.quit.notified() => tracing::info!("shutting down (/-/quit): no new connections, finishing in-flight requests"),
            _ = async {
                // Err: the opener finished without a fatal error and dropped its sender; wait on.
                if fatal.wait_for(|f| f.is_some()).await.is_err() {
                    std::future::pending::<()>().await;
                }
            } => {}
        }
        let _ = stop_tx.send(true);
    });
    let app = tessera_api::router(state.clone());
    match tls {
        Some(cfg) => serve_until(crate::tls::TlsListener::new(listener, cfg).context("TLS listener")?, app, stop_rx).await?,
        None => serve_until(plain_listener(listener), app, stop_rx).await?,
    }

    if let Some(err) = fatal_rx.borrow_and_update().clone() {
        anyhow::bail!(err);
    }
    for store in state.all_stores() {
        let Some(db) = store.db().cloned() else {
            tracing::info!(store = %store.name, "stopped before the store finished opening");
            continue;
        };
        let name = store.name.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(e) = store.metadata.save(&store.dir) {
                tracing::warn!(store = %store.name, error = %e, "saving metadata.json failed");
            }
            db.close()
        })
        .await
        .with_context(|| format!("closing store {name}: task failed"))?
        .with_context(|| format!("closing store {name}"))?;
        tracing::info!(store = %name, "database closed");
    }
    tracing::info!("bye");
    Ok(())
}

/// Serves the stores and unions of the config file: opens the stores not served yet (their directory
/// under `<data>/stores/`), updates the limits of those already served, stops serving the stores no
/// longer configured (their directories stay), and replaces every union. Returns what changed.
fn apply_stores(
    state: &Arc<AppState>,
    s: &Settings,
    stores: &[crate::config::StoreSettings],
    unions: &[crate::config::UnionSettings],
    opts: &Options,
) -> Result<Vec<String>, String> {
    let mut changes = Vec::new();
    let mut configured = std::collections::HashSet::new();
    for st in stores {
        configured.insert(st.name.clone());
        if let Some(existing) = state.get_store(&st.name).filter(|e| !e.is_union()) {
            if existing.limits() != st.limits {
                existing.set_limits(st.limits);
                changes.push(format!("limits of store {}", st.name));
            }
            continue;
        }
        let dir = s.data_dir.join("stores").join(&st.name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let shards = match s.shards {
            Some(n) => n,
            None => tessera_tsdb::db::recorded_shards(&dir).map_err(|e| format!("checking {}: {e}", dir.display()))?.unwrap_or(opts.shards),
        };
        let o = Options {
            shards,
            retention_ms: st.retention_ms,
            retention_bytes: st.retention_bytes,
            ooo_window_ms: st.ooo_window_ms,
            max_series: st.max_series,
            max_exemplars: st.max_exemplars,
            tiers: st.tiers.clone(),
            ..opts.clone()
        };
        let store = state.add_store(&st.name, dir);
        store.set_limits(st.limits);
        spawn_open(store, o, None);
        changes.push(format!("store {} added", st.name));
    }
    for old in state.all_stores() {
        if old.name == tessera_api::stores::DEFAULT || configured.contains(&old.name) {
            continue;
        }
        state.remove_store(&old.name);
        if old.is_union() {
            continue;
        }
        changes.push(format!("store {} no longer served (its data stays in {})", old.name, old.dir.display()));
        if let Some(db) = old.db().cloned() {
            tokio::task::spawn_blocking(move || {
                if let Err(e) = old.metadata.save(&old.dir) {
                    tracing::warn!(store = %old.name, error = %e, "saving metadata.json failed");
                }
                if let Err(e) = db.close() {
                    tracing::warn!(store = %old.name, error = %e, "closing a store no longer configured");
                }
            });
        }
    }
    for u in unions {
        let members = u
            .stores
            .iter()
            .filter_map(|m| {
                let store = state.get_store(m)?;
                let ext = stores.iter().find(|st| st.name == *m).map(|st| st.external_labels.clone()).unwrap_or_default();
                Some((store, tessera_model::Labels::from_pairs(ext)))
            })
            .collect();
        state.add_union(&u.name, members);
    }
    if let Ok(rd) = std::fs::read_dir(s.data_dir.join("stores")) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !configured.contains(&name) {
                tracing::warn!(store = %name, dir = %e.path().display(), "a store directory not in the config file: not served, not deleted (add [stores.{name}] back to serve it, or remove the directory)");
            }
        }
    }
    Ok(changes)
}

/// Re-reads the config file's stores and unions (over the top-level settings in force: those need a
/// restart) and the web configuration.
async fn reload(state: &Arc<AppState>, base: &Arc<Settings>, opts: &Options, tls: Option<&Arc<RwLock<Arc<rustls::ServerConfig>>>>) -> Result<(), String> {
    if let Some(path) = base.flags.get("config.file").filter(|p| !p.is_empty()) {
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {path}: {e}"))?;
        let file = crate::config::parse_config_file(&text).map_err(|e| format!("{path}: {e:#}"))?;
        let (stores, unions) = crate::config::stores_from(&file, &base.flags).map_err(|e| format!("{path}: {e:#}"))?;
        for c in apply_stores(state, base, &stores, &unions, opts)? {
            tracing::info!(change = %c, "reload");
        }
    }
    if let Some(path) = &base.web_config_file {
        let p = path.clone();
        let (a, cfg) = tokio::task::spawn_blocking(move || load_web_config(&p)).await.map_err(|e| e.to_string())?.map_err(|e| format!("{e:#}"))?;
        if let (Some(slot), Some(cfg)) = (tls, cfg) {
            *slot.write() = cfg;
        }
        state.set_access(Some(a));
    }
    Ok(())
}

/// Opens a store's database in the background and publishes it; `fatal`: a failure stops the server
/// (the default store), otherwise the store answers 503 and the failure is logged.
fn spawn_open(store: Arc<tessera_api::stores::Store>, opts: Options, fatal: Option<watch::Sender<Option<String>>>) {
    tokio::spawn(async move {
        let started = std::time::Instant::now();
        let dir = store.dir.clone();
        let d2 = dir.clone();
        let opened = tokio::task::spawn_blocking(move || {
            let db = Db::open(&d2, opts)?;
            let md = tessera_api::metadata::MetadataStore::load(&d2);
            Ok::<_, tessera_tsdb::Error>((db, md))
        })
        .await;
        let err = match opened {
            Ok(Ok((db, md))) => {
                match md {
                    Ok(md) => store.metadata.replace_with(md),
                    Err(e) => tracing::warn!(store = %store.name, error = %e, "metadata.json unreadable; starting with empty metadata"),
                }
                let st = db.stats();
                store.set_open_duration(started.elapsed());
                store.set_db(db);
                tracing::info!(
                    store = %store.name,
                    dir = %dir.display(),
                    shards = st.shards,
                    head_series = st.head_series,
                    blocks = st.blocks,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "store open; ready"
                );
                return;
            }
            Ok(Err(e)) => format!("opening {}: {e}", dir.display()),
            Err(e) => format!("opening {}: task failed: {e}", dir.display()),
        };
        match fatal {
            Some(tx) => {
                let _ = tx.send(Some(err));
            }
            None => tracing::error!(store = %store.name, error = %err, "store could not be opened; its requests answer 503"),
        }
    });
}

/// Turns Nagle's algorithm off on an accepted connection, as Go's net/http (Prometheus) does for every TCP
/// connection. With it on, a response written in pieces (headers, then the body's chunks) held its last small
/// piece until the client acknowledged the one before, and clients delay that acknowledgement by up to 40 ms:
/// a range query answered in 1.6 ms took ~43 ms in roughly one request of three on a kept-alive connection.
/// A connection whose option cannot be set is served anyway (a latency defect, not a reason to refuse it).
pub(crate) fn set_nodelay(tcp: &mut tokio::net::TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "could not set TCP_NODELAY on an accepted connection");
    }
}

/// The plain-HTTP listener: `tcp` with [`set_nodelay`] applied to every accepted connection.
fn plain_listener(tcp: tokio::net::TcpListener) -> axum::serve::TapIo<tokio::net::TcpListener, fn(&mut tokio::net::TcpStream)> {
    tcp.tap_io(set_nodelay as fn(&mut tokio::net::TcpStream))
}

/// Serves `app` on `listener` until `stop`, then lets in-flight requests finish for [`DRAIN_TIMEOUT`].
async fn serve_until<L>(listener: L, app: axum::Router, stop: watch::Receiver<bool>) -> anyhow::Result<()>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    let mut stop_wait = stop.clone();
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        let _ = stop_wait.wait_for(|s| *s).await;
    });
    let mut stop_deadline = stop;
    tokio::select! {
        r = server => r.context("HTTP server")?,
        _ = async {
            let _ = stop_deadline.wait_for(|s| *s).await;
            tokio::time::sleep(DRAIN_TIMEOUT).await;
        } => tracing::warn!(timeout_s = DRAIN_TIMEOUT.as_secs(), "in-flight requests did not finish in time; closing anyway"),
    }
    Ok(())
}

/// The web configuration file's rules and TLS settings (see `tessera_api::access`).
fn load_web_config(path: &std::path::Path) -> anyhow::Result<(Arc<Access>, Option<Arc<rustls::ServerConfig>>)> {
    let a = Access::load(path).map_err(|e| anyhow::anyhow!("--web.config.file: {e}"))?;
    let tls = match &a.tls {
        Some(t) => Some(Arc::new(crate::tls::server_config(t, a.http2).with_context(|| format!("--web.config.file: {}", path.display()))?)),
        None => None,
    };
    Ok((Arc::new(a), tls))
}

/// Re-reads the web configuration file when its contents change (as Prometheus does, the next
/// request and the next TLS handshake see the new rules); a file that no longer loads keeps the old
/// rules and is logged. TLS cannot be switched on or off without a restart.
fn watch_web_config(path: std::path::PathBuf, state: Arc<AppState>, tls: Option<Arc<RwLock<Arc<rustls::ServerConfig>>>>) {
    tokio::spawn(async move {
        let mut last = std::fs::read(&path).ok();
        let mut t = tokio::time::interval(WEB_CONFIG_POLL);
        loop {
            t.tick().await;
            let now = std::fs::read(&path).ok();
            if now == last {
                continue;
            }
            last = now;
            let p = path.clone();
            match tokio::task::spawn_blocking(move || load_web_config(&p)).await {
                Ok(Ok((a, cfg))) => {
                    match (&tls, cfg) {
                        (Some(slot), Some(cfg)) => *slot.write() = cfg,
                        (None, None) => {}
                        _ => tracing::warn!(file = %path.display(), "TLS switched on or off in the web configuration: needs a restart"),
                    }
                    state.set_access(Some(a));
                    tracing::info!(file = %path.display(), "web configuration reloaded");
                }
                Ok(Err(e)) => tracing::error!(error = %e, "web configuration not reloaded; keeping the previous one"),
                Err(e) => tracing::error!(error = %e, "web configuration reload: task failed"),
            }
        }
    });
}

async fn shutdown_signal() -> &'static str {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
        "SIGINT"
    };
    #[cfg(unix)]
    {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
            "SIGTERM"
        };
        tokio::select! { s = ctrl_c => s, s = term => s }
    }
    #[cfg(not(unix))]
    ctrl_c.await
}

#[cfg(test)]
mod open_files_tests {
    #[test]
    fn the_open_files_limit_is_raised_to_the_hard_one() {
        use rustix::process::{getrlimit, Resource};
        let got = super::raise_open_files_limit();
        let l = getrlimit(Resource::Nofile);
        assert_eq!(got, l.current);
        assert_eq!(l.current, l.maximum, "{l:?}");
    }
}


#[cfg(test)]
mod nodelay_tests {
    use axum::serve::Listener;

    #[tokio::test]
    async fn plain_connections_are_accepted_with_nagle_off() {
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = tcp.local_addr().expect("addr");
        // Tokio's default, which the listener must change: without it this test would pass vacuously.
        let _c = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (raw, _) = tcp.accept().await.expect("accept");
        assert!(!raw.nodelay().expect("nodelay"), "accepted sockets start with Nagle on");

        let mut l = super::plain_listener(tcp);
        let _c = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (io, _) = l.accept().await;
        assert!(io.nodelay().expect("nodelay"), "the plain listener must turn Nagle off");
    }
}
