//! The first start (`docs/security.md` §9.8): outside `--dev`, whatever secret the
//! configuration leaves unset is read from, or at the first start generated into, the state
//! directory, so that a server started with no configuration at all is closed (tokens
//! required), encrypted (HTTPS with a self-signed certificate) and keeps its identity across
//! restarts (the same tokens, token key, SAM key and certificate pin).
//!
//! | file | what | made when |
//! |---|---|---|
//! | `api.token`, `player.token`, `dashboard.token` | the three bearer tokens | neither `api_token` nor `token_secret_file` configured |
//! | `token.key` | HS256 key of signed tokens | no `token_secret_file` |
//! | `sam.key` | Ed25519 SAM signing seed | no `sam_key`/`sam_key_file` |
//! | `cert.pem`, `key.pem` | self-signed certificate and key | `tls` on, no `tls_cert`/`tls_key` |
//!
//! A configured `token_secret_file` is loaded (or made) here too, with or without `--dev`:
//! loading a configuration (`config::load`) writes nothing.
//!
//! Every file is written whole or not at all, mode 0600 (the certificate 0644), never
//! overwritten (`auth::write_new_file`); the directory is made 0700. Generated tokens are
//! printed once, at the start that made them, together with the certificate pin; later starts
//! name the files instead.

use crate::config::ServerConfig;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// What this start generated, to print once.
#[derive(Default)]
pub struct FirstStart {
    /// `(config key, value)` of every token generated now.
    pub generated_tokens: Vec<(&'static str, String)>,
    /// Where the tokens live (when they came from the state directory).
    pub token_files: Option<PathBuf>,
}

/// Fills what the configuration leaves unset from the state directory (see the module
/// documentation). Does nothing with `--dev`.
pub fn provision(cfg: &mut ServerConfig) -> Result<FirstStart> {
    let mut out = FirstStart::default();
    if let Some(f) = cfg.token_secret_file.clone() {
        cfg.tokens = std::mem::take(&mut cfg.tokens).with_jwt_secret_file(Some(&f))?;
    }
    if cfg.dev {
        return Ok(out);
    }
    let dir = cfg.state_dir.clone();
    make_private_dir(&dir)?;
    // Static tokens only when the configuration has no way in at all: a deployment of signed
    // tokens only (`token_secret_file`, no `api_token`) stays that.
    if cfg.tokens.api.is_none() && cfg.token_secret_file.is_none() {
        let mut got = Vec::new();
        for key in ["api_token", "player_token", "dashboard_token"] {
            let file = dir.join(format!("{}.token", key.trim_end_matches("_token")));
            let (value, made) = read_or_make(&file, random_token)?;
            if made {
                out.generated_tokens.push((key, value.clone()));
            }
            got.push(value);
        }
        let [api, player, dashboard]: [String; 3] = got.try_into().expect("three tokens");
        cfg.tokens.api = Some(api);
        cfg.tokens.player = Some(player);
        cfg.tokens.dashboard = Some(dashboard);
        out.token_files = Some(dir.clone());
    }
    if !cfg.tokens.has_signing_key() {
        cfg.tokens =
            std::mem::take(&mut cfg.tokens).with_jwt_secret_file(Some(&dir.join("token.key")))?;
    }
    if cfg.sam_key.is_none() && cfg.sam_key_file.is_none() {
        cfg.sam_key_file = Some(dir.join("sam.key"));
    }
    if cfg.tls && cfg.tls_cert.is_none() && cfg.tls_key.is_none() {
        cfg.tls_cert = Some(dir.join("cert.pem"));
        cfg.tls_key = Some(dir.join("key.pem"));
    }
    Ok(out)
}

/// The state directory's lock, held while a start reads or writes its secrets: two servers
/// started at once on one directory (a supervisor's restart racing a manual start, parallel
/// tests) then make one set of files and both read it, instead of one of them failing on a
/// file the other has just linked, or pairing a certificate with the other's key.
pub struct StateLock(#[allow(dead_code)] Option<std::fs::File>);

/// Takes the lock of [`StateLock`] (blocking); nothing with `--dev`, which uses no state directory.
pub fn lock_state(cfg: &ServerConfig) -> Result<StateLock> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    if cfg.dev {
        return Ok(StateLock(None));
    }
    make_private_dir(&cfg.state_dir)?;
    let path = cfg.state_dir.join(".lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    // SAFETY: flock on a descriptor this function owns; released when the file is closed.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(Error::io(
            format!("locking {}", path.display()),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(StateLock(Some(f)))
}

/// 32 random bytes as 64 hex digits.
fn random_token() -> Result<String> {
    let mut k = [0u8; 32];
    openssl::rand::rand_bytes(&mut k)
        .map_err(|e| Error::io("random token", std::io::Error::other(e.to_string())))?;
    Ok(k.iter().map(|b| format!("{b:02x}")).collect())
}

/// The trimmed content of `file`, or a new value written there (0600). Two servers making the
/// same file at once both end with the one that was linked first.
fn read_or_make(file: &Path, make: fn() -> Result<String>) -> Result<(String, bool)> {
    let read = |f: &Path| {
        std::fs::read_to_string(f)
            .map(|s| s.trim().to_string())
            .map_err(|e| Error::io(format!("reading {}", f.display()), e))
    };
    if file.exists() {
        return Ok((read(file)?, false));
    }
    let v = make()?;
    match crate::auth::write_secret(file, &v) {
        Ok(()) => Ok((v, true)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok((read(file)?, false)),
        Err(e) => Err(Error::io(format!("writing {}", file.display()), e)),
    }
}

/// Creates `dir` (and parents) with mode 0700 if it does not exist.
fn make_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(format!("making the state directory {}", dir.display()), e))
}

/// The start-up lines about the secrets: the generated tokens once, else where they are.
pub fn report(first: &FirstStart, cfg: &ServerConfig, pin: Option<&str>) -> String {
    let mut s = String::new();
    let scheme = if cfg.tls { "https" } else { "http" };
    if !first.generated_tokens.is_empty() {
        let dir = first.token_files.as_deref().unwrap_or(Path::new("?"));
        s.push_str(&format!(
            "layercast-server: first start: generated in {} (files 0600; printed this once):\n",
            dir.display()
        ));
        for (k, v) in &first.generated_tokens {
            s.push_str(&format!("  {k:<16} {v}\n"));
        }
        if let Some(p) = pin {
            s.push_str(&format!(
                "  {:<16} sha256:{p}  (players: --tls-fingerprint {p})\n",
                "certificate"
            ));
        }
        if let Some((_, d)) = first
            .generated_tokens
            .iter()
            .find(|(k, _)| *k == "dashboard_token")
        {
            s.push_str(&format!(
                "  dashboard        {scheme}://{}/?access_token={d}\n",
                cfg.http_addr
            ));
        }
    } else if let Some(dir) = &first.token_files {
        s.push_str(&format!(
            "layercast-server: tokens from {}/{{api,player,dashboard}}.token\n",
            dir.display()
        ));
    }
    if cfg.dev {
        s.push_str(&dev_warning(cfg));
    }
    s
}

/// What `--dev` opens, said loudly.
fn dev_warning(cfg: &ServerConfig) -> String {
    let mut open = Vec::new();
    if !cfg.tokens.enabled() {
        open.push("no tokens: anyone who reaches the port may create, change and delete sessions, read viewers and metrics");
    }
    if !cfg.tls {
        open.push("plain HTTP: requests and any bearer token cross the network in clear");
    }
    if cfg.sam_key.is_none() && cfg.sam_key_file.is_none() {
        open.push("SAM signing key made for this run: players cannot pin it across restarts");
    }
    let mut s = format!(
        "layercast-server: WARNING --dev on {}: development mode, not for a shared network\n",
        cfg.http_addr
    );
    for o in open {
        s.push_str(&format!("layercast-server: WARNING --dev: {o}\n"));
    }
    if !cfg.http_addr.ip().is_loopback() {
        s.push_str(&format!(
            "layercast-server: WARNING --dev: listening on {}, not loopback: everything above is reachable from other hosts\n",
            cfg.http_addr.ip()
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn cfg(args: &[&str], state: &Path) -> ServerConfig {
        let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        a.push(format!("--state-dir={}", state.display()));
        match crate::config::load(&a, &Default::default()).unwrap() {
            crate::config::Cli::Run(c) => *c,
            crate::config::Cli::Help(_) => unreachable!(),
        }
    }

    /// Several servers starting at once on one fresh state directory all start, with one set
    /// of secrets: the same tokens, SAM key and certificate (make test once ran two first starts
    /// in parallel, and one failed on the token key the other had just written).
    #[test]
    fn simultaneous_first_starts_share_one_set_of_secrets() {
        let dir = std::env::temp_dir().join(format!("lc-{}-first-starts", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let state = dir.join("state");
        let starts: Vec<_> = (0..6)
            .map(|_| {
                let mut c = cfg(&[], &state);
                std::thread::spawn(move || {
                    let lock = lock_state(&c)?;
                    provision(&mut c)?;
                    let (signer, _) = crate::auth::load_signer(&c)?;
                    let tls = crate::tls::load(
                        c.tls_cert.as_deref(),
                        c.tls_key.as_deref(),
                        c.http_addr.ip(),
                    )?;
                    drop(lock);
                    Ok::<_, Error>((
                        c.tokens.api.clone(),
                        signer.published_key(),
                        tls.fingerprint,
                    ))
                })
            })
            .collect();
        let got: Vec<_> = starts
            .into_iter()
            .map(|t| t.join().unwrap().expect("every start succeeds"))
            .collect();
        assert!(got.iter().all(|g| *g == got[0]), "{got:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A server started with no configuration is closed and encrypted, from files it made at
    /// the first start (0600, in a 0700 directory), printed once, the same at the next start.
    #[test]
    fn first_start_generates_tokens_keys_and_tls_then_reuses_them() {
        let dir = std::env::temp_dir().join(format!("lc-{}-first-start", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let state = dir.join("state");
        let mut c = cfg(&[], &state);
        assert!(c.tls && !c.dev);
        assert!(!c.tokens.enabled(), "nothing yet before provisioning");
        let first = provision(&mut c).unwrap();
        assert_eq!(first.generated_tokens.len(), 3);
        assert!(c.tokens.enabled() && c.tokens.has_signing_key());
        let api = c.tokens.api.clone().unwrap();
        assert_eq!(api.len(), 64);
        assert_ne!(c.tokens.api, c.tokens.player);
        assert_eq!(c.sam_key_file.as_deref(), Some(&*state.join("sam.key")));
        assert_eq!(c.tls_cert.as_deref(), Some(&*state.join("cert.pem")));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&state), 0o700);
        for f in ["api.token", "player.token", "dashboard.token", "token.key"] {
            assert_eq!(mode(&state.join(f)), 0o600, "{f}");
        }
        let text = report(&first, &c, Some("ab12"));
        assert!(
            text.contains(&api) && text.contains("sha256:ab12"),
            "{text}"
        );
        // The next start reads the same tokens and prints none.
        let mut again = cfg(&[], &state);
        let second = provision(&mut again).unwrap();
        assert!(second.generated_tokens.is_empty());
        assert_eq!(again.tokens.api.as_deref(), Some(api.as_str()));
        let text = report(&second, &again, Some("ab12"));
        assert!(!text.contains(&api), "{text}");
        // Configured tokens are used as given and nothing is generated for them.
        let mut given = cfg(
            &["--api-token", "given-api-token-0123456789"],
            &dir.join("s2"),
        );
        let f = provision(&mut given).unwrap();
        assert!(f.generated_tokens.is_empty());
        assert!(!dir.join("s2/api.token").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `--dev` generates nothing, keeps the API open and plain, and says so.
    #[test]
    fn dev_is_explicit_open_and_loud() {
        let dir = std::env::temp_dir().join(format!("lc-{}-dev", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut c = cfg(&["--dev", "--http-addr", "0.0.0.0:8080"], &dir);
        assert!(c.dev && !c.tls);
        let first = provision(&mut c).unwrap();
        assert!(!c.tokens.enabled() && !dir.exists());
        let text = report(&first, &c, None);
        for w in ["no tokens", "plain HTTP", "not loopback"] {
            assert!(text.contains(w), "{w}: {text}");
        }
    }

    /// Outside `--dev`, plain HTTP is refused on anything but loopback: tokens would cross
    /// the network in clear.
    #[test]
    fn plain_http_off_loopback_needs_dev() {
        let a = |v: &[&str]| {
            let v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
            crate::config::load(&v, &Default::default()).map(|_| ())
        };
        let e = a(&["--tls", "false", "--http-addr", "0.0.0.0:8080"]).unwrap_err();
        assert!(e.to_string().contains("in clear"), "{e}");
        assert!(a(&["--tls", "false", "--http-addr", "127.0.0.1:8080"]).is_ok());
        assert!(a(&["--dev", "--tls", "false", "--http-addr", "0.0.0.0:8080"]).is_ok());
        assert!(a(&["--http-addr", "0.0.0.0:8080"]).is_ok());
    }
}
