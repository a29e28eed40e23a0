//! `layercast-linkemu`: see the library documentation and docs/linkemu.md.
//!
//! ```text
//! layercast-linkemu [run] --a IF --b IF [--both JSON] [--ab JSON] [--ba JSON]
//!                   [--ctl PATH] [--seed N] [--stats-out FILE] [--rt-prio N] [--keep-awake]
//! layercast-linkemu ctl PATH JSON      # send one control request, print the reply
//! layercast-linkemu mrouter --upstream IF --downstream IF[,IF...]   # fast-leave IGMP router
//! layercast-linkemu keep-awake         # only the --keep-awake spinners, until SIGINT/SIGTERM
//! ```

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

const USAGE: &str = "usage:
  layercast-linkemu [run] --a IF --b IF [--both JSON] [--ab JSON] [--ba JSON]
                    [--ctl PATH] [--seed N] [--stats-out FILE] [--rt-prio 1..99]
                    [--keep-awake]
  layercast-linkemu ctl PATH JSON
  layercast-linkemu mrouter --upstream IF[,IF...] --downstream IF[,IF...] [--leave-delay-ms N]
  layercast-linkemu keep-awake     (one SCHED_IDLE spinner per CPU until SIGINT/SIGTERM)
JSON link settings: {\"rate_bps\":1000000,\"delay_ms\":10,\"jitter_ms\":0,\"loss\":0.01,
  \"queue\":{\"kind\":\"droptail\",\"limit_packets\":50},\"overhead_bytes\":0,
  \"flow\":{\"mcast_prefix_len\":24,\"udp_port_block\":0}}";

fn parse_args(args: &[String]) -> Result<Options, Error> {
    let mut o = Options {
        if_a: String::new(),
        if_b: String::new(),
        ab: LinkParams::default(),
        ba: LinkParams::default(),
        ctl: None,
        seed: 1,
        stats_out: None,
        rt_prio: 0,
        keep_awake: false,
    };
    let mut both = Vec::new();
    let mut ab = Vec::new();
    let mut ba = Vec::new();
    let mut it = args.iter();
    while let Some(k) = it.next() {
        let mut v = || {
            it.next()
                .cloned()
                .ok_or_else(|| Error::Config(format!("{k} needs a value")))
        };
        match k.as_str() {
            "--a" => o.if_a = v()?,
            "--b" => o.if_b = v()?,
            "--both" => both.push(v()?),
            "--ab" => ab.push(v()?),
            "--ba" => ba.push(v()?),
            "--ctl" => o.ctl = Some(PathBuf::from(v()?)),
            "--stats-out" => o.stats_out = Some(PathBuf::from(v()?)),
            "--rt-prio" => {
                o.rt_prio = v()?
                    .parse()
                    .map_err(|_| Error::Config("--rt-prio needs an integer 1..99".into()))?
            }
            "--keep-awake" => o.keep_awake = true,
            "--seed" => {
                o.seed = v()?
                    .parse()
                    .map_err(|_| Error::Config("--seed needs an integer".into()))?
            }
            other => return Err(Error::Config(format!("unknown argument {other:?}"))),
        }
    }
    if o.if_a.is_empty() || o.if_b.is_empty() {
        return Err(Error::Config("--a and --b are required".into()));
    }
    for j in &both {
        let u = LinkUpdate::from_json(j)?;
        u.apply(&mut o.ab)?;
        u.apply(&mut o.ba)?;
    }
    for j in &ab {
        LinkUpdate::from_json(j)?.apply(&mut o.ab)?;
    }
    for j in &ba {
        LinkUpdate::from_json(j)?.apply(&mut o.ba)?;
    }
    Ok(o)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None | Some("-h") | Some("--help") => {
            println!("{USAGE}");
            return;
        }
        Some("ctl") => match (args.get(1), args.get(2)) {
            (Some(p), Some(j)) => linkemu::ctl::request(&PathBuf::from(p), j).map(|r| {
                println!("{r}");
            }),
            _ => Err(Error::Config("ctl needs PATH and JSON".into())),
        },
        Some("run") => parse_args(&args[1..]).and_then(start),
        Some("mrouter") => mrouter(&args[1..]),
        Some("keep-awake") => keep_awake(),
        Some(_) => parse_args(&args).and_then(start),
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

fn mrouter(args: &[String]) -> Result<(), Error> {
    let mut up: Vec<String> = Vec::new();
    let mut down = Vec::new();
    let mut leave_delay_ms = 0u64;
    let mut it = args.iter();
    while let Some(k) = it.next() {
        let v = it
            .next()
            .ok_or_else(|| Error::Config(format!("{k} needs a value")))?;
        match k.as_str() {
            "--upstream" => up.extend(v.split(',').filter(|s| !s.is_empty()).map(String::from)),
            "--leave-delay-ms" => {
                leave_delay_ms = v
                    .parse()
                    .map_err(|_| Error::Config("--leave-delay-ms needs an integer".into()))?
            }
            "--downstream" => down.extend(v.split(',').filter(|s| !s.is_empty()).map(String::from)),
            o => return Err(Error::Config(format!("unknown argument {o:?}"))),
        }
    }
    if up.is_empty() {
        return Err(Error::Config("--upstream is required".into()));
    }
    // Checked before "ready", so a caller waiting for it sees the refusal (the kernel has 32
    // multicast vifs; with more interfaces `run` would fail after "ready").
    if down.is_empty() || up.len() + down.len() > linkemu::mroute::MAX_VIFS {
        return Err(Error::Config(format!(
            "need at least one downstream interface and at most {} interfaces in all (kernel MAXVIFS); got {}",
            linkemu::mroute::MAX_VIFS,
            up.len() + down.len()
        )));
    }
    let stop = install_signals();
    println!(
        "{}",
        serde_json::json!({"ready": true, "upstream": up, "downstream": down})
    );
    let r = linkemu::mroute::run(&up, &down, leave_delay_ms, &stop)?;
    println!(
        "{}",
        serde_json::json!({"event": "exit", "joins": r.joins, "leaves": r.leaves})
    );
    Ok(())
}
