//! [`Int32List`]: the type of every `[]int32` field in the generated messages.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, DerefMut};

/// Values held without a heap allocation.
const INLINE: usize = 5;

/// A list of `int32`s — broker ids, replica sets, partition indexes — that keeps up to five
/// values inline and only allocates beyond that.
///
/// A Metadata response has three of these per partition, nearly always as long as the
/// replication factor; as `Vec<i32>` each non-empty one cost an allocation, which was most of the
/// decoding time of a large cluster's metadata. It reads as a `&[i32]` (`Deref`), is built with
/// `.into()` from a `Vec<i32>`, an array or a slice, or collected from an iterator.
#[derive(Clone)]
pub struct Int32List(Repr);

#[derive(Clone)]
enum Repr {
    Inline { len: u8, items: [i32; INLINE] },
    Heap(Vec<i32>),
}

impl Int32List {
    /// The empty list.
    pub const fn new() -> Self {
        Int32List(Repr::Inline {
            len: 0,
            items: [0; INLINE],
        })
    }

    /// Appends `v`, moving to the heap when the inline room is full.
    pub fn push(&mut self, v: i32) {
        match &mut self.0 {
            Repr::Inline { len, items } if (*len as usize) < INLINE => {
                items[*len as usize] = v;
                *len += 1;
            }
            Repr::Inline { len, items } => {
                let mut heap = Vec::with_capacity(INLINE * 2);
                heap.extend_from_slice(&items[..*len as usize]);
                heap.push(v);
                self.0 = Repr::Heap(heap);
            }
            Repr::Heap(v2) => v2.push(v),
        }
    }

    /// The values as a slice.
    #[inline]
    pub fn as_slice(&self) -> &[i32] {
        match &self.0 {
            Repr::Inline { len, items } => &items[..*len as usize],
            Repr::Heap(v) => v,
        }
    }

    /// Builds a list from `n` big-endian `int32`s in `raw` (exactly `4 * n` bytes).
    pub(crate) fn from_be_bytes(raw: &[u8]) -> Self {
        let mut chunks = raw.chunks_exact(4);
        let n = raw.len() / 4;
        if n <= INLINE {
            let mut items = [0; INLINE];
            for (slot, c) in items.iter_mut().zip(&mut chunks) {
                *slot = i32::from_be_bytes([c[0], c[1], c[2], c[3]]);
            }
            Int32List(Repr::Inline { len: n as u8, items })
        } else {
            Int32List(Repr::Heap(
                chunks
                    .map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ))
        }
    }
}

impl Default for Int32List {
    fn default() -> Self {
        Self::new()
    }
}

impl Deref for Int32List {
    type Target = [i32];

    #[inline]
    fn deref(&self) -> &[i32] {
        self.as_slice()
    }
}

impl DerefMut for Int32List {
    fn deref_mut(&mut self) -> &mut [i32] {
        match &mut self.0 {
            Repr::Inline { len, items } => &mut items[..*len as usize],
            Repr::Heap(v) => v,
        }
    }
}

impl PartialEq for Int32List {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Int32List {}

impl Hash for Int32List {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl PartialEq<[i32]> for Int32List {
    fn eq(&self, other: &[i32]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<Vec<i32>> for Int32List {
    fn eq(&self, other: &Vec<i32>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<const N: usize> PartialEq<[i32; N]> for Int32List {
    fn eq(&self, other: &[i32; N]) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl fmt::Debug for Int32List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl FromIterator<i32> for Int32List {
    fn from_iter<I: IntoIterator<Item = i32>>(iter: I) -> Self {
        let mut list = Int32List::new();
        for v in iter {
            list.push(v);
        }
        list
    }
}

impl From<&[i32]> for Int32List {
    fn from(s: &[i32]) -> Self {
        s.iter().copied().collect()
    }
}

impl From<Vec<i32>> for Int32List {
    fn from(v: Vec<i32>) -> Self {
        if v.len() <= INLINE {
            v.as_slice().into()
        } else {
            Int32List(Repr::Heap(v))
        }
    }
}

impl<const N: usize> From<[i32; N]> for Int32List {
    fn from(a: [i32; N]) -> Self {
        a.as_slice().into()
    }
}

impl From<Int32List> for Vec<i32> {
    fn from(l: Int32List) -> Self {
        match l.0 {
            Repr::Inline { len, items } => items[..len as usize].to_vec(),
            Repr::Heap(v) => v,
        }
    }
}

impl<'a> IntoIterator for &'a Int32List {
    type Item = &'a i32;
    type IntoIter = std::slice::Iter<'a, i32>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl IntoIterator for Int32List {
    type Item = i32;
    type IntoIter = std::vec::IntoIter<i32>;

    fn into_iter(self) -> Self::IntoIter {
        Vec::from(self).into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_from_inline_to_heap_keeping_order() {
        let mut l = Int32List::new();
        assert!(l.is_empty());
        for i in 0..12 {
            l.push(i);
            assert_eq!(l.len(), i as usize + 1);
            assert_eq!(l, (0..=i).collect::<Vec<_>>());
        }
        let small: Int32List = vec![3, 1, 2].into();
        assert_eq!(small, [3, 1, 2]);
        let mut sorted = small.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [1, 2, 3]);
        assert_eq!(Vec::from(sorted), vec![1, 2, 3]);
        assert_eq!(format!("{small:?}"), "[3, 1, 2]");
        assert_eq!(Int32List::from(vec![1; 9]).len(), 9);
    }

    #[test]
    fn reads_big_endian_values_both_sizes() {
        for n in [0usize, 1, 5, 6, 40] {
            let values: Vec<i32> = (0..n as i32).map(|i| i * -70_001).collect();
            let raw: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
            assert_eq!(Int32List::from_be_bytes(&raw), values, "n = {n}");
        }
    }
}
