//! Expected vs actual, for the eval case view: a line diff of two texts (Myers, by the
//! `similar` crate) and a path-by-path diff of two JSON values. Pure; the view styles them.

use serde_json::Value;
use similar::{Algorithm, DiffOp};
use std::time::{Duration, Instant};

/// One line of a text diff. `Removed` lines are only in the expected text, `Added` only in
/// the actual one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineDiff<'a> {
    Same(&'a str),
    Removed(&'a str),
    Added(&'a str),
}

/// How long the line diff may search for a minimal script before it settles for a correct
/// one that is not minimal (the rest shown as removed then added): a pathological pair of
/// huge texts must not stall a frame.
const DIFF_DEADLINE: Duration = Duration::from_millis(100);

/// The lines of `expected` and `actual` in order, each marked same, removed or added; a
/// minimal diff (`similar`'s Myers), removals before additions where both are possible.
pub fn line_diff<'a>(expected: &'a str, actual: &'a str) -> Vec<LineDiff<'a>> {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    let deadline = Instant::now() + DIFF_DEADLINE;
    let ops = similar::capture_diff_slices_deadline(Algorithm::Myers, &a, &b, Some(deadline));
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    for op in ops {
        let (old, new) = (op.old_range(), op.new_range());
        if let DiffOp::Equal { .. } = op {
            out.extend(a[old].iter().map(|l| LineDiff::Same(l)));
        } else {
            out.extend(a[old].iter().map(|l| LineDiff::Removed(l)));
            out.extend(b[new].iter().map(|l| LineDiff::Added(l)));
        }
    }
    out
}

/// One place where two JSON values differ, by `JSONPath` (`$.payment.items[0].id`).
#[derive(Debug, Clone, PartialEq)]
pub enum PathDiff {
    /// Both have the path, with different values (or different types).
    Changed {
        path: String,
        expected: Value,
        actual: Value,
    },
    /// Expected has the path, actual does not.
    Missing { path: String, expected: Value },
    /// Actual has the path, expected does not.
    Added { path: String, actual: Value },
}

impl PathDiff {
    pub fn path(&self) -> &str {
        match self {
            Self::Changed { path, .. } | Self::Missing { path, .. } | Self::Added { path, .. } => {
                path
            }
        }
    }
}

/// Every path where `actual` differs from `expected`, walking both from `root` (`$`, or the
/// path an assertion looked at); objects key by key, arrays index by index. Numbers are
/// equal when their values are (`1` and `1.0`).
pub fn json_diff(root: &str, expected: &Value, actual: &Value) -> Vec<PathDiff> {
    let mut out = Vec::new();
    walk(&mut root.to_owned(), expected, actual, &mut out);
    out
}

fn walk(path: &mut String, expected: &Value, actual: &Value, out: &mut Vec<PathDiff>) {
    let len = path.len();
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (key, ev) in e {
                push_key(path, key);
                match a.get(key) {
                    Some(av) => walk(path, ev, av, out),
                    None => out.push(PathDiff::Missing {
                        path: path.clone(),
                        expected: ev.clone(),
                    }),
                }
                path.truncate(len);
            }
            for (key, av) in a.iter().filter(|(key, _)| !e.contains_key(*key)) {
                push_key(path, key);
                out.push(PathDiff::Added {
                    path: path.clone(),
                    actual: av.clone(),
                });
                path.truncate(len);
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            for i in 0..e.len().max(a.len()) {
                path.push_str(&format!("[{i}]"));
                match (e.get(i), a.get(i)) {
                    (Some(ev), Some(av)) => walk(path, ev, av, out),
                    (Some(ev), None) => out.push(PathDiff::Missing {
                        path: path.clone(),
                        expected: ev.clone(),
                    }),
                    (None, Some(av)) => out.push(PathDiff::Added {
                        path: path.clone(),
                        actual: av.clone(),
                    }),
                    (None, None) => {}
                }
                path.truncate(len);
            }
        }
        (Value::Number(e), Value::Number(a)) if e.as_f64() == a.as_f64() => {}
        (e, a) if e == a => {}
        (e, a) => out.push(PathDiff::Changed {
            path: path.clone(),
            expected: e.clone(),
            actual: a.clone(),
        }),
    }
}

/// `.key` for plain names, `["a key"]` (JSON-quoted) for anything else.
fn push_key(path: &mut String, key: &str) {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        path.push('.');
        path.push_str(key);
    } else {
        path.push('[');
        path.push_str(&Value::String(key.to_owned()).to_string());
        path.push(']');
    }
}

#[cfg(test)]
mod tests {
    use super::LineDiff::{Added, Removed, Same};
    use super::*;
    use serde_json::json;

