//! HTTPS: the web configuration's `tls_server_config` (Exporter Toolkit format) as a rustls acceptor,
//! and a listener that hands axum connections whose handshake is done.
//!
//! Handshakes run in tasks of their own with a deadline, so a client that connects and says nothing
//! (or trickles its hello) holds one task for ten seconds, never the accept loop. The configuration is
//! read per handshake from a shared slot, so a changed certificate applies to the next connection.
//!
//! What rustls cannot do is refused at start with the reason: TLS 1.0/1.1, cipher suites and curves it
//! does not implement, `RequestClientCert`/`RequireAnyClientCert` (client certificates accepted
//! unverified) and `client_allowed_sans`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use parking_lot::RwLock;
use rustls::crypto::ring as provider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedCipherSuite};
use tessera_api::access::TlsServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Longest a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

fn certs(inline: &Option<String>, file: &Option<String>, what: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let v: Vec<CertificateDer<'static>> = match (inline, file) {
        (Some(pem), None) => CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<_, _>>().with_context(|| format!("{what}: inline PEM"))?,
        (None, Some(f)) => CertificateDer::pem_file_iter(f)
            .with_context(|| format!("{what}: reading {f}"))?
            .collect::<Result<_, _>>()
            .with_context(|| format!("{what}: {f}"))?,
        (Some(_), Some(_)) => bail!("{what}: give the certificate inline or as a file, not both"),
        (None, None) => bail!("{what}: missing"),
    };
    if v.is_empty() {
        bail!("{what}: no certificate in the PEM");
    }
    Ok(v)
}

fn suite(name: &str) -> anyhow::Result<SupportedCipherSuite> {
    use provider::cipher_suite::*;
    // Go's names (crypto/tls) of the TLS 1.2 suites rustls implements.
    Ok(match name {
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" | "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256" => {
            TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        }
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" | "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256" => {
            TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
        }
        _ => bail!("cipher suite {name:?} is not one rustls implements (TLS 1.2: the ECDHE AES-GCM and ChaCha20 suites)"),
    })
}

