//! Loading: defaults, then the file, the environment and the flags, in increasing precedence.

use super::{ServerConfig, SessionConfig, KEYS};
use crate::error::{Error, Result};
use clap::error::ErrorKind;
use clap::{Arg, ArgAction, Command};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

/// Where a raw value came from, for error messages.
fn parse_val<T: std::str::FromStr>(key: &str, raw: &str) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    raw.trim()
        .parse::<T>()
        .map_err(|e| Error::config(key, format!("{raw:?}: {e}")))
}

fn parse_bool(key: &str, raw: &str) -> Result<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(Error::config(key, format!("{raw:?} is not a boolean"))),
    }
}

/// Result of parsing the command line: either run with a config, or print help.
pub enum Cli {
    Run(Box<ServerConfig>),
    Help(String),
}

/// Builds the configuration from `args` (without the program name) and `env`. Reads the
/// config file, writes nothing.
pub fn load(args: &[String], env: &BTreeMap<String, String>) -> Result<Cli> {
    let m = match command().try_get_matches_from(
        std::iter::once("layercast-server".into()).chain(args.iter().cloned()),
    ) {
        Ok(m) => m,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            return Ok(Cli::Help(e.render().to_string()))
        }
        Err(e) => return Err(Error::Cli(e)),
    };
    let flags: BTreeMap<String, String> = KEYS
        .iter()
        .filter_map(|(k, _, _)| Some((k.to_string(), m.get_one::<String>(k)?.clone())))
        .collect();
    let flag_sessions: Vec<String> = m
        .get_many::<String>("session")
        .map(|v| v.cloned().collect())
        .unwrap_or_default();
    load_inner(flags, &flag_sessions, env, None)
}

/// The configuration a config file's `text` alone gives (no flags, no environment): the
/// config-file fuzz target's entry (no command line to parse on each input).
pub fn load_file_text(text: &str) -> Result<Cli> {
    let flags = BTreeMap::from([("config".to_string(), "config.toml".to_string())]);
    load_inner(flags, &[], &BTreeMap::new(), Some(text))
}

