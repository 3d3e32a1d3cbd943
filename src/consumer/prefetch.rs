//! Fetch-ahead: what the consumer fetched and has not handed out yet, bounded in bytes, and the
//! rule that decides whether a prefetched record may still be handed out.
//!
//! Pure ([`FetchBuffer`], [`Stamp`]): the poll thread owns it; fetch threads
//! ([`super::workers`]) only ever send answers back, which the poll thread files here.
//!
//! - **Epochs.** Every partition carries a [`Stamp`]: bumped for that partition by a pause, a
//!   seek or a reset request, and for all of them by an assignment, a revocation or a loss.
//!   A fetch records the stamp its partitions had when it was sent; an answer whose stamp is
//!   no longer current is dropped when it arrives, and a buffered entry whose stamp is no
//!   longer current is dropped when poll reaches it. So nothing fetched before a partition was
//!   paused, seeked or revoked is ever handed out, however late its answer comes.
//! - **Positions.** Even with a current stamp, an entry is handed out only if its partition is
//!   assigned, not paused, and stands exactly where the entry starts.
//! - **Bytes.** Buffered records are counted as decoded (payload, headers and the per-record
//!   overhead), and every fetch in flight reserves the most it asked the broker for. A new
//!   fetch is sent only while buffered + reserved is below the limit, and asks for no more
//!   than what is left: backpressure on a slow application.

use super::positions::Positions;
use super::ConsumerRecord;
use crate::group::TopicPartition;
use std::collections::{HashMap, VecDeque};

/// A partition's assignment epoch: `(all, own)`, the consumer-wide part bumped by assignment
/// changes, the partition's own by a pause, seek or reset of that partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Stamp(u64, u64);

/// Records fetched for one partition and not yet handed out.
#[derive(Debug)]
struct Entry {
    tp: TopicPartition,
    stamp: Stamp,
    /// The offset the next record handed out must follow: the partition's position.
    at: i64,
    records: VecDeque<ConsumerRecord>,
    /// Where the partition goes on once these are handed out (past control records and gaps).
    next_offset: i64,
    /// Bytes counted for the records still here.
    bytes: usize,
}

/// The prefetched records, their byte count against the limit, and the partitions' epochs.
#[derive(Debug)]
pub(crate) struct FetchBuffer {
    entries: VecDeque<Entry>,
    all: u64,
    own: HashMap<TopicPartition, u64>,
    limit: usize,
    buffered: usize,
    reserved: usize,
}

/// What a record is counted as: its payload and headers, its topic name (a copy of its own)
/// and the struct itself.
pub(crate) fn record_size(r: &ConsumerRecord) -> usize {
    let len = |b: &Option<bytes::Bytes>| b.as_ref().map_or(0, |b| b.len());
    let headers: usize = r
        .headers
        .iter()
        .map(|(k, v)| k.len() + len(v) + std::mem::size_of::<(String, Option<bytes::Bytes>)>())
        .sum();
    std::mem::size_of::<ConsumerRecord>() + r.topic.len() + len(&r.key) + len(&r.value) + headers
}

impl FetchBuffer {
    /// An empty buffer holding at most `limit` bytes (plus what one answer overshoots by).
    pub fn new(limit: usize) -> Self {
        FetchBuffer {
            entries: VecDeque::new(),
            all: 0,
            own: HashMap::new(),
            limit,
            buffered: 0,
            reserved: 0,
        }
    }

    /// `tp`'s current stamp.
    pub fn stamp(&self, tp: &TopicPartition) -> Stamp {
        Stamp(self.all, self.own.get(tp).copied().unwrap_or(0))
    }

    /// Drops what is buffered for `tp` and invalidates what is in flight for it (pause, seek,
    /// reset request).
    pub fn discard(&mut self, tp: &TopicPartition) {
        *self.own.entry(tp.clone()).or_default() += 1;
        let mut freed = 0;
        self.entries.retain(|e| {
            let keep = &e.tp != tp;
            if !keep {
                freed += e.bytes;
            }
            keep
        });
        self.buffered -= freed;
    }

    /// Drops everything buffered and invalidates everything in flight (assignment change).
    pub fn discard_all(&mut self) {
        self.all += 1;
        self.own.clear();
        self.entries.clear();
        self.buffered = 0;
    }

