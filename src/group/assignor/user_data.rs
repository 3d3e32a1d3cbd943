//! The subscription user data of the sticky assignors, in the formats Kafka's Java assignors
//! write, and what the leader reads from it as each member's [`Claim`].
//!
//! - `sticky`: Java's `StickyAssignorUserData` — v0 is an array of (topic: string,
//!   partitions: array of int32), the member's last assignment; v1 appends its generation
//!   (int32). Classic encoding: int16-length strings, int32-count arrays, big-endian, no
//!   version prefix (the reader tells them apart by what remains).
//! - `cooperative-sticky`: the generation as one int32, for leaders that read subscriptions
//!   older than ConsumerProtocol v2 (which carries the generation itself); the owned
//!   partitions are in the subscription.

use super::sticky::Claim;
use crate::group::assignment::Subscription;
use crate::group::TopicPartition;
use crate::protocol::wire::Decoder;
use crate::protocol::DecodeError;
use bytes::Bytes;
use std::collections::BTreeMap;

/// `sticky`'s user data (v1): `partitions` (any order) and their generation.
pub(crate) fn encode_sticky(partitions: &[TopicPartition], generation: i32) -> Bytes {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    let mut out = Vec::new();
    out.extend_from_slice(&(by_topic.len() as i32).to_be_bytes());
    for (topic, ps) in by_topic {
        // A topic name is at most 249 bytes (Kafka's limit), far below i16::MAX.
        out.extend_from_slice(&(topic.len() as i16).to_be_bytes());
        out.extend_from_slice(topic.as_bytes());
        out.extend_from_slice(&(ps.len() as i32).to_be_bytes());
        for p in ps {
            out.extend_from_slice(&p.to_be_bytes());
        }
    }
    out.extend_from_slice(&generation.to_be_bytes());
    Bytes::from(out)
}

/// Reads `sticky`'s user data: the partitions and, from v1, the generation.
pub(crate) fn decode_sticky(bytes: &Bytes) -> Result<Claim, DecodeError> {
    let mut d = Decoder::new(bytes);
    let topics = d.get_array_len(false)?;
    let mut partitions = Vec::new();
    for _ in 0..topics {
        let topic = d.get_string(false)?;
        for _ in 0..d.get_array_len(false)? {
            partitions.push(TopicPartition::new(topic.to_string(), d.get_i32()?));
        }
    }
    // v0 ends here; v1 has the generation. Like Java's reader, a v1 whose generation is cut
    // short is read as v0, and bytes after it are ignored.
    let generation = match d.remaining() {
        n if n < 4 => None,
        _ => Some(d.get_i32()?).filter(|g| *g >= 0),
    };
    Ok(Claim {
        partitions,
        generation,
    })
}

/// What a `sticky` member claims: its user data's last assignment. Without user data (a
/// first join) or with user data that does not decode (another client's bug), nothing: its
/// partitions are then reassigned as if new rather than the whole group failing.
pub(crate) fn sticky_claim(sub: &Subscription) -> Claim {
    match &sub.user_data {
        Some(b) if !b.is_empty() => decode_sticky(b).unwrap_or_else(|e| {
            log::warn!("sticky: a member's user data does not decode ({e}); its partitions count as unowned");
            Claim::default()
        }),
        _ => Claim::default(),
    }
}

/// `cooperative-sticky`'s user data: the generation.
pub(crate) fn encode_generation(generation: i32) -> Bytes {
    Bytes::copy_from_slice(&generation.to_be_bytes())
}

/// What a `cooperative-sticky` member claims: the partitions its subscription says it owns,
/// with the subscription's generation (v2+), else the one in its user data.
pub(crate) fn cooperative_claim(sub: &Subscription) -> Claim {
    let from_user_data = || {
        let b = sub.user_data.as_ref()?;
        let raw: [u8; 4] = b.get(..4)?.try_into().ok()?;
        Some(i32::from_be_bytes(raw)).filter(|g| *g >= 0)
    };
    Claim {
        partitions: sub.owned.clone(),
        generation: sub.generation.or_else(from_user_data),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition::new(t, p)
    }

    #[test]
    fn sticky_user_data_has_javas_layout_and_reads_back() {
        let b = encode_sticky(&[tp("b", 1), tp("a", 0), tp("b", 0)], 7);
        #[rustfmt::skip]
        let expect: &[u8] = &[
            0, 0, 0, 2,                  // two topics
            0, 1, b'a', 0, 0, 0, 1, 0, 0, 0, 0,
            0, 1, b'b', 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0,
            0, 0, 0, 7,                  // generation (v1)
        ];
        assert_eq!(&b[..], expect);
        let c = decode_sticky(&b).unwrap();
        assert_eq!(c.partitions, vec![tp("a", 0), tp("b", 1), tp("b", 0)]);
        assert_eq!(c.generation, Some(7));
    }

    #[test]
    fn sticky_user_data_v0_has_no_generation() {
        let v1 = encode_sticky(&[tp("a", 3)], 2);
        let v0 = v1.slice(..v1.len() - 4);
        let c = decode_sticky(&v0).unwrap();
        assert_eq!((c.partitions, c.generation), (vec![tp("a", 3)], None));
    }

    #[test]
    fn hostile_sticky_user_data_is_an_error_not_a_panic_nor_a_huge_allocation() {
        let huge_count = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff]);
        assert!(decode_sticky(&huge_count).is_err());
        let negative = Bytes::from_static(&[0xff, 0xff, 0xff, 0xfe]);
        assert!(decode_sticky(&negative).is_err());
        let full = encode_sticky(&[tp("topic", 1), tp("topic", 2)], 3);
        for cut in 1..full.len() - 4 {
            assert!(decode_sticky(&full.slice(..cut)).is_err(), "cut at {cut}");
        }
        // A generation cut short reads as v0.
        assert_eq!(
            decode_sticky(&full.slice(..full.len() - 2)).unwrap().generation,
            None
        );
        // Undecodable user data claims nothing.
        let sub = Subscription {
            user_data: Some(huge_count),
            ..Default::default()
        };
        assert_eq!(sticky_claim(&sub), Claim::default());
    }

    #[test]
    fn a_cooperative_claim_prefers_the_subscriptions_generation() {
        let mut sub = Subscription {
            owned: vec![tp("t", 1)],
            user_data: Some(encode_generation(4)),
            ..Default::default()
        };
        assert_eq!(cooperative_claim(&sub).generation, Some(4));
        sub.generation = Some(5);
        assert_eq!(cooperative_claim(&sub).generation, Some(5));
        assert_eq!(cooperative_claim(&sub).partitions, vec![tp("t", 1)]);
        sub.generation = None;
        sub.user_data = Some(encode_generation(-1));
        assert_eq!(cooperative_claim(&sub).generation, None);
    }
}
