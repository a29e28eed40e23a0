//! `layercast-linkemu`: see the library documentation and docs/linkemu.md.
//!
//! ```text
//! layercast-linkemu [run] --a IF --b IF [--both JSON] [--ab JSON] [--ba JSON]
//!                   [--ctl PATH] [--seed N] [--stats-out FILE] [--rt-prio 0..99] [--keep-awake]
//! layercast-linkemu ctl PATH JSON      # send one control request, print the reply
//! layercast-linkemu mrouter --upstream IF[,IF...] --downstream IF[,IF...] [--leave-delay-ms N]
//! layercast-linkemu keep-awake         # only the --keep-awake spinners, until SIGINT/SIGTERM
//! layercast-linkemu --help | --version # also `help SUBCOMMAND`, `SUBCOMMAND --help`
//! ```
//!
//! The command line is clap's ([`Cli`]); without a subcommand the flags are `run`'s, as the
//! scripts and tests call it.

use clap::{Args, Parser, Subcommand};
use linkemu::config::{LinkParams, LinkUpdate};
use linkemu::run::{run, Options};
use linkemu::Error;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// The command line: a subcommand, or the `run` flags alone (`run` is the default, so
/// `layercast-linkemu --a IF --b IF ...` runs the wire, as scripts call it).
#[derive(Debug, Parser)]
#[command(
    name = "layercast-linkemu",
    version,
    about = "Userspace link emulator between two interfaces: rate, queue discipline, delay, \
             jitter, loss (docs/linkemu.md). Without a subcommand the flags are `run`'s.",
    long_about = None,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    args_override_self = true,
    allow_negative_numbers = true,
    after_help = LINK_JSON
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    run: Option<RunArgs>,
}

/// Shown after `--help`: the link settings' JSON (docs/linkemu.md has every field).
const LINK_JSON: &str = "JSON link settings (--both, --ab, --ba; docs/linkemu.md):
  {\"rate_bps\":1000000,\"delay_ms\":10,\"jitter_ms\":0,\"loss\":0.01,
   \"queue\":{\"kind\":\"droptail\",\"limit_packets\":50},\"overhead_bytes\":0,
   \"flow\":{\"mcast_prefix_len\":24,\"udp_port_block\":0}}";

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run the wire between --a and --b (the default: the same flags without `run`)
    #[command(after_help = LINK_JSON)]
    Run(RunArgs),
    /// Send one control request to a running wire's socket (--ctl PATH), print the reply
    Ctl {
        /// The wire's control socket (its --ctl)
        #[arg(value_name = "PATH")]
        path: PathBuf,
        /// The request, e.g. '{"cmd":"get"}' or '{"cmd":"set","dir":"ab","delay_ms":40}'
        #[arg(value_name = "JSON")]
        json: String,
    },
    /// A fast-leave IGMP multicast router between the interfaces
    Mrouter(MrouterArgs),
    /// Only the --keep-awake spinners (one SCHED_IDLE spinner per CPU), until SIGINT/SIGTERM
    KeepAwake,
}

/// `run`'s flags.
#[derive(Debug, Clone, Args)]
struct RunArgs {
    /// Interface a
    #[arg(long = "a", value_name = "IF")]
    if_a: String,
    /// Interface b
    #[arg(long = "b", value_name = "IF")]
    if_b: String,
    /// Link settings for both directions (JSON, below); repeatable, applied in order before
    /// --ab and --ba
    #[arg(long, value_name = "JSON", value_parser = link_update, action = clap::ArgAction::Append)]
    both: Vec<LinkUpdate>,
    /// Link settings a → b (JSON); repeatable, applied in order
    #[arg(long, value_name = "JSON", value_parser = link_update, action = clap::ArgAction::Append)]
    ab: Vec<LinkUpdate>,
    /// Link settings b → a (JSON); repeatable, applied in order
    #[arg(long, value_name = "JSON", value_parser = link_update, action = clap::ArgAction::Append)]
    ba: Vec<LinkUpdate>,
    /// Control socket (Unix stream, one JSON request per line)
    #[arg(long, value_name = "PATH")]
    ctl: Option<PathBuf>,
    /// Random seed (the directions use N and N+1)
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Write the final counters (JSON) here on exit
    #[arg(long, value_name = "FILE")]
    stats_out: Option<PathBuf>,
    /// SCHED_FIFO priority of the two wire threads, 1..=99 (0: normal scheduling)
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(i32).range(0..=99))]
    rt_prio: i32,
    /// One SCHED_IDLE spinner per CPU while the wire runs (no vCPU halts)
    #[arg(long)]
    keep_awake: bool,
}

