//! Version ranges as Kafka's schemas write them: `"0+"`, `"3"`, `"1-4"`, `"none"`.
//!
//! A real type (rather than strings compared ad hoc) because every field's range is intersected
//! with its message's valid range before emission, and that arithmetic must be right.

use std::fmt;

/// An inclusive range of protocol versions, possibly empty (`none`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRange {
    /// `None` is the empty range.
    bounds: Option<(i16, i16)>,
}

impl VersionRange {
    /// The empty range, `"none"` in a schema.
    pub const NONE: VersionRange = VersionRange { bounds: None };

    /// `min..=max`; empty when `min > max`.
    pub fn new(min: i16, max: i16) -> Self {
        if min > max {
            Self::NONE
        } else {
            VersionRange {
                bounds: Some((min, max)),
            }
        }
    }

    /// `min+`: every version from `min` on.
    pub fn open(min: i16) -> Self {
        Self::new(min, i16::MAX)
    }

    /// Parses a schema version spec.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let s = spec.trim();
        let num = |t: &str| -> Result<i16, String> {
            t.trim()
                .parse::<i16>()
                .ok()
                .filter(|v| *v >= 0)
                .ok_or_else(|| format!("bad version spec {spec:?}: {t:?} is not a version number"))
        };
        if s == "none" {
            Ok(Self::NONE)
        } else if let Some(min) = s.strip_suffix('+') {
            Ok(Self::open(num(min)?))
        } else if let Some((a, b)) = s.split_once('-') {
            let (a, b) = (num(a)?, num(b)?);
            if a > b {
                return Err(format!("bad version spec {spec:?}: {a} > {b}"));
            }
            Ok(Self::new(a, b))
        } else {
            let v = num(s)?;
            Ok(Self::new(v, v))
        }
    }

    /// True for the empty range.
    pub fn is_none(&self) -> bool {
        self.bounds.is_none()
    }

    /// Lowest version, if any.
    pub fn min(&self) -> Option<i16> {
        self.bounds.map(|b| b.0)
    }

    /// Highest version, if any (`i16::MAX` for an open range).
    pub fn max(&self) -> Option<i16> {
        self.bounds.map(|b| b.1)
    }

    /// Whether `v` is in the range.
    pub fn contains(&self, v: i16) -> bool {
        matches!(self.bounds, Some((a, b)) if a <= v && v <= b)
    }

    /// The versions in both ranges.
    pub fn intersect(&self, other: &VersionRange) -> VersionRange {
        match (self.bounds, other.bounds) {
            (Some((a, b)), Some((c, d))) => Self::new(a.max(c), b.min(d)),
            _ => Self::NONE,
        }
    }

    /// Whether every version of `other` is in `self`.
    pub fn covers(&self, other: &VersionRange) -> bool {
        match (self.bounds, other.bounds) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some((a, b)), Some((c, d))) => a <= c && d <= b,
        }
    }

    /// A Rust boolean expression over the variable `version` that is true exactly for the
    /// versions of `self` within `within` (the message's valid range), simplified so that
    /// always-true and always-false conditions become literals.
    pub fn condition(&self, within: &VersionRange) -> String {
        let r = self.intersect(within);
        let (Some((a, b)), Some((wa, wb))) = (r.bounds, within.bounds) else {
            return "false".into();
        };
        match (a <= wa, b >= wb) {
            (true, true) => "true".into(),
            (false, true) => format!("version >= {a}"),
            (true, false) => format!("version <= {b}"),
            (false, false) if a == b => format!("version == {a}"),
            (false, false) => format!("({a}..={b}).contains(&version)"),
        }
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.bounds {
            None => f.write_str("none"),
            Some((a, i16::MAX)) => write!(f, "{a}+"),
            Some((a, b)) if a == b => write!(f, "{a}"),
            Some((a, b)) => write!(f, "{a}-{b}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!(VersionRange::parse("0+").unwrap(), VersionRange::open(0));
        assert_eq!(VersionRange::parse("3").unwrap(), VersionRange::new(3, 3));
        assert_eq!(VersionRange::parse("1-4").unwrap(), VersionRange::new(1, 4));
        assert!(VersionRange::parse("none").unwrap().is_none());
        assert!(VersionRange::parse("4-1").is_err());
        assert!(VersionRange::parse("x+").is_err());
        assert!(VersionRange::parse("-1").is_err());
        assert!(VersionRange::parse("").is_err());
    }

    #[test]
    fn intersect_and_contains() {
        let valid = VersionRange::new(0, 9);
        let f = VersionRange::open(5);
        assert_eq!(f.intersect(&valid), VersionRange::new(5, 9));
        assert!(f.contains(5) && !f.contains(4));
        assert!(VersionRange::NONE.intersect(&valid).is_none());
        assert!(VersionRange::new(10, 12).intersect(&valid).is_none());
        assert!(valid.covers(&VersionRange::new(2, 3)));
        assert!(!valid.covers(&f));
    }

    #[test]
    fn conditions_are_simplified() {
        let valid = VersionRange::new(0, 9);
        assert_eq!(VersionRange::open(0).condition(&valid), "true");
        assert_eq!(VersionRange::open(5).condition(&valid), "version >= 5");
        assert_eq!(VersionRange::new(0, 4).condition(&valid), "version <= 4");
        assert_eq!(VersionRange::new(3, 3).condition(&valid), "version == 3");
        assert_eq!(
            VersionRange::new(2, 4).condition(&valid),
            "(2..=4).contains(&version)"
        );
        assert_eq!(VersionRange::NONE.condition(&valid), "false");
    }

    #[test]
    fn displays_like_the_schema() {
        for s in ["0+", "3", "1-4", "none"] {
            assert_eq!(VersionRange::parse(s).unwrap().to_string(), s);
        }
    }
}
