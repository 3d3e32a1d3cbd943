//! Kafka property names, as found in a `client.properties` file, for every builder's
//! `property(key, value)`: the value parsed into a typed [`Setting`] (an error names the
//! property), which builders take it, and the nearest known name for a misspelt one. Pure: the
//! builders apply the settings.

use crate::consumer::{IsolationLevel, OffsetReset};
use crate::error::{Error, Result};
use crate::group::{
    Assignor, CooperativeStickyAssignor, GroupProtocol, RangeAssignor, RoundRobinAssignor, StickyAssignor,
};
use crate::net::sasl::Secret;
use crate::net::{EndpointIdentification, SecurityProtocol};
use crate::producer::Acks;
use crate::records::Compression;
use std::sync::Arc;
use std::time::Duration;

/// A property's value, parsed. Each builder applies the settings it has and skips the others,
/// so one file can be given to the client, member, consumer and producer builders alike.
#[derive(Debug, Clone)]
pub(crate) enum Setting {
    // The client's (connections, security).
    BootstrapServers(String),
    ClientId(String),
    RequestTimeout(Duration),
    ConnectTimeout(Duration),
    ApiTimeout(Duration),
    ReconnectBackoff(Duration),
    ReconnectBackoffMax(Duration),
    SecurityProtocol(SecurityProtocol),
    SslCaLocation(String),
    SslCertificateLocation(String),
    SslKeyLocation(String),
    SslKeyPassword(Secret),
    SslEndpointIdentification(EndpointIdentification),
    SaslMechanism(String),
    SaslUsername(String),
    SaslPassword(Secret),
    SaslJaasConfig {
        username: String,
        password: Secret,
    },
    /// `retry.backoff.ms`: the client's default, which a member, consumer or producer given the
    /// same file also sets for itself (to the same value).
    RetryBackoff(Duration),
    /// `metadata.max.age.ms`: a member's or consumer's, and a producer's.
    MetadataMaxAge(Duration),
    // A group member's (and so a consumer's).
    GroupId(String),
    GroupInstanceId(String),
    SessionTimeout(Duration),
    HeartbeatInterval(Duration),
    MaxPollInterval(Duration),
    Assignors(Vec<Arc<dyn Assignor>>),
    ClientRack(String),
    GroupProtocol(GroupProtocol),
    GroupRemoteAssignor(String),
    // A consumer's.
    AutoOffsetReset(OffsetReset),
    EnableAutoCommit(bool),
    AutoCommitInterval(Duration),
    MaxPollRecords(usize),
    FetchMinBytes(usize),
    FetchMaxBytes(usize),
    FetchMaxWait(Duration),
    MaxPartitionFetchBytes(usize),
    IsolationLevel(IsolationLevel),
    QueuedMaxMessagesKbytes(usize),
    // A producer's.
    Acks(Acks),
    Compression(Compression),
    Linger(Duration),
    BatchSize(usize),
    Retries(u32),
    DeliveryTimeout(Duration),
    MaxRequestSize(usize),
    MaxBlock(Duration),
    BufferMemory(usize),
    MaxInFlight(usize),
    EnableIdempotence(bool),
    TransactionalId(String),
    TransactionTimeout(Duration),
    /// A Java class setting (serializers, deserializers): records are bytes here, so there is
    /// nothing to set, and a file written for a Java client still loads.
    JavaOnly,
}

/// Every name [`parse`] knows, for suggestions and the docs' lists.
pub(crate) const KNOWN: &[&str] = &[
    "bootstrap.servers",
    "client.id",
    "request.timeout.ms",
    "socket.connection.setup.timeout.ms",
    "default.api.timeout.ms",
    "retry.backoff.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "security.protocol",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "sasl.jaas.config",
    "metadata.max.age.ms",
    "group.id",
    "group.instance.id",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "partition.assignment.strategy",
    "client.rack",
    "group.protocol",
    "group.remote.assignor",
    "auto.offset.reset",
    "enable.auto.commit",
    "auto.commit.interval.ms",
    "max.poll.records",
    "fetch.min.bytes",
    "fetch.max.bytes",
    "fetch.max.wait.ms",
    "max.partition.fetch.bytes",
    "isolation.level",
    "queued.max.messages.kbytes",
    "acks",
    "compression.type",
    "linger.ms",
    "batch.size",
    "retries",
    "delivery.timeout.ms",
    "max.request.size",
    "max.block.ms",
    "buffer.memory",
    "max.in.flight.requests.per.connection",
    "enable.idempotence",
    "transactional.id",
    "transaction.timeout.ms",
    "key.serializer",
    "value.serializer",
    "key.deserializer",
    "value.deserializer",
];

