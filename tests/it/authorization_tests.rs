//! Authorization errors produced for real (`support::secure`, StandardAuthorizer): bob may use
//! topics and groups named `bob-*`, and only DESCRIBE those named `peek-*`, so every call that
//! needs an ACL on another name must fail with [`Error::Authorization`] naming that resource,
//! at once rather than after its timeout. `peek-*` gets the requests past the metadata and the
//! coordinator lookup denied for real: Fetch, Produce, JoinGroup, OffsetCommit, LeaveGroup,
//! CreatePartitions; an ACL added while a member runs gets its heartbeat denied.
//! CLUSTER_AUTHORIZATION_FAILED, which none of our calls gets from a current broker (since
//! KIP-231, Kafka 2.1, ListGroups leaves out the groups a principal may not describe instead),
//! comes from a scripted broker.

use crate::support::java;
use crate::support::scripted::{api_versions_frame, full_table, Reply, Scripted};
use crate::support::secure::{self, BOB, BOB_PREFIX, PEEK_PREFIX};
use crate::support::{unique_name, wait_for};
use kafka_group::sasl::{Mechanism, Secret};
use kafka_group::unstable::protocol::messages::list_groups_response::ListedGroup as WireGroup;
use kafka_group::unstable::protocol::messages::metadata_response::MetadataResponseBroker;
use kafka_group::unstable::protocol::messages::{
    ListGroupsRequest, ListGroupsResponse, MetadataRequest, MetadataResponse, ResponseHeader,
};
use kafka_group::unstable::protocol::{ApiKey, Message, Request};
use kafka_group::{
    Client, Error, KafkaCode, NewTopic, OffsetReset, OffsetSpec, ProducerRecord, Resource, SecurityProtocol,
};
use kafka_group::{MemberState, TopicPartition};
use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// bob's `default.api.timeout.ms`: each denied call must return well within it (a load margin
/// before it, so that a call that retried until it ran out fails the test).
const API_TIMEOUT: Duration = Duration::from_secs(30);

/// bob over SASL_SSL with SCRAM-SHA-512.
fn bob() -> Client {
    let b = secure::shared();
    Client::builder()
        .bootstrap_servers(format!("localhost:{}", b.sasl_ssl.port()))
        .security_protocol(SecurityProtocol::SaslSsl)
        .ssl_ca_location(&b.tls.ca)
        .sasl(Mechanism::ScramSha512 {
            username: BOB.name.into(),
            password: Secret::new(BOB.password),
        })
        .request_timeout(Duration::from_secs(10))
        .api_timeout(API_TIMEOUT)
        .build()
        .unwrap()
}

/// Three topics made by a super user (ANONYMOUS on PLAINTEXT): one bob may use, one he may
/// not, one he may only describe, each with a record. Shared by the tests of this file.
struct Topics {
    allowed: String,
    denied: String,
    /// bob may only DESCRIBE it.
    peek: String,
}

fn topics() -> &'static Topics {
    static TOPICS: OnceLock<Topics> = OnceLock::new();
    TOPICS.get_or_init(|| {
        let b = secure::shared();
        let admin_client = Client::builder()
            .bootstrap_servers(b.plaintext.to_string())
            .build()
            .unwrap();
        let t = Topics {
            allowed: unique_name(&format!("{BOB_PREFIX}authz")),
            denied: unique_name("authz-denied"),
            peek: unique_name(&format!("{PEEK_PREFIX}authz")),
        };
        admin_client
            .admin()
            .create_topics(
                &[
                    NewTopic::new(&t.allowed, 1, 1),
                    NewTopic::new(&t.denied, 1, 1),
                    NewTopic::new(&t.peek, 1, 1),
                ],
                Duration::from_secs(60),
            )
            .unwrap();
        let mut p = admin_client.producer().build().unwrap();
        for topic in [&t.allowed, &t.denied, &t.peek] {
            p.send(ProducerRecord::new(topic.as_str(), "v")).unwrap();
        }
        p.flush().unwrap();
        t
    })
}

