//! OAUTHBEARER tokens: the provider trait applications implement, and a cache for providers.

use super::secret::Secret;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// An OAUTHBEARER token as a provider hands it over.
#[derive(Clone, Debug)]
pub struct Token {
    /// The bearer token (e.g. a JWT), sent as `auth=Bearer <value>`.
    pub value: Secret,
    /// How long from now the token stays valid.
    pub lifetime: Duration,
    /// Who the token authenticates, for logs (the broker reads the principal from the token).
    pub principal: String,
    /// SASL extensions (KIP-342) sent beside the token, e.g. `logicalCluster`. Keys are
    /// letters only and `auth` is reserved.
    pub extensions: BTreeMap<String, String>,
}

/// Where OAUTHBEARER tokens come from. Called before each authentication (the first one of a
/// connection and each KIP-368 re-authentication), so an OIDC client or an AWS MSK IAM signer
/// can hand out a fresh token each time, or a cached one still valid ([`TokenCache`]).
pub trait TokenProvider: Send + Sync {
    /// A token valid now.
    fn token(&self) -> Result<Token, Box<dyn std::error::Error + Send + Sync>>;
}

/// Keeps one token for a provider that fetches them at a cost, and never returns it past its
/// lifetime. Pure: callers pass `now`.
///
/// A token is handed out only during the first 80 % of its lifetime — the window the Java
/// client's login refresh uses (`sasl.login.refresh.window.factor`) — so a connection does not
/// authenticate with a token that expires while it is being checked.
#[derive(Debug, Default)]
pub struct TokenCache {
    held: Option<(Token, Instant)>,
}

impl TokenCache {
    /// Share of a token's lifetime during which it is handed out.
    const WINDOW: f64 = 0.8;

    /// An empty cache.
    pub fn new() -> TokenCache {
        TokenCache::default()
    }

    /// The cached token at `now`, with its lifetime shortened to what remains, if it is still
    /// inside its window.
    pub fn get(&self, now: Instant) -> Option<Token> {
        let (token, obtained) = self.held.as_ref()?;
        let age = now.checked_duration_since(*obtained)?;
        if age >= token.lifetime.mul_f64(Self::WINDOW) {
            return None;
        }
        let mut t = token.clone();
        t.lifetime = token.lifetime - age;
        Some(t)
    }

    /// Stores `token`, obtained at `now`.
    pub fn put(&mut self, token: Token, now: Instant) {
        self.held = Some((token, now));
    }

    /// The cached token if still good, else a new one from `fetch`, cached.
    pub fn get_or_fetch<E>(
        &mut self,
        now: Instant,
        fetch: impl FnOnce() -> Result<Token, E>,
    ) -> Result<Token, E> {
        if let Some(t) = self.get(now) {
            return Ok(t);
        }
        self.held = None;
        let t = fetch()?;
        self.put(t.clone(), now);
        Ok(t)
    }
}

/// **For tests and examples only**: unsigned JWTs (`{"alg":"none"}`) that Kafka's *unsecured*
/// OAUTHBEARER validator (`OAuthBearerUnsecuredValidatorCallbackHandler`, the broker default when
/// no JWKS is configured) accepts. Any client can mint these; never use them in production.
#[derive(Debug, Clone)]
pub struct UnsecuredJwsProvider {
    /// The `sub` claim.
    pub principal: String,
    /// How long each token is valid (`exp` − `iat`).
    pub lifetime: Duration,
}

impl TokenProvider for UnsecuredJwsProvider {
    fn token(&self) -> Result<Token, Box<dyn std::error::Error + Send + Sync>> {
        let iat = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
        Ok(Token {
            value: Secret::new(unsecured_jws(&self.principal, iat, iat + self.lifetime.as_secs())),
            lifetime: self.lifetime,
            principal: self.principal.clone(),
            extensions: BTreeMap::new(),
        })
    }
}

/// `base64url(header) "." base64url(claims) "."`: a JWS with an empty signature.
fn unsecured_jws(sub: &str, iat: u64, exp: u64) -> String {
    let mut claims = String::from("{\"sub\":\"");
    for c in sub.chars() {
        match c {
            '"' => claims.push_str("\\\""),
            '\\' => claims.push_str("\\\\"),
            c if (c as u32) < 0x20 => claims.push_str(&format!("\\u{:04x}", c as u32)),
            c => claims.push(c),
        }
    }
    claims.push_str(&format!("\",\"iat\":{iat},\"exp\":{exp}}}"));
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(claims)
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A provider handing out one fixed token.
    pub(crate) struct Fixed(pub(crate) Token);

    impl Fixed {
        pub(crate) fn new(value: &str) -> Fixed {
            Fixed(Token {
                value: value.into(),
                lifetime: Duration::from_secs(3600),
                principal: "alice".into(),
                extensions: BTreeMap::new(),
            })
        }
    }

    impl TokenProvider for Fixed {
        fn token(&self) -> Result<Token, Box<dyn std::error::Error + Send + Sync>> {
            Ok(self.0.clone())
        }
    }

    #[test]
    fn cache_never_returns_a_token_past_its_window() {
        let t0 = Instant::now();
        let mut cache = TokenCache::new();
        assert!(cache.get(t0).is_none());
        let mut token = Fixed::new("tok").0;
        token.lifetime = Duration::from_secs(100);
        cache.put(token, t0);
        let got = cache.get(t0 + Duration::from_secs(30)).unwrap();
        assert_eq!(got.lifetime, Duration::from_secs(70));
        assert_eq!(got.value.expose(), "tok");
        assert!(cache.get(t0 + Duration::from_millis(79_999)).is_some());
        assert!(cache.get(t0 + Duration::from_secs(80)).is_none());
        assert!(cache.get(t0 + Duration::from_secs(500)).is_none());

        let mut fetched = 0;
        let mut fetch = |v: &str| {
            fetched += 1;
            let mut t = Fixed::new(v).0;
            t.lifetime = Duration::from_secs(10);
            Ok::<_, ()>(t)
        };
        let a = cache
            .get_or_fetch(t0 + Duration::from_secs(90), || fetch("a"))
            .unwrap();
        assert_eq!(a.value.expose(), "a");
        let b = cache
            .get_or_fetch(t0 + Duration::from_secs(95), || fetch("b"))
            .unwrap();
        assert_eq!(b.value.expose(), "a", "still inside the window");
        assert_eq!(b.lifetime, Duration::from_secs(5));
        let c = cache
            .get_or_fetch(t0 + Duration::from_secs(98), || fetch("c"))
            .unwrap();
        assert_eq!(c.value.expose(), "c");
        assert_eq!(fetched, 2);
    }

    #[test]
    fn unsecured_jws_shape() {
        let jws = unsecured_jws("ali\"ce", 1000, 1060);
        let parts: Vec<&str> = jws.split('.').collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[2], "");
        assert_eq!(URL_SAFE_NO_PAD.decode(parts[0]).unwrap(), br#"{"alg":"none"}"#);
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(
            claims,
            serde_json::json!({"sub": "ali\"ce", "iat": 1000, "exp": 1060})
        );
        let p = UnsecuredJwsProvider {
            principal: "bob".into(),
            lifetime: Duration::from_secs(60),
        };
        let t = p.token().unwrap();
        assert_eq!(t.principal, "bob");
        assert!(!format!("{t:?}").contains(t.value.expose()));
    }
}