/// Merges the four layers (`flags` and `flag_sessions` from the command line) and checks
/// every value.
fn load_inner(
    flags: BTreeMap<String, String>,
    flag_sessions: &[String],
    env: &BTreeMap<String, String>,
    file_text: Option<&str>,
) -> Result<Cli> {
    // Layer 1: defaults; 2: file; 3: env; 4: flags.
    let mut vals: BTreeMap<String, String> = KEYS
        .iter()
        .map(|(k, d, _)| (k.to_string(), d.to_string()))
        .collect();
    let config_path = flags
        .get("config")
        .cloned()
        .or_else(|| env.get("LAYERCAST_CONFIG").cloned());
    let mut sessions = Vec::new();
    if let Some(path) = config_path.filter(|p| !p.is_empty()) {
        let text = match file_text {
            Some(t) => t.to_string(),
            None => std::fs::read_to_string(&path).map_err(|e| Error::ConfigFile {
                path: path.clone(),
                reason: e.to_string(),
            })?,
        };
        let (file_vals, file_sessions) = parse_file(&path, &text)?;
        vals.extend(file_vals);
        sessions = file_sessions;
    }
    for (k, _, _) in KEYS {
        if let Some(v) = env.get(&format!("LAYERCAST_{}", k.to_ascii_uppercase())) {
            vals.insert(k.to_string(), v.clone());
        }
    }
    vals.extend(flags);
    for (n, s) in flag_sessions.iter().enumerate() {
        let c: SessionConfig = serde_json::from_str(s)
            .map_err(|e| Error::config(&format!("--session #{n}"), e.to_string()))?;
        sessions.push(c);
    }
    let v = |k: &str| vals.get(k).map(String::as_str).unwrap_or("");
    let announce = if v("announce").is_empty() {
        None
    } else {
        let sa: std::net::SocketAddrV4 = parse_val("announce", v("announce"))?;
        if !sa.ip().is_multicast() {
            return Err(Error::config(
                "announce",
                format!("{} is not multicast", sa.ip()),
            ));
        }
        Some((*sa.ip(), sa.port()))
    };
    let ms = |k: &str| -> Result<Duration> {
        let n: u64 = parse_val(k, v(k))?;
        if n == 0 {
            return Err(Error::config(k, "must be > 0"));
        }
        Ok(Duration::from_millis(n))
    };
    let group_base: Ipv4Addr = parse_val("group_base", v("group_base"))?;
    if !group_base.is_multicast() {
        return Err(Error::config(
            "group_base",
            format!("{group_base} is not multicast"),
        ));
    }
    let ttl: u32 = parse_val("ttl", v("ttl"))?;
    if ttl == 0 || ttl > 255 {
        return Err(Error::config("ttl", format!("{ttl} outside 1..=255")));
    }
    let ssm = v("ssm_source");
    let dev = parse_bool("dev", v("dev"))?;
    let cfg = ServerConfig {
        http_addr: parse_val("http_addr", v("http_addr"))?,
        announce,
        announce_interval: ms("announce_interval_ms")?,
        interface: parse_val("interface", v("interface"))?,
        ttl,
        multicast_loop: parse_bool("loop", v("loop"))?,
        ssm_source: if ssm.is_empty() {
            None
        } else {
            Some(parse_val("ssm_source", ssm)?)
        },
        group_base,
        port_base: parse_val("port_base", v("port_base"))?,
        dashboard_dir: PathBuf::from(v("dashboard_dir")),
        telemetry_min_interval: ms("telemetry_min_interval_ms")?,
        max_viewer_labels: parse_val("max_viewer_labels", v("max_viewer_labels"))?,
        viewer_timeout: Duration::from_secs(parse_val("viewer_timeout_s", v("viewer_timeout_s"))?),
        pacer_spin: Duration::from_micros(parse_val("pacer_spin_us", v("pacer_spin_us"))?),
        pacer_realtime: parse_bool("pacer_realtime", v("pacer_realtime"))?,
        sessions,
        tokens: crate::auth::Tokens::new(v("api_token"), v("player_token"), v("dashboard_token"))?,
        token_secret_file: Some(v("token_secret_file"))
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
        sam_key: Some(v("sam_key").to_string()).filter(|s| !s.is_empty()),
        sam_key_file: Some(v("sam_key_file"))
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
        dev,
        state_dir: state_dir(v("state_dir"), env),
        tls: match v("tls") {
            "" => !dev,
            t => parse_bool("tls", t)?,
        },
        http_io_timeout: ms("http_io_timeout_ms")?,
        tls_cert: Some(v("tls_cert"))
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
        tls_key: Some(v("tls_key"))
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
        telemetry_per_addr_per_sec: {
            let r: f64 = parse_val(
                "telemetry_per_addr_per_sec",
                v("telemetry_per_addr_per_sec"),
            )?;
            if !(r > 0.0 && r <= 100_000.0) {
                return Err(Error::config(
                    "telemetry_per_addr_per_sec",
                    "must be in (0, 100000]",
                ));
            }
            r
        },
        http_idle_timeout: ms("http_idle_timeout_ms")?,
        http_max_connections: parse_val("http_max_connections", v("http_max_connections"))?,
        http_listen_backlog: parse_val("http_listen_backlog", v("http_listen_backlog"))?,
        http_max_websockets: parse_val("http_max_websockets", v("http_max_websockets"))?,
        udp_reports: parse_bool("udp_reports", v("udp_reports"))?,
        report_budget_bps: parse_val("report_budget_bps", v("report_budget_bps"))?,
        media_key_refresh: ms("media_key_refresh_ms")?.max(Duration::from_secs(1)),
    };
    if !cfg.dev && !cfg.tls && !cfg.http_addr.ip().is_loopback() {
        return Err(Error::config(
            "tls",
            format!(
                "false on {}: bearer tokens would cross the network in clear; \
                 listen on a loopback address (behind a TLS proxy), keep tls on, or run with --dev",
                cfg.http_addr
            ),
        ));
    }
    Ok(Cli::Run(Box::new(cfg)))
}

/// The state directory: `state_dir` if set, else `$XDG_STATE_HOME/layercast`, else
/// `$HOME/.local/state/layercast` (XDG Base Directory), else `./layercast-state`.
pub fn state_dir(given: &str, env: &BTreeMap<String, String>) -> PathBuf {
    let non_empty = |k: &str| env.get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if !given.is_empty() {
        PathBuf::from(given)
    } else if let Some(x) = non_empty("XDG_STATE_HOME") {
        x.join("layercast")
    } else if let Some(h) = non_empty("HOME") {
        h.join(".local/state/layercast")
    } else {
        PathBuf::from("layercast-state")
    }
}

