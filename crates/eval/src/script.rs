//! The scripted model's rules shared by the runtime and suite files: checking a script
//! (`strict`, `retries`, `when` branches) and picking a step's answer from the last tool
//! outcome; also the prompts the fake model received, bounded, for `prompted` assertions.

use super::assert::{JsonPath, json_equal};
use serde_json::{Value, json};
use spyglass_protocol::rest::{ModelScript, ScriptBranch, ScriptStep};
use std::fmt::Write as _;

/// The most retries a script may ask for: each is one more model call per iteration.
pub const MAX_RETRIES: u32 = 10;
/// The most bytes one recorded prompt keeps (its messages as JSON).
pub const PROMPT_BYTES: usize = 32 * 1024;
/// The most bytes one run's recorded prompts keep together.
pub const RUN_PROMPT_BYTES: usize = 512 * 1024;
/// A longer text in a recorded message is cut to this many bytes.
pub const MESSAGE_TEXT_BYTES: usize = 4 * 1024;

/// One segment of where in a script a problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

fn key(name: &str) -> Seg {
    Seg::Key(name.to_owned())
}

/// A script that cannot run as written: where (`field_pointer` for the wire,
/// `field_dotted` for suite files) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptProblem {
    at: Vec<Seg>,
    pub message: String,
}

impl ScriptProblem {
    /// `/sequence/1/when/0/path`: relative to the script.
    pub fn field_pointer(&self) -> String {
        self.at
            .iter()
            .map(|seg| match seg {
                Seg::Key(key) => format!("/{}", key.replace('~', "~0").replace('/', "~1")),
                Seg::Index(i) => format!("/{i}"),
            })
            .collect()
    }

    /// `sequence[1].when[0].path`: relative to the script.
    pub fn field_dotted(&self) -> String {
        let mut out = String::new();
        for seg in &self.at {
            match seg {
                Seg::Key(key) if out.is_empty() => out.push_str(key),
                Seg::Key(key) => {
                    let _ = write!(out, ".{key}");
                }
                Seg::Index(i) => {
                    let _ = write!(out, "[{i}]");
                }
            }
        }
        out
    }
}

fn problem(at: &[Seg], message: impl Into<String>) -> ScriptProblem {
    ScriptProblem {
        at: at.to_vec(),
        message: message.into(),
    }
}

fn with(at: &[Seg], more: &[Seg]) -> Vec<Seg> {
    let mut out = at.to_vec();
    out.extend_from_slice(more);
    out
}

/// Reads a script from JSON and checks it: a wrong type or an unknown key is named by
/// where it sits (`sequence[0].when[0].then.text`), then [`check`].
pub fn parse(value: &Value) -> Result<ModelScript, ScriptProblem> {
    let script: ModelScript = serde_path_to_error::deserialize(value).map_err(|err| {
        let at = err
            .path()
            .iter()
            .filter_map(|seg| match seg {
                serde_path_to_error::Segment::Seq { index } => Some(Seg::Index(*index)),
                serde_path_to_error::Segment::Map { key } => Some(Seg::Key(key.clone())),
                serde_path_to_error::Segment::Enum { variant } => Some(Seg::Key(variant.clone())),
                serde_path_to_error::Segment::Unknown => None,
            })
            .collect::<Vec<_>>();
        problem(&at, err.into_inner().to_string())
    })?;
    check(&script)?;
    Ok(script)
}

/// What serde cannot say about a script: `retries` in bounds, and branching steps well
/// formed (a condition each, a path that parses, `equals` with its `path`, no branch
/// inside a branch, no text or tool calls beside `when`).
pub fn check(script: &ModelScript) -> Result<(), ScriptProblem> {
    if script.retries > MAX_RETRIES {
        return Err(problem(
            &[key("retries")],
            format!("retries is {}; the most is {MAX_RETRIES}", script.retries),
        ));
    }
    for (i, step) in script.sequence.iter().enumerate() {
        check_step(step, &[key("sequence"), Seg::Index(i)], true)?;
    }
    Ok(())
}

