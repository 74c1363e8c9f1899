//! Settings of `tessera serve`: command-line flags, an optional TOML config file, defaults.
//!
//! Every setting has one name, Prometheus' flag name where the concept is the same
//! (`storage.tsdb.retention.time`, `web.listen-address`, …). The config file uses the same names as
//! TOML dotted keys, so `--storage.tsdb.retention.time=30d` and `storage.tsdb.retention.time = "30d"`
//! mean the same; a flag given on the command line overrides the file, the file overrides the default.
//! All values are resolved from strings through one parser per setting, so the flag, the file and
//! `/api/v1/status/flags` can never disagree on the syntax.

use anyhow::{bail, Context};
use clap::Args;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use tessera_api::params::{format_duration_ms, parse_bytes, parse_duration_ms};
use tessera_tsdb::options::{ColdCodec, TierOptions};
use tessera_tsdb::FsyncPolicy;

/// `tessera serve` flags. Each is optional here so that "not given" can fall back to the config file;
/// the defaults are applied by [`Settings::resolve`] and shown in the help text.
#[derive(Debug, Clone, Default, Args)]
pub struct ServeArgs {
    /// TOML config file; its keys are the flag names (e.g. `storage.tsdb.retention.time = "30d"`).
    /// Flags given on the command line override it.
    #[arg(long = "config.file", value_name = "FILE")]
    pub config_file: Option<PathBuf>,

    /// Base path of the data directory. [default: data]
    #[arg(long = "storage.tsdb.path", value_name = "DIR")]
    pub storage_tsdb_path: Option<String>,

    /// Address to listen on for the HTTP API, remote write and /metrics. [default: 0.0.0.0:9090, the
    /// port of Prometheus, so that Tessera is a drop-in replacement]
    #[arg(long = "web.listen-address", value_name = "ADDR")]
    pub web_listen_address: Option<String>,

    /// Prometheus' web configuration file (YAML): TLS (`tls_server_config`), basic auth
    /// (`basic_auth_users`, bcrypt), response headers, rate limit, and Tessera's `authorization`
    /// (bearer tokens and users granted read/write/admin). Re-read when it changes. [default: none: plain
    /// HTTP, no authentication]
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<String>,

    /// Enable the admin API (`/api/v1/admin/tsdb/delete_series`, `clean_tombstones`, `snapshot`), as
    /// Prometheus' flag of the same name. [default: false]
    #[arg(long = "web.enable-admin-api", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub web_enable_admin_api: Option<String>,

    /// Enable `POST /-/reload` (re-reads the config file's stores and unions and the web configuration),
    /// as Prometheus' flag of the same name; SIGHUP reloads either way. [default: false]
    #[arg(long = "web.enable-lifecycle", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub web_enable_lifecycle: Option<String>,

    /// How long to keep data, as a Prometheus duration (15d, 2h30m, 1y); 0 disables time-based
    /// retention. [default: 15d]
    #[arg(long = "storage.tsdb.retention.time", value_name = "DURATION")]
    pub storage_tsdb_retention_time: Option<String>,

    /// Maximum bytes of blocks to keep (512MB, 10GB, 1TB; base 2 like Prometheus); the oldest blocks
    /// go first; 0 disables size-based retention. [default: 0]
    #[arg(long = "storage.tsdb.retention.size", value_name = "BYTES")]
    pub storage_tsdb_retention_size: Option<String>,

    /// How far back out-of-order samples are still accepted (0s: none, as in Prometheus); at most half
    /// of the 2h block range. [default: 0s]
    #[arg(long = "storage.tsdb.out-of-order-time-window", value_name = "DURATION")]
    pub storage_tsdb_out_of_order_time_window: Option<String>,

    /// Downsampling tiers, finest first, each `resolution:retention` (e.g. `5m:90d,1h:2y`; a
    /// retention of 0 or none keeps the tier forever). Computed in the background from finished
    /// blocks; range queries whose step fits a tier read it, and steps reaching back past the raw
    /// data read the finest tier still holding them (see the README's Downsampling). Each
    /// resolution must divide 2h; a tier must be kept at least as long as finer tiers and the raw
    /// data. [default: none]
    #[arg(long = "storage.tsdb.downsampling", value_name = "TIERS")]
    pub storage_tsdb_downsampling: Option<String>,

    /// Number of shards (storage partitions written and queried in parallel). Fixed when the data
    /// directory is created. [default: the shard count recorded in the data directory, else the
    /// number of CPU cores]
    #[arg(long = "storage.tsdb.shards", value_name = "N")]
    pub storage_tsdb_shards: Option<String>,

    /// When the WAL is fsynced: `always` (before every acknowledgement), `interval:<duration>` (at most
    /// that much acknowledged data lost on a machine crash; a process crash loses nothing), or
    /// `never` (benchmarks only). [default: interval:1s]
    #[arg(long = "storage.tsdb.wal-fsync", value_name = "POLICY")]
    pub storage_tsdb_wal_fsync: Option<String>,

    /// How blocks store plain float chunks: `dense` (Tessera's denser codecs where they save at least 1/16,
    /// also for the head's closed chunks of exact decimals; remote read converts to XOR) or `xor`
    /// (Prometheus' XOR chunks as written, in blocks and head). Existing blocks keep their chunks until
    /// compaction rewrites them. [default: dense]
    #[arg(long = "storage.tsdb.cold-codec", value_name = "CODEC")]
    pub storage_tsdb_cold_codec: Option<String>,

    /// Samples more than this far ahead of the server's clock are rejected (400, "out of bounds:
    /// timestamp too far in the future"); 0s = no bound, as Prometheus. Must stay below half the 2h
    /// block range: the newest sample sets the oldest time the head still accepts. [default: 10m]
    #[arg(long = "storage.tsdb.max-future-time", value_name = "DURATION")]
    pub storage_tsdb_max_future_time: Option<String>,

    /// `true`: at this start, drop WAL samples beyond --storage.tsdb.max-future-time and set blocks
    /// wholly beyond it aside in future-blocks/, repairing a data directory that an older version
    /// wedged with a sample from the future. Only with a correct clock. [default: false]
    #[arg(long = "storage.tsdb.repair-future-samples", value_name = "BOOL")]
    pub storage_tsdb_repair_future_samples: Option<String>,

    /// Compress the WAL (Prometheus' flag): sample batches coded against each series' previous value in
    /// the segment, then zstd. Replay reads either kind. [default: true]
    #[arg(long = "storage.tsdb.wal-compression", value_name = "BOOL")]
    pub storage_tsdb_wal_compression: Option<String>,

    /// Maximum active series in the head; samples of further new series are rejected (400, "limit of
    /// active series reached"), those of existing series written; 0 = no limit. [default: 0]
    #[arg(long = "storage.tsdb.max-series", value_name = "N")]
    pub storage_tsdb_max_series: Option<String>,

