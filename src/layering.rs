//! The one-way arrows between the crate's rooms (docs/ARCHITECTURE.md), checked on the
//! source: a lower room that names a higher one fails the build's tests naming file and line.

use std::fs;
use std::path::{Path, PathBuf};

/// A room (a directory or file under `src/`, as the path starts) and the modules it must
/// not name through `crate::`.
struct Rule {
    rooms: &'static [&'static str],
    except: &'static [&'static str],
    forbidden: &'static [&'static str],
}

const RULES: &[Rule] = &[
    // The inspector's side and the shared layers never reach into the server or the roles.
    Rule {
        rooms: &["protocol/", "model/", "eval/", "client/", "ui/"],
        except: &[],
        forbidden: &["runtime", "roles"],
    },
    // The wire, the model and eval logic are shared by both roles: no terminal, no client.
    Rule {
        rooms: &["protocol/", "model/", "eval/"],
        except: &[],
        forbidden: &["ui", "client"],
    },
    // Spans are mapped without IO: the runtime calls in, never the other way.
    Rule {
        rooms: &["otel/"],
        except: &[],
        forbidden: &["runtime", "roles", "ui", "client"],
    },
    // The demo workload is started by its role only.
    Rule {
        rooms: &[""],
        except: &["roles/", "main.rs", "demo.rs"],
        forbidden: &["demo"],
    },
];

/// Every `.rs` file under `dir`, as paths relative to `root` with `/` separators.
fn rust_files(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(root, &path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            let rel = path.strip_prefix(root).expect("under root");
            let rel = rel.to_string_lossy().replace('\\', "/");
            out.push((rel, path));
        }
    }
}

/// The source without comments, so that a doc line may mention a module freely. Strings
/// are kept: a `crate::` path inside one is rare and then worth a look anyway.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut block = 0usize;
    while !rest.is_empty() {
        if block > 0 {
            if rest.starts_with("*/") {
                block -= 1;
                rest = &rest[2..];
            } else if rest.starts_with("/*") {
                block += 1;
                rest = &rest[2..];
            } else {
                let c = rest.chars().next().unwrap_or(' ');
                // Keep line breaks so that line numbers stay right.
                if c == '\n' {
                    out.push('\n');
                }
                rest = &rest[c.len_utf8()..];
            }
        } else if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            rest = &rest[end..];
        } else if rest.starts_with("/*") {
            block += 1;
            rest = &rest[2..];
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// Each top-level module named through `crate::`, with its 1-based line: `crate::a::b`
/// names `a`; `crate::{a, b::c}` names `a` and `b`.
fn crate_paths(code: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("crate::") {
        let start = from + at;
        from = start + "crate::".len();
        let before = code[..start].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let line = code[..start].matches('\n').count() + 1;
        let after = code[from..].trim_start();
        if let Some(group) = after.strip_prefix('{') {
            let mut depth = 0usize;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if c.is_whitespace() => {}
                    _ if item_start => {
                        item_start = false;
                        found.push((line, ident_at(&group[i..]).to_owned()));
                    }
                    _ => {}
                }
            }
        } else {
            found.push((line, ident_at(after).to_owned()));
        }
    }
    found
}

/// Every offence in the files given, as `file:line names crate::module`.
fn offences(files: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (rel, text) in files {
        let code = strip_comments(text);
        for rule in RULES {
            let in_room = rule.rooms.iter().any(|r| rel.starts_with(r));
            let excepted = rule.except.iter().any(|e| rel.starts_with(e));
            if !in_room || excepted {
                continue;
            }
            for (line, name) in crate_paths(&code) {
                if rule.forbidden.contains(&name.as_str()) {
                    out.push(format!("src/{rel}:{line} names crate::{name}"));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_layers_do_not_name_higher_ones() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut paths = Vec::new();
        rust_files(&root, &root, &mut paths);
        assert!(
            paths.len() > 50,
            "found only {} files under src/",
            paths.len()
        );
        let files: Vec<(String, String)> = paths
            .into_iter()
            .map(|(rel, path)| {
                let text =
                    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                (rel, text)
            })
            .collect();
        let found = offences(&files);
        assert!(
            found.is_empty(),
            "layering broken (docs/ARCHITECTURE.md):\n{}",
            found.join("\n")
        );
    }

    fn one(rel: &str, text: &str) -> Vec<String> {
        offences(&[(rel.to_owned(), text.to_owned())])
    }

    #[test]
    fn an_offence_is_reported_with_file_and_line() {
        let text = "//! Doc.\n\nuse crate::protocol::Frame;\nuse crate::runtime::Runtime;\n";
        assert_eq!(
            one("model/x.rs", text),
            ["src/model/x.rs:4 names crate::runtime"]
        );
        assert_eq!(
            one("ui/app.rs", "fn f() { crate::roles::run(); }"),
            ["src/ui/app.rs:1 names crate::roles"]
        );
        assert_eq!(
            one("eval/a.rs", "use crate::client::RestClient;"),
            ["src/eval/a.rs:1 names crate::client"]
        );
        assert_eq!(
            one("glob.rs", "use crate::demo::Pace;"),
            ["src/glob.rs:1 names crate::demo"]
        );
    }

    #[test]
    fn grouped_imports_are_read_item_by_item() {
        let text = "use crate::{\n    model::Model,\n    runtime::{Runtime, RuntimeConfig},\n};";
        assert_eq!(
            one("protocol/p.rs", text),
            ["src/protocol/p.rs:1 names crate::runtime"]
        );
    }

    #[test]
    fn comments_allowed_rooms_and_lookalikes_are_not_offences() {
        let text = "// crate::runtime\n/* crate::roles /* nested */ crate::ui */\n\
                    /// See [`crate::runtime`].\nuse crate::protocol::Frame;\n\
                    fn f() { my_crate::runtime::x(); }\n";
        assert!(one("model/m.rs", text).is_empty());
        assert!(one("client/c.rs", "use crate::ui::App;").is_empty());
        assert!(one("roles/demo.rs", "use crate::demo::run;").is_empty());
        assert!(one("runtime/mod.rs", "use crate::client::RestClient;").is_empty());
    }
}
