//! layercast-server (issue 6).

fn main() {
    eprintln!("layercast-server: not built yet (issue 6)");
    std::process::exit(2);
}
