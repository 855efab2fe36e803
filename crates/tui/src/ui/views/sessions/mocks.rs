//! The Sessions tab's Mocks pane when it has the focus: a cursor over the declared mocks,
//! each opening to its payload (the static output, each stateful entry, each `$rules` rule)
//! with the calls each part answered and the next stateful entry marked.

use crate::model::{Call, MockRow, Session};
use crate::ui::views::pane::{PaneLine, TextPane, Tone};
use crate::ui::views::plural;
use serde_json::Value;
use spyglass_protocol::events::{Counter, MockMode};
use spyglass_protocol::sanitize::{shown, shown_text};

/// The focused pane: the selected mock (by position; a session's mocks never change), the
/// opened ones, and the text built from them, rebuilt when the session or the opened set
/// changes. The pane keeps its place and search across rebuilds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MocksPane {
    pub selected: usize,
    pub open: Vec<usize>,
    pub pane: TextPane,
    /// The line of each mock's header in `pane`.
    heads: Vec<usize>,
    built: Option<(String, u64, Vec<usize>)>,
}

impl MocksPane {
    /// Rebuilds the lines when the session changed since (a call consumed an entry).
    pub fn refresh(&mut self, session: &Session) {
        let key = (session.id.clone(), session.rev, self.open.clone());
        if self.built.as_ref() == Some(&key) {
            return;
        }
        let (lines, heads) = mock_lines(session, &self.open);
        self.pane.set_lines(lines);
        self.heads = heads;
        self.selected = self.selected.min(session.mocks.len().saturating_sub(1));
        self.built = Some(key);
    }

    /// The header line of the selected mock.
    pub fn selected_line(&self) -> Option<usize> {
        self.heads.get(self.selected).copied()
    }

    /// Moves the cursor to mock `to` and scrolls its header into view.
    pub fn select(&mut self, to: usize) {
        self.selected = to.min(self.heads.len().saturating_sub(1));
        if let Some(line) = self.selected_line() {
            self.pane.show_line(line);
        }
    }

    /// Opens or closes the selected mock.
    pub fn toggle(&mut self, session: &Session) {
        match self.open.iter().position(|i| *i == self.selected) {
            Some(at) => {
                self.open.remove(at);
            }
            None => self.open.push(self.selected),
        }
        self.refresh(session);
        self.selected = self.selected.min(self.heads.len().saturating_sub(1));
        // Opened, the mock's header goes to the top so its payload shows under it.
        if let Some(line) = self.selected_line() {
            self.pane.scroll_to(line);
        }
    }

    /// How many mocks the cursor moves over.
    pub fn count(&self) -> usize {
        self.heads.len()
    }
}

/// One answer a mock gave: the call, and whether it was the call's replay after approval.
struct Answer<'c> {
    call: &'c Call,
    counter: Counter,
    replay: bool,
}

/// The successful answers of `tool`'s mock, in dispatch order (a replay right after its
/// held call): an envelope consumed nothing.
fn answers<'c>(calls: &'c std::collections::VecDeque<Call>, tool: &str) -> Vec<Answer<'c>> {
    let mut out = vec![];
    for call in calls.iter().filter(|c| c.tool == tool) {
        if call.outcome.envelope().is_none()
            && let Some(counter) = call.counter
        {
            out.push(Answer {
                call,
                counter,
                replay: false,
            });
        }
        if let Some(replay) = &call.replay
            && replay.outcome.envelope().is_none()
            && let Some(counter) = replay.counter
        {
            out.push(Answer {
                call,
                counter,
                replay: true,
            });
        }
    }
    out
}

/// `call_1 (step 2)`, `call_3 (replay)`.
fn who(answer: &Answer) -> String {
    let mut text = shown(&answer.call.id).into_owned();
    if let Some(step) = answer.call.iteration {
        text.push_str(&format!(" (step {step})"));
    }
    if answer.replay {
        text.push_str(" (replay)");
    }
    text
}

/// `answered call_1, call_2`; `not called yet` when none.
fn answered_by(list: &[&Answer]) -> String {
    if list.is_empty() {
        return "not called yet".to_owned();
    }
    let names: Vec<String> = list.iter().map(|a| who(a)).collect();
    format!("answered {}", names.join(", "))
}

/// A JSON value as pretty lines, masked and sanitised, indented under its label.
fn json_block(lines: &mut Vec<PaneLine>, value: &Value) {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    lines.extend(
        shown_text(&text)
            .lines()
            .map(|l| PaneLine::json(format!("    {l}"))),
    );
}

