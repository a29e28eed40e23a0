//! Test media made with the real GStreamer tools.

use std::path::Path;
use std::process::Command;

/// Writes a VP8-in-Matroska clip of `frames` test-pattern pictures, `width`x`height` at `fps`,
/// to `path` with `gst-launch-1.0`; whether it succeeded.
pub fn vp8_clip(path: &Path, width: u32, height: u32, fps: u32, frames: u32) -> bool {
    Command::new("gst-launch-1.0")
        .args(["-q", "videotestsrc"])
        .arg(format!("num-buffers={frames}"))
        .arg("!")
        .arg(format!(
            "video/x-raw,width={width},height={height},framerate={fps}/1"
        ))
        .args(["!", "vp8enc", "!", "matroskamux", "!", "filesink"])
        .arg(format!("location={}", path.display()))
        .status()
        .is_ok_and(|s| s.success())
}
