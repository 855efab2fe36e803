//! The inspector's words for amounts: one duration format (`fmt_ms`) that every view and
//! `spyglass tail` use, and counted nouns (`plural`: `1 step`, `4 runs`).

/// The widest [`fmt_ms`] ever answers (characters): the DUR columns are sized by it.
pub const FMT_MS_MAX: usize = 7;

/// A duration in milliseconds, short: µs below 1 ms (`13µs`), ms with one decimal below
/// 1 s (`3.5ms`, `120.0ms`), then s with one decimal (`2.3s`), then `17m` and `5h`.
/// Total: a recording may claim any number, so a negative or non-finite one shows as
/// `—` and a huge one saturates at `>999h`; never wider than [`FMT_MS_MAX`].
pub fn fmt_ms(ms: f64) -> String {
    if !ms.is_finite() || ms < 0.0 {
        "—".into()
    } else if ms == 0.0 {
        // Not `{:.0}` of -0.0, which prints `-0`.
        "0µs".into()
    } else if ms < 0.9995 {
        format!("{:.0}µs", ms * 1000.0)
    } else if ms < 999.95 {
        format!("{ms:.1}ms")
    } else if ms < 999_950.0 {
        format!("{:.1}s", ms / 1000.0)
    } else if ms < 999.5 * 60_000.0 {
        format!("{:.0}m", ms / 60_000.0)
    } else if ms < 999.5 * 3_600_000.0 {
        format!("{:.0}h", ms / 3_600_000.0)
    } else {
        ">999h".into()
    }
}

/// `n` and `noun`, the noun plural unless `n` is one: `1 step`, `0 steps`, `4 runs`.
pub fn plural(n: impl TryInto<u64>, noun: &str) -> String {
    let n: u64 = n.try_into().unwrap_or(u64::MAX);
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_duration_format() {
        assert_eq!(fmt_ms(0.013), "13µs");
        assert_eq!(fmt_ms(0.25), "250µs");
        assert_eq!(fmt_ms(0.9996), "1.0ms");
        assert_eq!(fmt_ms(3.5), "3.5ms");
        assert_eq!(fmt_ms(12.0), "12.0ms");
        assert_eq!(fmt_ms(120.0), "120.0ms");
        assert_eq!(fmt_ms(999.96), "1.0s");
        assert_eq!(fmt_ms(2300.0), "2.3s");
        assert_eq!(fmt_ms(0.0), "0µs");
        assert_eq!(fmt_ms(-0.0), "0µs");
        assert_eq!(fmt_ms(999_000.0), "999.0s");
        assert_eq!(fmt_ms(1_500_000.0), "25m");
        assert_eq!(fmt_ms(7_200_000.0), "120m");
        assert_eq!(fmt_ms(72_000_000.0), "20h");
        assert_eq!(fmt_ms(3_600_000.0 * 999.0), "999h");
    }

    #[test]
    fn counted_nouns() {
        assert_eq!(plural(1u32, "step"), "1 step");
        assert_eq!(plural(0u32, "case"), "0 cases");
        assert_eq!(plural(4u64, "run"), "4 runs");
    }

    #[test]
    fn a_duration_no_recording_can_widen_past_its_column() {
        for ms in [
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -1.0,
            -1e-300,
            -1e308,
        ] {
            assert_eq!(fmt_ms(ms), "—", "{ms}");
        }
        for ms in [1e308, f64::MAX, 3_600_000.0 * 999.5, 1e12] {
            assert_eq!(fmt_ms(ms), ">999h", "{ms}");
        }
        // Every boundary, and either side of where rounding carries into a wider form.
        let mut ms = 1e-6;
        while ms < 1e15 {
            for probe in [ms, ms * 0.9995, ms * 1.0005] {
                let shown = fmt_ms(probe);
                assert!(shown.chars().count() <= FMT_MS_MAX, "{probe} -> {shown}");
            }
            ms *= 1.07;
        }
        for edge in [
            0.9995,
            9.95,
            999.5,
            999.95,
            999_949.0,
            999_950.0,
            59_970_000.0,
            3_598_200_000.0,
        ] {
            let shown = fmt_ms(edge);
            assert!(shown.chars().count() <= FMT_MS_MAX, "{edge} -> {shown}");
        }
    }
}