fn check_step(step: &ScriptStep, at: &[Seg], may_branch: bool) -> Result<(), ScriptProblem> {
    let branches = !step.when.is_empty();
    if !may_branch && (branches || step.otherwise.is_some()) {
        let key = if branches { "when" } else { "else" };
        return Err(problem(
            &with(at, &[Seg::Key(key.to_owned())]),
            "a branch's answer cannot branch again; put the conditions on the step",
        ));
    }
    if step.otherwise.is_some() && !branches {
        return Err(problem(
            &with(at, &[key("else")]),
            "`else` needs `when` branches beside it",
        ));
    }
    if branches && (step.text.is_some() || !step.tool_calls.is_empty()) {
        let key = if step.text.is_some() {
            "text"
        } else {
            "tool_calls"
        };
        return Err(problem(
            &with(at, &[Seg::Key(key.to_owned())]),
            "a step with `when` answers through its branches' `then` and its `else`; move this into `else`",
        ));
    }
    if branches && step.delay_ms.is_some() {
        return Err(problem(
            &with(at, &[key("delay_ms")]),
            "a step with `when` takes its delay from the answer it picks; put `delay_ms` in `then` / `else`",
        ));
    }
    for (b, branch) in step.when.iter().enumerate() {
        let here = with(at, &[key("when"), Seg::Index(b)]);
        check_branch(branch, &here)?;
        check_step(&branch.then, &with(&here, &[key("then")]), false)?;
    }
    if let Some(otherwise) = &step.otherwise {
        check_step(otherwise, &with(at, &[key("else")]), false)?;
    }
    Ok(())
}

fn check_branch(branch: &ScriptBranch, at: &[Seg]) -> Result<(), ScriptProblem> {
    if branch.envelope.is_none()
        && branch.tool.is_none()
        && branch.path.is_none()
        && branch.equals.is_none()
    {
        return Err(problem(
            at,
            "a branch needs a condition: `envelope`, `tool`, or `path` with `equals`",
        ));
    }
    for (key, value) in [("envelope", &branch.envelope), ("tool", &branch.tool)] {
        if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
            return Err(problem(
                &with(at, &[Seg::Key(key.to_owned())]),
                "must not be empty",
            ));
        }
    }
    match (&branch.path, &branch.equals) {
        (Some(path), Some(_)) => {
            JsonPath::parse(path)
                .map_err(|err| problem(&with(at, &[key("path")]), err.to_string()))?;
        }
        (Some(_), None) => {
            return Err(problem(
                &with(at, &[key("equals")]),
                "missing: the value expected at `path`",
            ));
        }
        (None, Some(_)) => {
            return Err(problem(
                &with(at, &[key("path")]),
                "missing: `equals` compares the value at a `path` like \"$.status\"",
            ));
        }
        (None, None) => {}
    }
    Ok(())
}

/// Every tool call a script may make, branches included (for the size cap).
pub fn tool_call_count(script: &ModelScript) -> usize {
    fn of(step: &ScriptStep) -> usize {
        step.tool_calls.len()
            + step.when.iter().map(|b| of(&b.then)).sum::<usize>()
            + step.otherwise.as_deref().map_or(0, of)
    }
    script.sequence.iter().map(of).sum()
}

/// The last tool call's outcome before a model call, as a branch reads it.
#[derive(Debug, Clone, Copy)]
pub struct LastOutcome<'a> {
    /// Canonical `server/tool`.
    pub tool: &'a str,
    /// What the model was handed: the result, or the envelope whole.
    pub output: &'a Value,
    /// The envelope code when the call returned one.
    pub code: Option<&'a str>,
}