    #[test]
    fn line_diff_keeps_common_lines_and_marks_the_rest() {
        let expected = "Charged: pay_1\nstatus: PENDING\nthanks";
        let actual = "Charged: pay_2\nstatus: PENDING\nthanks\nbye";
        assert_eq!(
            line_diff(expected, actual),
            vec![
                Removed("Charged: pay_1"),
                Added("Charged: pay_2"),
                Same("status: PENDING"),
                Same("thanks"),
                Added("bye"),
            ]
        );
    }

    #[test]
    fn line_diff_is_minimal_in_the_middle() {
        // The LCS is a, c, d: only b goes and x, y come in.
        let diff = line_diff("a\nb\nc\nd", "a\nx\nc\ny\nd");
        assert_eq!(
            diff,
            vec![
                Same("a"),
                Removed("b"),
                Added("x"),
                Same("c"),
                Added("y"),
                Same("d"),
            ]
        );
        let same = diff.iter().filter(|d| matches!(d, Same(_))).count();
        assert_eq!(same, 3);
    }

    #[test]
    fn line_diff_of_empty_and_equal_texts() {
        assert_eq!(line_diff("", ""), vec![]);
        assert_eq!(line_diff("", "x"), vec![Added("x")]);
        assert_eq!(line_diff("x\ny", ""), vec![Removed("x"), Removed("y")]);
        assert_eq!(line_diff("x\ny", "x\ny"), vec![Same("x"), Same("y")]);
        // Repeated lines: each expected line pairs with at most one actual line.
        assert_eq!(
            line_diff("a\na", "a"),
            vec![Same("a"), Removed("a")],
            "one `a` kept, one removed"
        );
    }

    #[test]
    fn line_diff_of_huge_texts_stays_correct_without_the_table() {
        let expected: String = (0..3000).map(|i| format!("e{i}\n")).collect();
        let actual: String = (0..3000).map(|i| format!("a{i}\n")).collect();
        let diff = line_diff(&expected, &actual);
        assert_eq!(diff.len(), 6000);
        assert_eq!(diff[0], Removed("e0"));
        assert_eq!(diff[3000], Added("a0"));
    }

    #[test]
    fn json_diff_lists_changed_missing_and_added_paths() {
        let expected = json!({
            "id": "pay_1",
            "amount": 5,
            "customer": {"name": "Ana", "tax id": "123"},
            "items": [{"sku": "a"}, {"sku": "b"}]
        });
        let actual = json!({
            "id": "pay_2",
            "amount": 5.0,
            "customer": {"name": "Ana"},
            "items": [{"sku": "a", "qty": 1}],
            "status": "PENDING"
        });
        let diff = json_diff("$", &expected, &actual);
        // Key order follows serde_json's map (sorted, or document order with
        // `preserve_order`), so compare as a set and look entries up by path.
        let mut paths: Vec<&str> = diff.iter().map(PathDiff::path).collect();
        paths.sort_unstable();
        assert_eq!(
            paths,
            [
                "$.customer[\"tax id\"]",
                "$.id",
                "$.items[0].qty",
                "$.items[1]",
                "$.status"
            ],
            "5 and 5.0 are the same number; equal values are not listed"
        );
        let at = |path: &str| diff.iter().find(|d| d.path() == path).unwrap().clone();
        assert_eq!(
            at("$.customer[\"tax id\"]"),
            PathDiff::Missing {
                path: "$.customer[\"tax id\"]".into(),
                expected: json!("123")
            }
        );
        assert_eq!(
            at("$.id"),
            PathDiff::Changed {
                path: "$.id".into(),
                expected: json!("pay_1"),
                actual: json!("pay_2")
            }
        );
        assert_eq!(
            at("$.items[0].qty"),
            PathDiff::Added {
                path: "$.items[0].qty".into(),
                actual: json!(1)
            }
        );
        assert_eq!(
            at("$.items[1]"),
            PathDiff::Missing {
                path: "$.items[1]".into(),
                expected: json!({"sku": "b"})
            }
        );
        assert_eq!(
            at("$.status"),
            PathDiff::Added {
                path: "$.status".into(),
                actual: json!("PENDING")
            }
        );
    }

    #[test]
    fn json_diff_of_equal_values_and_type_changes() {
        let v = json!({"a": [1, {"b": null}]});
        assert!(json_diff("$", &v, &v).is_empty());
        assert_eq!(
            json_diff("$.data", &json!({"a": 1}), &json!([1])),
            vec![PathDiff::Changed {
                path: "$.data".into(),
                expected: json!({"a": 1}),
                actual: json!([1])
            }]
        );
    }
}
