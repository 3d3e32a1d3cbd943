//! Acknowledgements of share-group records (KIP-932), as pure data: what the application said
//! about each record, kept per partition until the next ShareFetch or ShareAcknowledge carries
//! it, and packed into the protocol's acknowledgement batches.
//!
//! A batch covers consecutive offsets `first..=last` with either one type for all of them or
//! one type per offset; offsets the application has not acknowledged yet are never covered
//! (a batch ends before them), and offsets inside an acquired range that held no record for the
//! application (a control record, a compacted-away one) are acknowledged as gaps.

use std::collections::BTreeMap;

/// What becomes of a record a share consumer acknowledges (Java's `AcknowledgeType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcknowledgeType {
    /// Processed: the record is never delivered again.
    Accept,
    /// Not processed: the record becomes available again, to this consumer or another, with
    /// its delivery count one higher (up to the group's `group.share.delivery.count.limit`,
    /// after which it is archived).
    Release,
    /// Unprocessable: the record is archived and never delivered again.
    Reject,
}

impl AcknowledgeType {
    /// The type's code on the wire (ShareFetch and ShareAcknowledge `AcknowledgeTypes`).
    pub(crate) fn code(self) -> i8 {
        match self {
            AcknowledgeType::Accept => ACCEPT,
            AcknowledgeType::Release => RELEASE,
            AcknowledgeType::Reject => REJECT,
        }
    }
}

impl std::fmt::Display for AcknowledgeType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AcknowledgeType::Accept => "accept",
            AcknowledgeType::Release => "release",
            AcknowledgeType::Reject => "reject",
        })
    }
}

impl std::str::FromStr for AcknowledgeType {
    type Err = String;

    /// `accept`, `release` or `reject`, in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "accept" => Ok(AcknowledgeType::Accept),
            "release" => Ok(AcknowledgeType::Release),
            "reject" => Ok(AcknowledgeType::Reject),
            _ => Err(format!(
                "{s:?} is not an acknowledge type (accept, release, reject)"
            )),
        }
    }
}

/// An offset inside an acquired range that held no record for the application.
pub(crate) const GAP: i8 = 0;
const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;
const REJECT: i8 = 3;

/// One acknowledgement batch as the protocol carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Batch {
    /// First offset covered.
    pub(crate) first: i64,
    /// Last offset covered (inclusive).
    pub(crate) last: i64,
    /// One type for every offset, or one per offset.
    pub(crate) types: Vec<i8>,
}

/// The acknowledgements of one partition not sent yet, by offset (a later one for the same
/// offset replaces the earlier, as long as neither has been sent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PartitionAcks {
    by_offset: BTreeMap<i64, i8>,
}

impl PartitionAcks {
    /// Records how `offset` is acknowledged.
    pub(crate) fn add(&mut self, offset: i64, kind: AcknowledgeType) {
        self.by_offset.insert(offset, kind.code());
    }

    /// Accepts `offset` unless the application acknowledged it some other way already.
    pub(crate) fn accept_unless_acknowledged(&mut self, offset: i64) {
        self.by_offset.entry(offset).or_insert(ACCEPT);
    }

    /// Acknowledges `first..=last` as gaps (no record there for the application).
    pub(crate) fn gaps(&mut self, first: i64, last: i64) {
        for offset in first..=last {
            self.by_offset.entry(offset).or_insert(GAP);
        }
    }

    /// Whether nothing is waiting.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_offset.is_empty()
    }

    /// Takes everything waiting, packed into batches.
    pub(crate) fn take_batches(&mut self) -> Vec<Batch> {
        let batches = batches(&self.by_offset);
        self.by_offset.clear();
        batches
    }
}

/// Packs acknowledgements by offset into batches: one per run of consecutive offsets, with a
/// single type when the whole run has the same one.
pub(crate) fn batches(by_offset: &BTreeMap<i64, i8>) -> Vec<Batch> {
    let mut out: Vec<Batch> = Vec::new();
    let mut run: Vec<i8> = Vec::new();
    let mut first = 0;
    let mut last = 0;
    for (&offset, &kind) in by_offset {
        if !run.is_empty() && offset != last + 1 {
            out.push(batch(first, last, std::mem::take(&mut run)));
        }
        if run.is_empty() {
            first = offset;
        }
        run.push(kind);
        last = offset;
    }
    if !run.is_empty() {
        out.push(batch(first, last, run));
    }
    out
}

fn batch(first: i64, last: i64, mut types: Vec<i8>) -> Batch {
    if types.iter().all(|t| *t == types[0]) {
        types.truncate(1);
    }
    Batch { first, last, types }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acks(pairs: &[(i64, AcknowledgeType)]) -> PartitionAcks {
        let mut a = PartitionAcks::default();
        for (o, k) in pairs {
            a.add(*o, *k);
        }
        a
    }

    #[test]
    fn a_run_of_one_type_is_one_batch_with_one_type() {
        use AcknowledgeType::Accept;
        let mut a = acks(&[(5, Accept), (6, Accept), (7, Accept)]);
        assert_eq!(
            a.take_batches(),
            vec![Batch {
                first: 5,
                last: 7,
                types: vec![ACCEPT]
            }]
        );
        assert!(a.is_empty());
    }

    #[test]
    fn mixed_types_are_listed_per_offset_and_holes_split_batches() {
        use AcknowledgeType::*;
        let mut a = acks(&[(1, Accept), (2, Release), (3, Reject), (10, Accept)]);
        assert_eq!(
            a.take_batches(),
            vec![
                Batch {
                    first: 1,
                    last: 3,
                    types: vec![ACCEPT, RELEASE, REJECT]
                },
                Batch {
                    first: 10,
                    last: 10,
                    types: vec![ACCEPT]
                },
            ]
        );
    }

    #[test]
    fn gaps_fill_only_what_the_application_did_not_acknowledge() {
        let mut a = acks(&[(4, AcknowledgeType::Accept)]);
        a.gaps(3, 5);
        assert_eq!(
            a.take_batches(),
            vec![Batch {
                first: 3,
                last: 5,
                types: vec![GAP, ACCEPT, GAP]
            }]
        );
    }

    #[test]
    fn a_later_acknowledgement_replaces_an_unsent_one() {
        use AcknowledgeType::*;
        let mut a = acks(&[(1, Release), (1, Accept)]);
        assert_eq!(
            a.take_batches(),
            vec![Batch {
                first: 1,
                last: 1,
                types: vec![ACCEPT]
            }]
        );
    }

    #[test]
    fn an_implicit_accept_leaves_an_explicit_acknowledgement_alone() {
        use AcknowledgeType::*;
        let mut a = acks(&[(2, Reject)]);
        a.accept_unless_acknowledged(1);
        a.accept_unless_acknowledged(2);
        assert_eq!(a.take_batches()[0].types, vec![ACCEPT, REJECT]);
    }

    #[test]
    fn types_parse_and_print() {
        for t in [
            AcknowledgeType::Accept,
            AcknowledgeType::Release,
            AcknowledgeType::Reject,
        ] {
            assert_eq!(t.to_string().parse::<AcknowledgeType>(), Ok(t));
        }
        assert!("renew".parse::<AcknowledgeType>().is_err());
    }
}
