//! Which Kafka release advertises which API versions, from `data/broker-api-versions.tsv`.
//!
//! Used to name releases in errors ("static membership needs Kafka 2.3 or newer") and to
//! guess which release a broker is from its ApiVersions answer. The table covers every
//! release from 0.10.0 to 4.4, ZooKeeper (`zk-X.Y`) and KRaft (`kraft-X.Y`) mode.

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

/// How a broker's ApiVersions table compares with the releases in the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseMatch {
    /// The broker advertises exactly what this release does (or what a release with an
    /// identical table does: the newest of those).
    Exact(&'static Release),
    /// No release matches exactly; this is the closest of those the broker's versions allow
    /// (never one older than a version the broker advertises proves). `differing`: the API keys
    /// whose maximum differs or that only one side has.
    Closest {
        /// The closest release.
        release: &'static Release,
        /// API keys that differ, ascending.
        differing: Vec<i16>,
    },
    /// The broker advertises a version newer than every release in the table has: it is at
    /// least the newest one known, probably newer.
    Newer {
        /// The newest release in the table.
        than: &'static Release,
        /// API keys whose maximum is beyond it, ascending.
        beyond: Vec<i16>,
    },
    /// Too far from every release to name one (the closest lacks, or has beyond the broker's,
    /// more APIs than half of what the broker advertises): not an Apache Kafka release's table.
    Unknown,
}

impl ReleaseMatch {
    /// The release named: exact, closest, or (for [`ReleaseMatch::Newer`]) the lower bound.
    pub fn release(&self) -> Option<&'static Release> {
        match self {
            ReleaseMatch::Exact(r) | ReleaseMatch::Closest { release: r, .. } => Some(r),
            ReleaseMatch::Newer { than, .. } => Some(than),
            ReleaseMatch::Unknown => None,
        }
    }
}

