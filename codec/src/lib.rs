//! VP9 SVC codec and RTP payload (issue 5).
