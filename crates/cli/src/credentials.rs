//! The stored login: a file under the user's config dir, mode 0600, never printed.
//! `ACTIONGATE_API_KEY` and `ACTIONGATE_AGENT_ADDRESS` take precedence (hosted runtimes).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What `login` keeps.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stored {
    pub base_url: String,
    pub agent_api_key: Option<String>,
    pub agent_id: Option<String>,
    pub agent_address: Option<String>,
    pub email: String,
    pub owner_session: String,
    pub session_expires_at: String,
}

/// `$ACTIONGATE_CONFIG_DIR`, else `$XDG_CONFIG_HOME/actiongate`, else `$HOME/.config/actiongate`.
pub fn dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("ACTIONGATE_CONFIG_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CONFIG_HOME") {
        return Some(PathBuf::from(d).join("actiongate"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config").join("actiongate"))
}

pub fn path() -> Option<PathBuf> {
    dir().map(|d| d.join("credentials.json"))
}

pub fn load() -> Option<Stored> {
    let text = std::fs::read_to_string(path()?).ok()?;
    serde_json::from_str(&text).ok()
}

/// Writes the file with mode 0600 (replacing an earlier login).
pub fn save(stored: &Stored) -> std::io::Result<PathBuf> {
    let path = path().ok_or_else(|| {
        std::io::Error::other("no config directory: set HOME or ACTIONGATE_CONFIG_DIR")
    })?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let tmp = path.with_extension("json.tmp");
    let _ = std::fs::remove_file(&tmp);
    {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut f = options.open(&tmp)?;
        f.write_all(
            serde_json::to_string_pretty(stored)
                .map_err(std::io::Error::other)?
                .as_bytes(),
        )?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Forgets the stored login; true when there was one.
pub fn remove() -> std::io::Result<bool> {
    match path() {
        Some(p) if p.exists() => std::fs::remove_file(p).map(|()| true),
        _ => Ok(false),
    }
}

/// The agent key: `ACTIONGATE_API_KEY`, else the stored login.
pub fn agent_key() -> Option<(String, &'static str)> {
    if let Ok(k) = std::env::var("ACTIONGATE_API_KEY")
        && !k.trim().is_empty()
    {
        return Some((k.trim().to_owned(), "ACTIONGATE_API_KEY"));
    }
    load()
        .and_then(|s| s.agent_api_key)
        .map(|k| (k, "stored login"))
}

/// The agent address: `ACTIONGATE_AGENT_ADDRESS`, else the stored login.
pub fn agent_address() -> Option<String> {
    std::env::var("ACTIONGATE_AGENT_ADDRESS")
        .ok()
        .filter(|a| !a.is_empty())
        .or_else(|| load().and_then(|s| s.agent_address))
}
