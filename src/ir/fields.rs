//! [`Fields`]: the attributes of a plain object in a config tree ([`Tree::Object`]).
//!
//! Owns their storage: a vector sorted by name, read like the `BTreeMap` it replaces (the same
//! order, lookups by name). Why not a `BTreeMap`: its first node is a leaf with room for eleven
//! entries (about 900 bytes for `String` keys and [`Tree`] values) whatever the object holds,
//! and a large plan is mostly objects of one to three attributes; a 100k-resource IR held about
//! 180 MB of such leaves (issue 35). A sorted vector of exactly its length holds one attribute
//! in 80 bytes.
//!
//! Not here: what the attributes mean (`model`, `queries`), nor parsing them (`parse`).

use std::slice;

use super::model::Tree;

/// The attributes of a plain object, sorted by name, each name once.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Fields(Vec<(String, Tree)>);

/// An attribute of [`Fields`], as iterators yield it (a `BTreeMap` entry's shape).
type Entry<'a> = (&'a String, &'a Tree);

/// The iterator over [`Fields`] in name order.
pub(crate) type FieldsIter<'a> =
    std::iter::Map<slice::Iter<'a, (String, Tree)>, fn(&'a (String, Tree)) -> Entry<'a>>;

impl Fields {
    /// No attributes.
    pub(crate) fn new() -> Fields {
        Fields(Vec::new())
    }

    /// Room for `n` attributes, for a caller that knows how many it adds.
    pub(crate) fn with_capacity(n: usize) -> Fields {
        Fields(Vec::with_capacity(n))
    }

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(name))
    }

    /// The attribute `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Tree> {
        self.position(name).ok().map(|i| &self.0[i].1)
    }

    /// The attribute `name`, to change it.
    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut Tree> {
        self.position(name).ok().map(|i| &mut self.0[i].1)
    }

    /// Whether there is an attribute `name`.
    pub(crate) fn contains_key(&self, name: &str) -> bool {
        self.position(name).is_ok()
    }

    /// Sets attribute `name` to `value`; returns the value it replaces. Adding names in order
    /// (as a parsed JSON object from Nix has them) appends.
    pub(crate) fn insert(&mut self, name: String, value: Tree) -> Option<Tree> {
        if self.0.last().is_none_or(|(last, _)| *last < name) {
            self.0.push((name, value));
            return None;
        }
        match self.position(&name) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (name, value));
                None
            }
        }
    }

    /// How many attributes there are.
    #[cfg(test)] // used by the unit tests only
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The attributes in name order.
    pub(crate) fn iter(&self) -> FieldsIter<'_> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The names, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(k, _)| k)
    }

    /// The values, in name order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Tree> {
        self.0.iter().map(|(_, v)| v)
    }

    /// The values in name order, to change them.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut Tree> {
        self.0.iter_mut().map(|(_, v)| v)
    }

    /// Gives back the room no attribute uses.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.0.shrink_to_fit();
    }
}

impl FromIterator<(String, Tree)> for Fields {
    /// As a `BTreeMap` collects: sorted by name, a later value of a name replacing an earlier.
    fn from_iter<I: IntoIterator<Item = (String, Tree)>>(items: I) -> Fields {
        let items = items.into_iter();
        let mut out = Fields::with_capacity(items.size_hint().0);
        for (k, v) in items {
            out.insert(k, v);
        }
        out.shrink_to_fit();
        out
    }
}

impl std::ops::Index<&str> for Fields {
    type Output = Tree;

    /// The attribute `name`; panics when there is none, as a `BTreeMap` does.
    fn index(&self, name: &str) -> &Tree {
        self.get(name)
            .unwrap_or_else(|| panic!("no attribute {name:?} in the object"))
    }
}

impl<'a> IntoIterator for &'a Fields {
    type Item = Entry<'a>;
    type IntoIter = FieldsIter<'a>;

    fn into_iter(self) -> FieldsIter<'a> {
        self.iter()
    }
}

impl IntoIterator for Fields {
    type Item = (String, Tree);
    type IntoIter = std::vec::IntoIter<(String, Tree)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Tree {
        Tree::String(x.into())
    }

    #[test]
    fn fields_read_like_a_btreemap_in_any_insertion_order() {
        let names = ["b", "a", "c", "a", "d"];
        let fields: Fields = names
            .iter()
            .enumerate()
            .map(|(i, k)| (k.to_string(), s(&i.to_string())))
            .collect();
        let map: std::collections::BTreeMap<String, Tree> = names
            .iter()
            .enumerate()
            .map(|(i, k)| (k.to_string(), s(&i.to_string())))
            .collect();
        assert!(fields.iter().eq(map.iter()));
        assert_eq!(fields.len(), 4);
        assert_eq!(fields.get("a"), Some(&s("3")));
        assert_eq!(fields.get("e"), None);
        assert!(fields.contains_key("d") && !fields.contains_key(""));
    }

    #[test]
    fn insert_replaces_a_name_and_keeps_the_order() {
        let mut fields = Fields::new();
        assert_eq!(fields.insert("m".into(), s("1")), None);
        assert_eq!(fields.insert("z".into(), s("2")), None);
        assert_eq!(fields.insert("a".into(), s("3")), None);
        assert_eq!(fields.insert("m".into(), s("4")), Some(s("1")));
        let keys: Vec<&String> = fields.keys().collect();
        assert_eq!(keys, ["a", "m", "z"]);
        *fields.get_mut("z").unwrap() = s("5");
        let values: Vec<Tree> = fields.into_iter().map(|(_, v)| v).collect();
        assert_eq!(values, [s("3"), s("4"), s("5")]);
    }

    #[test]
    fn collected_fields_hold_no_spare_room() {
        let fields: Fields = (0..3).map(|i| (format!("k{i}"), s("v"))).collect();
        assert_eq!(fields.0.capacity(), 3);
    }
}