/// Whether every condition of `branch` holds on `last` (none holds before any call).
pub fn branch_holds(branch: &ScriptBranch, last: Option<&LastOutcome<'_>>) -> bool {
    let Some(last) = last else {
        return false;
    };
    let envelope = branch
        .envelope
        .as_deref()
        .is_none_or(|code| last.code == Some(code));
    let tool = branch.tool.as_deref().is_none_or(|name| {
        if name.contains('/') {
            name == last.tool
        } else {
            last.tool.rsplit('/').next() == Some(name)
        }
    });
    let path = match (&branch.path, &branch.equals) {
        (Some(path), Some(expected)) => JsonPath::parse(path)
            .ok()
            .and_then(|path| path.lookup(last.output).cloned())
            .is_some_and(|found| json_equal(&found, expected)),
        _ => true,
    };
    envelope && tool && path
}

/// Which answer a step gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Picked<'a> {
    /// A plain step: itself.
    Step(&'a ScriptStep),
    /// Branch `index`'s `then`.
    Branch(usize, &'a ScriptStep),
    /// No branch held: the `else`.
    Else(&'a ScriptStep),
    /// No branch held and there is no `else`.
    Nothing,
}

/// The answer of `step` given the last tool outcome: a plain step is itself; a
/// branching one the first branch that holds, else its `else`.
pub fn pick<'a>(step: &'a ScriptStep, last: Option<&LastOutcome<'_>>) -> Picked<'a> {
    if step.when.is_empty() {
        return Picked::Step(step);
    }
    if let Some((i, branch)) = step
        .when
        .iter()
        .enumerate()
        .find(|(_, b)| branch_holds(b, last))
    {
        return Picked::Branch(i, &branch.then);
    }
    step.otherwise
        .as_deref()
        .map_or(Picked::Nothing, Picked::Else)
}

/// The messages the fake model received at one model call (zero-based, as `fail_on_step`
/// counts them), bounded by [`PROMPT_BYTES`]; `cut` says something was left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptRecord {
    pub call: u32,
    pub iteration: u32,
    pub messages: Vec<Value>,
    pub cut: bool,
}

impl PromptRecord {
    /// The prompt as text, one message a line: text as it is, a tool call as
    /// `name {arguments}`, a tool result as `name {output}` (what `contains` and `matches`
    /// search).
    pub fn text(&self) -> String {
        let mut out = String::new();
        for message in &self.messages {
            let mut line = |text: &str| {
                if !text.is_empty() {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(text);
                }
            };
            if message.get("role").and_then(Value::as_str) == Some("tool") {
                let name = message.get("name").and_then(Value::as_str).unwrap_or("");
                let content = message.get("content").map_or_else(String::new, |c| {
                    c.as_str().map_or_else(|| c.to_string(), str::to_owned)
                });
                line(&format!("{name} {content}"));
                continue;
            }
            if let Some(text) = message.get("content").and_then(Value::as_str) {
                line(text);
            }
            for call in message
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let name = call.get("name").and_then(Value::as_str).unwrap_or("");
                let args = call.get("arguments").cloned().unwrap_or(Value::Null);
                line(&format!("{name} {args}"));
            }
        }
        out
    }
}

/// The conversation a scripted run holds, as the fake model receives it: the user's
/// message, each answer with its tool calls, and each call's output.
#[derive(Debug, Clone, Default)]
pub struct Conversation {
    messages: Vec<Value>,
    /// Some message was kept cut when it was added (a long text, a big output).
    cut: bool,
    /// Bytes the run's records hold so far (bounded by [`RUN_PROMPT_BYTES`]).
    recorded: usize,
    pub records: Vec<PromptRecord>,
}

impl Conversation {
    pub fn new(message: &str) -> Self {
        let mut conversation = Self::default();
        let content = conversation.text(message);
        conversation
            .messages
            .push(json!({"role": "user", "content": content}));
        conversation
    }

    /// A text as kept: cut past [`MESSAGE_TEXT_BYTES`], noting it.
    fn text(&mut self, text: &str) -> String {
        self.cut |= text.len() > MESSAGE_TEXT_BYTES;
        cut_text(text)
    }

    /// A JSON value as kept: one over twice [`MESSAGE_TEXT_BYTES`] becomes its cut text,
    /// so a run's conversation stays small whatever its tools return.
    fn value(&mut self, value: &Value) -> Value {
        if size(value) <= 2 * MESSAGE_TEXT_BYTES {
            return value.clone();
        }
        self.cut = true;
        Value::String(cut_text(&value.to_string()))
    }