/// Parses `value` for the property `key`. An unknown key is [`Error::UnknownProperty`] (its
/// message suggests the nearest known name); a value that does not parse is
/// [`Error::Config`] naming the property.
pub(crate) fn parse(key: &str, value: &str) -> Result<Setting> {
    let Some(&property) = KNOWN.iter().find(|k| **k == key) else {
        return Err(Error::UnknownProperty {
            property: key.to_string(),
        });
    };
    let value = value.trim();
    let v = Value { property, value };
    use Setting as S;
    Ok(match property {
        "bootstrap.servers" => S::BootstrapServers(value.into()),
        "client.id" => S::ClientId(value.into()),
        "request.timeout.ms" => S::RequestTimeout(v.ms()?),
        "socket.connection.setup.timeout.ms" => S::ConnectTimeout(v.ms()?),
        "default.api.timeout.ms" => S::ApiTimeout(v.ms()?),
        "retry.backoff.ms" => S::RetryBackoff(v.ms()?),
        "reconnect.backoff.ms" => S::ReconnectBackoff(v.ms()?),
        "reconnect.backoff.max.ms" => S::ReconnectBackoffMax(v.ms()?),
        "security.protocol" => S::SecurityProtocol(value.parse()?),
        "ssl.ca.location" => S::SslCaLocation(value.into()),
        "ssl.certificate.location" => S::SslCertificateLocation(value.into()),
        "ssl.key.location" => S::SslKeyLocation(value.into()),
        "ssl.key.password" => S::SslKeyPassword(value.into()),
        "ssl.endpoint.identification.algorithm" => {
            S::SslEndpointIdentification(match value.to_ascii_lowercase().as_str() {
                "https" => EndpointIdentification::Https,
                // Java's empty value turns the check off.
                "" | "none" => EndpointIdentification::None,
                _ => return Err(v.invalid("is not https or none (or empty)")),
            })
        }
        "sasl.mechanism" => S::SaslMechanism(value.into()),
        "sasl.username" => S::SaslUsername(value.into()),
        "sasl.password" => S::SaslPassword(value.into()),
        "sasl.jaas.config" => {
            let (username, password) = crate::client::jaas_credentials(value)?;
            S::SaslJaasConfig { username, password }
        }
        "metadata.max.age.ms" => S::MetadataMaxAge(v.ms()?),
        "group.id" => S::GroupId(value.into()),
        "group.instance.id" => S::GroupInstanceId(value.into()),
        "session.timeout.ms" => S::SessionTimeout(v.ms()?),
        "heartbeat.interval.ms" => S::HeartbeatInterval(v.ms()?),
        "max.poll.interval.ms" => S::MaxPollInterval(v.ms()?),
        "partition.assignment.strategy" => S::Assignors(assignors(v)?),
        "client.rack" => S::ClientRack(value.into()),
        "group.protocol" => S::GroupProtocol(value.parse()?),
        "group.remote.assignor" => S::GroupRemoteAssignor(value.into()),
        "auto.offset.reset" => S::AutoOffsetReset(value.parse()?),
        "enable.auto.commit" => S::EnableAutoCommit(v.bool()?),
        "auto.commit.interval.ms" => S::AutoCommitInterval(v.ms()?),
        "max.poll.records" => S::MaxPollRecords(v.number()?),
        "fetch.min.bytes" => S::FetchMinBytes(v.number()?),
        "fetch.max.bytes" => S::FetchMaxBytes(v.number()?),
        "fetch.max.wait.ms" => S::FetchMaxWait(v.ms()?),
        "max.partition.fetch.bytes" => S::MaxPartitionFetchBytes(v.number()?),
        "isolation.level" => S::IsolationLevel(value.parse()?),
        "queued.max.messages.kbytes" => S::QueuedMaxMessagesKbytes(v.number()?),
        "acks" => S::Acks(value.parse()?),
        "compression.type" => S::Compression(value.parse()?),
        "linger.ms" => S::Linger(v.ms()?),
        "batch.size" => S::BatchSize(v.number()?),
        "retries" => S::Retries(v.number()?),
        "delivery.timeout.ms" => S::DeliveryTimeout(v.ms()?),
        "max.request.size" => S::MaxRequestSize(v.number()?),
        "max.block.ms" => S::MaxBlock(v.ms()?),
        "buffer.memory" => S::BufferMemory(v.number()?),
        "max.in.flight.requests.per.connection" => S::MaxInFlight(v.number()?),
        "enable.idempotence" => S::EnableIdempotence(v.bool()?),
        "transactional.id" => S::TransactionalId(value.into()),
        "transaction.timeout.ms" => S::TransactionTimeout(v.ms()?),
        _ => S::JavaOnly,
    })
}

