//! The control side: the bearer token that guards `/gyre/executions`, `/gyre/closure` and
//! `/gyre/assessment`, and the capability URLs it issues per execution (docs/record.md,
//! "Security").
//!
//! The agent under training reaches the model URL; it must not reach the reward. So the control
//! routes are served on their own listener and every call needs the token (from a file or an
//! environment variable, never the command line, where `ps` shows it). A harness gets one URL per
//! execution, `/x/<execution>/<capability>`, where the capability is an HMAC-SHA256 of the
//! execution id under the token: it cannot be guessed or derived for another execution, needs no
//! state, and stays valid across restarts of the proxy with the same token.

use std::io::Write;
use std::path::{Path, PathBuf};

use axum::http::HeaderMap;
use eyre::{Result, WrapErr, eyre};
use gyre_format::note::Invalid;
use sha2::{Digest, Sha256};

/// Where the control token comes from.
#[derive(Clone, Debug)]
pub enum TokenSource {
    /// The value of an environment variable (named for messages).
    Env {
        /// The variable's name.
        name: String,
        /// Its value.
        value: String,
    },
    /// A file holding it: read when it exists (it must not be readable by other users),
    /// else created (mode 0600) with a fresh random token.
    File(PathBuf),
}

/// The control token and what is derived from it.
pub struct Control {
    token: Vec<u8>,
    /// Where it was read or written, for the startup line.
    pub origin: String,
    /// The token file this start created (a refused start removes it again).
    pub created: Option<PathBuf>,
}

/// Shortest token accepted (bytes): 128 bits as hex.
const MIN_TOKEN: usize = 32;

impl Control {
    /// Loads (or, for a missing file, creates) the token.
    pub fn load(source: &TokenSource) -> Result<Self> {
        match source {
            TokenSource::Env { name, value } => {
                let value = value.trim();
                if value.len() < MIN_TOKEN {
                    return Err(Invalid(format!(
                        "${name} holds {} characters; a control token needs at least {MIN_TOKEN} \
                         (e.g. `openssl rand -hex 32`)",
                        value.len()
                    ))
                    .into());
                }
                Ok(Control {
                    token: value.as_bytes().to_vec(),
                    origin: format!("${name}"),
                    created: None,
                })
            }
            TokenSource::File(path) => Self::from_file(path),
        }
    }

    fn from_file(path: &Path) -> Result<Self> {
        let origin = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => {
                check_private(path)?;
                let value = text.trim();
                if value.len() < MIN_TOKEN {
                    return Err(Invalid(format!(
                        "{origin} holds {} characters; a control token needs at least {MIN_TOKEN}",
                        value.len()
                    ))
                    .into());
                }
                Ok(Control {
                    token: value.as_bytes().to_vec(),
                    origin,
                    created: None,
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut raw = [0u8; 32];
                getrandom::fill(&mut raw)
                    .map_err(|e| eyre!("no OS random source for the control token: {e}"))?;
                let token = hex(&raw);
                // Written whole or not at all: a temporary file (mode 0600) beside it, synced,
                // then linked under its name unless one appeared meanwhile. A full disk leaves
                // no empty token file to refuse the next start.
                let dir = path
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                let mut tmp = tempfile::Builder::new()
                    .prefix(".gyre-control-token")
                    .tempfile_in(dir)
                    .wrap_err_with(|| format!("creating the control token file {origin}"))?;
                writeln!(tmp, "{token}")
                    .and_then(|()| tmp.as_file().sync_all())
                    .wrap_err_with(|| format!("writing the control token file {origin}"))?;
                match tmp.persist_noclobber(path) {
                    Ok(_) => Ok(Control {
                        token: token.into_bytes(),
                        origin,
                        created: Some(path.to_path_buf()),
                    }),
                    // Another start wrote it first: use that one.
                    Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
                        Self::from_file(path)
                    }
                    Err(e) => Err(eyre!(e.error)
                        .wrap_err(format!("creating the control token file {origin}"))),
                }
            }
            Err(e) => Err(eyre!(e).wrap_err(format!("reading the control token file {origin}"))),
        }
    }

    /// Whether `headers` carry `Authorization: Bearer <token>` (compared in constant time).
    pub fn authorized(&self, headers: &HeaderMap) -> bool {
        let Some(given) = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        else {
            return false;
        };
        constant_time_eq(given.trim().as_bytes(), &self.token)
    }

    /// The capability of `execution`: 128 bits of HMAC-SHA256(token, execution) as hex.
    pub fn capability(&self, execution: &str) -> String {
        let mac = hmac_sha256(
            &self.token,
            format!("gyre-capability\0{execution}").as_bytes(),
        );
        hex(&mac[..16])
    }

    /// Whether `capability` is the one issued for `execution`.
    pub fn check(&self, execution: &str, capability: &str) -> bool {
        constant_time_eq(self.capability(execution).as_bytes(), capability.as_bytes())
    }
}

/// A token file readable by others is refused: whoever reads it can write rewards.
fn check_private(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .wrap_err_with(|| format!("reading {}", path.display()))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(Invalid(format!(
                "the control token file {} is readable by other users (mode {:o}); \
                 run `chmod 600 {}`",
                path.display(),
                mode & 0o777,
                path.display()
            ))
            .into());
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// HMAC (RFC 2104) over SHA-256.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| k.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_capability_belongs_to_one_execution_and_one_token() {
        let a = Control {
            token: b"0123456789abcdef0123456789abcdef".to_vec(),
            origin: String::new(),
            created: None,
        };
        let b = Control {
            token: b"0123456789abcdef0123456789abcdeg".to_vec(),
            origin: String::new(),
            created: None,
        };
        let cap = a.capability("task-17");
        assert_eq!(cap.len(), 32);
        assert!(a.check("task-17", &cap));
        assert!(!a.check("task-18", &cap));
        assert!(!b.check("task-17", &cap));
        assert!(!a.check("task-17", &cap[..31]));
    }
}