/// What `broker` is, judged by its ApiVersions table. Unlike [`newest_matching`], one API
/// missing or one version off does not send the guess back to an old release: the guess is the
/// closest release among those at least as new as every version the broker advertises proves.
pub fn identify(broker: &BTreeMap<i16, VersionRange>) -> ReleaseMatch {
    let releases = all();
    let Some(newest) = releases.last() else {
        return ReleaseMatch::Unknown;
    };
    // Only APIs the table follows: brokers also advertise inter-broker ones (LeaderAndIsr …)
    // that it leaves out, and a fork may add its own.
    let tracked: std::collections::BTreeSet<i16> =
        releases.iter().flat_map(|r| r.apis.keys().copied()).collect();
    let relevant = |k: &i16| !OPTIONAL_APIS.contains(k) && tracked.contains(k);
    // The oldest release each advertised maximum proves: the first that has that version.
    let mut floor = 0;
    let mut beyond = Vec::new();
    for (&key, range) in broker.iter().filter(|(k, _)| relevant(k)) {
        match releases
            .iter()
            .position(|r| r.range(key).is_some_and(|v| v.max >= range.max))
        {
            Some(i) => floor = floor.max(i),
            // A version beyond what every release has: newer than the table.
            None => beyond.push(key),
        }
    }
    if !beyond.is_empty() {
        return ReleaseMatch::Newer { than: newest, beyond };
    }
    let differing = |r: &Release| -> Vec<i16> {
        let keys: std::collections::BTreeSet<i16> = r
            .apis
            .keys()
            .chain(broker.keys())
            .copied()
            .filter(|k| relevant(k))
            .collect();
        keys.into_iter()
            .filter(|k| r.range(*k).map(|v| v.max) != broker.get(k).map(|v| v.max))
            .collect()
    };
    // Fewest differences; among equals the newest, as releases with identical tables cannot be
    // told apart and the newer name is the safer lower bound.
    let Some((release, diff)) = releases[floor..]
        .iter()
        .map(|r| (r, differing(r)))
        .rev()
        .min_by_key(|(_, d)| d.len())
    else {
        return ReleaseMatch::Unknown;
    };
    // Versions may be off by any amount (a fork, a backport); APIs present on one side only
    // are what says the table is not Kafka's.
    let size = broker.keys().filter(|k| relevant(k)).count().max(1);
    let unshared = diff
        .iter()
        .filter(|k| release.range(**k).is_none() || !broker.contains_key(k))
        .count();
    if diff.is_empty() {
        ReleaseMatch::Exact(release)
    } else if unshared * 2 > size {
        ReleaseMatch::Unknown
    } else {
        ReleaseMatch::Closest {
            release,
            differing: diff,
        }
    }
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
        assert_eq!(all().len(), 41, "25 ZooKeeper-mode and 16 KRaft-mode releases");
        assert_eq!(all()[0].name, "zk-0.10.0");
    }

    /// Every release the integration tests run against has its row, so that `broker-versions`
    /// and capability errors name it instead of "newer than" an older one. Pins (first
    /// non-comment column two of `scripts/kafka-versions`) from 3.3 on are KRaft-mode brokers.
    #[test]
    fn every_pinned_release_is_in_the_table() {
        let pins = include_str!("../../scripts/kafka-versions");
        let mut checked = 0;
        for line in pins
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        {
            let version = line.split_whitespace().nth(1).unwrap();
            let (major, minor, patch) = sort_key(&format!("-{version}"));
            let number = if major == 0 {
                format!("{major}.{minor}.{patch}")
            } else {
                format!("{major}.{minor}")
            };
            let mode = if (major, minor) >= (3, 3) { "kraft" } else { "zk" };
            let name = format!("{mode}-{number}");
            assert!(
                by_name(&name).is_some(),
                "scripts/kafka-versions pins Kafka {version}, but the table has no {name}"
            );
            checked += 1;
        }
        assert!(checked >= 13, "read {checked} pins");
        let newest_pin = pins
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| sort_key(&format!("-{}", l.split_whitespace().nth(1).unwrap())))
            .max()
            .unwrap();
        let newest = sort_key(all().last().unwrap().name);
        assert!(
            (newest.0, newest.1) >= (newest_pin.0, newest_pin.1),
            "the table stops at {newest:?}, before the newest pin {newest_pin:?}"
        );
    }

    /// What real 4.3.1 and 4.4.0 brokers answered (no client telemetry without a metrics
    /// reporter; WriteTxnMarkers, which the table leaves out) is named 4.3 and 4.4 exactly.
    #[test]
    fn measured_4_3_and_4_4_brokers_are_named_exactly() {
        for name in ["kraft-4.3", "kraft-4.4"] {
            let mut apis = by_name(name).unwrap().apis.clone();
            apis.remove(&71);
            apis.remove(&72);
            apis.insert(27, VersionRange::new(1, 2));
            match identify(&apis) {
                ReleaseMatch::Exact(r) => assert_eq!(r.name, name),
                other => panic!("{name} identified as {other:?}"),
            }
        }
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
    fn every_release_identifies_as_itself_or_an_identical_table() {
        for r in all() {
            match identify(&r.apis) {
                ReleaseMatch::Exact(guess) => assert_eq!(guess.apis, r.apis, "{} as {}", r.name, guess.name),
                other => panic!("{} identified as {other:?}", r.name),
            }
        }
    }

    /// The example: a modern table missing one API that appeared in 0.11 must not be
    /// called 0.10.2; it is close to a modern release, and says what differs.
    #[test]
    fn one_missing_api_does_not_make_a_modern_broker_old() {
        let mut apis = by_name("kraft-4.0").unwrap().apis.clone();
        let removed = 22; // InitProducerId, since 0.11.0
        apis.remove(&removed);
        let old = newest_matching(&apis).unwrap().name;
        assert!(!old.starts_with("kraft-4."), "the old rule went back to {old}");
        match identify(&apis) {
            ReleaseMatch::Closest { release, differing } => {
                assert!(release.name.starts_with("kraft-4."), "{}", release.name);
                assert_eq!(differing, vec![removed]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn versions_beyond_the_table_are_newer_never_older() {
        let newest = all().last().unwrap();
        let mut apis = newest.apis.clone();
        let produce = apis[&0];
        apis.insert(0, VersionRange::new(produce.min, produce.max + 1));
        assert_eq!(
            identify(&apis),
            ReleaseMatch::Newer {
                than: newest,
                beyond: vec![0]
            }
        );
        // Proven by one version: a 2.3 table with JoinGroup v6 (2.4's) is no older than 2.4.
        let mut apis = by_name("zk-2.3").unwrap().apis.clone();
        apis.insert(11, VersionRange::new(0, 6));
        let r = identify(&apis).release().unwrap();
        assert!(sort_key(r.name) >= (2, 4, 0), "{}", r.name);
    }

    #[test]
    fn inter_broker_and_unknown_apis_do_not_count() {
        let mut apis = by_name("zk-2.3").unwrap().apis.clone();
        // LeaderAndIsr, StopReplica: every ZooKeeper-mode broker has them; the table does not.
        apis.insert(4, VersionRange::new(0, 2));
        apis.insert(5, VersionRange::new(0, 1));
        apis.insert(1000, VersionRange::new(0, 0));
        assert!(matches!(identify(&apis), ReleaseMatch::Exact(r) if r.name == "zk-2.3"));
    }

    #[test]
    fn a_table_like_no_release_is_unknown() {
        let apis: BTreeMap<i16, VersionRange> = [
            (0, VersionRange::new(0, 3)),
            (1, VersionRange::new(0, 11)),
            (3, VersionRange::new(0, 0)),
        ]
        .into_iter()
        .chain(
            (21..31)
                .map(|k| (k, VersionRange::new(0, 0)))
                .filter(|(k, _)| *k != 27),
        )
        .collect();
        assert_eq!(identify(&apis), ReleaseMatch::Unknown);
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