/// Asserts that `result` is the authorization error of `api` for `resource` with `code`,
/// returned well within [`API_TIMEOUT`] of `started`, and that its message names the resource.
/// `E` is an [`Error`] or the `Arc<Error>` of a producer's delivery handle.
fn assert_denied<T: std::fmt::Debug, E: std::borrow::Borrow<Error> + std::fmt::Display>(
    what: &str,
    started: Instant,
    result: Result<T, E>,
    api: ApiKey,
    code: KafkaCode,
    resource: Resource,
) -> E {
    let took = started.elapsed();
    let e = match result {
        Ok(v) => panic!("{what}: succeeded after {took:?}: {v:?}"),
        Err(e) => e,
    };
    eprintln!("{what}: {took:?}: {e}");
    match e.borrow() {
        Error::Authorization {
            api: a,
            code: c,
            resource: r,
            ..
        } => {
            assert_eq!((*a, *c, r), (api, code, &resource), "{what}: {e}");
        }
        other => panic!("{what}: not an authorization error after {took:?}: {other:?}"),
    }
    assert_eq!(e.borrow().kafka_code(), Some(code), "{what}");
    assert!(e.to_string().contains(&resource.to_string()), "{what}: {e}");
    assert!(
        took < API_TIMEOUT - crate::support::LOAD_MARGIN,
        "{what}: returned only after {took:?}: {e}"
    );
    e
}

/// Polls until the first error, for at most [`API_TIMEOUT`] (then the test fails in
/// [`assert_denied`]).
fn poll_until_error(c: &mut kafka_group::Consumer) -> Result<(), Error> {
    let started = Instant::now();
    while started.elapsed() < API_TIMEOUT {
        c.poll(Duration::from_secs(1))?;
    }
    Ok(())
}

#[test]
fn bob_polling_a_topic_outside_his_prefix_is_told_which_topic() {
    let t = topics();
    let client = bob();
    let mut c = client
        .consumer(&unique_name(&format!("{BOB_PREFIX}authz-grp")))
        .subscribe([t.denied.as_str()])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let started = Instant::now();
    let result = poll_until_error(&mut c);
    let e = assert_denied(
        "poll",
        started,
        result,
        ApiKey::Metadata,
        KafkaCode::TopicAuthorizationFailed,
        Resource::Topic(t.denied.clone()),
    );
    assert!(e.to_string().contains("DESCRIBE"), "{e}");
    // The group itself is bob's: the member is not stopped, and the next poll says it again.
    let started = Instant::now();
    let again = poll_until_error(&mut c);
    assert_denied(
        "second poll",
        started,
        again,
        ApiKey::Metadata,
        KafkaCode::TopicAuthorizationFailed,
        Resource::Topic(t.denied.clone()),
    );
    c.close().unwrap();
}

#[test]
fn bob_joining_a_group_outside_his_prefix_stops_the_member() {
    let t = topics();
    let client = bob();
    let group = unique_name("authz-grp");
    let mut c = client
        .consumer(&group)
        .group_instance_id("bob-1")
        .subscribe([t.allowed.as_str()])
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let started = Instant::now();
    let result = c.poll(Duration::from_secs(20));
    let e = assert_denied(
        "poll",
        started,
        result,
        ApiKey::FindCoordinator,
        KafkaCode::GroupAuthorizationFailed,
        Resource::Group(group.clone()),
    );
    assert!(e.to_string().contains("DESCRIBE"), "{e}");
    // Stopped, as when fenced: no further lookups, the same error from every call.
    assert_eq!(c.member().unwrap().state(), MemberState::Unauthorized);
    let lookups = c.member().unwrap().metrics();
    for what in ["poll again", "commit_offsets"] {
        let started = Instant::now();
        let result = if what == "poll again" {
            c.poll(Duration::from_secs(20)).map(|_| ())
        } else {
            let offsets = BTreeMap::from([(TopicPartition::new(t.allowed.clone(), 0), 1)]);
            c.commit_offsets(&offsets)
        };
        assert_denied(
            what,
            started,
            result,
            ApiKey::FindCoordinator,
            KafkaCode::GroupAuthorizationFailed,
            Resource::Group(group.clone()),
        );
    }
    assert_eq!(c.member().unwrap().metrics().joins, lookups.joins);
    assert_eq!(c.member().unwrap().metrics().joins, 0, "a JoinGroup was sent");
    c.close().unwrap();
}