    /// Maximum exemplars kept in memory (Prometheus' flag of the same name), split over the shards;
    /// the oldest stored goes first; 0 turns exemplar storage off. [default: 100000]
    #[arg(long = "storage.exemplars.exemplars-limit", value_name = "N")]
    pub storage_exemplars_exemplars_limit: Option<String>,

    /// Maximum series one remote-write request may create; samples of further new series are
    /// rejected (400); 0 = no limit. [default: 100000]
    #[arg(long = "web.remote-write.max-new-series-per-request", value_name = "N")]
    pub web_remote_write_max_new_series_per_request: Option<String>,

    /// Samples (and histograms) per second remote write may add to the default store (stores set their
    /// own); beyond it 429 with `Retry-After`; 0 = no limit. [default: 0]
    #[arg(long = "web.remote-write.ingestion-rate", value_name = "N")]
    pub web_remote_write_ingestion_rate: Option<String>,

    /// Most samples the ingestion rate lets through at once; 0 = one second's worth. [default: 0]
    #[arg(long = "web.remote-write.ingestion-burst", value_name = "N")]
    pub web_remote_write_ingestion_burst: Option<String>,

    /// Maximum number of queries evaluated at once; more wait, within their timeout. [default: 20]
    #[arg(long = "query.max-concurrency", value_name = "N")]
    pub query_max_concurrency: Option<String>,

    /// Maximum entries the series, labels and label values APIs return (a request's `limit` can only
    /// lower it; truncated answers carry Prometheus' warning); 0 = no limit. [default: 1000000]
    #[arg(long = "web.api.result-limit", value_name = "N")]
    pub web_api_result_limit: Option<String>,

    /// Maximum lookback for instant vector selectors. [default: 5m]
    #[arg(long = "query.lookback-delta", value_name = "DURATION")]
    pub query_lookback_delta: Option<String>,

    /// Maximum time a query may take before it is aborted. [default: 2m]
    #[arg(long = "query.timeout", value_name = "DURATION")]
    pub query_timeout: Option<String>,

    /// Most memory the range-query result cache may use (estimated); 0 disables it. [default: 128MiB]
    #[arg(long = "query.results-cache.max-size", value_name = "BYTES")]
    pub query_results_cache_max_size: Option<String>,

    /// Range-query steps whose samples reach into this last stretch before now are never cached (at
    /// least the out-of-order window is used). Any later write that touches a cached step invalidates
    /// it, so this only spares the cache steps that late writes would soon drop. [default: 0s]
    #[arg(long = "query.results-cache.freshness", value_name = "DURATION")]
    pub query_results_cache_freshness: Option<String>,

    /// Move every range query's start and end down to a multiple of its step (more cache hits for
    /// clients that do not align; shifts the returned timestamps). A request can ask with
    /// align_to_step=1. [default: false]
    #[arg(long = "query.align-to-step", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub query_align_to_step: Option<String>,

    /// Maximum number of samples a single query can load into memory. [default: 50000000]
    #[arg(long = "query.max-samples", value_name = "N")]
    pub query_max_samples: Option<String>,

    /// Largest accepted request body (remote write, compressed). [default: 32MB]
    #[arg(long = "web.max-request-bytes", value_name = "BYTES")]
    pub web_max_request_bytes: Option<String>,

    /// Compressed bytes of remote-write requests processed at once; past it requests are answered
    /// 429 with Retry-After and senders back off. Must be at least web.max-request-bytes. [default: 256MB]
    #[arg(long = "web.max-inflight-write-bytes", value_name = "BYTES")]
    pub web_max_inflight_write_bytes: Option<String>,

    /// Largest decompressed remote-write body. [default: 64MB]
    #[arg(long = "web.remote-write.max-decoded-bytes", value_name = "BYTES")]
    pub web_remote_write_max_decoded_bytes: Option<String>,

    /// Maximum labels per series in remote write; series with more are rejected. [default: 64]
    #[arg(long = "web.remote-write.max-labels-per-series", value_name = "N")]
    pub web_remote_write_max_labels_per_series: Option<String>,

    /// Maximum bytes of a label name in remote write. [default: 1024]
    #[arg(long = "web.remote-write.max-label-name-bytes", value_name = "N")]
    pub web_remote_write_max_label_name_bytes: Option<String>,

    /// Maximum bytes of a label value in remote write. [default: 16384]
    #[arg(long = "web.remote-write.max-label-value-bytes", value_name = "N")]
    pub web_remote_write_max_label_value_bytes: Option<String>,

    /// Maximum size in bytes of a streamed remote-read response frame (before snappy). [default: 1048576]
    #[arg(long = "storage.remote.read-max-bytes-in-frame", value_name = "BYTES")]
    pub storage_remote_read_max_bytes_in_frame: Option<String>,

    /// Maximum remote read requests served at once; more wait for a slot (0 = no limit). [default: 10]
    #[arg(long = "storage.remote.read-concurrent-limit", value_name = "N")]
    pub storage_remote_read_concurrent_limit: Option<String>,

    /// Maximum samples one remote read query returns in the SAMPLES response type. [default: 50000000]
    #[arg(long = "storage.remote.read-sample-limit", value_name = "N")]
    pub storage_remote_read_sample_limit: Option<String>,

    /// Only log messages with the given severity or above: debug, info, warn, error. [default: info]
    #[arg(long = "log.level", value_name = "LEVEL")]
    pub log_level: Option<String>,

    /// Output format of log messages: text or json. [default: text]
    #[arg(long = "log.format", value_name = "FORMAT")]
    pub log_format: Option<String>,

    /// Comma-separated experimental features to enable (repeatable), by Prometheus' names:
    /// promql-experimental-functions, promql-delayed-name-removal, promql-extended-range-selectors,
    /// promql-binop-fill-modifiers, use-start-timestamps (rate/increase/resets use samples' start
    /// timestamps); st-storage and promql-duration-expr are accepted and always on. Unknown names are
    /// logged and ignored, as Prometheus does. [default: none]
    #[arg(long = "enable-feature", value_name = "NAME,...")]
    pub enable_feature: Vec<String>,
}

