//! Copying to the user's clipboard: the system clipboard (arboard) when there is a
//! display, else an OSC 52 escape written to the terminal, which carries the text to the
//! local clipboard even over SSH. What is copied is masked first.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use spyglass_protocol::mask::mask;
use std::io::Write;
use std::sync::Mutex;

/// Which way the copy went, so the status line can say so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyOutcome {
    /// The system clipboard took it.
    Clipboard,
    /// Sent to the terminal as OSC 52; `why` says why the system clipboard was not used.
    /// Whether the terminal honours it cannot be known (some ignore OSC 52).
    Osc52 { why: String },
    /// Nothing worked.
    Failed(String),
}

impl CopyOutcome {
    /// A few words for the status bar (`copied`, `copied (OSC 52)`): it is read in passing,
    /// and a narrow terminal cuts what is long.
    pub fn status(&self) -> String {
        match self {
            CopyOutcome::Clipboard => "copied".to_string(),
            // No display is the common case over SSH: nothing to explain. A system
            // clipboard that failed is worth a word.
            CopyOutcome::Osc52 { why } if why == NO_DISPLAY => "copied (OSC 52)".to_string(),
            CopyOutcome::Osc52 { why } => format!("copied (OSC 52; {why})"),
            CopyOutcome::Failed(why) => format!("copy failed: {why}"),
        }
    }
}

/// Why OSC 52 was used when there is no display to hold a system clipboard.
const NO_DISPLAY: &str = "no display";

/// The system clipboard, kept for the life of the program: on X11 the copied text is
/// served by its owner, so dropping the handle right after copying could lose it.
static SYSTEM: Mutex<Option<arboard::Clipboard>> = Mutex::new(None);

fn system_clipboard(text: &str) -> Result<(), String> {
    let mut guard = SYSTEM
        .lock()
        .map_err(|_| "clipboard lock poisoned".to_string())?;
    if guard.is_none() {
        *guard = Some(arboard::Clipboard::new().map_err(|e| e.to_string())?);
    }
    match guard.as_mut() {
        Some(clipboard) => clipboard.set_text(text).map_err(|e| e.to_string()),
        None => Err("no clipboard".to_string()),
    }
}

fn has_display() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY"]
        .into_iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()))
}

/// Copy `text` (masked) to the clipboard: arboard first, OSC 52 on `terminal` when there
/// is no display or arboard fails.
pub fn copy(text: &str, terminal: &mut impl Write) -> CopyOutcome {
    copy_with(text, has_display(), system_clipboard, terminal)
}

/// [`copy`] with the display check and the system clipboard supplied, for tests.
pub fn copy_with(
    text: &str,
    has_display: bool,
    system: impl FnOnce(&str) -> Result<(), String>,
    terminal: &mut impl Write,
) -> CopyOutcome {
    let text = mask(text);
    let why = if has_display {
        match system(&text) {
            Ok(()) => return CopyOutcome::Clipboard,
            Err(e) => format!("system clipboard failed: {e}"),
        }
    } else {
        NO_DISPLAY.to_string()
    };
    match terminal
        .write_all(osc52(&text).as_bytes())
        .and_then(|()| terminal.flush())
    {
        Ok(()) => CopyOutcome::Osc52 { why },
        Err(e) => CopyOutcome::Failed(format!("{why}, and writing to the terminal failed: {e}")),
    }
}

/// The OSC 52 "set clipboard" sequence for `payload`: `ESC ] 52 ; c ; BASE64 BEL`, the
/// payload in standard base64 (RFC 4648, with padding).
pub fn osc52(payload: &str) -> String {
    format!("\x1b]52;c;{}\x07", STANDARD.encode(payload.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osc52_of_a_known_payload() {
        // Expected base64 computed independently with:
        // python3 -c 'import base64; print(base64.b64encode("{\"sessionId\":\"ses_1\",\"tool\":\"search\"} ✓".encode()).decode())'
        let payload = "{\"sessionId\":\"ses_1\",\"tool\":\"search\"} ✓";
        assert_eq!(
            osc52(payload),
            "\x1b]52;c;eyJzZXNzaW9uSWQiOiJzZXNfMSIsInRvb2wiOiJzZWFyY2gifSDinJM=\x07"
        );
    }

    #[test]
    fn without_a_display_it_writes_osc52_and_never_tries_the_system() {
        let mut term = Vec::new();
        let out = copy_with(
            "ses_1",
            false,
            |_| panic!("system clipboard must not be tried without a display"),
            &mut term,
        );
        assert_eq!(
            out,
            CopyOutcome::Osc52 {
                why: "no display".to_string()
            }
        );
        assert_eq!(term, osc52("ses_1").into_bytes());
        assert_eq!(out.status(), "copied (OSC 52)");
    }

    #[test]
    fn system_clipboard_first_then_osc52_when_it_fails() {
        let mut term = Vec::new();
        let mut got = String::new();
        let out = copy_with(
            "ses_1",
            true,
            |t| {
                got = t.to_string();
                Ok(())
            },
            &mut term,
        );
        assert_eq!(out, CopyOutcome::Clipboard);
        assert_eq!(got, "ses_1");
        assert!(term.is_empty(), "nothing written to the terminal");
        assert_eq!(out.status(), "copied");

        let out = copy_with(
            "ses_1",
            true,
            |_| Err("X11 server went away".into()),
            &mut term,
        );
        assert!(
            out.status().contains("X11 server went away"),
            "{}",
            out.status()
        );
        assert_eq!(term, osc52("ses_1").into_bytes());
    }

    #[test]
    fn copied_text_is_masked() {
        let mut got = String::new();
        let text = r#"{"apiKey":"csk_test_abc123","Authorization":"Bearer tok"}"#;
        copy_with(
            text,
            true,
            |t| {
                got = t.to_string();
                Ok(())
            },
            &mut Vec::new(),
        );
        assert_eq!(
            got,
            r#"{"apiKey":"csk_test_****","Authorization":"Bearer ****"}"#
        );

        let mut term = Vec::new();
        copy_with(text, false, |_| Ok(()), &mut term);
        assert_eq!(term, osc52(&got).into_bytes());
    }

    #[test]
    fn a_broken_terminal_is_reported_not_panicked() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("pipe closed"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let out = copy_with("x", false, |_| Ok(()), &mut Broken);
        assert!(
            matches!(&out, CopyOutcome::Failed(m) if m.contains("pipe closed")),
            "{out:?}"
        );
    }
}
