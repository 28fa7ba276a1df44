//! Entry timestamps: ISO-8601 strings with milliseconds and `Z` (`2025-12-08T22:41:05.306Z`),
//! converted to and from the epoch milliseconds that messages carry (spec §0.2, §2.2).
//!
//! Hand-written instead of pulling a date crate into the pure core: the format is fixed, and the
//! conversion must match JavaScript's `Date.parse` for the strings pi writes.

/// Epoch milliseconds of an ISO-8601 date-time (`YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM]`), as
/// JavaScript's `Date.parse` gives for it; `None` when the text is not of that form.
pub fn iso_to_epoch_ms(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(range)?;
        part.iter().try_fold(0i64, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
        })
    };
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 24
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut rest = &b[19..];
    let mut millis = 0i64;
    if let Some((b'.', frac)) = rest.split_first() {
        let digits = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        // JavaScript keeps millisecond precision: further digits are truncated.
        for (i, &c) in frac[..digits].iter().take(3).enumerate() {
            millis += i64::from(c - b'0') * [100, 10, 1][i];
        }
        rest = &frac[digits..];
    }
    let offset_minutes = match rest {
        [] | [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digits = [*h1, *h2, *m1, *m2];
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let minutes = i64::from(h1 - b'0') * 600
                + i64::from(h2 - b'0') * 60
                + i64::from(m1 - b'0') * 10
                + i64::from(m2 - b'0');
            if *sign == b'+' { minutes } else { -minutes }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some((seconds * 1000 + millis) as f64)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for epoch milliseconds, as JavaScript's `Date.toISOString`.
pub fn epoch_ms_to_iso(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// The current time as an entry timestamp.
pub fn now_iso() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    epoch_ms_to_iso(ms)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pi_timestamps_like_date_parse() {
        // Values from JavaScript: new Date("…").getTime().
        assert_eq!(
            iso_to_epoch_ms("2025-11-20T23:33:01.550Z"),
            Some(1_763_681_581_550.0)
        );
        assert_eq!(iso_to_epoch_ms("1970-01-01T00:00:00.000Z"), Some(0.0));
        assert_eq!(
            iso_to_epoch_ms("2024-02-29T12:00:00Z"),
            Some(1_709_208_000_000.0)
        );
        assert_eq!(
            iso_to_epoch_ms("2024-02-29T12:00:00.5+01:00"),
            Some(1_709_204_400_500.0)
        );
        assert_eq!(iso_to_epoch_ms("not a date"), None);
        assert_eq!(iso_to_epoch_ms("2024-13-01T00:00:00Z"), None);
    }

    #[test]
    fn formats_like_to_iso_string_and_round_trips() {
        assert_eq!(
            epoch_ms_to_iso(1_763_681_581_550),
            "2025-11-20T23:33:01.550Z"
        );
        assert_eq!(epoch_ms_to_iso(0), "1970-01-01T00:00:00.000Z");
        for ms in [
            0i64,
            1,
            951_782_400_000,
            1_709_208_000_123,
            4_102_444_800_000,
        ] {
            assert_eq!(iso_to_epoch_ms(&epoch_ms_to_iso(ms)), Some(ms as f64));
        }
    }
}
