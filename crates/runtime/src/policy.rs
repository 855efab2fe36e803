//! The policy engine: a deny-list and ordered rules (allow / approval / deny) read from
//! TOML, matched on the canonical tool name by glob and optionally on one input field.
//! First matching rule wins; no match means allow. A bad file names file, rule and field.

use serde_json::Value;
use spyglass_protocol::RawJson;
use spyglass_protocol::glob::{check_pattern, glob_match};
use spyglass_protocol::sanitize::{sanitize, sanitize_text};
use std::cell::OnceCell;
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// What a rule does with a matching call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Allow,
    Approval,
    Deny,
}

/// A comparison operator of a `when` condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

/// The literal a `when` condition compares against.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Number(f64),
    Text(String),
    Bool(bool),
}

/// `input.a.b > 1000`: a dotted path into the call's input, an operator and a literal.
/// A missing field or a value of another type makes the condition false.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub path: Vec<String>,
    pub op: Op,
    pub value: Literal,
}

impl Condition {
    /// Parses `input.value > 1000`, `input.method == "pix"`, `input.urgent != true`.
    pub fn parse(text: &str) -> Result<Condition, String> {
        let text = text.trim();
        let ops = [
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("==", Op::Eq),
            ("!=", Op::Ne),
            (">", Op::Gt),
            ("<", Op::Lt),
        ];
        let (at, token, op) = ops
            .iter()
            .filter_map(|(token, op)| text.find(token).map(|at| (at, *token, *op)))
            .min_by_key(|(at, token, _)| (*at, usize::MAX - token.len()))
            .ok_or_else(|| format!("`{text}` has no comparison (one of ==, !=, >, >=, <, <=)"))?;
        let left = text[..at].trim();
        let right = text[at + token.len()..].trim();
        let path: Vec<String> = left.split('.').map(str::to_owned).collect();
        if path.len() < 2 || path[0] != "input" || path.iter().any(String::is_empty) {
            return Err(format!(
                "`{left}` is not an input field path (write input.FIELD, e.g. input.value)"
            ));
        }
        let value = if right == "true" {
            Literal::Bool(true)
        } else if right == "false" {
            Literal::Bool(false)
        } else if let Some(text) = quoted(right) {
            Literal::Text(text)
        } else if let Ok(number) = right.parse::<f64>() {
            // `NaN`, `inf` and `1e400` parse as f64 but no JSON input number compares
            // with them as written: such a rule would silently never (or always) match.
            if !number.is_finite() {
                return Err(format!(
                    "`{right}` is not a finite number; a JSON input never holds it, so `{text}` could never match as meant"
                ));
            }
            Literal::Number(number)
        } else {
            return Err(format!(
                "`{right}` is not a number, a quoted string, true or false"
            ));
        };
        if matches!(value, Literal::Bool(_)) && !matches!(op, Op::Eq | Op::Ne) {
            return Err(format!("`{token}` cannot compare booleans; use == or !="));
        }
        Ok(Condition {
            path: path[1..].to_vec(),
            op,
            value,
        })
    }

    pub fn matches(&self, input: &Value) -> bool {
        let mut at = input;
        for key in &self.path {
            at = match at {
                Value::Object(map) => match map.get(key) {
                    Some(next) => next,
                    None => return false,
                },
                Value::Array(items) => match key.parse::<usize>().ok().and_then(|i| items.get(i)) {
                    Some(next) => next,
                    None => return false,
                },
                _ => return false,
            };
        }
        let ordering = match (&self.value, at) {
            (Literal::Number(want), Value::Number(got)) => match got.as_f64() {
                Some(got) => got.partial_cmp(want),
                None => None,
            },
            (Literal::Text(want), Value::String(got)) => Some(got.as_str().cmp(want.as_str())),
            (Literal::Bool(want), Value::Bool(got)) => Some(got.cmp(want)),
            _ => None,
        };
        let Some(ordering) = ordering else {
            return false;
        };
        match self.op {
            Op::Eq => ordering.is_eq(),
            Op::Ne => ordering.is_ne(),
            Op::Gt => ordering.is_gt(),
            Op::Ge => ordering.is_ge(),
            Op::Lt => ordering.is_lt(),
            Op::Le => ordering.is_le(),
        }
    }
}

fn quoted(text: &str) -> Option<String> {
    for quote in ['"', '\''] {
        if text.len() >= 2 && text.starts_with(quote) && text.ends_with(quote) {
            return Some(text[1..text.len() - 1].to_owned());
        }
    }
    None
}

/// One `[[rule]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub id: String,
    pub tool: String,
    pub action: Action,
    pub when: Option<Condition>,
    pub message: Option<String>,
}

