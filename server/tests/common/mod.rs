//! Pieces the server's integration tests share.

/// One UDP viewer report (`docs/protocols/reports.md`), tagged with `key`:
/// `LCR1 | flags | spatial 0 | rid | ts_us | len | session | JSON | tag`.
pub fn report(
    key: &security::auth::ReceiverKey,
    flags: u8,
    ts: u32,
    session: &str,
    json: &str,
) -> Vec<u8> {
    let mut b = b"LCR1".to_vec();
    b.extend_from_slice(&[flags, 0]);
    b.extend_from_slice(&key.rid().to_be_bytes());
    b.extend_from_slice(&ts.to_be_bytes());
    b.push(session.len() as u8);
    b.extend_from_slice(session.as_bytes());
    b.extend_from_slice(json.as_bytes());
    let tag = key.tag(&b);
    b.extend_from_slice(&tag);
    b
}
