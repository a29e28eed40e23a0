//! `layercast-sim`: run a scenario, the catalogue, or print the report.

fn main() {
    eprintln!("layercast-sim: not built yet (issue 4)");
    std::process::exit(2);
}