impl Rule {
    /// `input` is asked for only when the tool matches and there is a condition to test.
    pub fn matches<'a>(&self, tool: &str, input: &dyn Fn() -> &'a Value) -> bool {
        glob_match(&self.tool, tool) && self.when.as_ref().is_none_or(|when| when.matches(input()))
    }
}

/// Input a `when` rule had to read but that cannot be parsed into a tree.
#[derive(Debug, Clone, PartialEq, Error)]
#[error(
    "the input of {tool} cannot be checked against the policy ({reason}); send it with less nesting or numbers in range"
)]
pub struct UnreadableInput {
    pub tool: String,
    pub reason: String,
}

/// What the engine decided for one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Allow,
    Approval { rule_id: String, message: String },
    Deny { rule_id: String, message: String },
}

/// The deny-list and the ordered rules. The default policy allows everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policy {
    /// Tool globs no rule and no mock can let through (checked before the rules).
    pub deny_list: Vec<String>,
    pub rules: Vec<Rule>,
}

/// Why a policy file was refused: which file, which rule (index and id) and which field.
#[derive(Debug, Clone, PartialEq, Error)]
pub struct PolicyError {
    pub file: Option<PathBuf>,
    /// Zero-based index of the `[[rule]]`, when the error is inside one.
    pub rule_index: Option<usize>,
    pub rule_id: Option<String>,
    pub field: Option<String>,
    pub message: String,
}

/// Every part that came from the file (its name, a rule id, a key, a value quoted in the
/// message) is escaped for a terminal: a rule id holding a line break or an escape
/// sequence is shown as `\n` / `\e`, never written raw.
impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "policy ")?;
        if let Some(file) = &self.file {
            write!(f, "{}", sanitize(&file.display().to_string()))?;
        } else {
            write!(f, "text")?;
        }
        if let Some(index) = self.rule_index {
            write!(f, ", rule #{}", index + 1)?;
            if let Some(id) = &self.rule_id {
                write!(f, " (id \"{}\")", sanitize(id))?;
            }
        }
        if let Some(field) = &self.field {
            write!(f, ", field `{}`", sanitize(field))?;
        }
        write!(f, ": {}", sanitize_text(&self.message))
    }
}

impl PolicyError {
    fn top(field: Option<&str>, message: impl Into<String>) -> Self {
        Self {
            file: None,
            rule_index: None,
            rule_id: None,
            field: field.map(str::to_owned),
            message: message.into(),
        }
    }
}

const RULE_FIELDS: &[&str] = &["id", "tool", "action", "when", "message"];

impl Policy {
    /// The `when` of the rule named `rule_id` as written in a policy file.
    pub(crate) fn condition_of(&self, rule_id: &str) -> Option<String> {
        let rule = self.rules.iter().find(|r| r.id == rule_id)?;
        let when = rule.when.as_ref()?;
        let op = match when.op {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
        };
        let value = match &when.value {
            Literal::Number(n) => n.to_string(),
            Literal::Text(t) => serde_json::to_string(t).unwrap_or_else(|_| t.clone()),
            Literal::Bool(b) => b.to_string(),
        };
        Some(format!("input.{} {op} {value}", when.path.join(".")))
    }

    /// Parses policy TOML: optional `deny_list = ["glob", ...]` and `[[rule]]` tables.
    pub fn from_toml(text: &str) -> Result<Policy, PolicyError> {
        let table: toml::Table = text
            .parse()
            .map_err(|err: toml::de::Error| PolicyError::top(None, err.to_string().trim()))?;
        let mut policy = Policy::default();
        for (key, value) in &table {
            match key.as_str() {
                "deny_list" => {
                    let items = value.as_array().ok_or_else(|| {
                        PolicyError::top(Some("deny_list"), "must be an array of tool globs")
                    })?;
                    for (i, item) in items.iter().enumerate() {
                        let glob = item.as_str().ok_or_else(|| {
                            PolicyError::top(
                                Some(&format!("deny_list[{i}]")),
                                "must be a string (a tool glob)",
                            )
                        })?;
                        check_pattern(glob).map_err(|err| {
                            PolicyError::top(Some(&format!("deny_list[{i}]")), err.to_string())
                        })?;
                        policy.deny_list.push(glob.to_owned());
                    }
                }
                "rule" => {
                    let rules = value.as_array().ok_or_else(|| {
                        PolicyError::top(Some("rule"), "write rules as [[rule]] tables")
                    })?;
                    for (index, rule) in rules.iter().enumerate() {
                        policy.rules.push(parse_rule(index, rule)?);
                    }
                }
                other => {
                    return Err(PolicyError::top(
                        Some(other),
                        "unknown key (expected deny_list or [[rule]])",
                    ));
                }
            }
        }
        Ok(policy)
    }

