//! The bodies of spyglass's benchmarks, shared by the bench targets (full scale, one
//! `name=value unit baseline=value ratio=value` line each) and by `tests/bench_smoke.rs`,
//! which runs every body once at tiny scale so none of them can rot.
#![allow(dead_code)]

pub mod consume;
pub mod execute;
pub mod frame;
pub mod http;
pub mod ingest;
pub mod latency;
pub mod memory;
pub mod otel;
pub mod postgres;
pub mod workload;

/// A figure as `scripts/bench` prints it: the measured value and its same-run baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub name: &'static str,
    pub value: f64,
    pub baseline: f64,
    pub unit: &'static str,
    /// Per-round ratios when the figure and its baseline ran in pairs, back to back: their
    /// median is the ratio, so a machine that slows down between rounds moves both sides
    /// of a pair alike instead of one median against the other.
    pub paired: Vec<f64>,
}

impl Figure {
    pub fn ratio(&self) -> f64 {
        if !self.paired.is_empty() {
            return median(&mut self.paired.clone());
        }
        if self.baseline == 0.0 {
            0.0
        } else {
            self.value / self.baseline
        }
    }

    /// `name=value unit baseline=value unit ratio=value`.
    pub fn line(&self) -> String {
        format!(
            "{}={} {} baseline={} {} ratio={:.2}",
            self.name,
            fmt_value(self.value),
            self.unit,
            fmt_value(self.baseline),
            self.unit,
            self.ratio()
        )
    }
}

/// Whole numbers for big figures, three significant decimals for small ones (ms).
fn fmt_value(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// True when the bench binary was asked for its figure line (`-- --figure`) rather than
/// for criterion's statistics.
pub fn figure_mode() -> bool {
    std::env::args().any(|a| a == "--figure")
}

/// Prints a figure line on stdout, or the error on stderr with a failing exit.
pub fn print_figure(figure: anyhow::Result<Figure>) {
    match figure {
        Ok(figure) => {
            if !figure.paired.is_empty() {
                let mut sorted = figure.paired.clone();
                sorted.sort_by(f64::total_cmp);
                eprintln!(
                    "{}: ratio is the median of {} paired rounds, {:.2}–{:.2}",
                    figure.name,
                    sorted.len(),
                    sorted[0],
                    sorted[sorted.len() - 1]
                );
            }
            println!("{}", figure.line());
        }
        Err(err) => {
            eprintln!("bench failed: {err:#}");
            std::process::exit(1);
        }
    }
}

pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The `q` quantile (0..=1) of `values`, nearest rank.
pub fn quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((values.len() as f64 * q).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

/// A tokio runtime with `workers` threads, as the binary would run.
pub fn tokio_rt(workers: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?)
}

// The allocator the spyglass binary runs with (src/main.rs), so the figures are its own.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
