//! The small JSON path language of `json_path`, `prompted` and `args` checks: `$`, then
//! `.key`, `[index]` or `["key"]` steps, parsed once when the suite is read.

use serde_json::Value;
use std::fmt;
use thiserror::Error;

/// One step of a JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSegment {
    Key(String),
    Index(usize),
}

/// A JSON path: `$`, then `.key`, `[index]` or `["key"]` steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    pub segments: Vec<PathSegment>,
}

/// Why a JSON path could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid JSON path {path:?}: {reason}")]
pub struct JsonPathError {
    pub path: String,
    pub reason: String,
}

impl JsonPath {
    pub fn parse(text: &str) -> Result<Self, JsonPathError> {
        let fail = |reason: &str| JsonPathError {
            path: text.to_owned(),
            reason: reason.to_owned(),
        };
        let rest = text
            .strip_prefix('$')
            .ok_or_else(|| fail("it must start with `$`"))?;
        let chars: Vec<char> = rest.chars().collect();
        let mut segments = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '.' => {
                    let start = i + 1;
                    let mut end = start;
                    while end < chars.len() && chars[end] != '.' && chars[end] != '[' {
                        end += 1;
                    }
                    if end == start {
                        return Err(fail("a `.` must be followed by a key"));
                    }
                    segments.push(PathSegment::Key(chars[start..end].iter().collect()));
                    i = end;
                }
                '[' => {
                    let close = chars[i..]
                        .iter()
                        .position(|&c| c == ']')
                        .map(|at| at + i)
                        .ok_or_else(|| fail("unclosed `[`"))?;
                    let inner: String = chars[i + 1..close].iter().collect();
                    let inner = inner.trim();
                    let quoted = ['"', '\''].iter().find_map(|q| {
                        inner
                            .strip_prefix(*q)
                            .and_then(|s| s.strip_suffix(*q))
                            .filter(|_| inner.len() >= 2)
                    });
                    if let Some(key) = quoted {
                        segments.push(PathSegment::Key(key.to_owned()));
                    } else {
                        let index = inner.parse::<usize>().map_err(|_| {
                            fail("brackets hold an index (`[0]`) or a quoted key (`[\"a b\"]`)")
                        })?;
                        segments.push(PathSegment::Index(index));
                    }
                    i = close + 1;
                }
                _ => return Err(fail("expected `.key` or `[index]` after `$`")),
            }
        }
        Ok(Self { segments })
    }

    /// The value at this path, if there is one.
    pub fn lookup<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        self.segments
            .iter()
            .try_fold(value, |current, segment| match segment {
                PathSegment::Key(key) => current.as_object()?.get(key),
                PathSegment::Index(index) => current.as_array()?.get(*index),
            })
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("$")?;
        for segment in &self.segments {
            match segment {
                PathSegment::Key(key)
                    if !key.is_empty()
                        && key
                            .chars()
                            .all(|c| c.is_alphanumeric() || c == '_' || c == '-') =>
                {
                    write!(f, ".{key}")?;
                }
                PathSegment::Key(key) => write!(f, "[{key:?}]")?,
                PathSegment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}