    /// Reads and parses a policy file; errors name the file.
    pub fn load(path: impl AsRef<Path>) -> Result<Policy, PolicyError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|err| PolicyError {
            file: Some(path.to_owned()),
            rule_index: None,
            rule_id: None,
            field: None,
            message: format!("cannot read: {err}"),
        })?;
        Policy::from_toml(&text).map_err(|mut err| {
            err.file = Some(path.to_owned());
            err
        })
    }

    /// Deny-list first, then the first matching rule; no match allows.
    pub fn evaluate(&self, tool: &str, input: &Value) -> Verdict {
        self.evaluate_with(tool, &|| input)
    }

    /// `evaluate` for input kept as text: the tree is asked for, and so parsed, only when
    /// a rule for this tool has a `when` condition to test. Fails closed: input a rule
    /// needed but that cannot be parsed (too deep, a number out of range) is an error,
    /// never a `null` that no condition matches.
    pub fn evaluate_raw(&self, tool: &str, input: &RawJson) -> Result<Verdict, UnreadableInput> {
        static UNREAD: Value = Value::Null;
        let parsed: OnceCell<Result<Value, String>> = OnceCell::new();
        let verdict = self.evaluate_with(tool, &|| {
            match parsed.get_or_init(|| input.try_value().map_err(|err| err.to_string())) {
                Ok(value) => value,
                // Only a placeholder: the verdict reached with it is thrown away below.
                Err(_) => &UNREAD,
            }
        });
        match parsed.into_inner() {
            Some(Err(reason)) => Err(UnreadableInput {
                tool: tool.to_owned(),
                reason,
            }),
            _ => Ok(verdict),
        }
    }

    fn evaluate_with<'a>(&self, tool: &str, input: &dyn Fn() -> &'a Value) -> Verdict {
        if let Some(glob) = self.deny_list.iter().find(|glob| glob_match(glob, tool)) {
            return Verdict::Deny {
                rule_id: "deny_list".to_owned(),
                message: format!(
                    "{tool} is on the deny-list ({glob}); no policy or mock can allow it"
                ),
            };
        }
        for rule in &self.rules {
            if !rule.matches(tool, input) {
                continue;
            }
            return match rule.action {
                Action::Allow => Verdict::Allow,
                Action::Deny => Verdict::Deny {
                    rule_id: rule.id.clone(),
                    message: rule
                        .message
                        .clone()
                        .unwrap_or_else(|| format!("{tool} denied by policy rule {}", rule.id)),
                },
                Action::Approval => Verdict::Approval {
                    rule_id: rule.id.clone(),
                    message: rule.message.clone().unwrap_or_else(|| {
                        format!("{tool} requires approval (policy rule {})", rule.id)
                    }),
                },
            };
        }
        Verdict::Allow
    }
}