/// `mrouter`'s flags.
#[derive(Debug, Clone, Args)]
struct MrouterArgs {
    /// Upstream interfaces (comma-separated; repeatable)
    #[arg(long, value_name = "IF[,IF...]", required = true, value_delimiter = ',',
          action = clap::ArgAction::Append)]
    upstream: Vec<String>,
    /// Downstream interfaces (comma-separated; repeatable)
    #[arg(long, value_name = "IF[,IF...]", required = true, value_delimiter = ',',
          action = clap::ArgAction::Append)]
    downstream: Vec<String>,
    /// Delay each leave by this much (a slow leave; 0: at once), 0..=600000
    #[arg(long, value_name = "MS", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=600_000))]
    leave_delay_ms: u64,
}

/// A `--both`/`--ab`/`--ba` value: JSON that parses and that a link accepts (the update is
/// checked on default parameters; `LinkUpdate::apply` checks each field on its own).
fn link_update(s: &str) -> Result<LinkUpdate, String> {
    let u = LinkUpdate::from_json(s).map_err(|e| e.to_string())?;
    u.apply(&mut LinkParams::default())
        .map_err(|e| e.to_string())?;
    Ok(u)
}

/// What to do, from the command line (without the program name).
#[derive(Debug)]
enum Action {
    /// `--help` or `--version` was printed.
    Printed,
    Run(Box<Options>),
    Ctl(PathBuf, String),
    Mrouter {
        up: Vec<String>,
        down: Vec<String>,
        leave_delay_ms: u64,
    },
    KeepAwake,
}

/// Parses the command line; a bare command line (no argument at all) prints the help, as
/// before clap.
fn parse(args: &[String]) -> Result<Action, clap::Error> {
    use clap::CommandFactory;
    if args.is_empty() {
        print!("{}", Cli::command().render_help());
        return Ok(Action::Printed);
    }
    let argv = std::iter::once("layercast-linkemu").chain(args.iter().map(String::as_str));
    let cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return Ok(Action::Printed);
        }
        Err(e) => return Err(e),
    };
    match (cli.cmd, cli.run) {
        (Some(Cmd::Run(r)), _) | (None, Some(r)) => {
            into_options(r).map(|o| Action::Run(Box::new(o)))
        }
        (Some(Cmd::Ctl { path, json }), _) => Ok(Action::Ctl(path, json)),
        (Some(Cmd::Mrouter(m)), _) => into_mrouter(m),
        (Some(Cmd::KeepAwake), _) => Ok(Action::KeepAwake),
        // Not seen (clap asks for --a and --b when neither a subcommand nor a flag came),
        // but an error rather than a panic if it ever is.
        (None, None) => Err(Cli::command().error(
            clap::error::ErrorKind::MissingSubcommand,
            "give a subcommand, or run's flags (--a IF --b IF ...)",
        )),
    }
}

/// `run`'s flags as the emulator's options: `--both` first, then `--ab` and `--ba`, each in
/// the order given.
fn into_options(r: RunArgs) -> Result<Options, clap::Error> {
    let mut o = Options {
        if_a: r.if_a,
        if_b: r.if_b,
        ab: LinkParams::default(),
        ba: LinkParams::default(),
        ctl: r.ctl,
        seed: r.seed,
        stats_out: r.stats_out,
        rt_prio: r.rt_prio,
        keep_awake: r.keep_awake,
    };
    let bad = |flag: &str, e: Error| {
        use clap::CommandFactory;
        Cli::command().error(
            clap::error::ErrorKind::ValueValidation,
            format!("invalid value for '--{flag}': {e}"),
        )
    };
    for u in &r.both {
        u.apply(&mut o.ab).map_err(|e| bad("both", e))?;
        u.apply(&mut o.ba).map_err(|e| bad("both", e))?;
    }
    for u in &r.ab {
        u.apply(&mut o.ab).map_err(|e| bad("ab", e))?;
    }
    for u in &r.ba {
        u.apply(&mut o.ba).map_err(|e| bad("ba", e))?;
    }
    Ok(o)
}