/// Splits a TOML file into server-level scalars (as strings) and `[[session]]` tables.
fn parse_file(path: &str, text: &str) -> Result<(BTreeMap<String, String>, Vec<SessionConfig>)> {
    let file_err = |reason: String| Error::ConfigFile {
        path: path.to_string(),
        reason,
    };
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| file_err(e.to_string()))?;
    let mut vals = BTreeMap::new();
    let mut sessions = Vec::new();
    for (k, v) in table {
        if k == "session" {
            let arr = v
                .as_array()
                .ok_or_else(|| Error::config("session", "use [[session]] tables"))?;
            for (n, s) in arr.iter().enumerate() {
                let c: SessionConfig = s.clone().try_into().map_err(|e: toml::de::Error| {
                    Error::config(&format!("session[{n}]"), e.to_string())
                })?;
                sessions.push(c);
            }
            continue;
        }
        if k == "config" || !KEYS.iter().any(|(n, _, _)| *n == k) {
            return Err(Error::config(&k, format!("unknown key in {path}")));
        }
        let s = match v {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Float(f) => f.to_string(),
            other => return Err(Error::config(&k, format!("unsupported value {other:?}"))),
        };
        vals.insert(k, s);
    }
    Ok((vals, sessions))
}

/// What `--help` says after the flags.
const AFTER_HELP: &str = "\
Precedence: --flag > LAYERCAST_KEY env > config file > default.
Safe by default: tokens required, HTTPS, generated at the first start into state_dir; --dev opts
out, for loopback and labs only (docs/security.md).
Also: `layercast-server token --help` (signed player tokens), `layercast-server tfrc --help` (a
unicast TFRC flow; research build).";

