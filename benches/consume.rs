//! `consume` bench: 64 concurrent clients drain a stateful mock over HTTP; throughput
//! against the same calls on a static mock, and exactness (successes = entries). An
//! inexact drain fails the bench.

mod support;

fn main() {
    let result = support::consume::run(64, 5_000, 6);
    if let Ok(r) = &result {
        eprintln!(
            "consume: {} clients, {} rounds; successes {} of {} entries, {} exhausted answers: {}",
            r.clients,
            r.rounds,
            r.successes,
            r.entries,
            r.exhausted,
            if r.exact { "exact" } else { "NOT EXACT" }
        );
        if !r.exact {
            std::process::exit(2);
        }
    }
    support::print_figure(result.map(|r| r.figure()));
}