/// The rustls configuration `t` describes; `http2` adds `h2` to ALPN.
pub fn server_config(t: &TlsServerConfig, http2: bool) -> anyhow::Result<ServerConfig> {
    let version = |v: &Option<String>, dflt: &str| -> anyhow::Result<u8> {
        match v.as_deref().unwrap_or(dflt) {
            "TLS13" => Ok(13),
            "TLS12" => Ok(12),
            "TLS10" | "TLS11" => bail!("TLS 1.0 and 1.1 are not supported (rustls speaks TLS 1.2 and 1.3)"),
            other => bail!("unknown TLS version {other:?} (TLS12, TLS13)"),
        }
    };
    let (min, max) = (version(&t.min_version, "TLS12")?, version(&t.max_version, "TLS13")?);
    let auth = t.client_auth_type.as_deref().unwrap_or("NoClientCert");
    match auth {
        "NoClientCert" | "VerifyClientCertIfGiven" | "RequireAndVerifyClientCert" => {}
        "RequestClientCert" | "RequireAnyClientCert" => {
            bail!("client_auth_type {auth} (certificates accepted unverified) is not supported: use VerifyClientCertIfGiven or RequireAndVerifyClientCert")
        }
        other => bail!("unknown client_auth_type {other:?}"),
    }
    if min > max {
        bail!("tls_server_config: min_version is above max_version");
    }
    let chain = certs(&t.cert, &t.cert_file, "tls_server_config.cert_file")?;
    let key = match (&t.key, &t.key_file) {
        (Some(pem), None) => PrivateKeyDer::from_pem_slice(pem.as_bytes()).context("tls_server_config.key: inline PEM")?,
        (None, Some(f)) => PrivateKeyDer::from_pem_file(f).with_context(|| format!("tls_server_config.key_file: {f}"))?,
        (Some(_), Some(_)) => bail!("tls_server_config: give the key inline or as a file, not both"),
        (None, None) => bail!("tls_server_config.key_file: missing"),
    };
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [(12, &rustls::version::TLS12), (13, &rustls::version::TLS13)].into_iter().filter(|(v, _)| *v >= min && *v <= max).map(|(_, p)| p).collect();
    let mut p = provider::default_provider();
    if !t.cipher_suites.is_empty() {
        // Go's list applies to TLS 1.2; TLS 1.3's suites are not configurable there either.
        let mut chosen: Vec<SupportedCipherSuite> = Vec::new();
        for name in &t.cipher_suites {
            chosen.push(suite(name)?);
        }
        chosen.extend(p.cipher_suites.iter().filter(|s| s.version() == &rustls::version::TLS13).copied());
        p.cipher_suites = chosen;
    }
    if !t.curve_preferences.is_empty() {
        let mut groups = Vec::new();
        for c in &t.curve_preferences {
            groups.push(match c.as_str() {
                "X25519" => provider::kx_group::X25519,
                "CurveP256" => provider::kx_group::SECP256R1,
                "CurveP384" => provider::kx_group::SECP384R1,
                other => bail!("curve {other:?} is not one rustls implements (X25519, CurveP256, CurveP384)"),
            });
        }
        p.kx_groups = groups;
    }
    if !t.client_allowed_sans.is_empty() {
        bail!("tls_server_config.client_allowed_sans is not supported yet");
    }
    let p = Arc::new(p);
    let builder = ServerConfig::builder_with_provider(p.clone()).with_protocol_versions(&versions).context("TLS versions")?;
    let client_ca = match (&t.client_ca, &t.client_ca_file) {
        (None, None) => None,
        _ => Some(certs(&t.client_ca, &t.client_ca_file, "tls_server_config.client_ca_file")?),
    };
    let verifier = |allow_none: bool| -> anyhow::Result<Arc<dyn rustls::server::danger::ClientCertVerifier>> {
        let Some(cas) = &client_ca else { bail!("tls_server_config: client_auth_type {auth} needs client_ca_file") };
        let mut roots = RootCertStore::empty();
        for c in cas {
            roots.add(c.clone()).context("tls_server_config.client_ca_file")?;
        }
        let b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), p.clone());
        let b = if allow_none { b.allow_unauthenticated() } else { b };
        b.build().context("client certificate verifier")
    };
    let builder = match auth {
        "VerifyClientCertIfGiven" => builder.with_client_cert_verifier(verifier(true)?),
        "RequireAndVerifyClientCert" => builder.with_client_cert_verifier(verifier(false)?),
        // NoClientCert (the others were refused above).
        _ => builder.with_no_client_auth(),
    };
    let mut cfg = builder.with_single_cert(chain, key).context("tls_server_config: certificate and key")?;
    cfg.alpn_protocols = if http2 { vec![b"h2".to_vec(), b"http/1.1".to_vec()] } else { vec![b"http/1.1".to_vec()] };
    Ok(cfg)
}

/// A listener whose connections have finished their TLS handshake.
pub struct TlsListener {
    rx: tokio::sync::mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Accepts on `tcp`, handshaking with the configuration in `cfg` at that moment.
    pub fn new(tcp: TcpListener, cfg: Arc<RwLock<Arc<ServerConfig>>>) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (mut stream, addr) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: wait rather than spin.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                if tx.is_closed() {
                    return;
                }
                crate::serve::set_nodelay(&mut stream);
                let acceptor = TlsAcceptor::from(cfg.read().clone());
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, addr)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(peer = %addr, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(peer = %addr, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { rx, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept loop is gone only when the listener is: nothing will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod nodelay_tests {
    use super::*;
    use axum::serve::Listener;

    #[tokio::test]
    async fn tls_connections_are_accepted_with_nagle_off() {
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
        let der = ck.cert.der().clone();
        let key = PrivateKeyDer::try_from(ck.signing_key.serialize_der()).expect("key");
        let server = ServerConfig::builder_with_provider(Arc::new(provider::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![der.clone()], key)
            .expect("server config");
        let tcp = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = tcp.local_addr().expect("addr");
        let mut l = TlsListener::new(tcp, Arc::new(RwLock::new(Arc::new(server)))).expect("listener");

        let mut roots = RootCertStore::empty();
        roots.add(der).expect("root");
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(provider::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let c = tokio::spawn(async move {
            let s = TcpStream::connect(addr).await.expect("connect");
            connector.connect("localhost".try_into().expect("name"), s).await.expect("handshake")
        });
        let (io, _) = tokio::time::timeout(Duration::from_secs(10), l.accept()).await.expect("accepted in time");
        assert!(io.get_ref().0.nodelay().expect("nodelay"), "the TLS listener must turn Nagle off");
        drop(c.await.expect("client"));
    }
}