/// The header of one mock, ` ▸ tool  stateful 1/2 · exhausted · 3 calls`: what tells
/// mocks apart first, so a narrow pane cuts the least telling part. The leading space is
/// where the cursor's `›` goes.
fn header(m: &MockRow, open: bool) -> PaneLine {
    let glyph = if open { "▾" } else { "▸" };
    let count = match m.mode {
        MockMode::Stateful => format!("stateful {}/{}", m.consumed, m.entries),
        MockMode::Static => format!("static, served {}", m.consumed),
        MockMode::Rules => format!("rules ×{}", m.entries),
    };
    // An exhausted counter stays red, open or closed.
    let (tone, exhausted) = if m.exhausted() {
        (Tone::Error, " · exhausted")
    } else {
        (Tone::Heading, "")
    };
    let calls = if m.calls == 1 { "call" } else { "calls" };
    PaneLine::new(
        tone,
        format!(
            " {glyph} {}  {count}{exhausted} · {} {calls}",
            shown(&m.tool),
            m.calls
        ),
    )
}

/// The pane's text: every mock's header, and under each opened one its payload part by
/// part with the calls that part answered. Returns the lines and each header's line.
pub fn mock_lines(session: &Session, open: &[usize]) -> (Vec<PaneLine>, Vec<usize>) {
    let calls = session.timeline.calls();
    let mut lines = vec![];
    let mut heads = vec![];
    for (i, m) in session.mocks.iter().enumerate() {
        let is_open = open.contains(&i);
        heads.push(lines.len());
        lines.push(header(m, is_open));
        if !is_open {
            continue;
        }
        let Some(payload) = m.payload.as_ref().and_then(|p| p.try_value().ok()) else {
            let why = match m.payload_bytes {
                Some(bytes) => format!(
                    "  (the payload is {bytes} bytes, over the {} the stream carries)",
                    spyglass_protocol::events::MAX_STREAMED_PAYLOAD_BYTES
                ),
                None => "  (the payload was not on the stream: an older runtime, or a session read from a snapshot)".to_owned(),
            };
            lines.push(PaneLine::new(Tone::Muted, why));
            continue;
        };
        let given = answers(calls, &m.tool);
        match m.mode {
            MockMode::Static => {
                let all: Vec<&Answer> = given.iter().collect();
                lines.push(PaneLine::plain(format!("  output · {}", answered_by(&all))));
                json_block(&mut lines, &payload);
            }
            MockMode::Stateful => {
                let entries = payload.as_array().cloned().unwrap_or_default();
                let next = m.consumed as usize;
                for (n, entry) in entries.iter().enumerate() {
                    let by: Vec<&Answer> = given
                        .iter()
                        .filter(|a| a.counter.consumed as usize == n + 1)
                        .collect();
                    let (tone, what) = if !by.is_empty() {
                        (Tone::Plain, answered_by(&by))
                    } else if n == next {
                        (Tone::Warn, "▶ next to be served".to_owned())
                    } else if n < next {
                        (
                            Tone::Muted,
                            "served (its call is no longer held)".to_owned(),
                        )
                    } else {
                        (Tone::Muted, "not served yet".to_owned())
                    };
                    lines.push(PaneLine::new(tone, format!("  entry #{n} · {what}")));
                    json_block(&mut lines, entry);
                }
                if m.exhausted() {
                    lines.push(PaneLine::new(
                        Tone::Error,
                        format!(
                            "  exhausted: every entry served; further calls answer mocks_exhausted ({} in all)",
                            plural(m.calls, "call")
                        ),
                    ));
                }
            }
            MockMode::Rules => {
                let rules = payload
                    .get("$rules")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for (n, rule) in rules.iter().enumerate() {
                    let by: Vec<&Answer> = given
                        .iter()
                        .filter(|a| a.counter.rule == Some(n as u32))
                        .collect();
                    lines.push(PaneLine::plain(format!(
                        "  rule #{n} · {}",
                        answered_by(&by)
                    )));
                    json_block(&mut lines, rule);
                }
                if let Some(fallback) = payload.get("$fallback") {
                    let by: Vec<&Answer> = given.iter().filter(|a| a.counter.fallback).collect();
                    lines.push(PaneLine::plain(format!(
                        "  $fallback · {}",
                        answered_by(&by)
                    )));
                    json_block(&mut lines, fallback);
                }
            }
        }
    }
    (lines, heads)
}

#[cfg(test)]
mod tests {
    use super::mock_lines;
    use crate::ui::views::testing::model;

    #[test]
    fn a_payload_the_stream_did_not_carry_says_why() {
        let model = model(&[r#"{"kind":"session.created","seq":1,"ts":"2026-11-22T21:43:30.000Z","sessionId":"ses_b","userId":"ana","servers":[],"project":"default","mocks":[{"tool":"a/big","mode":"static","entries":1,"payloadBytes":20011},{"tool":"a/old","mode":"static","entries":1}]}"#.to_owned()]);
        let session = model.session("ses_b").expect("the session");
        let (lines, heads) = mock_lines(session, &[0, 1]);
        assert_eq!(heads, [0, 2]);
        assert!(
            lines[1].text.contains("20011 bytes, over the 16384"),
            "{lines:?}"
        );
        assert!(lines[3].text.contains("older runtime"), "{lines:?}");
    }
}