/// Setting name → default (as a string parsed like a flag value).
const DEFAULTS: &[(&str, &str)] = &[
    ("storage.tsdb.path", "data"),
    ("web.listen-address", "0.0.0.0:9090"),
    ("web.config.file", ""),
    ("web.enable-admin-api", "false"),
    ("web.enable-lifecycle", "false"),
    ("storage.tsdb.retention.time", "15d"),
    ("storage.tsdb.retention.size", "0"),
    ("storage.tsdb.out-of-order-time-window", "0s"),
    ("storage.tsdb.downsampling", ""),
    ("storage.tsdb.shards", ""),
    ("storage.tsdb.wal-fsync", "interval:1s"),
    ("storage.tsdb.cold-codec", "dense"),
    ("storage.tsdb.max-future-time", "10m"),
    ("storage.tsdb.max-series", "0"),
    ("storage.exemplars.exemplars-limit", "100000"),
    ("storage.tsdb.repair-future-samples", "false"),
    ("storage.tsdb.wal-compression", "true"),
    ("web.remote-write.max-new-series-per-request", "100000"),
    ("web.remote-write.ingestion-rate", "0"),
    ("web.remote-write.ingestion-burst", "0"),
    ("query.max-concurrency", "20"),
    ("web.api.result-limit", "1000000"),
    ("query.lookback-delta", "5m"),
    ("query.timeout", "2m"),
    ("query.max-samples", "50000000"),
    ("query.results-cache.max-size", "128MiB"),
    ("query.results-cache.freshness", "0s"),
    ("query.align-to-step", "false"),
    ("web.max-request-bytes", "32MB"),
    ("web.max-inflight-write-bytes", "256MB"),
    ("web.remote-write.max-decoded-bytes", "64MB"),
    ("web.remote-write.max-labels-per-series", "64"),
    ("web.remote-write.max-label-name-bytes", "1024"),
    ("web.remote-write.max-label-value-bytes", "16384"),
    ("storage.remote.read-max-bytes-in-frame", "1048576"),
    ("storage.remote.read-concurrent-limit", "10"),
    ("storage.remote.read-sample-limit", "50000000"),
    ("log.level", "info"),
    ("log.format", "text"),
    ("enable-feature", ""),
];

impl ServeArgs {
    /// The flags given on the command line, by setting name.
    fn given(&self) -> BTreeMap<&'static str, String> {
        let features = (!self.enable_feature.is_empty()).then(|| self.enable_feature.join(","));
        let pairs: [(&str, &Option<String>); 39] = [
            ("web.enable-lifecycle", &self.web_enable_lifecycle),
            ("web.remote-write.ingestion-rate", &self.web_remote_write_ingestion_rate),
            ("web.remote-write.ingestion-burst", &self.web_remote_write_ingestion_burst),
            ("web.config.file", &self.web_config_file),
            ("web.enable-admin-api", &self.web_enable_admin_api),
            ("storage.tsdb.downsampling", &self.storage_tsdb_downsampling),
            ("storage.tsdb.path", &self.storage_tsdb_path),
            ("web.listen-address", &self.web_listen_address),
            ("storage.tsdb.retention.time", &self.storage_tsdb_retention_time),
            ("storage.tsdb.retention.size", &self.storage_tsdb_retention_size),
            ("storage.tsdb.out-of-order-time-window", &self.storage_tsdb_out_of_order_time_window),
            ("storage.tsdb.shards", &self.storage_tsdb_shards),
            ("storage.tsdb.wal-fsync", &self.storage_tsdb_wal_fsync),
            ("storage.tsdb.cold-codec", &self.storage_tsdb_cold_codec),
            ("storage.tsdb.max-future-time", &self.storage_tsdb_max_future_time),
            ("storage.tsdb.max-series", &self.storage_tsdb_max_series),
            ("storage.exemplars.exemplars-limit", &self.storage_exemplars_exemplars_limit),
            ("storage.tsdb.repair-future-samples", &self.storage_tsdb_repair_future_samples),
            ("storage.tsdb.wal-compression", &self.storage_tsdb_wal_compression),
            ("web.remote-write.max-new-series-per-request", &self.web_remote_write_max_new_series_per_request),
            ("query.max-concurrency", &self.query_max_concurrency),
            ("web.api.result-limit", &self.web_api_result_limit),
            ("query.lookback-delta", &self.query_lookback_delta),
            ("query.timeout", &self.query_timeout),
            ("query.max-samples", &self.query_max_samples),
            ("query.results-cache.max-size", &self.query_results_cache_max_size),
            ("query.results-cache.freshness", &self.query_results_cache_freshness),
            ("query.align-to-step", &self.query_align_to_step),
            ("web.max-request-bytes", &self.web_max_request_bytes),
            ("web.max-inflight-write-bytes", &self.web_max_inflight_write_bytes),
            ("web.remote-write.max-decoded-bytes", &self.web_remote_write_max_decoded_bytes),
            ("web.remote-write.max-labels-per-series", &self.web_remote_write_max_labels_per_series),
            ("web.remote-write.max-label-name-bytes", &self.web_remote_write_max_label_name_bytes),
            ("web.remote-write.max-label-value-bytes", &self.web_remote_write_max_label_value_bytes),
            ("storage.remote.read-max-bytes-in-frame", &self.storage_remote_read_max_bytes_in_frame),
            ("storage.remote.read-concurrent-limit", &self.storage_remote_read_concurrent_limit),
            ("storage.remote.read-sample-limit", &self.storage_remote_read_sample_limit),
            ("log.level", &self.log_level),
            ("log.format", &self.log_format),
        ];
        let mut given: BTreeMap<&'static str, String> =
            pairs.into_iter().filter_map(|(k, v)| v.clone().map(|v| (k, v))).collect();
        if let Some(f) = features {
            given.insert("enable-feature", f);
        }
        given
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Resolved, typed settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub data_dir: PathBuf,
    pub listen_address: String,
    /// `--web.config.file`.
    pub web_config_file: Option<PathBuf>,
    /// `--web.enable-admin-api`.
    pub enable_admin_api: bool,
    /// `--web.enable-lifecycle`.
    pub enable_lifecycle: bool,
    /// The config file's stores beyond `default`, by name.
    pub stores: Vec<StoreSettings>,
    /// The config file's union stores.
    pub unions: Vec<UnionSettings>,
    pub retention_ms: i64,
    pub retention_bytes: u64,
    pub ooo_window_ms: i64,
    /// Downsampling tiers (`--storage.tsdb.downsampling`), finest first.
    pub tiers: Vec<TierOptions>,
    /// `None`: what the data directory records, else the core count.
    pub shards: Option<usize>,
    pub fsync: FsyncPolicy,
    pub cold_codec: ColdCodec,
    pub max_future_ms: i64,
    pub max_series: u64,
    pub max_exemplars: usize,
    pub repair_future: bool,
    pub wal_compression: bool,
    pub max_new_series_per_request: usize,
    /// The default store's limits (`web.remote-write.ingestion-*`).
    pub limits: tessera_api::stores::Limits,
    pub query_max_concurrency: usize,
    pub api_result_limit: usize,
    pub lookback_delta_ms: i64,
    pub query_timeout_ms: i64,
    pub query_max_samples: usize,
    pub results_cache_max_bytes: usize,
    pub results_cache_freshness_ms: i64,
    pub align_to_step: bool,
    pub max_request_bytes: usize,
    pub max_inflight_write_bytes: usize,
    pub max_decoded_bytes: usize,
    pub max_labels_per_series: usize,
    pub max_label_name_bytes: usize,
    pub max_label_value_bytes: usize,
    pub remote_read_max_bytes_in_frame: usize,
    pub remote_read_concurrent_limit: usize,
    pub remote_read_sample_limit: usize,
    pub log_level: String,
    pub log_format: LogFormat,
    /// What `--enable-feature` turned on.
    pub features: Features,
    /// Every setting's effective value, for `/api/v1/status/flags` (Prometheus lists them all).
    pub flags: BTreeMap<String, String>,
}

