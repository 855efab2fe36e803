//! The Approvals tab's confirm prompt: what `a`/`d` ask before anything is sent, for one
//! call (the tool, the session and what the rule saw) or for every marked call.

use super::{Prompt, condition_fields, input_cell};
use crate::model::Approval;
use crate::ui::action::Action;
use crate::ui::views::{Cx, fit, key_label, wrap_words};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use spyglass_protocol::sanitize::shown;

/// `text` masked, made terminal-safe and wrapped into lines of `width`, in `style`.
fn said(text: &str, style: Style, width: usize) -> impl Iterator<Item = Line<'static>> {
    wrap_words(&shown(text), width)
        .into_iter()
        .map(move |l| Line::from(Span::styled(l, style)))
}

/// What the rule looked at, in one sentence: `rule payments: input.value = 5000 (when
/// input.value > 1000)`, or the rule's message when the frame carried no condition.
fn rule_sentence(a: &Approval) -> String {
    let rule = format!("rule {}", a.rule_id);
    match &a.condition {
        Some(condition) => {
            let fields = condition_fields(condition, &a.input).join(", ");
            format!("{rule}: {fields} (when {condition})")
        }
        None if !a.message.is_empty() => format!("{rule}: {}", a.message),
        None => rule,
    }
}

pub(super) fn prompt_lines(prompt: &Prompt, cx: &Cx, width: usize) -> Vec<Line<'static>> {
    let theme = cx.theme;
    let verb = if prompt.approve { "Approve" } else { "Deny" };
    if !prompt.also.is_empty() {
        return marked_prompt_lines(prompt, verb, cx, width);
    }
    let approval = cx.model.approvals.get(&prompt.approval_id);
    let what = approval
        .map(|a| format!("{} for {}", a.tool, a.session_id))
        .unwrap_or_default();
    let key = |a: Action| key_label(cx.keymap, a);
    let mut lines = Vec::new();
    let mut say = |text: &str, style: Style| lines.extend(said(text, style, width));
    say(
        &format!("{verb} {what} ({})?", prompt.approval_id),
        theme.warn().add_modifier(Modifier::BOLD),
    );
    if let Some(a) = approval {
        say(&rule_sentence(a), Style::default());
    }
    if prompt.editing_note {
        say(&format!("note: {}▏", prompt.note), theme.accent());
        say(
            &format!(
                "{} keeps the note, {} drops it",
                key(Action::Open),
                key(Action::Back)
            ),
            theme.muted(),
        );
    } else {
        if !prompt.note.is_empty() {
            say(&format!("note: {}", prompt.note), theme.accent());
        }
        say(
            &format!(
                "{} confirm · {} add a note · any other key cancels",
                key(Action::Confirm),
                key(Action::Note)
            ),
            theme.muted(),
        );
    }
    lines
}

/// The prompt for several marked calls: how many, which, and each one's tool and the
/// input the rule saw (one line each, as the list shows it), so nothing is decided unseen.
fn marked_prompt_lines(prompt: &Prompt, verb: &str, cx: &Cx, width: usize) -> Vec<Line<'static>> {
    let theme = cx.theme;
    let count = prompt.also.len() + 1;
    let ids: Vec<&str> = std::iter::once(prompt.approval_id.as_str())
        .chain(prompt.also.iter().map(String::as_str))
        .collect();
    let key = |a: Action| key_label(cx.keymap, a);
    let mut lines: Vec<Line<'static>> = said(
        &format!("{verb} all {count} marked calls?"),
        theme.warn().add_modifier(Modifier::BOLD),
        width,
    )
    .chain(said(&ids.join(", "), Style::default(), width))
    .collect();
    lines.extend(ids.iter().map(|id| {
        let call = cx.model.approvals.get(id).map_or_else(
            || format!("  {id}"),
            |a| format!("  {id}: {} {}", a.tool, input_cell(a)),
        );
        Line::from(fit(&shown(&call), width))
    }));
    if prompt.editing_note {
        lines.extend(said(
            &format!("note (for all {count}): {}▏", prompt.note),
            theme.accent(),
            width,
        ));
    } else {
        if !prompt.note.is_empty() {
            lines.extend(said(
                &format!("note: {}", prompt.note),
                theme.accent(),
                width,
            ));
        }
        lines.extend(said(
            &format!(
                "{} confirm all {count} · {} add a note · any other key cancels",
                key(Action::Confirm),
                key(Action::Note)
            ),
            theme.muted(),
            width,
        ));
    }
    lines
}
