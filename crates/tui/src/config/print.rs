//! The text of `spyglass --print-config`: every resolved setting with its source, every
//! key binding and every path, with the API key masked.

use super::History;
use super::keys::Action;
use super::resolve::{Resolved, Source};
use super::theme::ThemeSource;
use std::fmt::{self, Write as _};
use std::path::PathBuf;

impl Resolved {
    /// The text of `spyglass --print-config`: every setting with where it came from, and
    /// every path. The API key is masked.
    pub fn print_config(&self) -> String {
        let mut out = String::from(
            "spyglass configuration (flags > environment > config file > defaults)\n\nsettings:\n",
        );
        let mut line = |name: &str, value: &str, source: &dyn fmt::Display| {
            let _ = writeln!(out, "  {name:<26} {value:<36} ({source})");
        };
        let url = self
            .url
            .value
            .clone()
            .unwrap_or_else(|| "(none: start an embedded runtime)".to_string());
        let key = self
            .api_key
            .value
            .as_ref()
            .map_or_else(|| "(none)".to_string(), ToString::to_string);
        let theme = match &self.theme_source {
            ThemeSource::BuiltIn(_) => self.theme_name.value.clone(),
            ThemeSource::File(path) => format!("{} ({})", self.theme_name.value, path.display()),
        };

        line("url", &url, &self.url.source);
        line("api_key", &key, &self.api_key.source);
        let project = self
            .project
            .value
            .clone()
            .unwrap_or_else(|| "(default)".to_string());
        line("project", &project, &self.project.source);
        line("theme", &theme, &self.theme_name.source);
        line("mouse", &self.mouse.value.to_string(), &self.mouse.source);
        for (name, source) in History::KEYS.iter().zip(&self.history_sources) {
            let value = self.history.get(name).unwrap_or_default().to_string();
            line(&format!("history.{name}"), &value, source);
        }

        out.push_str("\nkeys:\n");
        for action in Action::ALL {
            let source = if self.keys_from_file.contains(&action) {
                Source::File
            } else {
                Source::Default
            };
            let _ = writeln!(
                out,
                "  {:<26} {:<36} ({source})",
                format!("keys.{}", action.name()),
                self.keys.describe(action)
            );
        }

        let path_or = |p: &Option<PathBuf>| {
            p.as_ref().map_or_else(
                || "(none: HOME is not set)".to_string(),
                |p| p.display().to_string(),
            )
        };
        out.push_str("\npaths:\n");
        let config_note = if self.config_file_found {
            "found"
        } else {
            "not found: defaults used"
        };
        let _ = writeln!(
            out,
            "  {:<26} {} ({config_note})",
            "config file",
            path_or(&self.paths.config_file)
        );
        let _ = writeln!(
            out,
            "  {:<26} {}",
            "theme dir",
            path_or(&self.paths.theme_dir)
        );
        let _ = writeln!(out, "  {:<26} {}", "theme in use", self.theme_source);
        let _ = writeln!(
            out,
            "  {:<26} {}",
            "log file",
            path_or(&self.paths.log_file)
        );

        if !self.warnings.is_empty() {
            out.push_str("\nwarnings:\n");
            for w in &self.warnings {
                let _ = writeln!(out, "  {w}");
            }
        }
        out
    }
}
