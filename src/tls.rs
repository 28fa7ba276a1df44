//! The one TLS crypto provider the process links: ring, as sqlx's TLS to PostgreSQL already
//! does. reqwest is built without one of its own (its default would add aws-lc, whose C build
//! was two minutes of a cold build on two cores), so every HTTP client starts here.

/// A builder of an HTTP client, ring installed as the process's provider first (once; a
/// provider installed before, by anyone, stays).
pub(crate) fn client() -> reqwest::ClientBuilder {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
}
