//! layercast-linkemu (issue 7).

fn main() {
    eprintln!("layercast-linkemu: not built yet (issue 7)");
    std::process::exit(2);
}