impl Settings {
    /// Command line over config file over defaults.
    pub fn resolve(args: &ServeArgs) -> anyhow::Result<Settings> {
        let file = match &args.config_file {
            Some(p) => {
                let text = std::fs::read_to_string(p).with_context(|| format!("reading config file {}", p.display()))?;
                parse_config_file(&text).with_context(|| format!("config file {}", p.display()))?
            }
            None => BTreeMap::new(),
        };
        let given = args.given();
        let mut eff: BTreeMap<String, String> = BTreeMap::new();
        for (k, d) in DEFAULTS {
            let v = given.get(k).cloned().or_else(|| file.get(*k).cloned()).unwrap_or_else(|| d.to_string());
            eff.insert(k.to_string(), v);
        }
        let mut s = Self::from_map(&eff)?;
        (s.stores, s.unions) = stores_from(&file, &eff)?;
        let mut flags = eff;
        if let Some(p) = &args.config_file {
            flags.insert("config.file".into(), p.display().to_string());
        }
        Ok(Settings { flags, ..s })
    }

    fn from_map(m: &BTreeMap<String, String>) -> anyhow::Result<Settings> {
        let get = |k: &str| m.get(k).map(String::as_str).unwrap_or("");
        let dur = |k: &str| parse_duration_ms(get(k)).map_err(|e| anyhow::anyhow!("--{k}: {e}"));
        let bytes = |k: &str| parse_bytes(get(k)).map_err(|e| anyhow::anyhow!("--{k}: {e}"));
        let num = |k: &str| get(k).trim().parse::<usize>().map_err(|e| anyhow::anyhow!("--{k}: {:?}: {e}", get(k)));
        let shards = match get("storage.tsdb.shards").trim() {
            "" => None,
            s => {
                let n: usize = s.parse().map_err(|e| anyhow::anyhow!("--storage.tsdb.shards: {s:?}: {e}"))?;
                if n == 0 {
                    bail!("--storage.tsdb.shards must be at least 1");
                }
                Some(n)
            }
        };
        let log_format = match get("log.format") {
            "text" | "logfmt" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => bail!("--log.format: {other:?} is not one of text, json"),
        };
        let log_level = get("log.level").to_string();
        if !matches!(log_level.as_str(), "debug" | "info" | "warn" | "error" | "trace") {
            bail!("--log.level: {log_level:?} is not one of debug, info, warn, error");
        }
        let features = Features::parse(get("enable-feature"));
        let s = Settings {
            data_dir: PathBuf::from(get("storage.tsdb.path")),
            listen_address: get("web.listen-address").to_string(),
            web_config_file: Some(get("web.config.file").trim()).filter(|f| !f.is_empty()).map(PathBuf::from),
            stores: Vec::new(),
            unions: Vec::new(),
            enable_lifecycle: match get("web.enable-lifecycle").trim() {
                "true" | "1" => true,
                "false" | "0" | "" => false,
                other => bail!("--web.enable-lifecycle: {other:?} is not true or false"),
            },
            enable_admin_api: match get("web.enable-admin-api").trim() {
                "true" | "1" => true,
                "false" | "0" | "" => false,
                other => bail!("--web.enable-admin-api: {other:?} is not true or false"),
            },
            retention_ms: dur("storage.tsdb.retention.time")?,
            retention_bytes: bytes("storage.tsdb.retention.size")?,
            ooo_window_ms: dur("storage.tsdb.out-of-order-time-window")?,
            tiers: parse_tiers(get("storage.tsdb.downsampling"), dur("storage.tsdb.retention.time")?)
                .map_err(|e| anyhow::anyhow!("--storage.tsdb.downsampling: {e}"))?,
            shards,
            fsync: parse_fsync(get("storage.tsdb.wal-fsync")).map_err(|e| anyhow::anyhow!("--storage.tsdb.wal-fsync: {e}"))?,
            cold_codec: parse_cold_codec(get("storage.tsdb.cold-codec"))
                .map_err(|e| anyhow::anyhow!("--storage.tsdb.cold-codec: {e}"))?,
            max_future_ms: dur("storage.tsdb.max-future-time")?,
            max_series: num("storage.tsdb.max-series")? as u64,
            max_exemplars: num("storage.exemplars.exemplars-limit")?,
            repair_future: match get("storage.tsdb.repair-future-samples").trim() {
                "true" | "1" => true,
                "false" | "0" | "" => false,
                other => bail!("--storage.tsdb.repair-future-samples: {other:?} is not true or false"),
            },
            wal_compression: match get("storage.tsdb.wal-compression").trim() {
                "true" | "1" | "" => true,
                "false" | "0" => false,
                other => bail!("--storage.tsdb.wal-compression: {other:?} is not true or false"),
            },
            max_new_series_per_request: num("web.remote-write.max-new-series-per-request")?,
            limits: store_limits(m, None)?,
            query_max_concurrency: num("query.max-concurrency")?,
            api_result_limit: num("web.api.result-limit")?,
            lookback_delta_ms: dur("query.lookback-delta")?,
            query_timeout_ms: dur("query.timeout")?,
            query_max_samples: num("query.max-samples")?,
            results_cache_max_bytes: bytes("query.results-cache.max-size")? as usize,
            results_cache_freshness_ms: dur("query.results-cache.freshness")?,
            align_to_step: match get("query.align-to-step").trim() {
                "true" | "1" => true,
                "false" | "0" | "" => false,
                other => bail!("--query.align-to-step: {other:?} is not true or false"),
            },
            max_request_bytes: bytes("web.max-request-bytes")? as usize,
            max_inflight_write_bytes: bytes("web.max-inflight-write-bytes")? as usize,
            max_decoded_bytes: bytes("web.remote-write.max-decoded-bytes")? as usize,
            max_labels_per_series: num("web.remote-write.max-labels-per-series")?,
            max_label_name_bytes: num("web.remote-write.max-label-name-bytes")?,
            max_label_value_bytes: num("web.remote-write.max-label-value-bytes")?,
            remote_read_max_bytes_in_frame: bytes("storage.remote.read-max-bytes-in-frame")? as usize,
            remote_read_concurrent_limit: num("storage.remote.read-concurrent-limit")?,
            remote_read_sample_limit: num("storage.remote.read-sample-limit")?,
            log_level,
            log_format,
            features,
            flags: BTreeMap::new(),
        };
        if s.data_dir.as_os_str().is_empty() {
            bail!("--storage.tsdb.path must not be empty");
        }
        if s.max_future_ms >= 3_600_000 {
            bail!("--storage.tsdb.max-future-time must be below 1h (half the 2h block range), or 0s for no bound");
        }
        if s.max_request_bytes == 0 || s.max_request_bytes > u32::MAX as usize {
            bail!("--web.max-request-bytes must be between 1 byte and 4GB");
        }
        if s.max_inflight_write_bytes < s.max_request_bytes {
            bail!(
                "--web.max-inflight-write-bytes ({}) must be at least --web.max-request-bytes ({}), or a maximal request could never be accepted",
                s.max_inflight_write_bytes,
                s.max_request_bytes
            );
        }
        Ok(s)
    }

