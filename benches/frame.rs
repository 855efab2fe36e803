//! `frame` bench: `cargo bench --bench frame -- --figure` prints the figure line (the
//! slowest view at 1 M events against itself at 1 k, 10 k sessions) and every view's
//! timings on stderr; without `--figure`, criterion times each view at both sizes.

mod support;

use criterion::Criterion;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use spyglass::ui::render::draw;
use support::frame;

const SESSIONS: usize = 10_000;
const SMALL: usize = 1_000;
const LARGE: usize = 1_000_000;

fn main() {
    if support::figure_mode() {
        let result = frame::run(SESSIONS, SMALL, LARGE, 200);
        if let Ok(r) = &result {
            for v in &r.views {
                eprintln!(
                    "frame {:<10} {:>7.3} ms at {} events, {:>7.3} ms at {} (ratio {:.2})",
                    v.view,
                    v.small_ms,
                    SMALL,
                    v.large_ms,
                    LARGE,
                    v.ratio()
                );
            }
        }
        support::print_figure(result.and_then(|r| r.figure()));
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    for (label, events) in [("1k", SMALL), ("1M", LARGE)] {
        let Ok(mut app) = frame::app_with(SESSIONS, events) else {
            eprintln!("could not build the {label} model");
            std::process::exit(1);
        };
        // A TestBackend cannot fail to start.
        let Ok(mut terminal) = Terminal::new(TestBackend::new(frame::WIDTH, frame::HEIGHT));
        let mut group = c.benchmark_group(format!("frame_{label}"));
        for view in frame::views() {
            frame::show(&mut app, view);
            group.bench_function(view, |b| {
                b.iter(|| terminal.draw(|f| draw(f, &mut app)).map(|_| ()).is_ok());
            });
        }
        group.finish();
    }
    c.final_summary();
}