#[test]
fn bob_committing_outside_his_prefix_is_told_which_resource() {
    let t = topics();
    let client = bob();
    // A group outside the prefix: the commit's coordinator lookup is denied.
    let denied_group = unique_name("authz-commit");
    let mut c = client
        .consumer(&denied_group)
        .subscribe([t.allowed.as_str()])
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let offsets = BTreeMap::from([(TopicPartition::new(t.allowed.clone(), 0), 1)]);
    let started = Instant::now();
    assert_denied(
        "commit in a denied group",
        started,
        c.commit_offsets(&offsets),
        ApiKey::FindCoordinator,
        KafkaCode::GroupAuthorizationFailed,
        Resource::Group(denied_group),
    );
    drop(c);
    // bob's own group, a member of it, committing a topic outside the prefix.
    let mut c = client
        .consumer(&unique_name(&format!("{BOB_PREFIX}authz-commit")))
        .subscribe([t.allowed.as_str()])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.assignment().is_empty() {
        assert!(Instant::now() < deadline, "no assignment");
        c.poll(Duration::from_millis(500)).unwrap();
    }
    let offsets = BTreeMap::from([(TopicPartition::new(t.denied.clone(), 0), 1)]);
    let started = Instant::now();
    let e = assert_denied(
        "commit of a denied topic",
        started,
        c.commit_offsets(&offsets),
        ApiKey::OffsetCommit,
        KafkaCode::TopicAuthorizationFailed,
        Resource::Topic(t.denied.clone()),
    );
    assert!(e.to_string().contains("READ"), "{e}");
    // The member goes on: its own topic still commits.
    c.commit_offsets(&BTreeMap::from([(TopicPartition::new(t.allowed.clone(), 0), 1)]))
        .unwrap();
    c.close().unwrap();
}

#[test]
fn bob_producing_to_a_topic_outside_his_prefix_is_told_which_topic() {
    let t = topics();
    let client = bob();
    let mut p = client.producer().build().unwrap();
    let started = Instant::now();
    assert_denied(
        "send",
        started,
        p.send(ProducerRecord::new(t.denied.as_str(), "v")),
        ApiKey::Metadata,
        KafkaCode::TopicAuthorizationFailed,
        Resource::Topic(t.denied.clone()),
    );
    // The producer stays usable for topics bob may write.
    p.send(ProducerRecord::new(t.allowed.as_str(), "v")).unwrap();
    p.flush().unwrap();
}

#[test]
fn bob_admin_calls_outside_his_prefix_are_told_which_resource() {
    let t = topics();
    let client = bob();
    let admin = client.admin().api_timeout(API_TIMEOUT);
    let new = unique_name("authz-new");
    let started = Instant::now();
    let e = assert_denied(
        "create_topics",
        started,
        admin.create_topics(&[NewTopic::new(&new, 1, 1)], API_TIMEOUT),
        ApiKey::CreateTopics,
        KafkaCode::TopicAuthorizationFailed,
        Resource::Topic(new),
    );
    assert!(e.to_string().contains("CREATE"), "{e}");
    let started = Instant::now();
    assert_denied(
        "delete_topics",
        started,
        admin.delete_topics(&[t.denied.as_str()], API_TIMEOUT),
        ApiKey::DeleteTopics,
        KafkaCode::TopicAuthorizationFailed,
        Resource::Topic(t.denied.clone()),
    );
    let started = Instant::now();
    assert_denied(
        "list_offsets",
        started,
        admin.list_offsets(&[TopicPartition::new(t.denied.clone(), 0)], OffsetSpec::Latest),
        ApiKey::Metadata,
        KafkaCode::TopicAuthorizationFailed,
        Resource::Topic(t.denied.clone()),
    );
    let group = unique_name("authz-admin-grp");
    let started = Instant::now();
    assert_denied(
        "describe_group",
        started,
        admin.describe_group(&group),
        ApiKey::FindCoordinator,
        KafkaCode::GroupAuthorizationFailed,
        Resource::Group(group.clone()),
    );
    let started = Instant::now();
    assert_denied(
        "group_offsets",
        started,
        admin.group_offsets(&group),
        ApiKey::FindCoordinator,
        KafkaCode::GroupAuthorizationFailed,
        Resource::Group(group),
    );
    // ListGroups needs no ACL the cluster could deny: the broker leaves out the groups bob
    // may not describe.
    let listed = admin.list_groups().unwrap();
    assert!(
        listed.iter().all(|g| g.group_id.starts_with(BOB_PREFIX)),
        "{listed:?}"
    );
}

