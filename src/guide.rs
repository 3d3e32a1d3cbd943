//! The user guide: one page per topic, after the crate-level introduction.
//!
//! | page | what it covers |
//! |---|---|
//! | [`consuming`] | `poll` and its events, graceful shutdown with `wakeup()`, offsets and positions, pause, the rebalance listener, manual assignment, fetching ahead, a batch job |
//! | [`static_membership`] | what `group.instance.id` guarantees, sizing the session timeout, fencing, old brokers, KIP-814, a threaded server of static members |
//! | [`rebalancing`] | the four assignors, eager against cooperative rebalancing, migrating an assignor |
//! | [`kip848`] | the consumer group protocol (`group.protocol=consumer`): brokers, what differs for static members, migrating a group |
//! | [`producing`] | the sender thread, idempotence, delivery handles, splitting batches refused as too large |
//! | [`exactly_once`] | consume, transform, produce and commit in one transaction; what each error means |
//! | [`share_groups`] | share groups (KIP-932): queues on Kafka topics, acknowledging each record, worker threads |
//! | [`security`] | TLS, SASL (PLAIN, SCRAM, OAUTHBEARER), re-authentication, authorization errors |
//! | [`configuration`] | builders, `property(key, value)` and properties files, every setting with its default, value checks |
//! | [`errors`] | the [`Error`](crate::Error) variants by what to do about them |
//! | [`compatibility`] | version negotiation, the broker releases tested and the matrix, minimum Rust version |
//!
//! The pages are Markdown files in the repository's `docs/guide/`; their Rust examples are
//! compiled as doc tests (`no_run` where they need a broker).

// Each page is an empty module whose documentation is one Markdown file, so the same text reads
// on docs.rs (with its examples compiled as doc tests) and in the repository.

#[doc = include_str!("../docs/guide/consuming.md")]
pub mod consuming {}

#[doc = include_str!("../docs/guide/static_membership.md")]
pub mod static_membership {}

#[doc = include_str!("../docs/guide/rebalancing.md")]
pub mod rebalancing {}

#[doc = include_str!("../docs/guide/kip848.md")]
pub mod kip848 {}

#[doc = include_str!("../docs/guide/producing.md")]
pub mod producing {}

#[doc = include_str!("../docs/guide/exactly_once.md")]
pub mod exactly_once {}

#[doc = include_str!("../docs/guide/share_groups.md")]
pub mod share_groups {}

#[doc = include_str!("../docs/guide/security.md")]
pub mod security {}

#[doc = include_str!("../docs/guide/configuration.md")]
pub mod configuration {}

#[doc = include_str!("../docs/guide/errors.md")]
pub mod errors {}

#[doc = include_str!("../docs/guide/compatibility.md")]
pub mod compatibility {}
