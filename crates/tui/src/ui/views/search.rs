//! Search inside an open detail pane: `/` types a word, the pane scrolls to the first line
//! holding it, `n` and `N` go to the next and previous such line, wrapping around.

use super::{TextKey, edit_filter};

/// A search in one pane: the text, whether it is being typed, and the line last shown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PaneSearch {
    pub text: String,
    pub typing: bool,
    /// The line of the current match, when there is one.
    pub at: Option<usize>,
}

impl PaneSearch {
    pub fn start(&mut self) {
        *self = Self {
            typing: true,
            ..Self::default()
        };
    }

    /// The lines holding the text (case never matters).
    fn hits(&self, lines: &[impl AsRef<str>]) -> Vec<usize> {
        if self.text.is_empty() {
            return vec![];
        }
        let needle = self.text.to_lowercase();
        lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.as_ref().to_lowercase().contains(&needle))
            .map(|(i, _)| i)
            .collect()
    }

    /// A key while the text is typed; the first match from `scroll` on is the current one
    /// as it changes. Returns the line to scroll to.
    pub fn key(&mut self, key: TextKey, lines: &[impl AsRef<str>], scroll: usize) -> Option<usize> {
        match key {
            TextKey::Keep => self.typing = false,
            TextKey::Discard => *self = Self::default(),
            TextKey::Edit(key) => {
                edit_filter(&mut self.text, key);
                let hits = self.hits(lines);
                self.at = hits
                    .iter()
                    .copied()
                    .find(|h| *h >= scroll)
                    .or_else(|| hits.first().copied());
                return self.at;
            }
            TextKey::Quit | TextKey::Ignore => {}
        }
        None
    }

    /// The next (or previous) match after the current one, wrapping around.
    pub fn step(&mut self, lines: &[impl AsRef<str>], forward: bool) -> Option<usize> {
        let hits = self.hits(lines);
        let cur = self.at;
        let next = if forward {
            hits.iter()
                .copied()
                .find(|h| cur.is_none_or(|c| *h > c))
                .or_else(|| hits.first().copied())
        } else {
            hits.iter()
                .rev()
                .copied()
                .find(|h| cur.is_none_or(|c| *h < c))
                .or_else(|| hits.last().copied())
        };
        self.at = next;
        next
    }

    /// `/word▏ 2/5` for the pane's title; empty with no search.
    pub fn label(&self, lines: &[impl AsRef<str>]) -> String {
        if self.text.is_empty() && !self.typing {
            return String::new();
        }
        let cursor = if self.typing { "▏" } else { "" };
        let hits = self.hits(lines);
        let place = match self.at.and_then(|at| hits.iter().position(|h| *h == at)) {
            Some(i) => format!("{}/{}", i + 1, hits.len()),
            None if self.text.is_empty() => String::new(),
            None => "no match".to_owned(),
        };
        format!("/{}{cursor} {place}", self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn lines() -> Vec<String> {
        [
            "Input",
            "{",
            "  \"id\": \"pay_1\"",
            "}",
            "Output",
            "  \"id\": \"pay_2\"",
        ]
        .iter()
        .map(|l| (*l).to_owned())
        .collect()
    }

    fn typed(search: &mut PaneSearch, text: &str, scroll: usize) -> Option<usize> {
        let mut at = None;
        for c in text.chars() {
            let key = KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
            at = search.key(TextKey::Edit(key), &lines(), scroll);
        }
        at
    }

    #[test]
    fn typing_finds_the_first_line_from_where_the_pane_is_and_n_wraps_around() {
        let mut search = PaneSearch::default();
        search.start();
        assert_eq!(typed(&mut search, "ID", 0), Some(2));
        assert_eq!(search.label(&lines()), "/ID▏ 1/2");
        search.key(TextKey::Keep, &lines(), 0);
        assert_eq!(search.step(&lines(), true), Some(5));
        assert_eq!(search.label(&lines()), "/ID 2/2");
        assert_eq!(search.step(&lines(), true), Some(2), "wraps to the first");
        assert_eq!(
            search.step(&lines(), false),
            Some(5),
            "and back to the last"
        );
        // From further down, typing starts at the first match below.
        let mut lower = PaneSearch::default();
        lower.start();
        assert_eq!(typed(&mut lower, "id", 3), Some(5));
        // Nothing matches: it says so and does not scroll.
        let mut none = PaneSearch::default();
        none.start();
        assert_eq!(typed(&mut none, "zzz", 0), None);
        assert_eq!(none.label(&lines()), "/zzz▏ no match");
        assert_eq!(none.step(&lines(), true), None);
    }
}
