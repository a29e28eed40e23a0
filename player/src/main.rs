//! layercast-player (issue 6).

fn main() {
    eprintln!("layercast-player: not built yet (issue 6)");
    std::process::exit(2);
}