/// The known name nearest to `key`, if it is close enough to be a typo of it (a few edits,
/// fewer than a third of the name).
pub(crate) fn nearest(key: &str) -> Option<&'static str> {
    let limit = (key.chars().count() / 3).clamp(1, 3);
    KNOWN
        .iter()
        .map(|k| (edit_distance(key, k), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance (insertions, deletions and substitutions of characters).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb)).min(above + 1).min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// A value being parsed for `property`, for errors that name it.
struct Value<'a> {
    property: &'static str,
    value: &'a str,
}

impl Value<'_> {
    fn invalid(&self, problem: &str) -> Error {
        Error::Config {
            property: self.property,
            problem: format!("{:?} {problem}", self.value),
        }
    }

    fn ms(&self) -> Result<Duration> {
        self.value
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| self.invalid("is not a number of milliseconds"))
    }

    fn number<T: std::str::FromStr>(&self) -> Result<T> {
        self.value
            .parse()
            .map_err(|_| self.invalid("is not a whole number in this setting's range"))
    }

    fn bool(&self) -> Result<bool> {
        match self.value.to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(self.invalid("is not true or false")),
        }
    }
}

/// `partition.assignment.strategy`: a comma-separated list of assignor names or Java class
/// names, in preference order.
fn assignors(v: Value<'_>) -> Result<Vec<Arc<dyn Assignor>>> {
    v.value
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| -> Result<Arc<dyn Assignor>> {
            let short = name
                .strip_prefix("org.apache.kafka.clients.consumer.")
                .unwrap_or(name);
            Ok(match short {
                "range" | "RangeAssignor" => Arc::new(RangeAssignor),
                "roundrobin" | "RoundRobinAssignor" => Arc::new(RoundRobinAssignor),
                "sticky" | "StickyAssignor" => Arc::new(StickyAssignor),
                "cooperative-sticky" | "CooperativeStickyAssignor" => Arc::new(CooperativeStickyAssignor),
                _ => {
                    return Err(Error::Config {
                        property: v.property,
                        problem: format!(
                            "{name:?} is not an assignor this client has (range, roundrobin, \
                             sticky, cooperative-sticky, or their Java class names)"
                        ),
                    })
                }
            })
        })
        .collect()
}