    /// Keeps what the model receives at this call.
    pub fn record(&mut self, call: u32, iteration: u32) {
        let room = PROMPT_BYTES.min(RUN_PROMPT_BYTES.saturating_sub(self.recorded));
        let (messages, cut, bytes) = bounded(&self.messages, room);
        self.recorded += bytes;
        self.records.push(PromptRecord {
            call,
            iteration,
            messages,
            cut: cut || self.cut,
        });
    }

    /// The model's answer: its text and the calls it made (`id`, `name`, `arguments`).
    pub fn answered(&mut self, text: &str, calls: &[(String, String, Value)]) {
        let content = self.text(text);
        let mut message = json!({"role": "assistant", "content": content});
        if !calls.is_empty() {
            let calls: Vec<Value> = calls
                .iter()
                .map(|(id, name, arguments)| {
                    let arguments = self.value(arguments);
                    json!({"id": id, "name": name, "arguments": arguments})
                })
                .collect();
            message["tool_calls"] = Value::Array(calls);
        }
        self.messages.push(message);
    }

    /// One call's output, handed back to the model.
    pub fn tool_result(&mut self, id: &str, name: &str, output: &Value) {
        let content = self.value(output);
        self.messages.push(json!({
            "role": "tool",
            "tool_call_id": id,
            "name": name,
            "content": content,
        }));
    }
}

fn cut_text(text: &str) -> String {
    if text.len() <= MESSAGE_TEXT_BYTES {
        return text.to_owned();
    }
    let mut end = MESSAGE_TEXT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} bytes cut]", &text[..end], text.len() - end)
}

fn size(value: &Value) -> usize {
    serde_json::to_vec(value).map_or(0, |v| v.len())
}

