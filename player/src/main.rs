//! layercast-player: joins a layered multicast session, runs a receiver-driven controller on
//! kernel-timestamped packets, joins and leaves layers with IGMP, and reports (see
//! `docs/player.md`).

/// mimalloc instead of glibc malloc: under the per-second churn of reports, decisions and
/// HTTP buffers (small blocks of many lifetimes, several threads) glibc's heap kept growing
/// from fragmentation with a bounded live heap (docs/reliability.md "Soak"). Not in unit tests,
/// which count allocations with an allocator of their own.
#[cfg(not(test))]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod audio;
mod audio_net;
mod auth;
mod cli;
mod decode;
mod error;
mod feedback;
mod framelog;
mod freeze;
mod http_client;
mod lower;
mod net;
mod playout;
mod poller;
mod qr;
mod receiver;
mod report;
mod telemetry;
#[cfg(feature = "research")]
mod tfrc;
mod video;
mod window;

use cli::{parse_args, Args};
use error::Error;
use std::sync::atomic::{AtomicBool, Ordering};

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::SeqCst);
}

/// Turns transparent huge pages off for this process (`PR_SET_THP_DISABLE`), first thing in
/// `main`.
///
/// Why: mimalloc reserves a 1-GiB arena and (without the `no_thp` build feature, which the
/// workspace sets) advises it `MADV_HUGEPAGE`; a few hundred KiB of live heap spread over
/// three 2-MiB ranges were then billed as 6 MiB of huge pages, either at the first fault or
/// whenever khugepaged got round to collapsing them, minutes into a run. That made RssAnon
/// jump by 2-6 MiB at random times with no allocation behind it (the soak's one-off steps,
/// docs/reliability.md "The steps were huge pages"). With `no_thp` the arena is no longer
/// advised; this call also covers hosts whose THP mode is `always`, where any 2-MiB-aligned
/// anonymous range qualifies. RssAnon then counts the 4-KiB pages the process touched, so a
/// growth after the warm-up is a growth of memory in use. Failure (old kernel, seccomp) only
/// costs that accuracy: ignored.
fn disable_thp() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and changes a flag of this
    // process's memory descriptor.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

fn main() {
    disable_thp();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let h = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    #[cfg(feature = "research")]
    if tfrc::wanted(&args) {
        // A live unicast TFRC flow (src/tfrc.rs): its own loop, no SAM or layers.
        // SAFETY: the handler only stores to an atomic.
        unsafe {
            libc::signal(libc::SIGINT, h);
            libc::signal(libc::SIGTERM, h);
        }
        std::process::exit(tfrc::main(&args, &SIGNALLED));
    }
    let a = match parse_args(&args) {
        Ok(Some(a)) => a,
        Ok(None) => return,
        // Clap's own report: the error, the usage line, a pointer to --help; exit code 2.
        Err(Error::Cli(e)) => e.exit(),
        Err(e) => {
            eprintln!("layercast-player: {e}");
            std::process::exit(2);
        }
    };
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, h);
        libc::signal(libc::SIGTERM, h);
    }
    auth::set_client_options(a.client.clone());
    if let Err(e) = receiver::run(a, &SIGNALLED) {
        eprintln!("layercast-player: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    /// `disable_thp` must leave the process with THP disabled (the flag the kernel checks at
    /// every fault and in khugepaged); without it the soak's RssAnon steps come back.
    #[test]
    fn disable_thp_turns_transparent_huge_pages_off() {
        super::disable_thp();
        // SAFETY: PR_GET_THP_DISABLE takes no pointer and only reads a flag.
        let flag = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        assert_eq!(flag, 1, "PR_GET_THP_DISABLE after disable_thp");
        // Linux >= 5.0 also shows the effective state in /proc/<pid>/status.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        if let Some(l) = status.lines().find(|l| l.starts_with("THP_enabled:")) {
            assert_eq!(l.split_whitespace().nth(1), Some("0"), "{l}");
        }
    }
}