#[cfg(test)]
/// What a new user tries first: the properties file of a Java consumer and producer.
pub(crate) const JAVA_FILE: &[(&str, &str)] = &[
    ("bootstrap.servers", "h:9092"),
    ("security.protocol", "PLAINTEXT"),
    ("group.id", "billing"),
    ("group.instance.id", "billing-1"),
    ("session.timeout.ms", "10000"),
    ("auto.offset.reset", "earliest"),
    ("enable.auto.commit", "false"),
    ("max.poll.records", "50"),
    ("isolation.level", "read_committed"),
    (
        "partition.assignment.strategy",
        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
    ),
    ("acks", "all"),
    ("linger.ms", "20"),
    ("compression.type", "lz4"),
    ("enable.idempotence", "true"),
    (
        "key.deserializer",
        "org.apache.kafka.common.serialization.StringDeserializer",
    ),
    (
        "value.serializer",
        "org.apache.kafka.common.serialization.StringSerializer",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_name_parses_or_names_itself_in_its_error() {
        for key in KNOWN {
            match parse(key, "not-a-value-of-anything") {
                Ok(_) => {}
                Err(Error::Config { property, .. }) => assert_eq!(property, *key),
                Err(e) => panic!("{key}: {e:?}"),
            }
        }
    }

    #[test]
    fn a_consumer_and_producer_file_parses_as_java_writes_it() {
        let file = [
            ("group.id", "billing"),
            ("group.instance.id", "billing-1"),
            ("session.timeout.ms", "10000"),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "FALSE"),
            ("max.poll.records", "500"),
            ("isolation.level", "read_committed"),
            (
                "partition.assignment.strategy",
                "org.apache.kafka.clients.consumer.CooperativeStickyAssignor, range",
            ),
            ("acks", "all"),
            ("linger.ms", " 5 "),
            ("compression.type", "zstd"),
            ("enable.idempotence", "true"),
            (
                "key.deserializer",
                "org.apache.kafka.common.serialization.StringDeserializer",
            ),
        ];
        for (k, v) in file {
            parse(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
        }
        assert!(matches!(parse("acks", "-1").unwrap(), Setting::Acks(Acks::All)));
        assert!(matches!(parse("acks", "1").unwrap(), Setting::Acks(Acks::Leader)));
        assert!(
            matches!(parse("linger.ms", " 5 ").unwrap(), Setting::Linger(d) if d == Duration::from_millis(5))
        );
        match parse("partition.assignment.strategy", "cooperative-sticky,range").unwrap() {
            Setting::Assignors(a) => {
                let names: Vec<_> = a.iter().map(|a| a.name()).collect();
                assert_eq!(names, ["cooperative-sticky", "range"]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_bad_value_names_its_property_and_the_value() {
        for (k, v, says) in [
            ("session.timeout.ms", "10s", "milliseconds"),
            ("enable.auto.commit", "yes", "true or false"),
            ("max.poll.records", "-1", "whole number"),
            ("acks", "2", "all"),
            ("compression.type", "brotli", "zstd"),
            ("auto.offset.reset", "smallest", "earliest"),
            ("isolation.level", "serializable", "read_committed"),
            ("group.protocol", "streams", "consumer"),
            ("partition.assignment.strategy", "uniform", "cooperative-sticky"),
        ] {
            let e = parse(k, v).unwrap_err();
            assert!(
                matches!(&e, Error::Config { property, .. } if *property == k),
                "{k}: {e:?}"
            );
            let text = e.to_string();
            assert!(
                text.contains(k) && text.contains(v) && text.contains(says),
                "{k}: {text}"
            );
        }
    }

    #[test]
    fn a_misspelt_name_gets_the_nearest_known_one() {
        assert_eq!(nearest("sesion.timeout.ms"), Some("session.timeout.ms"));
        assert_eq!(nearest("group.instance"), Some("group.instance.id"));
        assert_eq!(nearest("auto.offset.rest"), Some("auto.offset.reset"));
        assert_eq!(nearest("ack"), Some("acks"));
        assert_eq!(nearest("ssl.keystore.location"), None);
        assert_eq!(nearest("zzz"), None);
        let e = parse("lingr.ms", "5").unwrap_err();
        assert!(
            matches!(&e, Error::UnknownProperty { property } if property == "lingr.ms"),
            "{e:?}"
        );
        assert!(e.to_string().contains("did you mean `linger.ms`?"), "{e}");
        let text = parse("ssl.keystore.location", "x").unwrap_err().to_string();
        assert!(!text.contains("did you mean"), "{text}");
    }

    #[test]
    fn edit_distance_counts_single_character_edits() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("acks", "acks"), 0);
    }
}