/// The positive control: the same calls on `bob-*` names work.
#[test]
fn bob_on_his_own_prefix_is_not_denied() {
    let t = topics();
    let client = bob();
    let admin = client.admin().api_timeout(API_TIMEOUT);
    let own = unique_name(&format!("{BOB_PREFIX}authz-own"));
    admin
        .create_topics(&[NewTopic::new(&own, 1, 1)], API_TIMEOUT)
        .unwrap();
    let mut p = client.producer().build().unwrap();
    p.send(ProducerRecord::new(own.as_str(), "mine")).unwrap();
    p.flush().unwrap();
    let group = unique_name(&format!("{BOB_PREFIX}authz-own-grp"));
    let mut c = client
        .consumer(&group)
        .group_instance_id("bob-own-1")
        .subscribe([own.as_str(), t.allowed.as_str()])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = 0;
    while got < 2 {
        assert!(Instant::now() < deadline, "{got} of 2 records");
        got += c.poll(Duration::from_millis(500)).unwrap().len();
    }
    c.commit().unwrap();
    c.close().unwrap();
    let committed = admin.group_offsets(&group).unwrap();
    assert_eq!(committed.len(), 2, "{committed:?}");
    assert!(admin.describe_group(&group).is_ok());
    admin.delete_topics(&[own.as_str()], API_TIMEOUT).unwrap();
}

/// A broker before Kafka 2.1 (KIP-231) answers ListGroups without `DESCRIBE` on the cluster with
/// CLUSTER_AUTHORIZATION_FAILED; scripted, since no broker we test with still does.
#[test]
fn cluster_authorization_failed_from_list_groups_names_the_cluster() {
    let fake = Scripted::start_many(|req, local| {
        if req.api_key == ApiKey::ApiVersions.key() {
            return Reply::Frame(api_versions_frame(
                req.correlation_id,
                req.api_version,
                0,
                &full_table(),
            ));
        }
        let mut out = Vec::new();
        let mut header = |header_version: i16| {
            ResponseHeader {
                correlation_id: req.correlation_id,
                ..Default::default()
            }
            .encode(header_version, &mut out)
            .unwrap();
        };
        if req.api_key == ApiKey::Metadata.key() {
            header(MetadataRequest::response_header_version(req.api_version));
            MetadataResponse {
                brokers: vec![MetadataResponseBroker {
                    node_id: 1,
                    host: "127.0.0.1".into(),
                    port: i32::from(local.port()),
                    ..Default::default()
                }],
                controller_id: 1,
                ..Default::default()
            }
            .encode(req.api_version, &mut out)
            .unwrap();
        } else if req.api_key == ApiKey::ListGroups.key() {
            header(ListGroupsRequest::response_header_version(req.api_version));
            ListGroupsResponse {
                error_code: KafkaCode::ClusterAuthorizationFailed.code(),
                groups: Vec::<WireGroup>::new(),
                ..Default::default()
            }
            .encode(req.api_version, &mut out)
            .unwrap();
        } else {
            return Reply::Close;
        }
        Reply::Frame(out)
    });
    let client = Client::builder()
        .bootstrap_servers(fake.addr.to_string())
        .request_timeout(Duration::from_secs(10))
        .api_timeout(API_TIMEOUT)
        .build()
        .unwrap();
    let started = Instant::now();
    let e = assert_denied(
        "list_groups",
        started,
        client.admin().list_groups(),
        ApiKey::ListGroups,
        KafkaCode::ClusterAuthorizationFailed,
        Resource::Cluster,
    );
    assert!(e.to_string().contains("the cluster"), "{e}");
    assert_eq!(
        fake.versions_seen(ApiKey::ListGroups.key()).len(),
        1,
        "ListGroups was retried"
    );
}

/// A topic bob may describe but not read: the metadata, OffsetFetch and ListOffsets pass,
/// Fetch is denied.
#[test]
fn bob_fetching_a_topic_he_may_only_describe_is_denied_on_fetch() {
    let t = topics();
    let client = bob();
    let mut c = client
        .consumer(&unique_name(&format!("{BOB_PREFIX}authz-fetch")))
        .subscribe([t.peek.as_str()])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let started = Instant::now();
    let result = poll_until_error(&mut c);
    let e = assert_denied(
        "poll",
        started,
        result,
        ApiKey::Fetch,
        KafkaCode::TopicAuthorizationFailed,
        Resource::Topic(t.peek.clone()),
    );
    assert!(e.to_string().contains("READ"), "{e}");
    assert_eq!(c.assignment(), vec![TopicPartition::new(t.peek.clone(), 0)]);
    c.close().unwrap();
}

