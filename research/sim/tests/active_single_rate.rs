//! The AER/NCA part of the catalogue (`active-networks.md` §5.2 S1-a…d, S2-a, S3): every
//! `research/scenarios/an-s*.yaml` at its full `seeds` (S2-b: PGMCC), recorded for `docs/acceptance.md` by check id,
//! with the checks that span files (S1-b monotone in the receiver count, S1-c increasing in
//! the loss rate, S1-d with RS below without, S3 RED above drop-tail at every x).
//!
//! About a minute of CPU, so `#[ignore]`d out of `cargo test`; run it with
//! `cargo test --release -p layercast-sim --test active_single_rate -- --ignored --nocapture`.
//! (The fast catalogue of `cargo test` runs the files with `fast_seeds: 1`.)

use sim::catalogue::{run_scenario, scenario_files, table, Row};
use sim::scenario::Scenario;
use std::path::PathBuf;

const CMD: &str = "cargo test --release -p layercast-sim --test active_single_rate -- --ignored";

fn fmt(r: &Row) -> String {
    format!("{:.3} ± {:.3}", r.mean, r.ci95)
}

#[test]
#[ignore = "full AER/NCA catalogue, about a minute of CPU"]
fn aer_nca_full_catalogue() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut all: Vec<Row> = Vec::new();
    let mut seeds = 0;
    for f in scenario_files(&dir).unwrap() {
        let sc = Scenario::load(&f).unwrap();
        if !sc.name.starts_with("an-s") {
            continue;
        }
        eprintln!("running {} ({} seeds)", sc.name, sc.seeds);
        seeds = seeds.max(sc.seeds);
        all.extend(run_scenario(&sc, sc.seeds).unwrap());
    }
    eprintln!("{}", table(&all));
    let row = |id: &str| -> &Row {
        all.iter()
            .find(|r| r.id == id)
            .unwrap_or_else(|| panic!("no row {id}"))
    };
    let head = format!("simulator, {seeds} seeds, mean ± 95% CI");

    // S1-a: Jain and the NCA byte share in the non-lossy 4-receiver run.
    let (j, s) = (
        row("active/S1-a jain(NCA, TCP1, TCP2)"),
        row("active/S1-a NCA byte share"),
    );
    testkit::record(
        "active/S1-a",
        &format!(
            "{head}: Jain(NCA, TCP1, TCP2) {} (band >= 0.85), NCA byte share {} (band <= 1/3)",
            fmt(j),
            fmt(s)
        ),
        Some(j.pass && s.pass),
        CMD,
    );

    // S1-b: AN usage with RS at 1 % loss, 4 → 32 receivers: decreasing, 32 within 0.03-0.08.
    let b: Vec<&Row> = [4, 8, 16, 32]
        .iter()
        .map(|n| row(&format!("active/S1-b AN usage {n} receivers RS 1%")))
        .collect();
    let decreasing = b.windows(2).all(|w| w[1].mean < w[0].mean);
    testkit::record(
        "active/S1-b",
        &format!(
            "{head}: AN usage (AN packets / all packets on n1-n2, both directions) at 4/8/16/32 \
             receivers, RS on, 1% loss: {}; decreasing {decreasing}; 32 receivers in 0.03-0.08 {}",
            b.iter().map(|r| fmt(r)).collect::<Vec<_>>().join(" / "),
            b[3].pass
        ),
        Some(decreasing && b[3].pass),
        CMD,
    );

    // S1-c: AN usage at 4 receivers, RS on, 1 → 5 → 25 % loss: increasing.
    let c: Vec<&Row> = [
        "active/S1-b AN usage 4 receivers RS 1%",
        "active/S1-c AN usage 4 receivers RS 5%",
        "active/S1-c AN usage 4 receivers RS 25%",
    ]
    .iter()
    .map(|id| row(id))
    .collect();
    let increasing = c.windows(2).all(|w| w[1].mean > w[0].mean);
    testkit::record(
        "active/S1-c",
        &format!(
            "{head}: AN usage at 4 receivers, RS on, loss 1/5/25%: {} (thesis 0.27/0.33/0.47); \
             increasing {increasing}",
            c.iter().map(|r| fmt(r)).collect::<Vec<_>>().join(" / ")
        ),
        Some(increasing),
        CMD,
    );

    // S1-d: PLR (drops / transmissions of the AN flow, all links) with and without RS.
    let plr = |n: u32, rs: bool| {
        row(&format!(
            "active/S1-d PLR {n} receivers {} 1%",
            if rs { "RS" } else { "no RS" }
        ))
    };
    let below = [16, 32]
        .iter()
        .all(|&n| plr(n, true).mean < plr(n, false).mean);
    let text = [4, 8, 16, 32]
        .iter()
        .map(|&n| {
            format!(
                "{n}: no RS {} / RS {}",
                fmt(plr(n, false)),
                fmt(plr(n, true))
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    testkit::record(
        "active/S1-d",
        &format!(
            "{head}: PLR at 1% link loss {text}; RS below no RS at 16 and 32 {below}; 32 \
             receivers in band (no RS 5.4-7.4%, RS 2.7-4.1%) {}",
            plr(32, false).pass && plr(32, true).pass
        ),
        Some(below && plr(32, false).pass && plr(32, true).pass),
        CMD,
    );

    // S2-a: Jain ≥ 0.97 at 300 s and 3000 s; TCP ≥ NCA at 3000 s.
    let j300 = row("active/S2-a jain(AER/NCA, TCP) 300 s");
    let j3000 = row("active/S2-a jain(AER/NCA, TCP) 3000 s");
    let s3000 = row("active/S2-a AER/NCA rate share 3000 s");
    testkit::record(
        "active/S2-a",
        &format!(
            "{head}: Jain(AER/NCA, TCP) 300 s {} / 3000 s {} (band >= 0.97); AER/NCA share at \
             3000 s {} (TCP ahead: <= 0.5)",
            fmt(j300),
            fmt(j3000),
            fmt(s3000)
        ),
        Some(j300.pass && j3000.pass && s3000.pass),
        CMD,
    );

    // S2-b: PGMCC against TCP, 300 s and 3000 s (reference only: Seada & Helmy's 0.94 →
    // 0.74, PGMCC taking the larger share on the long run, the stall/timeout flaw).
    let p300 = row("active/S2-b jain(PGMCC, TCP) 300 s");
    let p3000 = row("active/S2-b jain(PGMCC, TCP) 3000 s");
    let ps3000 = row("active/S2-b PGMCC rate share 3000 s");
    let degraded = p3000.mean < 0.94;
    let pgmcc_ahead = ps3000.mean > 0.5;
    testkit::record(
        "active/S2-b",
        &format!(
            "{head}: Jain(PGMCC, TCP) 300 s {} / 3000 s {} (reference 0.94 / 0.74); PGMCC share \
             at 3000 s {} (reference: PGMCC ahead, ratio ~0.26 the other way); degraded below \
             0.94 {degraded}; PGMCC ahead {pgmcc_ahead}",
            fmt(p300),
            fmt(p3000),
            fmt(ps3000)
        ),
        Some(degraded && pgmcc_ahead),
        CMD,
    );

    // S3: RED 0.92-0.98, drop-tail 0.83-0.89, RED > drop-tail at each x.
    let xs = [20, 40, 60, 80, 100];
    let red: Vec<&Row> = xs
        .iter()
        .map(|x| row(&format!("active/S3 jain red x={x} ms")))
        .collect();
    let dt: Vec<&Row> = xs
        .iter()
        .map(|x| row(&format!("active/S3 jain droptail x={x} ms")))
        .collect();
    let above = red.iter().zip(&dt).all(|(r, d)| r.mean > d.mean);
    let bands = red.iter().chain(&dt).all(|r| r.pass);
    testkit::record(
        "active/S3",
        &format!(
            "{head}: Jain(AER/NCA, TCP) at x = 20/40/60/80/100 ms: RED {} (band 0.92-0.98); \
             drop-tail {} (band 0.83-0.89); RED > drop-tail at every x {above}",
            red.iter().map(|r| fmt(r)).collect::<Vec<_>>().join(" / "),
            dt.iter().map(|r| fmt(r)).collect::<Vec<_>>().join(" / ")
        ),
        Some(above && bands),
        CMD,
    );
}
