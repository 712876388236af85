//! Parsing and printing of the quantities the benchmarks talk about: byte
//! sizes (`256M`, `4G`), comma-separated lists, and durations in µs.

use std::fmt;

/// Why a size or a list could not be parsed; the message names the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

/// Parses a byte size: a whole number with an optional binary suffix
/// `K`, `M`, `G` or `T` (also `KiB`, `MB`, ... in any case; all suffixes are
/// powers of 1024), so `256M` is 268435456.
///
/// Fails on an empty string, an unknown suffix, a fraction, or a size that
/// does not fit in 64 bits.
pub fn parse_size(text: &str) -> Result<u64, ParseError> {
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, suffix) = trimmed.split_at(digits_end);
    if digits.is_empty() {
        return Err(ParseError(format!(
            "invalid size {text:?}: expected a number with an optional K, M, G or T suffix"
        )));
    }
    let number: u64 = digits
        .parse()
        .map_err(|_| ParseError(format!("invalid size {text:?}: number too large")))?;
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => {
            return Err(ParseError(format!(
                "invalid size {text:?}: unknown suffix {suffix:?} (use K, M, G or T)"
            )))
        }
    };
    number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| ParseError(format!("invalid size {text:?}: too large")))
}

/// Parses a comma-separated list with `parse_item`, ignoring spaces around
/// items. Fails on an empty list, an empty item, or the first item that
/// `parse_item` rejects.
pub fn parse_list<T, E: fmt::Display>(
    text: &str,
    what: &str,
    parse_item: impl Fn(&str) -> Result<T, E>,
) -> Result<Vec<T>, ParseError> {
    let mut items = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(ParseError(format!(
                "invalid {what} list {text:?}: empty item"
            )));
        }
        items.push(parse_item(item).map_err(|e| ParseError(e.to_string()))?);
    }
    Ok(items)
}

/// Formats a byte count with the largest binary unit that keeps it readable:
/// `0 B`, `512 KiB`, `256 MiB`, `1.5 GiB`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 0;
    let mut value = bytes as f64;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Formats a number of microseconds with three significant figures or more
/// (`12.3`, `456`, `12345`), as the tables print them.
pub fn format_us(us: f64) -> String {
    if us >= 100.0 {
        format!("{us:.0}")
    } else if us >= 10.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.2}")
    }
}

/// Formats a rate with thousands separators (`12,345`), as the tables print
/// spawns per second.
pub fn format_rate(per_second: f64) -> String {
    let whole = per_second.round() as u64;
    let digits = whole.to_string();
    let groups: Vec<String> = digits
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|group| String::from_utf8_lossy(group).into_owned())
        .collect();
    groups.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_binary_suffixes() {
        assert_eq!(parse_size("0").unwrap(), 0);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("8K").unwrap(), 8 << 10);
        assert_eq!(parse_size("256M").unwrap(), 256 << 20);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert_eq!(parse_size("4GiB").unwrap(), 4 << 30);
        assert!(parse_size("").is_err());
        assert!(parse_size("1.5G").is_err());
        assert!(parse_size("3X").is_err());
        assert!(parse_size("99999999999999T").is_err());
    }

    #[test]
    fn lists_reject_empty_items() {
        assert_eq!(
            parse_list("0, 256M,1G", "memory", parse_size).unwrap(),
            vec![0, 256 << 20, 1 << 30]
        );
        assert!(parse_list("1,,2", "memory", parse_size).is_err());
        assert!(parse_list("1,x", "memory", parse_size).is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(256 << 20), "256 MiB");
        assert_eq!(format_bytes(3 << 29), "1.5 GiB");
        assert_eq!(format_rate(1234567.4), "1,234,567");
        assert_eq!(format_rate(999.0), "999");
        assert_eq!(format_us(123.4), "123");
        assert_eq!(format_us(12.34), "12.3");
    }
}