/// A topic bob may describe but not write: the record is accepted into a batch, the
/// broker's Produce answer denies it, the record's handle has the denial and flush says so.
#[test]
fn bob_producing_to_a_topic_he_may_only_describe_is_denied_on_produce() {
    let t = topics();
    let client = bob();
    let mut p = client.producer().build().unwrap();
    let started = Instant::now();
    let handle = p.send(ProducerRecord::new(t.peek.as_str(), "v")).unwrap();
    match p.flush() {
        Err(Error::Delivery { failed: 1, first }) => {
            assert_eq!(first.kafka_code(), Some(KafkaCode::TopicAuthorizationFailed))
        }
        other => panic!("flush: {other:?}"),
    }
    let result = handle
        .try_result()
        .expect("every record has its result after flush");
    let e = assert_denied(
        "the record's handle",
        started,
        result,
        ApiKey::Produce,
        KafkaCode::TopicAuthorizationFailed,
        Resource::Topic(t.peek.clone()),
    );
    assert!(e.to_string().contains("WRITE"), "{e}");
    assert_eq!(p.pending(), 0, "the denied batch is dropped, not retried");
}

/// In one flush, a record for a topic bob may not write and records for one he may: the
/// denied record's handle has the denial, the others their offsets.
#[test]
fn a_denied_record_reaches_its_own_handle_while_the_others_are_written() {
    let t = topics();
    let client = bob();
    let mut p = client.producer().build().unwrap();
    let started = Instant::now();
    let before = p.send(ProducerRecord::new(t.allowed.as_str(), "before")).unwrap();
    let denied = p.send(ProducerRecord::new(t.peek.as_str(), "denied")).unwrap();
    let after = p.send(ProducerRecord::new(t.allowed.as_str(), "after")).unwrap();
    match p.flush() {
        Err(Error::Delivery { failed: 1, .. }) => {}
        other => panic!("flush: {other:?}"),
    }
    assert_denied(
        "the denied record's handle",
        started,
        denied.try_result().expect("done after flush"),
        ApiKey::Produce,
        KafkaCode::TopicAuthorizationFailed,
        Resource::Topic(t.peek.clone()),
    );
    let before = before.try_result().unwrap().unwrap();
    let after = after.try_result().unwrap().unwrap();
    assert_eq!((before.topic.as_str(), before.partition), (t.allowed.as_str(), 0));
    // One batch: consecutive offsets.
    assert_eq!(after.offset, before.offset.map(|o| o + 1), "{before:?} {after:?}");
}

/// A group bob may describe but not read: its coordinator is found, JoinGroup is denied and
/// the member stops; a commit to it is denied by OffsetCommit; admin calls that only describe
/// it work, removing its members does not.
#[test]
fn bob_in_a_group_he_may_only_describe_is_denied_on_join_and_commit() {
    let t = topics();
    let client = bob();
    let group = unique_name(&format!("{PEEK_PREFIX}authz-join"));
    let mut c = client
        .consumer(&group)
        .group_instance_id("bob-peek-1")
        .subscribe([t.allowed.as_str()])
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let started = Instant::now();
    let result = c.poll(Duration::from_secs(20));
    let e = assert_denied(
        "poll",
        started,
        result,
        ApiKey::JoinGroup,
        KafkaCode::GroupAuthorizationFailed,
        Resource::Group(group.clone()),
    );
    assert!(e.to_string().contains("READ"), "{e}");
    assert_eq!(c.member().unwrap().state(), MemberState::Unauthorized);
    let joins = c.member().unwrap().metrics().joins;
    let started = Instant::now();
    let again = c.poll(Duration::from_secs(20));
    assert_denied(
        "poll again",
        started,
        again,
        ApiKey::JoinGroup,
        KafkaCode::GroupAuthorizationFailed,
        Resource::Group(group.clone()),
    );
    assert_eq!(
        c.member().unwrap().metrics().joins,
        joins,
        "the stopped member joined again"
    );
    c.close().unwrap();

    let commit_group = unique_name(&format!("{PEEK_PREFIX}authz-commit"));
    let mut c = client
        .consumer(&commit_group)
        .subscribe([t.allowed.as_str()])
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let offsets = BTreeMap::from([(TopicPartition::new(t.allowed.clone(), 0), 1)]);
    let started = Instant::now();
    assert_denied(
        "commit_offsets",
        started,
        c.commit_offsets(&offsets),
        ApiKey::OffsetCommit,
        KafkaCode::GroupAuthorizationFailed,
        Resource::Group(commit_group.clone()),
    );
    drop(c);

    let admin = client.admin().api_timeout(API_TIMEOUT);
    assert_eq!(admin.describe_group(&group).unwrap().members.len(), 0);
    assert!(admin.group_offsets(&group).unwrap().is_empty());
    let started = Instant::now();
    assert_denied(
        "remove_members",
        started,
        admin.remove_members(&group, &["bob-peek-1"]),
        ApiKey::LeaveGroup,
        KafkaCode::GroupAuthorizationFailed,
        Resource::Group(group),
    );
    let started = Instant::now();
    assert_denied(
        "create_partitions",
        started,
        admin.create_partitions(&[(t.peek.as_str(), 2)], API_TIMEOUT),
        ApiKey::CreatePartitions,
        KafkaCode::TopicAuthorizationFailed,
        Resource::Topic(t.peek.clone()),
    );
}