/// `mrouter`'s interfaces, checked before "ready", so a caller waiting for it sees the refusal
/// (the kernel has 32 multicast vifs; with more interfaces `run` would fail after "ready").
fn into_mrouter(m: MrouterArgs) -> Result<Action, clap::Error> {
    use clap::CommandFactory;
    let up: Vec<String> = m.upstream.into_iter().filter(|s| !s.is_empty()).collect();
    let down: Vec<String> = m.downstream.into_iter().filter(|s| !s.is_empty()).collect();
    let err = |msg: String| {
        let mut cmd = Cli::command();
        // Built, so that the usage line names `layercast-linkemu mrouter`.
        cmd.build();
        cmd.find_subcommand_mut("mrouter")
            .expect("mrouter is a subcommand")
            .error(clap::error::ErrorKind::ValueValidation, msg)
    };
    if up.is_empty() {
        return Err(err("--upstream: at least one interface is needed".into()));
    }
    if down.is_empty() || up.len() + down.len() > linkemu::mroute::MAX_VIFS {
        return Err(err(format!(
            "--downstream: need at least one downstream interface and at most {} interfaces in all (kernel MAXVIFS); got {}",
            linkemu::mroute::MAX_VIFS,
            up.len() + down.len()
        )));
    }
    Ok(Action::Mrouter {
        up,
        down,
        leave_delay_ms: m.leave_delay_ms,
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let action = match parse(&args) {
        Ok(a) => a,
        // Clap's report (the error naming the flag, the usage line); exit code 2 (it was 1
        // before clap, when a bad command line and a failed run were not told apart).
        Err(e) => e.exit(),
    };
    let result = match action {
        Action::Printed => return,
        Action::Ctl(p, j) => linkemu::ctl::request(&p, &j).map(|r| {
            println!("{r}");
        }),
        Action::Run(o) => start(*o),
        Action::Mrouter {
            up,
            down,
            leave_delay_ms,
        } => mrouter(&up, &down, leave_delay_ms),
        Action::KeepAwake => keep_awake(),
    };
    if let Err(e) = result {
        eprintln!("layercast-linkemu: {e}");
        std::process::exit(1);
    }
}

fn start(o: Options) -> Result<(), Error> {
    let stop = install_signals();
    run(o, stop).map(|_| ())
}

/// `keep-awake`: the spinners of `--keep-awake` without a wire, until a signal.
fn keep_awake() -> Result<(), Error> {
    let stop = install_signals();
    linkemu::run::spawn_keep_awake(&stop)?;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(())
}

fn install_signals() -> Arc<AtomicBool> {
    // SAFETY: installing an async-signal-safe handler that only stores an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    std::thread::spawn(move || loop {
        if STOP.load(Ordering::Relaxed) {
            s2.store(true, Ordering::Relaxed);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    });
    stop
}

/// `mrouter`: routes until a signal; prints `{"ready":true,...}` first, then one line per
/// membership event.
fn mrouter(up: &[String], down: &[String], leave_delay_ms: u64) -> Result<(), Error> {
    let stop = install_signals();
    println!(
        "{}",
        serde_json::json!({"ready": true, "upstream": up, "downstream": down})
    );
    let r = linkemu::mroute::run(up, down, leave_delay_ms, &stop)?;
    println!(
        "{}",
        serde_json::json!({"event": "exit", "joins": r.joins, "leaves": r.leaves})
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse_v(v: &[&str]) -> Result<Action, clap::Error> {
        parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn run_opts(v: &[&str]) -> Options {
        match parse_v(v) {
            Ok(Action::Run(o)) => *o,
            other => panic!("{v:?}: {other:?}"),
        }
    }

    /// The clap error of a command line that must not parse, as text.
    fn err(v: &[&str], kind: ErrorKind) -> String {
        match parse_v(v) {
            Err(e) => {
                assert_eq!(e.kind(), kind, "{v:?}: {e}");
                e.to_string()
            }
            Ok(a) => panic!("{v:?} parsed: {a:?}"),
        }
    }

    /// Every command line the project runs the emulator with, as those places build it.
    #[test]
    fn the_projects_invocations_parse() {
        let ab = r#"{"rate_bps":1000000,"delay_ms":10,"queue":{"kind":"droptail","limit_packets":50},"overhead_bytes":14}"#;
        // e2e/src/linkemu.ts (LinkEmu.start; topology.ts and edge.ts start links through it).
        let o = run_opts(&[
            "--a",
            "l0a",
            "--b",
            "l0b",
            "--ctl",
            "/tmp/l0.sock",
            "--ab",
            ab,
            "--ba",
            r#"{"rate_bps":0,"delay_ms":10}"#,
            "--seed",
            "1001",
            "--rt-prio",
            "10",
            "--stats-out",
            "/tmp/linkemu-0.json",
        ]);
        assert_eq!((o.if_a.as_str(), o.if_b.as_str()), ("l0a", "l0b"));
        assert_eq!(o.ctl, Some(PathBuf::from("/tmp/l0.sock")));
        assert_eq!((o.seed, o.rt_prio, o.keep_awake), (1001, 10, false));
        assert_eq!(o.stats_out, Some(PathBuf::from("/tmp/linkemu-0.json")));
        assert_eq!(
            (o.ab.rate_bps, o.ab.delay_ns, o.ab.overhead_bytes),
            (1_000_000, 10_000_000, 14)
        );
        assert_eq!((o.ba.rate_bps, o.ba.delay_ns), (0, 10_000_000));
        // player/tests/common/mod.rs (LAYERCAST_BOTTLENECK=linkemu).
        let o = run_opts(&[
            "--a",
            "ea",
            "--b",
            "eb",
            "--ab",
            ab,
            "--ba",
            "{}",
            "--ctl",
            "/tmp/linkemu.sock",
            "--rt-prio",
            "10",
            "--keep-awake",
        ]);
        assert!(o.keep_awake);
        assert_eq!(o.ba, LinkParams::default());
        // e2e/linkemu/tests/netns.rs (Wire::with_args).
        for extra in [&[][..], &["--rt-prio", "10"][..]] {
            let mut v = vec![
                "--a",
                "ea",
                "--b",
                "eb",
                "--ctl",
                "/tmp/w.sock",
                "--both",
                r#"{"rate_bps":10000000,"delay_ms":5}"#,
            ];
            v.extend_from_slice(extra);
            let o = run_opts(&v);
            assert_eq!(o.ab, o.ba);
            assert_eq!(o.ab.rate_bps, 10_000_000);
        }
        // e2e/src/topology.ts and bed.ts (one or several interfaces each side).
        for (v, up, down, delay) in [
            (
                &[
                    "mrouter",
                    "--upstream",
                    "r0",
                    "--downstream",
                    "r1,r2",
                    "--leave-delay-ms",
                    "0",
                ][..],
                &["r0"][..],
                &["r1", "r2"][..],
                0,
            ),
            (
                &[
                    "mrouter",
                    "--upstream",
                    "a,b",
                    "--downstream",
                    "c",
                    "--leave-delay-ms",
                    "2000",
                ][..],
                &["a", "b"][..],
                &["c"][..],
                2000,
            ),
            // player/tests/common/mod.rs.
            (
                &["mrouter", "--upstream", "r0", "--downstream", "r1"][..],
                &["r0"][..],
                &["r1"][..],
                0,
            ),
        ] {
            match parse_v(v) {
                Ok(Action::Mrouter {
                    up: u,
                    down: d,
                    leave_delay_ms,
                }) => {
                    assert_eq!(u, up, "{v:?}");
                    assert_eq!(d, down, "{v:?}");
                    assert_eq!(leave_delay_ms, delay, "{v:?}");
                }
                other => panic!("{v:?}: {other:?}"),
            }
        }
        // player/tests/common/mod.rs (set_link, emu_state).
        for req in [
            r#"{"cmd":"get"}"#,
            r#"{"cmd":"set","dir":"ab","rate_bps":500000}"#,
        ] {
            match parse_v(&["ctl", "/tmp/linkemu.sock", req]) {
                Ok(Action::Ctl(p, j)) => {
                    assert_eq!((p, j.as_str()), (PathBuf::from("/tmp/linkemu.sock"), req));
                }
                other => panic!("ctl {req}: {other:?}"),
            }
        }
        // scripts/test.sh, e2e/src/bed.ts, e2e/linkemu/tests/keep_awake.rs.
        assert!(matches!(parse_v(&["keep-awake"]), Ok(Action::KeepAwake)));
    }

    /// The usage block of docs/linkemu.md ("Running it"), placeholders filled in, parses
    /// line by line (with and without `run`).
    #[test]
    fn the_documented_usage_parses() {
        let doc = include_str!("../../../docs/linkemu.md");
        let block = doc
            .split("## Running it\n\n```\n")
            .nth(1)
            .and_then(|b| b.split("\n```").next())
            .expect("docs/linkemu.md has the usage block");
        let mut lines: Vec<String> = Vec::new();
        for l in block.lines() {
            let l = l.split(" # ").next().unwrap();
            match lines.last_mut() {
                Some(prev) if l.starts_with(' ') => prev.push_str(l),
                _ => lines.push(l.to_string()),
            }
        }
        assert!(lines.len() >= 5, "{lines:?}");
        for line in &lines {
            let words: Vec<String> = line
                .replace("IF[,IF...]", "IF,IF...")
                .replace(['[', ']'], " ")
                .split_whitespace()
                .skip(1)
                .map(|w| match w {
                    "IF" => "ea".into(),
                    "IF,IF..." => "r0,r1".into(),
                    "JSON" => r#"{"delay_ms":5}"#.into(),
                    "PATH" => "/tmp/linkemu.sock".into(),
                    "FILE" => "/tmp/stats.json".into(),
                    "N" => "7".into(),
                    "0..99" => "10".into(),
                    w => w.to_string(),
                })
                .collect();
            let v: Vec<&str> = words.iter().map(String::as_str).collect();
            let a = parse_v(&v).unwrap_or_else(|e| panic!("{line}: {e}"));
            if v.first() == Some(&"run") {
                assert!(matches!(a, Action::Run(_)), "{line}");
                let bare = parse_v(&v[1..]).unwrap_or_else(|e| panic!("{line} without run: {e}"));
                assert!(matches!(bare, Action::Run(_)), "{line} without run");
            }
        }
    }

    /// `--both` applies first, then `--ab`/`--ba`, each in order; other flags keep their last
    /// value; the defaults are those of `Options` before clap.
    #[test]
    fn order_and_defaults() {
        let o = run_opts(&[
            "--a",
            "x",
            "--b",
            "y",
            "--ab",
            r#"{"delay_ms":3}"#,
            "--both",
            r#"{"delay_ms":1,"rate_bps":2000}"#,
            "--both",
            r#"{"delay_ms":2}"#,
            "--ab",
            r#"{"rate_bps":5000}"#,
            "--a",
            "z",
            "--seed=9",
            "--seed",
            "8",
        ]);
        assert_eq!(o.if_a, "z");
        assert_eq!(o.seed, 8);
        assert_eq!((o.ab.delay_ns, o.ab.rate_bps), (3_000_000, 5000));
        assert_eq!((o.ba.delay_ns, o.ba.rate_bps), (2_000_000, 2000));
        let o = run_opts(&["run", "--a", "x", "--b", "y"]);
        assert_eq!((o.seed, o.rt_prio, o.keep_awake), (1, 0, false));
        assert_eq!((o.ctl, o.stats_out), (None, None));
        assert_eq!((o.ab, o.ba), (LinkParams::default(), LinkParams::default()));
        match parse_v(&[
            "mrouter",
            "--upstream",
            "a,,b",
            "--upstream",
            "c",
            "--downstream=d",
            "--downstream",
            "e,f",
        ]) {
            Ok(Action::Mrouter {
                up,
                down,
                leave_delay_ms,
            }) => {
                assert_eq!(
                    (up, down, leave_delay_ms),
                    (
                        vec!["a".into(), "b".into(), "c".into()],
                        vec!["d".into(), "e".into(), "f".into()],
                        0
                    )
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_command_lines_name_the_flag() {
        let e = err(
            &["--a", "x", "--b", "y", "--bogus"],
            ErrorKind::UnknownArgument,
        );
        assert!(e.contains("--bogus"), "{e}");
        err(&["bogus"], ErrorKind::InvalidSubcommand);
        err(&["--"], ErrorKind::MissingRequiredArgument);
        let e = err(&["--a", "x", "--b"], ErrorKind::InvalidValue);
        assert!(e.contains("--b"), "{e}");
        let e = err(&["--a", "x"], ErrorKind::MissingRequiredArgument);
        assert!(e.contains("--b"), "{e}");
        let e = err(&["run", "--keep-awake"], ErrorKind::MissingRequiredArgument);
        assert!(e.contains("--a") && e.contains("--b"), "{e}");
        for (flag, val, why) in [
            ("--rt-prio", "100", "0..=99"),
            ("--rt-prio", "-1", "0..=99"),
            ("--seed", "x", "invalid digit"),
            ("--ab", "{", "EOF"),
            ("--ba", r#"{"bogus":1}"#, "bogus"),
            ("--both", r#"{"rate_bps":5}"#, "below 1 kbit/s"),
            ("--both", r#"{"loss":2}"#, "loss"),
        ] {
            let e = err(
                &["--a", "x", "--b", "y", flag, val],
                ErrorKind::ValueValidation,
            );
            assert!(e.contains(flag) && e.contains(why), "{flag} {val}: {e}");
        }
        let e = err(
            &["mrouter", "--downstream", "r1"],
            ErrorKind::MissingRequiredArgument,
        );
        assert!(e.contains("--upstream"), "{e}");
        let e = err(
            &["mrouter", "--upstream", "r0", "--downstream", ""],
            ErrorKind::ValueValidation,
        );
        assert!(
            e.contains("--downstream") && e.contains("layercast-linkemu mrouter"),
            "{e}"
        );
        let many = (0..32)
            .map(|i| format!("d{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let e = err(
            &["mrouter", "--upstream", "r0", "--downstream", &many],
            ErrorKind::ValueValidation,
        );
        assert!(e.contains("MAXVIFS") && e.contains("got 33"), "{e}");
        let e = err(
            &[
                "mrouter",
                "--upstream",
                "r0",
                "--downstream",
                "r1",
                "--leave-delay-ms",
                "600001",
            ],
            ErrorKind::ValueValidation,
        );
        assert!(e.contains("--leave-delay-ms"), "{e}");
        let e = err(&["ctl", "/tmp/x"], ErrorKind::MissingRequiredArgument);
        assert!(e.contains("<JSON>"), "{e}");
        err(
            &["ctl", "/tmp/x", "{}", "extra"],
            ErrorKind::UnknownArgument,
        );
        err(
            &["--a", "x", "--b", "y", "keep-awake"],
            ErrorKind::ArgumentConflict,
        );
    }

    #[test]
    fn help_and_version() {
        use clap::CommandFactory;
        for v in [
            &[][..],
            &["--help"],
            &["-h"],
            &["--version"],
            &["-V"],
            &["help", "mrouter"],
            &["run", "--help"],
            &["ctl", "--help"],
        ] {
            assert!(matches!(parse_v(v), Ok(Action::Printed)), "{v:?}");
        }
        let mut cmd = Cli::command();
        assert_eq!(
            cmd.render_version().trim(),
            format!("layercast-linkemu {}", env!("CARGO_PKG_VERSION"))
        );
        let help = cmd.render_help().to_string();
        for s in [
            "run",
            "ctl",
            "mrouter",
            "keep-awake",
            "--a <IF>",
            "--rt-prio <N>",
            "--keep-awake",
            "\"rate_bps\"",
            "--version",
        ] {
            assert!(help.contains(s), "--help lacks {s:?}:\n{help}");
        }
    }
}
