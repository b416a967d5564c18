//! Large outputs: text cut at a byte budget (on a character boundary) ends with a marker that
//! says how much was left out, so a model never mistakes a cut output for a whole one.

/// How every truncation marker starts.
pub const TRUNCATION_MARKER: &str = "[warden: output truncated";

/// The marker appended to text cut after `shown` bytes with `omitted` more not shown
/// (`None`: unknown, the producer was stopped).
pub(crate) fn marker(shown: usize, omitted: Option<usize>) -> String {
    match omitted {
        Some(n) => format!("\n{TRUNCATION_MARKER} after {shown} bytes; {n} more bytes not shown]"),
        None => format!("\n{TRUNCATION_MARKER} after {shown} bytes; the rest was not read]"),
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub(crate) fn prefix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text` cut to at most `max` bytes (plus the marker); whether it was cut.
pub(crate) fn truncate(text: String, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let kept = prefix(&text, max);
    let omitted = text.len() - kept.len();
    let mut out = String::with_capacity(kept.len() + 80);
    out.push_str(kept);
    out.push_str(&marker(kept.len(), Some(omitted)));
    (out, true)
}

/// The last `max` bytes of `text` (on a character boundary), for failure messages.
pub(crate) fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
