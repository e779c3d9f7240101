//! The `text` format: a few lines per finding, for people.

use std::io::Write;

use super::error::OutputError;
use super::finding::{redact_in_percent, Finding};
use super::{SkipView, WriteOptions};

/// The longest context line shown, in characters; longer ones end in `…`.
pub const CONTEXT_MAX_CHARS: usize = 240;

/// ANSI SGR sequences, or empty strings when colour is off.
#[derive(Clone, Copy, Debug)]
pub struct Palette {
    /// Bold.
    pub bold: &'static str,
    /// Dim (labels).
    pub dim: &'static str,
    /// Red (rule ids, a non-zero finding count).
    pub red: &'static str,
    /// Green (a zero finding count).
    pub green: &'static str,
    /// Yellow (secrets).
    pub yellow: &'static str,
    /// Cyan (paths).
    pub cyan: &'static str,
    /// Back to normal.
    pub reset: &'static str,
}

impl Palette {
    /// The palette for `color` on or off.
    pub fn new(color: bool) -> Self {
        if color {
            Self {
                bold: "\x1b[1m",
                dim: "\x1b[2m",
                red: "\x1b[1;31m",
                green: "\x1b[32m",
                yellow: "\x1b[33m",
                cyan: "\x1b[36m",
                reset: "\x1b[0m",
            }
        } else {
            Self {
                bold: "",
                dim: "",
                red: "",
                green: "",
                yellow: "",
                cyan: "",
                reset: "",
            }
        }
    }
}

/// Whether to colour: `always` and `never` are obeyed; `auto` colours only a
/// terminal, and only when `NO_COLOR` is unset or empty (no-color.org).
pub fn color_enabled(
    choice: crate::cli::ColorChoice,
    is_terminal: bool,
    no_color: Option<&std::ffi::OsStr>,
) -> bool {
    use crate::cli::ColorChoice;
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => is_terminal && no_color.is_none_or(|v| v.is_empty()),
    }
}

/// `bytes` made safe to print on a terminal: invalid UTF-8 becomes U+FFFD, and
/// control characters (C0, DEL, C1) and bidirectional overrides are shown as
/// `\u{..}` escapes, so a hostile file name or secret cannot move the cursor,
/// rewrite earlier lines or reorder what the reader sees.
pub fn terminal_safe(bytes: &[u8]) -> String {
    let lossy = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(lossy.len());
    for c in lossy.chars() {
        let dangerous = c.is_control()
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}');
        if dangerous {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// Writes `findings` as text:
///
/// ```text
/// aws-access-key-id  AWS access key ID
///   at          repo/.env:3:19 (offset 64)
///   secret      AKIAIOSFODNN7EXAMPLE
///   line        AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE
///   fingerprint 5d7b6a1d3f0e2c94
/// ```
///
/// followed by a blank line. The `line` row appears only when the finding
/// carries a context line.
pub fn write_text(
    out: &mut dyn Write,
    findings: &[Finding],
    opts: &WriteOptions,
) -> Result<(), OutputError> {
    let p = Palette::new(opts.color);
    for f in findings {
        let secret = opts.shown_secret(&f.secret);
        let mut s = format!(
            "{}{}{}  {}\n  {}at{}          {}{}:{}:{}{} (offset {})\n  {}secret{}      {}{}{}\n",
            p.red,
            terminal_safe(f.rule.as_bytes()),
            p.reset,
            terminal_safe(f.description.as_bytes()),
            p.dim,
            p.reset,
            p.cyan,
            terminal_safe(&f.path.to_bytes()),
            f.line,
            f.column,
            p.reset,
            f.offset,
            p.dim,
            p.reset,
            p.yellow,
            terminal_safe(&secret),
            p.reset,
        );
        if let Some(c) = &f.commit {
            s.push_str(&format!(
                "  {}commit{}      {} {} ({}, {})\n",
                p.dim,
                p.reset,
                c.short_id(),
                terminal_safe(c.subject.as_bytes()),
                terminal_safe(c.author.as_bytes()),
                terminal_safe(c.date.as_bytes()),
            ));
        }
        if !f.context.is_empty() {
            let ctx = if opts.redact {
                redact_in_percent(&f.context, &f.secret, opts.redact_percent)
            } else {
                f.context.clone()
            };
            let mut line = terminal_safe(ctx.trim_ascii());
            if let Some((cut, _)) = line.char_indices().nth(CONTEXT_MAX_CHARS) {
                line.truncate(cut);
                line.push('…');
            }
            s.push_str(&format!("  {}line{}        {line}\n", p.dim, p.reset));
        }
        if !f.decoded.is_empty() {
            s.push_str(&format!(
                "  {}decoded{}     {}\n",
                p.dim,
                p.reset,
                f.decoded_label()
            ));
        }
        s.push_str(&format!(
            "  {}fingerprint{} {}\n\n",
            p.dim, p.reset, f.fingerprint
        ));
        out.write_all(s.as_bytes())?;
    }
    out.flush()?;
    Ok(())
}

/// Writes one line per skipped entry, `skipped PATH: REASON`, for `-v` (on
/// standard error, before the summary). Paths and details are made
/// terminal-safe.
pub fn write_skipped<S: SkipView>(out: &mut dyn Write, skipped: &[S]) -> std::io::Result<()> {
    let mut s = String::new();
    for e in skipped {
        s.push_str(&format!(
            "skipped {}: {} [{}]\n",
            terminal_safe(&e.view_path().to_bytes()),
            terminal_safe(e.view_message().as_bytes()),
            e.view_label()
        ));
    }
    out.write_all(s.as_bytes())
}
