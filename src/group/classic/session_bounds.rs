//! What a JoinGroup answered `INVALID_SESSION_TIMEOUT` is told: the coordinator broker's
//! `group.min.session.timeout.ms` and `group.max.session.timeout.ms`, read with DescribeConfigs
//! (a broker resource, over the member's coordinator connection) only when that error comes,
//! so the join itself pays nothing for it.

use super::Classic;
use crate::error::Error;
use crate::group::member::core::Core;
use crate::group::member::lookup_deadline;
use crate::protocol::messages::describe_configs_request::DescribeConfigsResource;
use crate::protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use crate::KafkaCode;
use std::time::{Duration, Instant};

/// DescribeConfigs' resource type for a broker (Java's `ConfigResource.Type.BROKER`).
const BROKER_RESOURCE: i8 = 4;
const MIN: &str = "group.min.session.timeout.ms";
const MAX: &str = "group.max.session.timeout.ms";

impl Classic {
    /// [`Error::InvalidSessionTimeout`] for this member, with the coordinator's bounds if they
    /// can be read by `deadline` (or within one lookup's minimum when less is left), else why
    /// not.
    pub(super) fn invalid_session_timeout(&mut self, core: &mut Core, deadline: Instant) -> Error {
        let bounds = self.read_session_bounds(core, lookup_deadline(deadline));
        if let Err(why) = &bounds {
            log::debug!("{}: could not read {MIN}/{MAX}: {why}", core.ctx());
        }
        let (broker_bounds, bounds_unread) = match bounds {
            Ok(b) => (Some(b), None),
            Err(why) => (None, Some(why)),
        };
        Error::InvalidSessionTimeout {
            group: core.config.group_id.clone(),
            session_timeout: core.config.session_timeout,
            broker_bounds,
            bounds_unread,
        }
    }

    fn read_session_bounds(
        &mut self,
        core: &mut Core,
        deadline: Instant,
    ) -> Result<(Duration, Duration), String> {
        let broker = core
            .session
            .coordinator
            .as_ref()
            .map(|b| b.id.to_string())
            .ok_or("the coordinator is unknown")?;
        let conn = core
            .session
            .conn
            .as_mut()
            .ok_or("no connection to the coordinator")?;
        let resp = conn
            .request(Some(deadline), |_| session_bounds_request(&broker))
            .map_err(|e| format!("DescribeConfigs failed: {e}"))?;
        session_bounds_in(&resp)
    }
}

/// DescribeConfigs of the two settings on broker `broker` (its id).
fn session_bounds_request(broker: &str) -> DescribeConfigsRequest {
    DescribeConfigsRequest {
        resources: vec![DescribeConfigsResource {
            resource_type: BROKER_RESOURCE,
            resource_name: broker.to_string().into(),
            configuration_keys: Some(vec![MIN.into(), MAX.into()]),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The two bounds in a DescribeConfigs answer, or why they are not there (an error for the
/// resource, e.g. no `DESCRIBE_CONFIGS` on the cluster; a value missing or not a number).
fn session_bounds_in(resp: &DescribeConfigsResponse) -> Result<(Duration, Duration), String> {
    let result = resp
        .results
        .first()
        .ok_or("DescribeConfigs answered no resource")?;
    let code = KafkaCode::from_code(result.error_code);
    if code.is_error() {
        return Err(match &result.error_message {
            Some(m) => format!("DescribeConfigs answered {code}: {}", m.as_str()),
            None => format!("DescribeConfigs answered {code}"),
        });
    }
    let value = |name: &str| -> Result<Duration, String> {
        let config = result
            .configs
            .iter()
            .find(|c| c.name.as_str() == name)
            .ok_or_else(|| format!("{name} not in the answer"))?;
        let text = config.value.as_ref().map_or("", |v| v.as_str());
        text.parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| format!("{name} is {text:?}, not a number of milliseconds"))
    };
    Ok((value(MIN)?, value(MAX)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::describe_configs_response::{
        DescribeConfigsResourceResult, DescribeConfigsResult,
    };

    fn answer(code: KafkaCode, configs: &[(&str, Option<&str>)]) -> DescribeConfigsResponse {
        DescribeConfigsResponse {
            results: vec![DescribeConfigsResult {
                error_code: code.code(),
                resource_type: BROKER_RESOURCE,
                resource_name: "1".into(),
                configs: configs
                    .iter()
                    .map(|(n, v)| DescribeConfigsResourceResult {
                        name: (*n).into(),
                        value: v.map(Into::into),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn the_request_asks_the_broker_for_both_settings() {
        let req = session_bounds_request("3");
        assert_eq!(req.resources.len(), 1);
        let r = &req.resources[0];
        assert_eq!((r.resource_type, r.resource_name.as_str()), (4, "3"));
        let keys: Vec<&str> = r
            .configuration_keys
            .iter()
            .flatten()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(keys, [MIN, MAX]);
    }

    #[test]
    fn bounds_are_read_or_say_why_not() {
        let ms = Duration::from_millis;
        let ok = answer(KafkaCode::None, &[(MAX, Some("1800000")), (MIN, Some("6000"))]);
        assert_eq!(session_bounds_in(&ok), Ok((ms(6000), ms(1_800_000))));
        let denied = answer(KafkaCode::ClusterAuthorizationFailed, &[]);
        assert!(session_bounds_in(&denied)
            .unwrap_err()
            .contains("CLUSTER_AUTHORIZATION_FAILED"));
        let missing = answer(KafkaCode::None, &[(MIN, Some("6000"))]);
        assert!(session_bounds_in(&missing).unwrap_err().contains(MAX));
        let bad = answer(KafkaCode::None, &[(MIN, Some("six")), (MAX, None)]);
        assert!(session_bounds_in(&bad).unwrap_err().contains("not a number"));
        assert!(session_bounds_in(&DescribeConfigsResponse::default()).is_err());
    }
}