    /// Bytes a new fetch may ask for: 0 when buffered and reserved bytes reach the limit.
    pub fn room(&self) -> usize {
        self.limit.saturating_sub(self.buffered + self.reserved)
    }

    /// A fetch asking for up to `bytes` was sent.
    pub fn reserve(&mut self, bytes: usize) {
        self.reserved += bytes;
    }

    /// A fetch that reserved `bytes` was answered (or failed).
    pub fn release(&mut self, bytes: usize) {
        self.reserved = self.reserved.saturating_sub(bytes);
    }

    /// Bytes counted for buffered records.
    #[cfg(test)]
    pub fn buffered_bytes(&self) -> usize {
        self.buffered
    }

    /// Whether nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether an answer for `tp` sent with `stamp` may still be kept.
    pub fn is_current(&self, tp: &TopicPartition, stamp: Stamp) -> bool {
        self.stamp(tp) == stamp
    }

    /// Files records fetched for `tp` from `from` under `stamp`; where the partition goes on
    /// afterwards is `next_offset`. False (and nothing kept) if the stamp is stale.
    pub fn push(
        &mut self,
        tp: TopicPartition,
        stamp: Stamp,
        from: i64,
        records: Vec<ConsumerRecord>,
        next_offset: i64,
    ) -> bool {
        if !self.is_current(&tp, stamp) {
            return false;
        }
        let bytes = records.iter().map(record_size).sum();
        self.buffered += bytes;
        self.entries.push_back(Entry {
            tp,
            stamp,
            at: from,
            records: records.into(),
            next_offset,
            bytes,
        });
        true
    }