    /// The retention as `/api/v1/status/runtimeinfo` reports it ("15d", "15d or 512MiB", "512MiB").
    pub fn retention_description(&self) -> String {
        let size = (self.retention_bytes > 0).then(|| human_bytes(self.retention_bytes));
        match (self.retention_ms > 0, size) {
            (true, Some(s)) => format!("{} or {s}", format_duration_ms(self.retention_ms)),
            (true, None) => format_duration_ms(self.retention_ms),
            (false, Some(s)) => s,
            (false, None) => "unlimited".into(),
        }
    }
}

/// The config file's stores and unions (`file`: its flattened keys), over the effective top-level
/// settings `eff`. Also what a reload re-reads.
pub fn stores_from(
    file: &BTreeMap<String, String>,
    eff: &BTreeMap<String, String>,
) -> anyhow::Result<(Vec<StoreSettings>, Vec<UnionSettings>)> {
    let (mut stores, mut unions_out): (Vec<StoreSettings>, Vec<UnionSettings>) = (Vec::new(), Vec::new());
    // Each store: the top-level settings, its table's over them.
    let mut names: Vec<&str> = file.keys().filter_map(|k| k.strip_prefix("stores.")).map(|r| r.split_once('.').map_or(r, |x| x.0)).collect();
    names.dedup();
    for name in names {
        let mut m = eff.clone();
        let mut own = BTreeMap::new();
        for key in STORE_KEYS {
            if let Some(v) = file.get(&format!("stores.{name}.{key}")) {
                m.insert(key.to_string(), v.clone());
                own.insert(key.to_string(), v.clone());
            }
        }
        let get = |k: &str| m.get(k).map(String::as_str).unwrap_or("");
        let ctx = |k: &str| format!("[stores.{name}] {k}");
        let retention_ms = parse_duration_ms(get("storage.tsdb.retention.time")).map_err(|e| anyhow::anyhow!("{}: {e}", ctx("storage.tsdb.retention.time")))?;
        stores.push(StoreSettings {
            name: name.to_string(),
            retention_ms,
            retention_bytes: parse_bytes(get("storage.tsdb.retention.size"))
                .map_err(|e| anyhow::anyhow!("{}: {e}", ctx("storage.tsdb.retention.size")))?,
            ooo_window_ms: parse_duration_ms(get("storage.tsdb.out-of-order-time-window"))
                .map_err(|e| anyhow::anyhow!("{}: {e}", ctx("storage.tsdb.out-of-order-time-window")))?,
            tiers: parse_tiers(get("storage.tsdb.downsampling"), retention_ms)
                .map_err(|e| anyhow::anyhow!("{}: {e}", ctx("storage.tsdb.downsampling")))?,
            max_series: get("storage.tsdb.max-series").trim().parse().map_err(|e| anyhow::anyhow!("{}: {e}", ctx("storage.tsdb.max-series")))?,
            max_exemplars: get("storage.exemplars.exemplars-limit")
                .trim()
                .parse()
                .map_err(|e| anyhow::anyhow!("{}: {e}", ctx("storage.exemplars.exemplars-limit")))?,
            limits: store_limits(&m, Some(&own)).map_err(|e| anyhow::anyhow!("[stores.{name}] {e}"))?,
            external_labels: file
                .iter()
                .filter_map(|(k, v)| k.strip_prefix(&format!("stores.{name}.external_labels.")).map(|l| (l.to_string(), v.clone())))
                .collect(),
        });
    }
    let mut unions: Vec<&str> = file.keys().filter_map(|k| k.strip_prefix("unions.")).map(|r| r.split_once('.').map_or(r, |x| x.0)).collect();
    unions.dedup();
    for name in unions {
        let members: Vec<String> = file
            .get(&format!("unions.{name}.stores"))
            .map(|v| v.split(',').map(|m| m.trim().to_string()).filter(|m| !m.is_empty()).collect())
            .unwrap_or_default();
        if members.is_empty() {
            bail!("[unions.{name}]: stores = [...] names no store");
        }
        if name == tessera_api::stores::DEFAULT || stores.iter().any(|st| st.name == name) {
            bail!("[unions.{name}]: a store of that name exists");
        }
        for m in &members {
            if m != tessera_api::stores::DEFAULT && !stores.iter().any(|st| st.name == *m) {
                bail!("[unions.{name}]: member {m:?} is not a store (unions are made of stores, not of unions)");
            }
        }
        unions_out.push(UnionSettings { name: name.to_string(), stores: members });
    }
    Ok((stores, unions_out))
}

/// The experimental features of `--enable-feature`, parsed as Prometheus' `setFeatureListOptions` does:
/// every flag value is split on commas; a name Tessera does not know is not an error (it is logged at
/// start-up and ignored), so a Prometheus command line can be reused as is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    pub promql: tessera_api::PromqlFeatures,
    /// One line per name that changed nothing, for the log: accepted no-ops and unknown names.
    pub notes: Vec<FeatureNote>,
}

/// What to log about one `--enable-feature` name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeatureNote {
    /// A known name that is always on in Tessera (info).
    AlwaysOn { name: String, why: &'static str },
    /// A name Tessera does not know, or a Prometheus feature it does not implement (warning).
    Unknown(String),
}

impl Features {
    pub fn parse(list: &str) -> Features {
        let mut f = Features::default();
        // Empty items (`a,,b`, a trailing comma) are skipped rather than reported as unknown names.
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let p = &mut f.promql;
            match name {
                "promql-experimental-functions" => p.experimental_functions = true,
                "promql-delayed-name-removal" => p.delayed_name_removal = true,
                "promql-extended-range-selectors" => p.extended_range_selectors = true,
                "promql-binop-fill-modifiers" => p.binop_fill_modifiers = true,
                "use-start-timestamps" => p.use_start_timestamps = true,
                "st-storage" => f.notes.push(FeatureNote::AlwaysOn {
                    name: name.into(),
                    why: "Tessera always stores start timestamps received by remote write 2.0",
                }),
                "promql-duration-expr" => f.notes.push(FeatureNote::AlwaysOn {
                    name: name.into(),
                    why: "duration expressions are permanently enabled (as in Prometheus)",
                }),
                other => f.notes.push(FeatureNote::Unknown(other.into())),
            }
        }
        f
    }

    /// Logs the notes (after logging is set up).
    pub fn log_notes(&self) {
        for n in &self.notes {
            match n {
                FeatureNote::AlwaysOn { name, why } => {
                    tracing::info!(option = %name, "this option for --enable-feature is a no-op: {why}")
                }
                FeatureNote::Unknown(name) => tracing::warn!(option = %name, "Unknown option for --enable-feature"),
            }
        }
    }
}