/// The messages within `room` bytes: a message over a quarter of it keeps its role and a
/// cut copy of its JSON text; past the room, the oldest after the first are left out (a
/// marker says how many). Returns the kept messages, whether anything was cut, and bytes.
fn bounded(messages: &[Value], room: usize) -> (Vec<Value>, bool, usize) {
    let mut cut = false;
    let shrunk: Vec<(Value, usize)> = messages
        .iter()
        .map(|m| {
            let bytes = size(m);
            if bytes <= room / 4 {
                return (m.clone(), bytes);
            }
            cut = true;
            let role = m.get("role").cloned().unwrap_or(Value::Null);
            let text = cut_text(&m.to_string());
            let keep = text.len().min(room / 4);
            let mut end = keep;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let small = json!({"role": role, "content": &text[..end]});
            let bytes = size(&small);
            (small, bytes)
        })
        .collect();
    let total: usize = shrunk.iter().map(|(_, b)| *b).sum();
    if total <= room {
        return (shrunk.into_iter().map(|(m, _)| m).collect(), cut, total);
    }
    // Keep the first message (the user's ask) and the newest that fit.
    let mut used = 64;
    let mut tail = Vec::new();
    let first = shrunk.first().cloned();
    if let Some((_, bytes)) = &first {
        used += bytes;
    }
    for (message, bytes) in shrunk.iter().skip(1).rev() {
        if used + bytes > room {
            break;
        }
        used += bytes;
        tail.push(message.clone());
    }
    tail.reverse();
    let dropped = shrunk.len().saturating_sub(1 + tail.len());
    let mut out = Vec::with_capacity(tail.len() + 2);
    if let Some((message, bytes)) = first
        && bytes <= room
    {
        out.push(message);
    }
    out.push(json!({"role": "spyglass", "content": format!("{dropped} message(s) cut to keep the prompt within {room} bytes")}));
    out.extend(tail);
    (out, true, used)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(value: Value) -> ModelScript {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn problems_name_the_field_both_ways() {
        let bad = script(json!({"sequence": [{"text": "a"},
            {"when": [{"path": "status", "equals": 1, "then": {"text": "x"}}]}]}));
        let err = check(&bad).unwrap_err();
        assert_eq!(err.field_pointer(), "/sequence/1/when/0/path");
        assert_eq!(err.field_dotted(), "sequence[1].when[0].path");
        assert!(err.message.contains("must start with `$`"), "{err:?}");
        let too_many = script(json!({"retries": 11}));
        assert_eq!(check(&too_many).unwrap_err().field_dotted(), "retries");
        let nested = script(json!({"sequence": [{"when": [{"envelope": "x",
            "then": {"when": [{"envelope": "y", "then": {}}]}}]}]}));
        assert_eq!(
            check(&nested).unwrap_err().field_dotted(),
            "sequence[0].when[0].then.when"
        );
        let lonely = script(json!({"sequence": [{"else": {"text": "x"}}]}));
        assert_eq!(
            check(&lonely).unwrap_err().field_dotted(),
            "sequence[0].else"
        );
        let beside =
            script(json!({"sequence": [{"text": "t", "when": [{"tool": "a", "then": {}}]}]}));
        assert_eq!(
            check(&beside).unwrap_err().field_dotted(),
            "sequence[0].text"
        );
        let bare = script(json!({"sequence": [{"when": [{"then": {}}]}]}));
        assert_eq!(
            check(&bare).unwrap_err().field_dotted(),
            "sequence[0].when[0]"
        );
        let no_path = script(json!({"sequence": [{"when": [{"equals": 1, "then": {}}]}]}));
        assert_eq!(
            check(&no_path).unwrap_err().field_dotted(),
            "sequence[0].when[0].path"
        );
    }

    #[test]
    fn branches_pick_by_the_last_outcome() {
        let step: ScriptStep = serde_json::from_value(json!({
            "when": [
                {"envelope": "rate_limited", "then": {"text": "later"}},
                {"tool": "get_payment", "path": "$.status", "equals": "PAID", "then": {"text": "paid"}}
            ],
            "else": {"text": "pending"}
        }))
        .unwrap();
        let paid = json!({"status": "PAID"});
        let last = LastOutcome {
            tool: "asaas/get_payment",
            output: &paid,
            code: None,
        };
        assert!(
            matches!(pick(&step, Some(&last)), Picked::Branch(1, s) if s.text.as_deref() == Some("paid"))
        );
        let env = json!({"code": "rate_limited"});
        let limited = LastOutcome {
            tool: "asaas/get_payment",
            output: &env,
            code: Some("rate_limited"),
        };
        assert!(matches!(pick(&step, Some(&limited)), Picked::Branch(0, _)));
        assert!(
            matches!(pick(&step, None), Picked::Else(s) if s.text.as_deref() == Some("pending"))
        );
        let other = LastOutcome {
            tool: "other/get_payment_x",
            output: &paid,
            code: None,
        };
        assert!(matches!(pick(&step, Some(&other)), Picked::Else(_)));
    }

    #[test]
    fn recorded_prompts_stay_within_their_bytes() {
        let mut conversation = Conversation::new("Charge R$5");
        conversation.record(0, 0);
        let big = json!({"blob": "x".repeat(100_000)});
        for i in 0..40 {
            let id = format!("c{i}");
            conversation.answered("", &[(id.clone(), "a/b".to_owned(), json!({"i": i}))]);
            conversation.tool_result(&id, "a/b", &big);
            conversation.record(i + 1, i + 1);
        }
        let first = &conversation.records[0];
        assert!(!first.cut);
        assert_eq!(first.text(), "Charge R$5");
        for record in &conversation.records {
            let bytes: usize = record.messages.iter().map(size).sum();
            assert!(bytes <= PROMPT_BYTES, "{bytes}");
        }
        let total: usize = conversation
            .records
            .iter()
            .flat_map(|r| r.messages.iter().map(size))
            .sum();
        assert!(total <= RUN_PROMPT_BYTES + 64 * 41, "{total}");
        assert!(conversation.records[5].cut);
        // The user's ask is kept ahead of the newest messages.
        assert!(conversation.records[5].text().starts_with("Charge R$5"));
    }
}
