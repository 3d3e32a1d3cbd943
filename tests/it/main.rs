//! Integration tests against real Kafka brokers (see `support::broker`). One test binary, so
//! that all tests share one broker start-up.

mod admin_tests;
mod authorization_tests;
mod bounded_tests;
mod busy_link_tests;
// The binary exists only with the `cli` feature (on by default).
mod chaos_tests;
#[cfg(feature = "cli")]
mod cli_tests;
mod client_tests;
mod compat_tests;
mod connection_tests;
mod consumer_control_tests;
mod consumer_protocol_tests;
mod consumer_tests;
mod cooperative_tests;
mod demo_tests;
mod exactly_once_tests;
mod examples_tests;
mod failing_call_tests;
mod fetch_ahead_tests;
mod fetch_session_tests;
mod group_metadata_tests;
mod group_tests;
mod group_usability_tests;
mod harness;
mod hostile_api_tests;
mod idempotence_codec_tests;
mod interop_tests;
mod isolation_tests;
mod legacy_sasl_tests;
mod liveness_tests;
mod memory_tests;
mod no_loss_tests;
mod offsets_tests;
mod producer_tests;
mod proxy_tests;
mod read_committed_tests;
mod reauth_tests;
mod records_tests;
mod revoked_credentials_tests;
mod sasl_tests;
mod secure_broker_tests;
mod secure_interop_tests;
mod secure_tests;
mod support;
mod tls_tests;
mod transaction_interop_tests;
mod transaction_tests;
mod transactions_admin_tests;
mod wakeup_tests;