fn human_bytes(n: u64) -> String {
    for (unit, shift) in [("EiB", 60), ("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    format!("{n}B")
}

/// `always`, `never`, or `interval:<duration>`.
/// `--storage.tsdb.cold-codec`: `dense` or `xor`.
/// `5m:90d,1h:2y` → tiers, checked: each resolution at least 1s and a divisor of the 2h block range,
/// finest first, each kept at least as long as the finer tiers and the raw data (`raw_retention_ms`,
/// 0 = forever), so that the coarsest tier that fits a query's step also reaches furthest back.
pub fn parse_tiers(s: &str, raw_retention_ms: i64) -> Result<Vec<TierOptions>, String> {
    let mut out: Vec<TierOptions> = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (res, keep) = part.split_once(':').unwrap_or((part, "0"));
        let resolution_ms = parse_duration_ms(res.trim()).map_err(|e| format!("{part:?}: resolution: {e}"))?;
        let retention_ms = parse_duration_ms(keep.trim()).map_err(|e| format!("{part:?}: retention: {e}"))?;
        if resolution_ms < 1000 || 7_200_000 % resolution_ms != 0 {
            return Err(format!("{part:?}: the resolution must be at least 1s and divide 2h (1m, 5m, 10m, 15m, 30m, 1h, 2h, …)"));
        }
        let forever = |r: i64| r == 0;
        if let Some(prev) = out.last() {
            if prev.resolution_ms >= resolution_ms {
                return Err(format!("{part:?}: list tiers finest first, each resolution once"));
            }
            if !forever(retention_ms) && (forever(prev.retention_ms) || retention_ms < prev.retention_ms) {
                return Err(format!("{part:?}: a tier must be kept at least as long as the finer tiers"));
            }
        }
        if !forever(retention_ms) && (forever(raw_retention_ms) || retention_ms < raw_retention_ms) {
            return Err(format!("{part:?}: a tier must be kept at least as long as the raw data (--storage.tsdb.retention.time)"));
        }
        out.push(TierOptions { resolution_ms, retention_ms });
    }
    Ok(out)
}

pub fn parse_cold_codec(s: &str) -> Result<ColdCodec, String> {
    match s.trim() {
        "dense" => Ok(ColdCodec::Dense),
        "xor" => Ok(ColdCodec::Xor),
        other => Err(format!("{other:?} is not one of dense, xor")),
    }
}

pub fn parse_fsync(s: &str) -> Result<FsyncPolicy, String> {
    match s.trim() {
        "always" => Ok(FsyncPolicy::Always),
        "never" => Ok(FsyncPolicy::Never),
        other => match other.strip_prefix("interval:") {
            Some(d) => {
                let ms = parse_duration_ms(d)?;
                if ms <= 0 {
                    return Err("the interval must be positive (use `always` to fsync every write)".into());
                }
                Ok(FsyncPolicy::Interval(Duration::from_millis(ms as u64)))
            }
            None => Err(format!("{other:?} is not one of always, interval:<duration>, never")),
        },
    }
}

/// What a `[stores.<name>]` table may set; the rest is the top-level settings'.
const STORE_KEYS: &[&str] = &[
    "storage.tsdb.retention.time",
    "storage.tsdb.retention.size",
    "storage.tsdb.out-of-order-time-window",
    "storage.tsdb.downsampling",
    "storage.tsdb.max-series",
    "storage.exemplars.exemplars-limit",
    "web.remote-write.ingestion-rate",
    "web.remote-write.ingestion-burst",
    "query.max-samples",
    "query.max-concurrency",
];

/// A store's limits from resolved settings; `query.max-samples` is the store's own only when its table
/// sets it (`own`), the server's otherwise.
fn store_limits(m: &BTreeMap<String, String>, own: Option<&BTreeMap<String, String>>) -> anyhow::Result<tessera_api::stores::Limits> {
    let get = |k: &str| m.get(k).map(String::as_str).unwrap_or("");
    let f = |k: &str| -> anyhow::Result<f64> {
        let v: f64 = get(k).trim().parse().map_err(|e| anyhow::anyhow!("{k}: {:?}: {e}", get(k)))?;
        if !v.is_finite() || v < 0.0 {
            bail!("{k}: must be a non-negative number");
        }
        Ok(v)
    };
    let n = |k: &str| -> anyhow::Result<usize> { get(k).trim().parse().map_err(|e| anyhow::anyhow!("{k}: {:?}: {e}", get(k))) };
    Ok(tessera_api::stores::Limits {
        ingestion_rate: f("web.remote-write.ingestion-rate")?,
        ingestion_burst: f("web.remote-write.ingestion-burst")?,
        query_max_samples: match own {
            Some(m) if m.contains_key("query.max-samples") => Some(n("query.max-samples")?),
            _ => None,
        },
        query_max_concurrency: if own.is_some_and(|m| m.contains_key("query.max-concurrency")) { n("query.max-concurrency")? } else { 0 },
    })
}

/// One store of the config file's `[stores.<name>]` tables (see `tessera_api::stores`), its settings
/// resolved: those the table sets, the top-level ones for the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreSettings {
    pub name: String,
    pub retention_ms: i64,
    pub retention_bytes: u64,
    pub ooo_window_ms: i64,
    pub tiers: Vec<TierOptions>,
    pub max_series: u64,
    pub max_exemplars: usize,
    pub limits: tessera_api::stores::Limits,
    /// Labels its series get when read through a union (not already set on the series).
    pub external_labels: Vec<(String, String)>,
}

