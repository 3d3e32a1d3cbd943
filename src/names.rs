//! Kafka's rule for the names it stores as files or keys — topics and `group.instance.id`:
//! 1 to 249 characters of `[a-zA-Z0-9._-]`, and not `.` or `..`. Checked on the client so that
//! a bad name fails with the property it came from instead of a broker error, or, for a
//! subscription, instead of silently matching nothing.

use crate::error::{Error, Result};

/// The longest name Kafka accepts (a topic's directory also carries the partition number).
pub(crate) const MAX_LEN: usize = 249;

/// Checks `name` against Kafka's rule; the error names `property` (`group.instance.id`,
/// `subscribe`, `topic` …).
pub(crate) fn check(property: &'static str, name: &str) -> Result<()> {
    let bad = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')));
    let problem = if name.is_empty() {
        Some("must not be empty".to_string())
    } else if name == "." || name == ".." {
        Some(format!("{name:?} is not allowed"))
    } else if let Some(c) = bad {
        Some(format!(
            "{name:?} contains {c:?}; only [a-zA-Z0-9._-] are allowed"
        ))
    } else if name.len() > MAX_LEN {
        // Only ASCII is left here, so bytes are characters.
        Some(format!(
            "is {} characters long, the maximum is {MAX_LEN}",
            name.len()
        ))
    } else {
        None
    };
    match problem {
        Some(problem) => Err(Error::Config { property, problem }),
        None => Ok(()),
    }
}

/// [`check`] for a topic name.
pub(crate) fn check_topic(property: &'static str, topic: &str) -> Result<()> {
    check(property, topic).map_err(|e| match e {
        Error::Config { property, problem } => Error::Config {
            property,
            problem: format!("topic {problem}"),
        },
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(name: &str) -> Option<String> {
        match check("topic", name) {
            Ok(()) => None,
            Err(Error::Config { property, problem }) => {
                assert_eq!(property, "topic");
                Some(problem)
            }
            Err(other) => panic!("not a config error: {other}"),
        }
    }

    #[test]
    fn kafka_naming_rule() {
        assert_eq!(problem("worker-1.eu_west"), None);
        assert_eq!(problem(&"a".repeat(249)), None);
        assert_eq!(problem("..a"), None);
        assert!(problem(&"a".repeat(250)).unwrap().contains("250 characters"));
        assert!(problem("").unwrap().contains("empty"));
        assert!(problem("bad topic!").unwrap().contains("' '"));
        assert!(problem("é").unwrap().contains("'é'"));
        assert!(problem(&"é".repeat(200)).unwrap().contains("'é'"));
        assert!(problem(".").is_some());
        assert!(problem("..").is_some());
        assert!(problem("a/b").is_some());
    }

    /// Every public call that takes a topic name refuses a bad one with a `Config` error naming
    /// the call, before any network call: the client's only broker is a closed port, and its
    /// timeouts are short, so a call that went to the network would fail otherwise.
    #[test]
    fn every_call_taking_a_topic_checks_it_before_any_network_call() {
        use crate::{Client, NewTopic, OffsetSpec, TopicPartition};
        use std::collections::BTreeMap;
        use std::time::Duration;
        let client = Client::builder()
            .bootstrap_servers("127.0.0.1:1")
            .connect_timeout(Duration::from_millis(200))
            .request_timeout(Duration::from_millis(200))
            .api_timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let admin = client.admin();
        let t = Duration::from_secs(1);
        let bad = "bad topic!";
        let tp = TopicPartition::new(bad, 0);
        let mut consumer = client.consumer("g").subscribe(["ok"]).build().unwrap();
        let calls: Vec<(&str, crate::Result<()>)> = vec![
            (
                "NewTopic::name",
                admin.create_topics(&[NewTopic::new(bad, 1, 1)], t),
            ),
            ("create_partitions", admin.create_partitions(&[(bad, 2)], t)),
            ("delete_topics", admin.delete_topics(&["ok", bad], t)),
            (
                "list_offsets",
                admin
                    .list_offsets(std::slice::from_ref(&tp), OffsetSpec::Latest)
                    .map(drop),
            ),
            (
                "refresh_metadata",
                client.refresh_metadata(Some(&[bad])).map(drop),
            ),
            ("seek", consumer.seek(&tp, 0)),
            (
                "committed",
                consumer.committed(std::slice::from_ref(&tp)).map(drop),
            ),
            (
                "commit_offsets",
                consumer.commit_offsets(&BTreeMap::from([(tp.clone(), 1)])),
            ),
        ];
        for (call, result) in calls {
            match result {
                Err(Error::Config { property, problem }) => {
                    assert_eq!(property, call);
                    assert!(problem.contains(bad), "{call}: {problem}");
                }
                other => panic!("{call}: {other:?}"),
            }
        }
        let e = client.consumer("g").subscribe([bad]).build().unwrap_err();
        assert!(
            matches!(
                e,
                Error::Config {
                    property: "subscribe",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn topic_errors_say_it_is_a_topic() {
        let e = check_topic("subscribe", "a b").unwrap_err();
        assert!(
            matches!(&e, Error::Config { property: "subscribe", problem } if problem.starts_with("topic \"a b\"")),
            "{e}"
        );
    }
}
