//! API tokens: who may use a server, with which role, and how much.
//!
//! A tokens file (TOML; `burrow serve --tokens FILE`) names every token in
//! a table of its own:
//!
//! ```toml
//! [tokens.ops]
//! role = "admin"
//! secret = "a long random string"
//!
//! [tokens.web]
//! role = "client"
//! secret = "another long random string"
//! actors = ["chat-room", "counter"]  # optional: only these actors
//! rate = 200                         # optional: requests per second
//! connections = 50                   # optional: open WebSockets at once
//! ```
//!
//! Only a digest of each secret is kept in memory; a presented token is
//! compared with every one of them in constant time, so that neither the
//! comparison's time nor an early exit tells how much of it matched.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU32;
use std::path::Path;

use anyhow::{Context, anyhow, bail};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::caller::{Identity, Role};

/// The shortest secret a token may have.
pub const MIN_SECRET_CHARS: usize = 16;

/// One API token (its secret's digest, never the secret).
#[derive(Debug, Clone)]
pub struct Token {
    /// The token's name: its table in the file. Logs and actors see this.
    pub name: String,
    /// What it allows.
    pub role: Role,
    /// The actors a client token may reach; `None` for every actor.
    pub actors: Option<BTreeSet<String>>,
    /// At most this many requests per second, if set.
    pub rate: Option<NonZeroU32>,
    /// At most this many open WebSockets at once, if set.
    pub connections: Option<u32>,
    digest: [u8; 32],
}

impl Token {
    /// The identity a request with this token has.
    pub fn identity(&self) -> Identity {
        Identity {
            name: self.name.clone(),
            role: self.role,
        }
    }

    /// Whether this token may reach `actor` (admin tokens reach every one).
    pub fn may_reach(&self, actor: &str) -> bool {
        self.role == Role::Admin || self.actors.as_ref().is_none_or(|a| a.contains(actor))
    }
}

/// The tokens a server accepts.
#[derive(Debug, Clone)]
pub struct Tokens {
    tokens: Vec<Token>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    tokens: BTreeMap<String, RawToken>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToken {
    role: Role,
    secret: String,
    actors: Option<Vec<String>>,
    rate: Option<u32>,
    connections: Option<u32>,
}

impl Tokens {
    /// Reads a tokens file.
    pub fn load(path: &Path) -> anyhow::Result<Tokens> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the tokens file {}", path.display()))?;
        Tokens::parse(&text).with_context(|| format!("in the tokens file {}", path.display()))
    }

    /// Parses the text of a tokens file.
    pub fn parse(text: &str) -> anyhow::Result<Tokens> {
        let raw: RawFile = toml::from_str(text).map_err(|e| anyhow!("{}", e.message()))?;
        if raw.tokens.is_empty() {
            bail!("no token: add a [tokens.NAME] table with a role and a secret");
        }
        let mut tokens = Vec::with_capacity(raw.tokens.len());
        for (name, raw) in raw.tokens {
            tokens.push(token(name, raw)?);
        }
        for (i, a) in tokens.iter().enumerate() {
            if let Some(b) = tokens[..i].iter().find(|b| b.digest == a.digest) {
                bail!(
                    "tokens `{}` and `{}` have the same secret; each needs its own",
                    b.name,
                    a.name
                );
            }
        }
        Ok(Tokens { tokens })
    }

    /// The token whose secret is `presented`, if any. Every token is
    /// compared, in constant time.
    pub fn authenticate(&self, presented: &str) -> Option<&Token> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for token in &self.tokens {
            if bool::from(token.digest.ct_eq(&digest)) {
                found = Some(token);
            }
        }
        found
    }

    /// Every token.
    pub fn iter(&self) -> impl Iterator<Item = &Token> {
        self.tokens.iter()
    }
}

fn token(name: String, raw: RawToken) -> anyhow::Result<Token> {
    let named = |what: String| anyhow!("token `{name}`: {what}");
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        bail!("token name `{name}`: use letters, digits, `-`, `_` and `.`");
    }
    if raw.secret.chars().count() < MIN_SECRET_CHARS {
        return Err(named(format!(
            "the secret is shorter than {MIN_SECRET_CHARS} characters"
        )));
    }
    if !raw.secret.chars().all(|c| c.is_ascii_graphic()) {
        return Err(named(
            "the secret may hold only visible ASCII characters (no spaces)".into(),
        ));
    }
    if raw.role == Role::Admin && raw.actors.is_some() {
        return Err(named(
            "`actors` limits client tokens; an admin token reaches every actor".into(),
        ));
    }
    let rate = match raw.rate {
        Some(rate) => {
            Some(NonZeroU32::new(rate).ok_or_else(|| named("`rate` must be at least 1".into()))?)
        }
        None => None,
    };
    Ok(Token {
        digest: Sha256::digest(raw.secret.as_bytes()).into(),
        name,
        role: raw.role,
        actors: raw.actors.map(|a| a.into_iter().collect()),
        rate,
        connections: raw.connections,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
        [tokens.ops]
        role = "admin"
        secret = "ops-secret-0123456789"

        [tokens.web]
        role = "client"
        secret = "web-secret-0123456789"
        actors = ["counter"]
        rate = 5
        connections = 2
    "#;

    #[test]
    fn a_presented_secret_finds_its_token() {
        let tokens = Tokens::parse(FILE).unwrap();
        let ops = tokens.authenticate("ops-secret-0123456789").unwrap();
        assert_eq!((ops.name.as_str(), ops.role), ("ops", Role::Admin));
        let web = tokens.authenticate("web-secret-0123456789").unwrap();
        assert_eq!(web.role, Role::Client);
        assert!(web.may_reach("counter"));
        assert!(!web.may_reach("mailer"));
        assert!(ops.may_reach("mailer"));
        assert_eq!(web.rate.map(NonZeroU32::get), Some(5));
        assert!(tokens.authenticate("web-secret-012345678").is_none());
        assert!(tokens.authenticate("").is_none());
    }

    #[test]
    fn bad_files_are_refused_with_what_is_wrong() {
        let err = |text: &str| format!("{:#}", Tokens::parse(text).unwrap_err());
        assert!(err("").contains("no token"));
        assert!(err("[tokens.a]\nrole = 'admin'\nsecret = 'short'").contains("shorter than 16"));
        assert!(
            err("[tokens.a]\nrole = 'root'\nsecret = '0123456789abcdef'")
                .contains("unknown variant")
        );
        assert!(
            err("[tokens.a]\nrole = 'client'\nsecret = '0123456789abcdef'\nsecrte = 1")
                .contains("unknown field")
        );
        assert!(
            err("[tokens.a]\nrole = 'admin'\nsecret = '0123456789abcdef'\nactors = ['x']")
                .contains("every actor")
        );
        assert!(
            err("[tokens.a]\nrole = 'client'\nsecret = '0123456789 abcdef'").contains("no spaces")
        );
        assert!(
            err("[tokens.a]\nrole = 'client'\nsecret = '0123456789abcdef'\nrate = 0")
                .contains("at least 1")
        );
        let twice = "[tokens.a]\nrole = 'client'\nsecret = '0123456789abcdef'\n\
                     [tokens.b]\nrole = 'admin'\nsecret = '0123456789abcdef'";
        assert!(err(twice).contains("same secret"));
        assert!(
            err("[tokens.'a b']\nrole = 'client'\nsecret = '0123456789abcdef'")
                .contains("token name")
        );
    }

    #[test]
    fn the_secret_is_not_kept() {
        let tokens = Tokens::parse(FILE).unwrap();
        assert!(!format!("{tokens:?}").contains("ops-secret"));
    }
}