fn parse_rule(index: usize, value: &toml::Value) -> Result<Rule, PolicyError> {
    let id = value
        .get("id")
        .and_then(toml::Value::as_str)
        .map(str::to_owned);
    let fail = |field: &str, message: String| PolicyError {
        file: None,
        rule_index: Some(index),
        rule_id: id.clone(),
        field: Some(field.to_owned()),
        message,
    };
    let table = value
        .as_table()
        .ok_or_else(|| fail("rule", "must be a table".to_owned()))?;
    if let Some(unknown) = table
        .keys()
        .find(|key| !RULE_FIELDS.contains(&key.as_str()))
    {
        return Err(fail(
            unknown,
            format!("unknown field (expected one of {})", RULE_FIELDS.join(", ")),
        ));
    }
    let text = |field: &str, required: bool| -> Result<Option<String>, PolicyError> {
        match table.get(field) {
            None if required => Err(fail(field, "is required".to_owned())),
            None => Ok(None),
            Some(toml::Value::String(text)) if text.trim().is_empty() => {
                Err(fail(field, "must not be empty".to_owned()))
            }
            Some(toml::Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(fail(
                field,
                format!("must be a string, found {}", other.type_str()),
            )),
        }
    };
    let id_text = text("id", true)?.unwrap_or_default();
    let tool = text("tool", true)?.unwrap_or_default();
    check_pattern(&tool).map_err(|err| fail("tool", err.to_string()))?;
    let action = match text("action", true)?.as_deref() {
        Some("allow") => Action::Allow,
        Some("approval") => Action::Approval,
        Some("deny") => Action::Deny,
        other => {
            return Err(fail(
                "action",
                format!(
                    "`{}` is not an action (allow, deny or approval)",
                    other.unwrap_or_default()
                ),
            ));
        }
    };
    let when = match text("when", false)? {
        Some(when) => Some(Condition::parse(&when).map_err(|message| fail("when", message))?),
        None => None,
    };
    Ok(Rule {
        id: id_text,
        tool,
        action,
        when,
        message: text("message", false)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn globs_match_names() {
        assert!(glob_match("*/create_payment", "asaas/create_payment"));
        assert!(glob_match("*create_payment*", "asaas/create_payment_v2"));
        assert!(glob_match("asaas/?reate_payment", "asaas/create_payment"));
        assert!(!glob_match("*/create_payment", "asaas/create_refund"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("a?", "a"));
    }

    #[test]
    fn a_rule_id_with_a_line_break_or_an_escape_is_shown_escaped_in_the_error() {
        let err = Policy::from_toml(
            "[[rule]]\nid = \"ok\\nFAKE: all clear\\u001b[2J\\u202e\"\ntool = \"*\"\naction = \"explode\"\n",
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(!text.contains('\n'), "a forged second line: {text}");
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{202e}'),
            "{text}"
        );
        assert!(
            text.contains(r#"(id "ok\nFAKE: all clear\e[2J\u{202e}")"#),
            "{text}"
        );
    }

    /// Approval over a threshold, a deny by tool, a deny on a condition, a deny-list.
    fn payments_policy() -> Policy {
        Policy::from_toml(
            r#"
            deny_list = ["*/transfer_all"]
            [[rule]]
            id = "big"
            tool = "*/create_payment"
            action = "approval"
            when = "input.value > 1000"
            [[rule]]
            id = "no_refunds"
            tool = "*/refund*"
            action = "deny"
            [[rule]]
            id = "all_payments"
            tool = "*/create_payment"
            action = "deny"
            when = "input.method == 'boleto'"
            "#,
        )
        .unwrap()
    }

    #[test]
    fn first_matching_rule_wins_and_default_allows() {
        let policy = payments_policy();
        let pay = "asaas/create_payment";
        assert!(matches!(
            policy.evaluate(pay, &json!({"value": 1500})),
            Verdict::Approval { rule_id, .. } if rule_id == "big"
        ));
        assert_eq!(policy.evaluate(pay, &json!({"value": 5})), Verdict::Allow);
        assert_eq!(
            policy.evaluate(pay, &json!({"value": "9999"})),
            Verdict::Allow
        );
        assert!(matches!(
            policy.evaluate(pay, &json!({"method": "boleto"})),
            Verdict::Deny { rule_id, .. } if rule_id == "all_payments"
        ));
        assert!(matches!(
            policy.evaluate("asaas/refund_payment", &json!({})),
            Verdict::Deny { rule_id, .. } if rule_id == "no_refunds"
        ));
    }

    #[test]
    fn raw_input_gets_the_verdicts_of_its_tree() {
        let policy = payments_policy();
        let cases = [
            ("asaas/create_payment", r#"{"value": 1500}"#),
            (
                "asaas/create_payment",
                r#"{ "value" : 5 , "note": "small" }"#,
            ),
            ("asaas/create_payment", r#"{"value": "9999"}"#),
            ("asaas/create_payment", "{}"),
            ("asaas/create_payment", r#"{"method": "boleto"}"#),
            ("asaas/refund_payment", r#"{"value": 1500}"#),
            ("bank/transfer_all", "{}"),
            ("nuvem-fiscal/create_nfe", r#"{"value": 1500}"#),
        ];
        for (tool, text) in cases {
            let raw = RawJson::from_text(text).unwrap();
            let tree: Value = serde_json::from_str(text).unwrap();
            assert_eq!(
                policy.evaluate_raw(tool, &raw),
                Ok(policy.evaluate(tool, &tree)),
                "{tool} {text}"
            );
        }
        assert!(matches!(
            policy.evaluate_raw("asaas/create_payment", &RawJson::from_text(r#"{"value":1500}"#).unwrap()),
            Ok(Verdict::Approval { rule_id, .. }) if rule_id == "big"
        ));
    }

    #[test]
    fn a_comparison_with_a_non_finite_number_is_refused_naming_the_rule() {
        for literal in ["NaN", "nan", "inf", "-infinity", "1e400"] {
            let text = format!(
                "[[rule]]\nid = \"odd\"\ntool = \"*\"\naction = \"deny\"\nwhen = \"input.a == {literal}\"\n"
            );
            let err = Policy::from_toml(&text).unwrap_err();
            assert_eq!(err.rule_id.as_deref(), Some("odd"), "{literal}");
            assert_eq!(err.field.as_deref(), Some("when"));
            assert!(err.to_string().contains("not a finite number"), "{err}");
        }
    }

    #[test]
    fn input_a_rule_cannot_read_is_refused_not_read_as_null() {
        let policy = payments_policy();
        let deep = format!(
            r#"{{"value":5000,"pad":{}{}}}"#,
            "[".repeat(127),
            "]".repeat(127)
        );
        for text in [deep.as_str(), r#"{"value": 1e400}"#] {
            let raw = RawJson::from_text(text).unwrap();
            let err = policy
                .evaluate_raw("asaas/create_payment", &raw)
                .unwrap_err();
            assert_eq!(err.tool, "asaas/create_payment");
            assert!(!err.reason.is_empty());
            // No rule of this tool reads the input: nothing to refuse.
            assert_eq!(policy.evaluate_raw("other/tool", &raw), Ok(Verdict::Allow));
        }
    }

    #[test]
    fn conditions_compare_numbers_strings_and_bools() {
        let input = json!({"a": {"b": 3}, "s": "x", "t": true, "list": [1, 2]});
        let check = |text: &str| Condition::parse(text).unwrap().matches(&input);
        assert!(check("input.a.b >= 3"));
        assert!(check("input.a.b < 3.5"));
        assert!(!check("input.a.b != 3"));
        assert!(check("input.s == \"x\""));
        assert!(check("input.t == true"));
        assert!(check("input.list.1 == 2"));
        assert!(!check("input.missing == 1"));
        assert!(Condition::parse("value > 3").is_err());
        assert!(Condition::parse("input.v ~ 3").is_err());
        assert!(Condition::parse("input.v > maybe").is_err());
        assert!(Condition::parse("input.v > true").is_err());
    }

    #[test]
    fn deny_list_precedes_rules() {
        let policy = Policy::from_toml(
            "deny_list = [\"*/transfer_all\"]\n[[rule]]\nid = \"ok\"\ntool = \"*\"\naction = \"allow\"\n",
        )
        .unwrap();
        assert!(matches!(
            policy.evaluate("bank/transfer_all", &json!({})),
            Verdict::Deny { rule_id, .. } if rule_id == "deny_list"
        ));
    }

    #[test]
    fn bad_rules_name_rule_and_field() {
        let err = Policy::from_toml(
            "[[rule]]\nid = \"a\"\ntool = \"*\"\naction = \"allow\"\n[[rule]]\nid = \"b\"\ntool = \"*\"\naction = \"maybe\"\n",
        )
        .unwrap_err();
        assert_eq!(err.rule_index, Some(1));
        assert_eq!(err.rule_id.as_deref(), Some("b"));
        assert_eq!(err.field.as_deref(), Some("action"));
        let err = Policy::from_toml(
            "[[rule]]\nid = \"c\"\ntool = \"*\"\naction = \"deny\"\nwehn = \"x\"\n",
        )
        .unwrap_err();
        assert_eq!(err.field.as_deref(), Some("wehn"));
        let err = Policy::from_toml("[[rule]]\nid = \"d\"\naction = \"deny\"\n").unwrap_err();
        assert_eq!(err.field.as_deref(), Some("tool"));
        let err = Policy::from_toml(
            "[[rule]]\nid = \"e\"\ntool = \"*\"\naction = \"deny\"\nwhen = \"input.x ~ 1\"\n",
        )
        .unwrap_err();
        assert_eq!(err.field.as_deref(), Some("when"));
        assert!(err.to_string().contains("rule #1 (id \"e\")"), "{err}");
        assert!(Policy::from_toml("[[rule]\n").is_err());
        assert!(Policy::from_toml("deny_list = \"x\"").is_err());
    }

    #[test]
    fn globs_over_the_length_bound_are_refused_at_load() {
        let long = "*a".repeat(spyglass_protocol::glob::MAX_PATTERN_LEN);
        let err = Policy::from_toml(&format!(
            "[[rule]]\nid = \"long\"\ntool = \"{long}\"\naction = \"deny\"\n"
        ))
        .unwrap_err();
        assert_eq!(err.field.as_deref(), Some("tool"));
        assert!(err.to_string().contains("the limit is 1024"), "{err}");
        let err = Policy::from_toml(&format!("deny_list = [\"x\", \"{long}\"]")).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("deny_list[1]"));
        let ok = "*".repeat(spyglass_protocol::glob::MAX_PATTERN_LEN);
        assert!(Policy::from_toml(&format!("deny_list = [\"{ok}\"]")).is_ok());
    }
}
