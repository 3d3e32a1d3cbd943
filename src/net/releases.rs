//! Which Kafka release advertises which API versions, from `data/broker-api-versions.tsv`.
//!
//! Used to name releases in errors ("static membership needs Kafka 2.3 or newer") and to
//! guess which release a broker is from its ApiVersions answer. The table covers every
//! release from 0.10.0 to 4.2, ZooKeeper (`zk-X.Y`) and KRaft (`kraft-X.Y`) mode.

use crate::protocol::VersionRange;
use std::collections::BTreeMap;
use std::sync::OnceLock;

const TABLE: &str = include_str!("../../data/broker-api-versions.tsv");

/// One Kafka release and the API versions its brokers advertise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// `zk-2.3`, `kraft-3.9`, …
    pub name: &'static str,
    /// API key → advertised range.
    pub apis: BTreeMap<i16, VersionRange>,
}

impl Release {
    /// The release's number without its mode prefix, e.g. `2.3`.
    pub fn version(&self) -> &'static str {
        number(self.name)
    }

    /// Whether this release's brokers run in KRaft mode.
    pub fn is_kraft(&self) -> bool {
        self.name.starts_with("kraft-")
    }

    /// The range it advertises for `api_key`, if it has that API.
    pub fn range(&self, api_key: i16) -> Option<VersionRange> {
        self.apis.get(&api_key).copied()
    }
}

/// Every release in the table, oldest first (ZooKeeper mode before KRaft for the same number).
pub fn all() -> &'static [Release] {
    static RELEASES: OnceLock<Vec<Release>> = OnceLock::new();
    RELEASES.get_or_init(|| parse(TABLE))
}

/// The release with this name (`zk-2.3`).
pub fn by_name(name: &str) -> Option<&'static Release> {
    all().iter().find(|r| r.name == name)
}

/// The oldest release whose brokers advertise at least `min` for every `(api_key, min)`.
pub fn oldest_with(requirements: &[(i16, i16)]) -> Option<&'static Release> {
    all().iter().find(|r| {
        requirements
            .iter()
            .all(|&(key, min)| r.range(key).is_some_and(|v| v.max >= min))
    })
}

/// APIs a broker advertises only when configured to: client telemetry (KIP-714) appears only
/// with a metrics reporter that supports it. Their absence says nothing about the release.
const OPTIONAL_APIS: &[i16] = &[71, 72];

/// The newest release whose advertised maxima are all at or below the broker's for the APIs
/// both know, and that has no API the broker lacks (optional ones aside): the best guess of
/// what the broker is.
pub fn newest_matching(broker: &BTreeMap<i16, VersionRange>) -> Option<&'static Release> {
    all()
        .iter()
        .filter(|r| {
            r.apis
                .iter()
                .filter(|(k, _)| !OPTIONAL_APIS.contains(k))
                .all(|(k, v)| broker.get(k).is_some_and(|b| b.max >= v.max))
        })
        .max_by_key(|r| (sort_key(r.name), r.apis.len()))
}

/// `zk-2.3` → `2.3`: operators know releases by number; the mode prefix is table bookkeeping.
pub(crate) fn number(name: &str) -> &str {
    name.split_once('-').map_or(name, |(_, v)| v)
}

fn sort_key(name: &str) -> (u32, u32, u32) {
    let mut parts = number(name).split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

fn parse(text: &'static str) -> Vec<Release> {
    let mut releases: Vec<Release> = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.starts_with("release\t") || line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&'static str> = line.split('\t').collect();
        // The table is compiled in and checked by a unit test, so a malformed row is a build
        // mistake; skipping it keeps this path free of panics.
        let [name, key, _api, min, max] = cols[..] else {
            continue;
        };
        let (Ok(key), Ok(min), Ok(max)) = (key.parse::<i16>(), min.parse::<i16>(), max.parse::<i16>()) else {
            continue;
        };
        match releases.last_mut() {
            Some(r) if r.name == name => {
                r.apis.insert(key, VersionRange::new(min, max));
            }
            _ => releases.push(Release {
                name,
                apis: BTreeMap::from([(key, VersionRange::new(min, max))]),
            }),
        }
    }
    releases.sort_by_key(|r| (sort_key(r.name), r.is_kraft()));
    releases
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_parsed() {
        let rows = TABLE
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("release\t") && !l.trim().is_empty())
            .count();
        assert_eq!(all().iter().map(|r| r.apis.len()).sum::<usize>(), rows);
        assert_eq!(all().len(), 39, "25 ZooKeeper-mode and 14 KRaft-mode releases");
        assert_eq!(all()[0].name, "zk-0.10.0");
    }

    #[test]
    fn static_membership_arrives_in_2_3() {
        let r = oldest_with(&[(11, 5), (14, 3), (12, 3), (8, 7)]).unwrap();
        assert_eq!(r.name, "zk-2.3");
        assert_eq!(oldest_with(&[(13, 3)]).unwrap().name, "zk-2.4");
        assert_eq!(
            by_name("zk-2.2").unwrap().range(11),
            Some(VersionRange::new(0, 4))
        );
    }

    #[test]
    fn a_4x_broker_without_client_telemetry_is_still_4x() {
        let mut apis = by_name("kraft-4.0").unwrap().apis.clone();
        apis.remove(&71);
        apis.remove(&72);
        let guess = newest_matching(&apis).unwrap();
        assert!(guess.name.starts_with("kraft-4."), "guessed {}", guess.name);
    }

    #[test]
    fn a_release_matches_its_own_table() {
        for name in [
            "zk-0.10.0",
            "zk-2.2",
            "zk-2.3",
            "zk-3.9",
            "kraft-3.9",
            "kraft-4.0",
        ] {
            let r = by_name(name).unwrap();
            let guess = newest_matching(&r.apis).unwrap();
            // Releases with identical tables are indistinguishable; the guess must advertise
            // exactly the same versions.
            assert_eq!(guess.apis, r.apis, "{name} guessed as {}", guess.name);
        }
    }
}
