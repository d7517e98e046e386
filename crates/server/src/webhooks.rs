//! The webhooks' HTTP client (`WebhookTransport`): where deliveries may go and how they are posted.
//! A URL's host is resolved and every address it names is checked: private, loopback, link-local,
//! unique-local, CGNAT, multicast and unspecified addresses are refused unless `[webhooks]
//! allow-private = true` (SSRF); the post then connects to the checked address only (no second
//! lookup that could answer another), follows no redirect, and gives up after 10 s.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use actiongate_core::webhooks::WebhookTransport;
use async_trait::async_trait;

/// How long a post may take, connection included.
const TIMEOUT: Duration = Duration::from_secs(10);

pub struct HttpTransport {
    allow_private: bool,
}

impl HttpTransport {
    pub fn new(allow_private: bool) -> Self {
        Self { allow_private }
    }

    /// The URL's host and port, and the one address to connect to, checked.
    async fn target(&self, url: &str) -> Result<(url::Url, String, SocketAddr), String> {
        let parsed = url::Url::parse(url).map_err(|_| "not a URL".to_owned())?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("only http and https URLs are called".into());
        }
        let host = parsed
            .host_str()
            .ok_or_else(|| "the URL has no host".to_owned())?
            .trim_matches(|c| c == '[' || c == ']')
            .to_owned();
        let port = parsed
            .port_or_known_default()
            .ok_or_else(|| "the URL has no port".to_owned())?;
        let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::net::lookup_host((host.as_str(), port))
                .await
                .map_err(|_| format!("{host} does not resolve"))?
                .collect(),
        };
        let Some(first) = addrs.first().copied() else {
            return Err(format!("{host} does not resolve"));
        };
        if !self.allow_private
            && let Some(bad) = addrs.iter().find(|a| !is_public(a.ip()))
        {
            return Err(format!(
                "{host} is a private, loopback or link-local address ({}): the gateway does not call it",
                bad.ip()
            ));
        }
        Ok((parsed, host, first))
    }
}

/// Whether an address is on the public internet.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || (o[0] == 198 && (18..20).contains(&o[1]))
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || first == 0x2001 && v6.segments()[1] == 0x0db8)
        }
    }
}

#[async_trait]
impl WebhookTransport for HttpTransport {
    async fn check(&self, url: &str) -> Result<(), String> {
        self.target(url).await.map(|_| ())
    }

    async fn post(&self, url: &str, headers: &[(&str, String)], body: &str) -> Result<u16, String> {
        let (parsed, host, addr) = self.target(url).await?;
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .connect_timeout(TIMEOUT)
            .resolve(&host, addr)
            .user_agent(concat!("actiongate-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("client: {e}"))?;
        let mut req = client.post(parsed).body(body.to_owned());
        for (name, value) in headers {
            req = req.header(*name, value);
        }
        // Without the URL: an owner's URL may carry a token in its query.
        let resp = req
            .send()
            .await
            .map_err(|e| format!("not delivered: {}", e.without_url()))?;
        Ok(resp.status().as_u16())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::",
        ] {
            assert!(!is_public(private.parse().expect("ip")), "{private}");
        }
        for public in ["1.1.1.1", "8.8.8.8", "2606:4700:4700::1111"] {
            assert!(is_public(public.parse().expect("ip")), "{public}");
        }
    }

    #[tokio::test]
    async fn private_targets_are_refused_unless_allowed() {
        let strict = HttpTransport::new(false);
        for url in [
            "http://127.0.0.1:9/hook",
            "http://localhost:9/hook",
            "http://[::1]:9/hook",
            "http://169.254.169.254/latest/meta-data",
            "http://10.0.0.5/hook",
        ] {
            assert!(strict.check(url).await.is_err(), "{url}");
        }
        assert!(strict.check("ftp://example.com/").await.is_err());
        assert!(
            HttpTransport::new(true)
                .check("http://127.0.0.1:9/hook")
                .await
                .is_ok()
        );
    }
}
