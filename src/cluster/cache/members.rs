//! The objects filed under one index key, in key order.
//!
//! Most index keys hold a handful of objects (a promotion's status, its four profiles, a
//! profile's summaries on a small fleet), and a `BTreeMap` allocates a whole 11-slot node (about
//! 460 bytes) for even one. Small groups are a sorted vector sized to fit instead; a group that
//! grows past [`SMALL`] becomes a B-tree, where an insertion is not a shift of every later member.

use std::collections::BTreeMap;

use std::sync::Arc;

use super::member_key::MemberKey;

/// Members beyond which a group is a B-tree.
const SMALL: usize = 32;

pub enum Members<T> {
    /// Sorted by key, capacity equal to length.
    Small(Vec<(Arc<MemberKey>, T)>),
    Large(BTreeMap<Arc<MemberKey>, T>),
}

impl<T> Default for Members<T> {
    fn default() -> Self {
        Members::Small(Vec::new())
    }
}

impl<T> Members<T> {
    pub fn insert(&mut self, key: Arc<MemberKey>, value: T) {
        match self {
            Members::Small(members) => match members.binary_search_by(|(k, _)| (**k).cmp(&key)) {
                Ok(at) => members[at].1 = value,
                Err(at) if members.len() < SMALL => {
                    members.reserve_exact(1);
                    members.insert(at, (key, value));
                }
                Err(_) => {
                    let mut tree: BTreeMap<Arc<MemberKey>, T> = members.drain(..).collect();
                    tree.insert(key, value);
                    *self = Members::Large(tree);
                }
            },
            Members::Large(tree) => {
                tree.insert(key, value);
            }
        }
    }

    /// Removes the member of `key`; returns its key as stored, and its value.
    pub fn remove(&mut self, key: &MemberKey) -> Option<(Arc<MemberKey>, T)> {
        match self {
            Members::Small(members) => {
                let at = members.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
                let removed = members.remove(at);
                members.shrink_to_fit();
                Some(removed)
            }
            Members::Large(tree) => {
                let removed = tree.remove_entry(key);
                // Back to a vector well below the threshold, so a group hovering at the
                // threshold does not convert back and forth.
                if tree.len() <= SMALL / 2 {
                    let members: Vec<(Arc<MemberKey>, T)> =
                        std::mem::take(tree).into_iter().collect();
                    *self = Members::Small(members);
                }
                removed
            }
        }
    }

    pub fn get(&self, key: &MemberKey) -> Option<&T> {
        match self {
            Members::Small(members) => members
                .binary_search_by(|(k, _)| (**k).cmp(key))
                .ok()
                .map(|at| &members[at].1),
            Members::Large(tree) => tree.get(key),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Members::Small(members) => members.is_empty(),
            Members::Large(tree) => tree.is_empty(),
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        match self {
            Members::Small(members) => members.len(),
            Members::Large(tree) => tree.len(),
        }
    }

    /// Every member in key order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&Arc<MemberKey>, &T)> + '_> {
        match self {
            Members::Small(members) => Box::new(members.iter().map(|(k, v)| (k, v))),
            Members::Large(tree) => Box::new(tree.iter()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Arc<MemberKey> {
        MemberKey::unindexed("ns", name)
    }

    #[test]
    fn members_stay_in_key_order_across_the_threshold_both_ways() {
        let mut members: Members<usize> = Members::default();
        // Inserted in a scrambled order, past the threshold.
        let order: Vec<usize> = (0..SMALL * 2).map(|i| (i * 37) % (SMALL * 2)).collect();
        for i in &order {
            members.insert(key(&format!("{i:03}")), *i);
            members.insert(key(&format!("{i:03}")), *i); // a replace is not a new member
        }
        assert!(matches!(members, Members::Large(_)));
        assert_eq!(members.len(), SMALL * 2);
        let seen: Vec<usize> = members.iter().map(|(_, v)| *v).collect();
        assert_eq!(seen, (0..SMALL * 2).collect::<Vec<_>>());
        for i in 0..SMALL * 2 - 3 {
            members.remove(&key(&format!("{i:03}")));
        }
        assert!(matches!(members, Members::Small(_)));
        let seen: Vec<usize> = members.iter().map(|(_, v)| *v).collect();
        assert_eq!(seen, [SMALL * 2 - 3, SMALL * 2 - 2, SMALL * 2 - 1]);
        assert_eq!(
            members.get(&key(&format!("{:03}", SMALL * 2 - 2))).copied(),
            Some(SMALL * 2 - 2)
        );
        assert!(members.get(&key("000")).is_none());
        members.remove(&key("000"));
        assert_eq!(members.len(), 3);
    }

    #[test]
    fn a_small_group_holds_no_spare_capacity() {
        let mut members: Members<u8> = Members::default();
        for name in ["c", "a", "b"] {
            members.insert(key(name), 0);
        }
        members.remove(&key("a"));
        let Members::Small(vector) = &members else {
            panic!("three members are a small group");
        };
        assert_eq!(vector.capacity(), vector.len());
        assert_eq!(
            members
                .iter()
                .map(|(k, _)| k.name(None))
                .collect::<Vec<_>>(),
            ["b", "c"]
        );
    }
}