/// The command line: every server-level key of [`KEYS`] as `--key-name VALUE` (or
/// `--key-name=VALUE`, or with the key's underscores), `--session JSON` (repeatable) and `--dev` (alone: the explicit
/// opt-out of the safe defaults; `--dev=false` also parses). The values stay text here: each
/// is checked once the four layers are merged, so a bad value names its key wherever it came
/// from (flag, environment or file).
fn command() -> Command {
    let mut c = Command::new("layercast-server")
        .version(env!("CARGO_PKG_VERSION"))
        .about("layercast-server: layered multicast sender, session announcements, HTTP API")
        .after_help(AFTER_HELP)
        .args_override_self(true)
        .allow_negative_numbers(true);
    for (k, d, h) in KEYS {
        let mut a = Arg::new(*k)
            .long(k.replace('_', "-"))
            .value_name(k.to_ascii_uppercase())
            .help(format!(
                "{h} [default: {d:?}; env LAYERCAST_{}]",
                k.to_ascii_uppercase()
            ))
            .action(ArgAction::Set);
        if k.contains('_') {
            // The key's own spelling (`--http_addr`) parses too, as it always has: scripts
            // written against the file's names keep working.
            a = a.alias(*k);
        }
        if *k == "dev" {
            a = a
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true")
                .value_name("BOOL");
        }
        c = c.arg(a);
    }
    c.arg(
        Arg::new("session")
            .long("session")
            .value_name("JSON")
            .action(ArgAction::Append)
            .help(
                "add a session (same schema as POST /api/sessions); repeatable; the file may \
                 hold [[session]] tables",
            ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn run(a: &[&str], env: &[(&str, &str)]) -> Result<ServerConfig> {
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        match load(&args(a), &env)? {
            Cli::Run(c) => Ok(*c),
            Cli::Help(_) => panic!("help"),
        }
    }

    #[test]
    fn precedence_flag_over_env_over_file() {
        let dir = std::env::temp_dir().join(format!("lc-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.toml");
        std::fs::write(
            &f,
            "ttl = 3\nhttp_addr = \"127.0.0.1:9001\"\nport_base = 6000\n[[session]]\nname = \"a\"\nlayers = 4\n",
        )
        .unwrap();
        let path = f.to_str().unwrap();
        let c = run(&["--config", path], &[]).unwrap();
        assert_eq!(c.ttl, 3);
        assert_eq!(c.port_base, 6000);
        assert_eq!(c.sessions.len(), 1);
        let c = run(&["--config", path], &[("LAYERCAST_TTL", "4")]).unwrap();
        assert_eq!(c.ttl, 4);
        let c = run(&["--config", path, "--ttl=5"], &[("LAYERCAST_TTL", "4")]).unwrap();
        assert_eq!(c.ttl, 5);
        assert_eq!(c.http_addr.port(), 9001);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn errors_name_the_key() {
        let e = run(&["--ttl", "0"], &[]).unwrap_err().to_string();
        assert!(e.contains("`ttl`"), "{e}");
        let e = run(&[], &[("LAYERCAST_HTTP_ADDR", "nope")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`http_addr`"), "{e}");
        let e = run(&["--bogus", "1"], &[]).unwrap_err();
        assert!(
            matches!(&e, Error::Cli(c) if c.kind() == ErrorKind::UnknownArgument),
            "{e}"
        );
        assert!(e.to_string().contains("'--bogus'"), "{e}");
        let e = run(&["--announce", "10.0.0.1:5000"], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`announce`"), "{e}");
        let e = run(&["--session", "{\"layerz\":3}"], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--session #0"), "{e}");
    }

    fn cli_err(a: &[&str]) -> clap::Error {
        match run(a, &[]) {
            Err(Error::Cli(e)) => e,
            Err(e) => panic!("{a:?}: not a command-line error: {e}"),
            Ok(_) => panic!("{a:?} parsed"),
        }
    }

    /// Flags as clap parses them: `--key value` and `--key=value`, the last of a repeated
    /// flag, every `--session`, `--dev` alone or with `=BOOL`, and clear errors for a missing
    /// value or a stray word.
    #[test]
    fn the_command_line() {
        let c = run(&["--ttl=6", "--port-base", "7000", "--ttl", "7"], &[]).unwrap();
        assert_eq!((c.ttl, c.port_base), (7, 7000));
        // The key's own spelling: what the testbed and older scripts pass.
        let c = run(
            &[
                "--http_addr",
                "127.0.0.1:9002",
                "--announce_interval_ms=500",
            ],
            &[],
        )
        .unwrap();
        assert_eq!(c.http_addr.port(), 9002);
        assert_eq!(c.announce_interval, Duration::from_millis(500));
        let s = r#"{"name":"a","layers":2}"#;
        let c = run(&["--session", s, "--session", s], &[]).unwrap();
        assert_eq!(c.sessions.len(), 2);
        assert!(run(&["--dev"], &[]).unwrap().dev);
        let c = run(
            &["--dev", "--tls", "false", "--http-addr", "0.0.0.0:8080"],
            &[],
        )
        .unwrap();
        assert!(c.dev && !c.tls);
        assert!(!run(&["--dev=false"], &[]).unwrap().dev);
        assert!(!run(&[], &[]).unwrap().dev);
        // An empty value is a value: `--announce ''` turns the announcements off (the edge).
        assert_eq!(run(&["--announce", ""], &[]).unwrap().announce, None);
        assert_eq!(run(&["--announce="], &[]).unwrap().announce, None);
        let e = cli_err(&["--ttl"]);
        assert_eq!(e.kind(), ErrorKind::InvalidValue, "{e}");
        assert!(e.to_string().contains("--ttl"), "{e}");
        let e = cli_err(&["ttl", "3"]);
        assert_eq!(e.kind(), ErrorKind::UnknownArgument, "{e}");
        let e = cli_err(&["--dev", "true"]);
        assert_eq!(e.kind(), ErrorKind::UnknownArgument, "{e}");
        // A negative number is a value (refused by its key's own check).
        let e = run(&["--port-base", "-1"], &[]).unwrap_err().to_string();
        assert!(e.contains("`port_base`"), "{e}");
    }

    /// `--help` lists every key as a flag with its default and environment variable, and the
    /// precedence; `--version` the crate's version. Neither runs the server.
    #[test]
    fn help_and_version() {
        let help = match load(&args(&["--help"]), &BTreeMap::new()).unwrap() {
            Cli::Help(h) => h,
            Cli::Run(_) => panic!("--help ran"),
        };
        for (k, _, _) in KEYS {
            let flag = format!("--{}", k.replace('_', "-"));
            assert!(help.contains(&flag), "{flag} missing from --help:\n{help}");
            let env = format!("LAYERCAST_{}", k.to_ascii_uppercase());
            assert!(help.contains(&env), "{env} missing from --help");
        }
        assert!(help.contains("--session <JSON>") && help.contains("Precedence"));
        match load(&args(&["--version"]), &BTreeMap::new()).unwrap() {
            Cli::Help(v) => assert_eq!(
                v.trim(),
                format!("layercast-server {}", env!("CARGO_PKG_VERSION"))
            ),
            Cli::Run(_) => panic!("--version ran"),
        }
    }
}
