//! A usage error clap refused, printed in the CLI's one error form (`spyglass <role>:
//! <message>`, then clap's tip and usage line) with exit 2.

use crate::sanitize::sanitize_text;
use std::process::ExitCode;

/// Every role's name, and `store`'s operations (its errors name the operation, as
/// `main` prefixes them), for naming a usage error's role.
pub fn role_names(command: &clap::Command) -> Vec<(String, Vec<String>)> {
    command
        .get_subcommands()
        .map(|sub| {
            let ops = sub
                .get_subcommands()
                .filter(|_| sub.get_name() == "store")
                .map(|op| op.get_name().to_owned());
            (sub.get_name().to_owned(), ops.collect())
        })
        .collect()
}

/// The role a command line names, as its errors are prefixed: `spyglass tail`, `spyglass
/// store migrate`, or `spyglass` when the first word is no role (a flag's value, a typo).
fn role_prefix(args: &[String], names: &[(String, Vec<String>)]) -> String {
    let mut words = args.iter().skip(1).filter(|a| !a.starts_with('-'));
    let Some((role, ops)) = words
        .next()
        .and_then(|first| names.iter().find(|(name, _)| name == first))
    else {
        return "spyglass".to_owned();
    };
    match words.next().filter(|op| ops.contains(op)) {
        Some(op) => format!("spyglass {role} {op}"),
        None => format!("spyglass {role}"),
    }
}

/// clap's refusal in the CLI's one error form: its first line reads `spyglass <role>:
/// <message>`, then clap's tip and usage line as clap wrote them; exit 2. `--help` and
/// `--version` print as clap prints them.
pub fn refuse(err: &clap::Error, names: &[(String, Vec<String>)]) -> ExitCode {
    if !err.use_stderr() {
        err.exit();
    }
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let prefix = role_prefix(&args, names);
    let text = err.render().to_string();
    let message = text.strip_prefix("error: ").unwrap_or(&text);
    eprint!("{prefix}: {}", sanitize_text(message));
    ExitCode::from(super::EXIT_USAGE)
}

/// How errors name the role a parsed command line runs (`spyglass <role>: <message>`,
/// `spyglass store <op>: …`), and that role's own matches.
pub fn role_of(matches: &clap::ArgMatches) -> (String, &clap::ArgMatches) {
    match matches.subcommand() {
        None => ("spyglass".to_owned(), matches),
        Some(("store", sub)) => {
            let op = sub.subcommand_name().unwrap_or_default();
            (format!("spyglass store {op}"), sub)
        }
        Some((name, sub)) => (format!("spyglass {name}"), sub),
    }
}
