//! Run outputs: `summary.json`, `timeseries.csv` and a hand-written SVG plot of rate and
//! layers per receiver.

use crate::engine::Sim;
use crate::report::RunSummary;
use crate::scenario::Scenario;
use crate::Error;
use std::fmt::Write as _;
use std::path::Path;

/// One CSV row per (interval, monitor): `t_s,monitor,kind,rate_kbps,layers,received,lost,loss_ratio`.
pub fn timeseries_csv(sc: &Scenario, sim: &Sim) -> String {
    let iv = sc.interval_s;
    let n = (sc.duration_s / iv).ceil() as usize;
    let mut out = String::from("t_s,monitor,kind,rate_kbps,layers,received,lost,loss_ratio\n");
    for i in 0..n {
        let t = i as f64 * iv;
        for m in &sim.net.monitors.list {
            let b = m.bytes.get(i).copied().unwrap_or(0);
            let r = m.received.get(i).copied().unwrap_or(0);
            let l = m.lost.get(i).copied().unwrap_or(0);
            let lr = if r + l > 0 {
                l as f64 / (r + l) as f64
            } else {
                0.0
            };
            let _ = writeln!(
                out,
                "{t:.3},{},{},{:.3},{},{r},{l},{lr:.6}",
                m.name,
                serde_json::to_string(&m.kind)
                    .unwrap_or_default()
                    .trim_matches('"'),
                b as f64 * 8.0 / 1000.0 / iv,
                m.level_at(t + iv),
            );
        }
    }
    out
}

const COLOURS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// An SVG with two panels: received rate (kbit/s) and layers held, against time.
pub fn plot_svg(sc: &Scenario, sim: &Sim) -> String {
    let (w, h, ml, mr, mt, gap) = (900.0, 560.0, 60.0, 170.0, 30.0, 50.0);
    let ph = (h - mt - gap - 40.0) / 2.0;
    let pw = w - ml - mr;
    let iv = sc.interval_s;
    let n = (sc.duration_s / iv).ceil() as usize;
    let mons = &sim.net.monitors.list;
    let rate = |m: &crate::metrics::Monitor, i: usize| {
        m.bytes.get(i).copied().unwrap_or(0) as f64 * 8.0 / 1000.0 / iv
    };
    let max_rate = mons
        .iter()
        .flat_map(|m| (0..n).map(move |i| rate(m, i)))
        .fold(1.0, f64::max)
        * 1.1;
    let max_layers = mons
        .iter()
        .flat_map(|m| m.levels.iter().map(|l| f64::from(l.1)))
        .fold(1.0, f64::max)
        + 1.0;
    let x = |t: f64| ml + pw * t / sc.duration_s;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{ml}" y="18" font-size="13">{} (seed {})</text>"#,
        xml(&sc.name),
        sim.seed()
    );
    for (panel, (label, top, ymax)) in [
        ("rate (kbit/s)", mt, max_rate),
        ("layers", mt + ph + gap, max_layers),
    ]
    .into_iter()
    .enumerate()
    {
        let y = |v: f64| top + ph - ph * v / ymax;
        let _ = writeln!(
            s,
            r##"<rect x="{ml}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>"##
        );
        let _ = writeln!(
            s,
            r#"<text x="10" y="{}" transform="rotate(-90 10 {})">{label}</text>"#,
            top + ph / 2.0,
            top + ph / 2.0
        );
        for k in 0..=4 {
            let v = ymax * k as f64 / 4.0;
            let _ = writeln!(
                s,
                r##"<text x="{}" y="{}" text-anchor="end">{v:.0}</text><line x1="{ml}" x2="{}" y1="{}" y2="{}" stroke="#ddd"/>"##,
                ml - 4.0,
                y(v) + 4.0,
                ml + pw,
                y(v),
                y(v)
            );
        }
        for k in 0..=5 {
            let t = sc.duration_s * k as f64 / 5.0;
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" text-anchor="middle">{t:.0} s</text>"#,
                x(t),
                top + ph + 14.0
            );
        }
        for (mi, m) in mons.iter().enumerate() {
            let c = COLOURS[mi % COLOURS.len()];
            let mut pts = String::new();
            if panel == 0 {
                for i in 0..n {
                    let _ = write!(pts, "{:.1},{:.1} ", x((i as f64 + 0.5) * iv), y(rate(m, i)));
                }
            } else {
                if m.levels.is_empty() {
                    continue;
                }
                let mut prev = 0.0;
                for &(t, k) in &m.levels {
                    let _ = write!(
                        pts,
                        "{:.1},{:.1} {:.1},{:.1} ",
                        x(t),
                        y(prev),
                        x(t),
                        y(f64::from(k))
                    );
                    prev = f64::from(k);
                }
                let _ = write!(pts, "{:.1},{:.1}", x(sc.duration_s), y(prev));
            }
            let _ = writeln!(
                s,
                r#"<polyline fill="none" stroke="{c}" stroke-width="1.3" points="{pts}"/>"#
            );
        }
    }
    for (mi, m) in mons.iter().enumerate() {
        let c = COLOURS[mi % COLOURS.len()];
        let yy = mt + 12.0 + 16.0 * mi as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{}" y="{}" width="12" height="3" fill="{c}"/><text x="{}" y="{}">{}</text>"#,
            w - mr + 10.0,
            yy - 4.0,
            w - mr + 26.0,
            yy,
            xml(&m.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Writes `summary.json`, `timeseries.csv`, `measurements.csv` and `plot.svg` into `dir`.
pub fn write_run(dir: &Path, sc: &Scenario, sim: &Sim, summary: &RunSummary) -> Result<(), Error> {
    let io = |e: std::io::Error| Error::Io(format!("{}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(io)?;
    let json = serde_json::to_string_pretty(summary).map_err(|e| Error::Io(e.to_string()))?;
    std::fs::write(dir.join("summary.json"), json).map_err(io)?;
    std::fs::write(dir.join("timeseries.csv"), timeseries_csv(sc, sim)).map_err(io)?;
    let mut mc = String::from("id,metric,value,min,max,pass,published\n");
    for m in &summary.measurements {
        let f = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
        let _ = writeln!(
            mc,
            "\"{}\",{},{},{},{},{},\"{}\"",
            m.id.replace('"', "'"),
            m.metric,
            m.value,
            f(m.min),
            f(m.max),
            m.pass,
            m.published.replace('"', "'")
        );
    }
    std::fs::write(dir.join("measurements.csv"), mc).map_err(io)?;
    std::fs::write(dir.join("plot.svg"), plot_svg(sc, sim)).map_err(io)?;
    let mut dl = String::new();
    for m in &sim.net.monitors.list {
        for d in &m.decisions {
            let line = serde_json::json!({"receiver": m.name, "decision": d});
            let _ = writeln!(dl, "{line}");
        }
    }
    std::fs::write(dir.join("decisions.jsonl"), dl).map_err(io)?;
    Ok(())
}