/// Prometheus' label name rule (`[a-zA-Z_][a-zA-Z0-9_]*`).
fn valid_label_name(n: &str) -> bool {
    let mut b = n.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_') && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// One `[unions.<name>]` table: a read-only view over `stores` (configured stores or `default`).
#[derive(Debug, Clone, PartialEq)]
pub struct UnionSettings {
    pub name: String,
    pub stores: Vec<String>,
}

/// Reads a TOML config file into setting name → value string. Keys are dotted paths equal to the
/// flag names; unknown keys are errors (a typo must not be silently ignored).
pub fn parse_config_file(text: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let table: toml::Table = text.parse().context("invalid TOML")?;
    for kind in ["stores", "unions"] {
        if let Some(v) = table.get(kind) {
            let Some(t) = v.as_table() else { bail!("{kind}: expected [{kind}.<name>] tables") };
            for name in t.keys() {
                if !tessera_api::stores::valid_name(name) {
                    bail!("[{kind}.{name:?}]: a store name is 1 to 64 of A-Z a-z 0-9 _ -");
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    // Every store and union table is declared by its name alone too, so an empty one exists.
    for kind in ["stores", "unions"] {
        if let Some(t) = table.get(kind).and_then(|v| v.as_table()) {
            for name in t.keys() {
                out.insert(format!("{kind}.{name}"), String::new());
            }
        }
    }
    flatten("", &toml::Value::Table(table), &mut out)?;
    for k in out.keys() {
        if let Some(rest) = k.strip_prefix("stores.") {
            let (name, key) = rest.split_once('.').unwrap_or((rest, ""));
            if key.is_empty() {
                continue;
            }
            if !tessera_api::stores::valid_name(name) {
                bail!("[stores.{name}]: a store name is 1 to 64 of A-Z a-z 0-9 _ -");
            }
            if name == tessera_api::stores::DEFAULT {
                bail!("[stores.default]: the default store's settings are the top-level ones");
            }
            if let Some(l) = key.strip_prefix("external_labels.") {
                if !valid_label_name(l) {
                    bail!("[stores.{name}] external_labels: {l:?} is not a label name");
                }
                continue;
            }
            if !STORE_KEYS.contains(&key) {
                bail!("unknown store setting {key:?} in [stores.{name}]; known: {}, external_labels", STORE_KEYS.join(", "));
            }
            continue;
        }
        if let Some(rest) = k.strip_prefix("unions.") {
            let (name, key) = rest.split_once('.').unwrap_or((rest, ""));
            if key.is_empty() {
                continue;
            }
            if key != "stores" {
                bail!("unknown union setting {key:?} in [unions.{name}]; known: stores");
            }
            continue;
        }
        if !DEFAULTS.iter().any(|(d, _)| d == k) {
            let known: Vec<&str> = DEFAULTS.iter().map(|(d, _)| *d).collect();
            bail!("unknown setting {k:?}; known settings: {}", known.join(", "));
        }
    }
    Ok(out)
}

fn flatten(prefix: &str, v: &toml::Value, out: &mut BTreeMap<String, String>) -> anyhow::Result<()> {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out)?;
            }
        }
        toml::Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        toml::Value::Integer(i) => {
            out.insert(prefix.to_string(), i.to_string());
        }
        toml::Value::Boolean(b) => {
            out.insert(prefix.to_string(), b.to_string());
        }
        // `web.remote-write.ingestion-rate = 2.5`; each setting's parser decides what it accepts.
        toml::Value::Float(f) => {
            out.insert(prefix.to_string(), f.to_string());
        }
        // Only list-valued setting: `enable-feature = ["use-start-timestamps", "st-storage"]`, the same
        // as the comma-separated string.
        toml::Value::Array(items)
            if prefix == "enable-feature"
                || prefix.ends_with("storage.tsdb.downsampling")
                || (prefix.starts_with("unions.") && prefix.ends_with(".stores")) =>
        {
            let mut names = Vec::with_capacity(items.len());
            for i in items {
                match i {
                    toml::Value::String(s) => names.push(s.as_str()),
                    other => bail!("setting {prefix:?}: expected strings, got {other}"),
                }
            }
            out.insert(prefix.to_string(), names.join(","));
        }
        other => bail!("setting {prefix:?}: expected a string or a number, got {other}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let s = Settings::resolve(&ServeArgs::default()).expect("defaults resolve");
        assert_eq!(s.listen_address, "0.0.0.0:9090");
        assert_eq!(s.data_dir, PathBuf::from("data"));
        assert_eq!(s.retention_ms, 15 * 86_400_000);
        assert_eq!(s.retention_bytes, 0);
        assert_eq!(s.fsync, FsyncPolicy::Interval(Duration::from_secs(1)));
        assert_eq!(s.max_request_bytes, 32 << 20);
        assert_eq!(s.shards, None);
        assert_eq!(s.flags["query.lookback-delta"], "5m");
        assert_eq!(s.retention_description(), "15d");
    }

    #[test]
    fn flags_override_file_override_defaults() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = dir.path().join("tessera.toml");
        std::fs::write(
            &cfg,
            r#"
storage.tsdb.retention.time = "30d"
storage.tsdb.retention.size = "10GB"
storage.tsdb.shards = 4
web.listen-address = "127.0.0.1:9999"
storage.tsdb.wal-fsync = "always"
[query]
timeout = "1m"
"#,
        )
        .expect("write");
        let args = ServeArgs {
            config_file: Some(cfg.clone()),
            web_listen_address: Some("127.0.0.1:1234".into()),
            ..Default::default()
        };
        let s = Settings::resolve(&args).expect("resolve");
        assert_eq!(s.listen_address, "127.0.0.1:1234", "flag wins");
        assert_eq!(s.retention_ms, 30 * 86_400_000, "file wins over default");
        assert_eq!(s.retention_bytes, 10 << 30);
        assert_eq!(s.shards, Some(4));
        assert_eq!(s.fsync, FsyncPolicy::Always);
        assert_eq!(s.query_timeout_ms, 60_000, "tables work as well as dotted keys");
        assert_eq!(s.retention_description(), "30d or 10GiB");
        assert_eq!(s.flags["config.file"], cfg.display().to_string());
    }

    #[test]
    fn enable_feature_is_comma_separated_repeatable_and_lenient() {
        let args = ServeArgs {
            enable_feature: vec!["promql-experimental-functions,use-start-timestamps".into(), "st-storage,no-such-thing,".into()],
            ..Default::default()
        };
        let s = Settings::resolve(&args).expect("resolve");
        let p = s.features.promql;
        assert!(p.experimental_functions && p.use_start_timestamps);
        assert!(!p.delayed_name_removal && !p.extended_range_selectors && !p.binop_fill_modifiers);
        assert_eq!(s.features.notes.len(), 2, "{:?}", s.features.notes);
        assert!(matches!(&s.features.notes[0], FeatureNote::AlwaysOn { name, .. } if name == "st-storage"));
        assert_eq!(s.features.notes[1], FeatureNote::Unknown("no-such-thing".into()));
        assert_eq!(s.flags["enable-feature"], "promql-experimental-functions,use-start-timestamps,st-storage,no-such-thing,");

        // Off by default, as in Prometheus.
        let s = Settings::resolve(&ServeArgs::default()).expect("defaults");
        assert_eq!(s.features, Features::default());

        // The config file takes a list or a string; the command line wins over it.
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = dir.path().join("tessera.toml");
        std::fs::write(&cfg, "enable-feature = [\"promql-delayed-name-removal\", \"promql-binop-fill-modifiers\"]\n").expect("write");
        let s = Settings::resolve(&ServeArgs { config_file: Some(cfg.clone()), ..Default::default() }).expect("resolve");
        assert!(s.features.promql.delayed_name_removal && s.features.promql.binop_fill_modifiers);
        let args = ServeArgs {
            config_file: Some(cfg.clone()),
            enable_feature: vec!["promql-extended-range-selectors".into()],
            ..Default::default()
        };
        let s = Settings::resolve(&args).expect("resolve");
        assert!(s.features.promql.extended_range_selectors && !s.features.promql.delayed_name_removal);
        std::fs::write(&cfg, "enable-feature = \"use-start-timestamps\"\n").expect("write");
        let s = Settings::resolve(&ServeArgs { config_file: Some(cfg.clone()), ..Default::default() }).expect("resolve");
        assert!(s.features.promql.use_start_timestamps);
        std::fs::write(&cfg, "enable-feature = [1]\n").expect("write");
        assert!(Settings::resolve(&ServeArgs { config_file: Some(cfg), ..Default::default() }).is_err());
    }

    #[test]
    fn downsampling_tiers_parse_and_are_checked() {
        let t = parse_tiers("5m:90d, 1h:2y", 15 * 86_400_000).expect("valid");
        assert_eq!(t, vec![
            TierOptions { resolution_ms: 300_000, retention_ms: 90 * 86_400_000 },
            TierOptions { resolution_ms: 3_600_000, retention_ms: 2 * 365 * 86_400_000 },
        ]);
        assert_eq!(parse_tiers("", 0).expect("none"), vec![]);
        assert_eq!(parse_tiers("1h", 0).expect("forever").len(), 1);
        for bad in ["7m:1y", "500ms:1y", "1h:2y,5m:90d", "5m:90d,1h:30d", "5m:1d", "5m:x", "5m:90d,5m:90d", "3h:1y"] {
            assert!(parse_tiers(bad, 15 * 86_400_000).is_err(), "{bad} accepted");
        }
        assert!(parse_tiers("5m:90d", 0).is_err(), "a tier kept for less than raw data kept forever");
        let m = parse_config_file("storage.tsdb.downsampling = [\"5m:90d\", \"1h:2y\"]").expect("toml");
        assert_eq!(m["storage.tsdb.downsampling"], "5m:90d,1h:2y");
        let args = ServeArgs { storage_tsdb_downsampling: Some("7m".into()), ..Default::default() };
        let e = Settings::resolve(&args).expect_err("bad tier");
        assert!(e.to_string().contains("--storage.tsdb.downsampling"), "{e}");
    }

    #[test]
    fn bad_values_are_errors_naming_the_flag() {
        let e = parse_config_file("storage.tsdb.retension.time = \"1d\"").expect_err("typo");
        assert!(e.to_string().contains("unknown setting \"storage.tsdb.retension.time\""), "{e}");
        let args = ServeArgs { storage_tsdb_retention_time: Some("15 days".into()), ..Default::default() };
        let e = Settings::resolve(&args).expect_err("bad duration");
        assert!(e.to_string().contains("--storage.tsdb.retention.time"), "{e}");
        let args = ServeArgs { storage_tsdb_wal_fsync: Some("sometimes".into()), ..Default::default() };
        assert!(Settings::resolve(&args).is_err());
        assert_eq!(Settings::resolve(&ServeArgs::default()).expect("defaults").cold_codec, ColdCodec::Dense);
        let args = ServeArgs { storage_tsdb_cold_codec: Some("xor".into()), ..Default::default() };
        assert_eq!(Settings::resolve(&args).expect("xor").cold_codec, ColdCodec::Xor);
        let args = ServeArgs { storage_tsdb_cold_codec: Some("gorilla".into()), ..Default::default() };
        let e = Settings::resolve(&args).expect_err("bad codec");
        assert!(e.to_string().contains("--storage.tsdb.cold-codec: \"gorilla\" is not one of dense, xor"), "{e}");
        let args = ServeArgs {
            web_max_request_bytes: Some("512MB".into()),
            web_max_inflight_write_bytes: Some("256MB".into()),
            ..Default::default()
        };
        assert!(Settings::resolve(&args).is_err());
        assert_eq!(parse_fsync("interval:250ms"), Ok(FsyncPolicy::Interval(Duration::from_millis(250))));
        assert_eq!(parse_fsync("never"), Ok(FsyncPolicy::Never));
    }

    /// Issue 9's flags: defaults, and hostile values refused with the flag's name.
    #[test]
    fn protection_flags() {
        let s = Settings::resolve(&ServeArgs::default()).expect("defaults");
        assert_eq!((s.max_future_ms, s.max_series, s.repair_future), (600_000, 0, false));
        assert!(s.wal_compression, "on by default, as Prometheus'");
        assert!(!Settings::resolve(&ServeArgs { storage_tsdb_wal_compression: Some("false".into()), ..Default::default() }).expect("off").wal_compression);
        assert_eq!(s.max_exemplars, 100_000);
        assert_eq!((s.max_new_series_per_request, s.query_max_concurrency, s.api_result_limit), (100_000, 20, 1_000_000));
        let bad = |args: ServeArgs, says: &str| {
            let e = Settings::resolve(&args).expect_err(says);
            assert!(e.to_string().contains(says), "{e}");
        };
        bad(ServeArgs { storage_tsdb_max_future_time: Some("2h".into()), ..Default::default() }, "--storage.tsdb.max-future-time must be below 1h");
        bad(ServeArgs { storage_tsdb_wal_compression: Some("snappy".into()), ..Default::default() }, "--storage.tsdb.wal-compression: \"snappy\" is not true or false");
        bad(ServeArgs { storage_tsdb_max_future_time: Some("-5m".into()), ..Default::default() }, "--storage.tsdb.max-future-time");
        bad(ServeArgs { storage_tsdb_repair_future_samples: Some("maybe".into()), ..Default::default() }, "--storage.tsdb.repair-future-samples: \"maybe\" is not true or false");
        bad(ServeArgs { storage_tsdb_max_series: Some("-1".into()), ..Default::default() }, "--storage.tsdb.max-series");
        bad(ServeArgs { storage_exemplars_exemplars_limit: Some("-1".into()), ..Default::default() }, "--storage.exemplars.exemplars-limit");
        bad(ServeArgs { storage_exemplars_exemplars_limit: Some("99999999999999999999999".into()), ..Default::default() }, "--storage.exemplars.exemplars-limit");
        bad(ServeArgs { query_max_concurrency: Some("99999999999999999999999".into()), ..Default::default() }, "--query.max-concurrency");
        bad(ServeArgs { web_api_result_limit: Some("lots".into()), ..Default::default() }, "--web.api.result-limit");
        let ok = ServeArgs { storage_tsdb_repair_future_samples: Some("true".into()), storage_tsdb_max_future_time: Some("0s".into()), ..Default::default() };
        let s = Settings::resolve(&ok).expect("valid");
        assert_eq!((s.max_future_ms, s.repair_future), (0, true));
    }
}
