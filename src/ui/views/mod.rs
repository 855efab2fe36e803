//! One module per tab. Each exposes a `render` that reads the app and draws only what is
//! visible; tabs whose issue has not landed show a placeholder naming it.

pub mod diff;
pub mod evals;
pub mod placeholder;
pub mod sessions;

/// Fits text into `width` columns, with an ellipsis when cut.
pub fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// A duration in milliseconds, short: `850µs`, `3.5ms`, `120ms`, `2.3s`.
pub fn fmt_ms(ms: f64) -> String {
    if ms < 1.0 {
        format!("{:.0}µs", ms * 1000.0)
    } else if ms < 10.0 {
        format!("{ms:.1}ms")
    } else if ms < 1000.0 {
        format!("{ms:.0}ms")
    } else {
        format!("{:.1}s", ms / 1000.0)
    }
}

/// How long ago, short: `now`, `12s`, `3m`, `2h`, `4d`.
pub fn fmt_age(now_ms: f64, then_ms: Option<f64>) -> String {
    let Some(then) = then_ms else {
        return "-".into();
    };
    let secs = ((now_ms - then) / 1000.0).floor();
    if secs < 1.0 {
        "now".into()
    } else if secs < 60.0 {
        format!("{secs:.0}s")
    } else if secs < 3600.0 {
        format!("{:.0}m", (secs / 60.0).floor())
    } else if secs < 86_400.0 {
        format!("{:.0}h", (secs / 3600.0).floor())
    } else {
        format!("{:.0}d", (secs / 86_400.0).floor())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_forms() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
        assert_eq!(fmt_ms(0.25), "250µs");
        assert_eq!(fmt_ms(3.5), "3.5ms");
        assert_eq!(fmt_ms(2300.0), "2.3s");
        assert_eq!(fmt_age(10_000.0, Some(9_500.0)), "now");
        assert_eq!(fmt_age(200_000.0, Some(10_000.0)), "3m");
        assert_eq!(fmt_age(0.0, None), "-");
    }
}
