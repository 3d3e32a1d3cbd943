//! Tagged fields a message carries that this client's schemas do not name.

use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt;

/// Tagged fields the client does not know, by tag, with their raw encoded values, kept so that
/// they survive a decode and re-encode; iterated in tag order, as they must be written.
///
/// Nearly every struct on the wire has none, and every generated struct (each partition of a
/// Metadata answer, each member of a JoinGroup answer) holds one of these, so the empty case is
/// what it is built for: one null pointer, which takes nothing to create, move or drop. A
/// `BTreeMap` took three words and an out-of-line `drop` call per struct even when empty.
// The box is the point (clippy's `box_collection` assumes the map's own size does not matter): it
// makes the empty case one word instead of three.
#[allow(clippy::box_collection)]
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct UnknownTaggedFields(Option<Box<BTreeMap<u32, Bytes>>>);

impl UnknownTaggedFields {
    /// No fields.
    #[inline]
    pub const fn new() -> Self {
        UnknownTaggedFields(None)
    }

    /// Whether there are none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        // Never `Some` of an empty map: `remove` drops the map with its last field.
        self.0.is_none()
    }

    /// How many there are.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |m| m.len())
    }

    /// Sets the raw value of `tag`, returning the one it replaces.
    pub fn insert(&mut self, tag: u32, value: Bytes) -> Option<Bytes> {
        self.0.get_or_insert_with(Default::default).insert(tag, value)
    }

    /// The raw value of `tag`.
    pub fn get(&self, tag: u32) -> Option<&Bytes> {
        self.0.as_ref()?.get(&tag)
    }

    /// Removes `tag`, returning its raw value.
    pub fn remove(&mut self, tag: u32) -> Option<Bytes> {
        let map = self.0.as_mut()?;
        let value = map.remove(&tag);
        if map.is_empty() {
            self.0 = None;
        }
        value
    }

    /// The fields in tag order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Bytes)> + '_ {
        self.0
            .iter()
            .flat_map(|m| m.iter().map(|(tag, value)| (*tag, value)))
    }
}

impl fmt::Debug for UnknownTaggedFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl FromIterator<(u32, Bytes)> for UnknownTaggedFields {
    fn from_iter<I: IntoIterator<Item = (u32, Bytes)>>(iter: I) -> Self {
        let mut fields = UnknownTaggedFields::new();
        fields.extend(iter);
        fields
    }
}

impl Extend<(u32, Bytes)> for UnknownTaggedFields {
    fn extend<I: IntoIterator<Item = (u32, Bytes)>>(&mut self, iter: I) {
        for (tag, value) in iter {
            self.insert(tag, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_again_equals_never_filled() {
        let mut fields = UnknownTaggedFields::new();
        assert!(fields.is_empty());
        assert_eq!(fields.insert(7, Bytes::from_static(b"x")), None);
        assert_eq!(fields.insert(3, Bytes::from_static(b"y")), None);
        assert_eq!(
            fields.insert(7, Bytes::from_static(b"z")).as_deref(),
            Some(&b"x"[..])
        );
        assert_eq!(fields.len(), 2);
        assert_eq!(fields.get(7).map(|b| &b[..]), Some(&b"z"[..]));
        let tags: Vec<u32> = fields.iter().map(|(tag, _)| tag).collect();
        assert_eq!(tags, [3, 7], "iterated in tag order, as they are written");
        assert_ne!(fields, UnknownTaggedFields::new());
        assert_eq!(fields.remove(3).as_deref(), Some(&b"y"[..]));
        assert_eq!(fields.remove(3), None);
        assert_eq!(fields.remove(7).as_deref(), Some(&b"z"[..]));
        assert!(fields.is_empty());
        assert_eq!(fields, UnknownTaggedFields::new());
        assert_eq!(format!("{fields:?}"), "{}");
    }

    #[test]
    fn collects_and_prints_like_a_map() {
        let fields: UnknownTaggedFields = [(2, Bytes::from_static(b"b")), (1, Bytes::from_static(b"a"))]
            .into_iter()
            .collect();
        assert_eq!(format!("{fields:?}"), "{1: b\"a\", 2: b\"b\"}");
        assert_eq!(
            std::mem::size_of::<UnknownTaggedFields>(),
            std::mem::size_of::<usize>()
        );
    }
}
