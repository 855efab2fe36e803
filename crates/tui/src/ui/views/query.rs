//! The filter language the Sessions, Approvals and Evals lists share: words all kept, each
//! `key:value` (a field's value starts with it) or plain text (found anywhere), `-` negating.

/// One word of a filter.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    negate: bool,
    /// `status` in `status:failed`; `None` for plain text.
    key: Option<String>,
    value: String,
}

/// A parsed filter: `status:failed -user:spyglass-eval pay` keeps the failed sessions of
/// anyone but the eval runner whose id or user holds `pay`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Query {
    terms: Vec<Term>,
}

impl Query {
    /// Reads a filter as typed; case never matters. A lone `-` is still being typed and
    /// asks for nothing.
    pub fn parse(text: &str) -> Self {
        let terms = text
            .split_whitespace()
            .filter_map(|word| {
                let word = word.to_lowercase();
                let (negate, word) = match word.strip_prefix('-') {
                    Some(rest) => (true, rest.to_owned()),
                    None => (false, word),
                };
                if word.is_empty() {
                    return None;
                }
                let (key, value) = match word.split_once(':') {
                    Some((key, value))
                        if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphabetic()) =>
                    {
                        (Some(key.to_owned()), value.to_owned())
                    }
                    _ => (None, word),
                };
                Some(Term { negate, key, value })
            })
            .collect();
        Self { terms }
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether a row passes: `fields` are its `(key, value)` pairs (a key may repeat, as a
    /// session has more than one source), `text` what plain words are looked for in. A key
    /// the row does not have is read as plain text (`a:b` in a tool name still matches).
    pub fn matches(&self, fields: &[(&str, &str)], text: &[&str]) -> bool {
        self.terms.iter().all(|term| {
            let hit = match &term.key {
                Some(key) if fields.iter().any(|(k, _)| k == key) => fields
                    .iter()
                    .filter(|(k, _)| k == key)
                    .any(|(_, v)| v.to_lowercase().starts_with(&term.value)),
                Some(key) => {
                    let literal = format!("{key}:{}", term.value);
                    text.iter().any(|t| t.to_lowercase().contains(&literal))
                }
                None => text.iter().any(|t| t.to_lowercase().contains(&term.value)),
            };
            hit != term.negate
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Query;

    const EVAL: [(&str, &str); 3] = [
        ("status", "closed"),
        ("user", "spyglass-eval"),
        ("source", "runtime"),
    ];
    const ANA: [(&str, &str); 3] = [("status", "failed"), ("user", "ana"), ("source", "otel")];

    fn keeps(filter: &str, fields: &[(&str, &str)], text: &[&str]) -> bool {
        Query::parse(filter).matches(fields, text)
    }

    #[test]
    fn fields_text_negation_and_every_word_together() {
        assert!(keeps("status:failed", &ANA, &["ses_1"]));
        assert!(!keeps("status:failed", &EVAL, &["ses_2"]));
        // A value is a prefix, and case does not matter.
        assert!(keeps("STATUS:fail", &ANA, &["ses_1"]));
        assert!(!keeps("-user:spyglass-eval", &EVAL, &["ses_2"]));
        assert!(keeps("-user:spyglass-eval", &ANA, &["ses_1"]));
        assert!(keeps("source:otel status:failed ses_1", &ANA, &["ses_1"]));
        assert!(!keeps("source:otel status:failed ses_9", &ANA, &["ses_1"]));
        assert!(!keeps("source:otel -status:failed", &ANA, &["ses_1"]));
        // Plain text is found anywhere in what the row shows.
        assert!(keeps("es_", &ANA, &["ses_1"]));
        assert!(keeps("-zzz", &ANA, &["ses_1"]));
    }

    #[test]
    fn half_typed_and_odd_words_never_hide_everything_by_accident() {
        // Nothing typed yet after `-`, or only blanks: no filter at all.
        assert!(Query::parse("- ").is_empty());
        assert!(Query::parse("   ").is_empty());
        // `status:` (nothing after the colon yet) keeps every row that has a status.
        assert!(keeps("status:", &ANA, &[]));
        // A key the rows do not have is read as text: a tool named `nuvem:create`.
        assert!(keeps("nuvem:cre", &ANA, &["nuvem:create"]));
        assert!(!keeps("nuvem:del", &ANA, &["nuvem:create"]));
        // A URL-ish word is text, not a key.
        assert!(keeps("http://x", &ANA, &["see http://x"]));
    }
}