    /// Hands out up to `max` records, advancing `positions`. An entry whose stamp is stale, or
    /// whose partition is not assigned, paused, or not at the entry's offset, is dropped.
    pub fn drain(&mut self, max: usize, positions: &mut Positions) -> Vec<ConsumerRecord> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(front) = self.entries.front_mut() else {
                break;
            };
            let deliverable = Stamp(self.all, self.own.get(&front.tp).copied().unwrap_or(0)) == front.stamp
                && positions.is_assigned(&front.tp)
                && !positions.is_paused(&front.tp)
                && positions.position(&front.tp) == Some(front.at);
            if !deliverable {
                log::debug!(
                    "{}: dropping {} prefetched records",
                    front.tp,
                    front.records.len()
                );
                self.buffered -= front.bytes;
                self.entries.pop_front();
                continue;
            }
            let n = (max - out.len()).min(front.records.len());
            let mut last = None;
            for r in front.records.drain(..n) {
                let size = record_size(&r);
                front.bytes -= size;
                self.buffered -= size;
                last = Some((r.offset, r.leader_epoch));
                out.push(r);
            }
            let epoch = last.and_then(|(_, e)| e);
            if front.records.is_empty() {
                // Past control records and gaps too, so that a commit does not point at them.
                positions.consumed(&front.tp, front.next_offset, epoch);
                self.buffered -= front.bytes;
                self.entries.pop_front();
            } else if let Some((offset, _)) = last {
                positions.consumed(&front.tp, offset + 1, epoch);
                front.at = offset + 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    fn record(partition: i32, offset: i64) -> ConsumerRecord {
        ConsumerRecord {
            topic: "t".into(),
            partition,
            offset,
            timestamp: 0,
            key: None,
            value: Some(bytes::Bytes::from(vec![0u8; 100])),
            headers: Vec::new(),
            leader_epoch: Some(1),
        }
    }

    fn records(partition: i32, from: i64, to: i64) -> Vec<ConsumerRecord> {
        (from..to).map(|o| record(partition, o)).collect()
    }

    /// Partitions 0 and 1 assigned, at offset 0.
    fn positions() -> Positions {
        let mut p = Positions::default();
        p.assign(&[tp(0), tp(1)]);
        p.apply_committed(&tp(0), Some((0, None)));
        p.apply_committed(&tp(1), Some((0, None)));
        p
    }

    #[test]
    fn answers_sent_before_a_pause_seek_or_reassignment_are_dropped() {
        let mut b = FetchBuffer::new(1 << 20);
        let before = b.stamp(&tp(0));
        b.discard(&tp(0)); // pause, seek or reset request
        assert!(!b.push(tp(0), before, 0, records(0, 0, 3), 3));
        assert!(b.is_empty());
        assert!(
            b.push(tp(1), b.stamp(&tp(1)), 0, records(1, 0, 3), 3),
            "other partitions unaffected"
        );
        let one = b.stamp(&tp(1));
        b.discard_all(); // assignment, revocation, loss
        assert!(b.is_empty());
        assert_eq!(b.buffered_bytes(), 0);
        assert!(!b.push(tp(1), one, 3, records(1, 3, 4), 4));
        assert!(b.push(tp(0), b.stamp(&tp(0)), 0, records(0, 0, 1), 1));
    }

    #[test]
    fn buffered_entries_of_a_paused_or_moved_partition_are_not_handed_out() {
        let mut p = positions();
        let mut b = FetchBuffer::new(1 << 20);
        let (s0, s1) = (b.stamp(&tp(0)), b.stamp(&tp(1)));
        assert!(b.push(tp(0), s0, 0, records(0, 0, 2), 2));
        assert!(b.push(tp(1), s1, 0, records(1, 0, 2), 2));
        assert!(b.push(tp(0), s0, 2, records(0, 2, 4), 4), "a second answer ahead");
        // Paused behind the buffer's back (the consumer also discards): still never handed out.
        p.pause(&tp(1));
        let out = b.drain(10, &mut p);
        assert_eq!(
            out.iter().map(|r| (r.partition, r.offset)).collect::<Vec<_>>(),
            vec![(0, 0), (0, 1), (0, 2), (0, 3)]
        );
        assert_eq!(p.position(&tp(0)), Some(4));
        assert_eq!(p.position(&tp(1)), Some(0));
        assert!(b.is_empty());
        assert_eq!(b.buffered_bytes(), 0);
        // A seek elsewhere leaves the entry's offset behind: dropped.
        assert!(b.push(tp(0), s0, 4, records(0, 4, 6), 6));
        p.seek(&tp(0), 10);
        assert!(b.drain(10, &mut p).is_empty());
        assert_eq!(p.position(&tp(0)), Some(10));
    }

    #[test]
    fn partial_drains_keep_order_and_accounting() {
        let mut p = positions();
        let mut b = FetchBuffer::new(1 << 20);
        let s = b.stamp(&tp(0));
        assert!(b.push(tp(0), s, 0, records(0, 0, 5), 7)); // control records at 5-6
        let full = b.buffered_bytes();
        assert_eq!(full, 5 * record_size(&record(0, 0)));
        assert_eq!(b.drain(3, &mut p).len(), 3);
        assert_eq!(b.buffered_bytes(), 2 * record_size(&record(0, 0)));
        assert_eq!(p.position(&tp(0)), Some(3));
        assert_eq!(b.drain(3, &mut p).len(), 2);
        assert_eq!(p.position(&tp(0)), Some(7), "past the control records");
        assert_eq!(b.buffered_bytes(), 0);
        // An answer with only control records moves the position once reached.
        assert!(b.push(tp(0), s, 7, Vec::new(), 9));
        assert!(b.drain(3, &mut p).is_empty());
        assert_eq!(p.position(&tp(0)), Some(9));
    }

    #[test]
    fn room_shrinks_with_buffered_and_reserved_bytes() {
        let size = record_size(&record(0, 0));
        let mut b = FetchBuffer::new(10 * size);
        assert_eq!(b.room(), 10 * size);
        b.reserve(4 * size);
        assert_eq!(b.room(), 6 * size);
        assert!(b.push(tp(0), b.stamp(&tp(0)), 0, records(0, 0, 6), 6));
        assert_eq!(b.room(), 0, "full: no fetch is sent (backpressure)");
        b.release(4 * size);
        assert_eq!(b.room(), 4 * size);
        // An answer may overshoot (the broker returns a first batch whole); room stays 0.
        assert!(b.push(tp(1), b.stamp(&tp(1)), 0, records(1, 0, 8), 8));
        assert_eq!(b.room(), 0);
        let mut p = positions();
        b.drain(6, &mut p);
        assert_eq!(b.room(), 2 * size);
        b.discard(&tp(1));
        assert_eq!(b.room(), 10 * size);
        b.release(1); // a release without a reservation does not underflow
        assert_eq!(b.room(), 10 * size);
    }
}