/// Adds an ACL denying `principal` READ on the group named `group` (a DENY wins over bob's
/// ALLOW on the prefix), as ANONYMOUS on PLAINTEXT, with Kafka's own Admin client.
fn deny_group_read(principal: &str, group: &str) {
    const SOURCE: &str = r#"
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.resource.*;
public class DenyGroupRead {
    public static void main(String[] a) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", a[0]))) {
            admin.createAcls(List.of(new AclBinding(
                new ResourcePattern(ResourceType.GROUP, a[2], PatternType.LITERAL),
                new AccessControlEntry(a[1], "*", AclOperation.READ, AclPermissionType.DENY)))).all().get();
        }
    }
}
"#;
    let b = secure::shared();
    java::run_source(
        &b.version,
        "DenyGroupRead",
        SOURCE,
        &[&b.plaintext.to_string(), principal, group],
    );
}

/// An ACL taken away while the member runs: its next heartbeat is denied, the heartbeat thread
/// stops, and poll returns the error and the member stops, as when fenced.
#[test]
fn a_member_whose_group_acl_is_revoked_stops_at_its_next_heartbeat() {
    let t = topics();
    let client = bob();
    let group = unique_name(&format!("{BOB_PREFIX}authz-revoked"));
    let mut c = client
        .consumer(&group)
        .group_instance_id("bob-revoked-1")
        .subscribe([t.allowed.as_str()])
        .heartbeat_interval(Duration::from_millis(300))
        .session_timeout(Duration::from_secs(10))
        .enable_auto_commit(false)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.assignment().is_empty() {
        assert!(Instant::now() < deadline, "no assignment");
        c.poll(Duration::from_millis(500)).unwrap();
    }
    // Heartbeats are answered before the ACL goes.
    wait_for("a heartbeat answered", Duration::from_secs(10), || {
        c.member().unwrap().metrics().heartbeats > 0
    });
    deny_group_read(&format!("User:{}", BOB.name), &group);
    let started = Instant::now();
    let result = poll_until_error(&mut c);
    assert_denied(
        "poll after the ACL went",
        started,
        result,
        ApiKey::Heartbeat,
        KafkaCode::GroupAuthorizationFailed,
        Resource::Group(group.clone()),
    );
    assert_eq!(c.member().unwrap().state(), MemberState::Unauthorized);
    assert!(
        c.member().unwrap().assignment().is_empty(),
        "{}",
        c.member().unwrap().assignment()
    );
    // Stopped: no more heartbeats go out, and every call says why.
    let sent = c.member().unwrap().metrics().heartbeats + c.member().unwrap().metrics().heartbeat_failures;
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        c.member().unwrap().metrics().heartbeats + c.member().unwrap().metrics().heartbeat_failures,
        sent,
        "heartbeats went on"
    );
    assert!(matches!(
        c.poll(Duration::from_secs(1)),
        Err(Error::Authorization {
            api: ApiKey::Heartbeat,
            ..
        })
    ));
    c.close().unwrap();
}
