//! A cached object's name, kept relative to the index key it is filed under, and interned.
//!
//! Generated names repeat their index key: a ClusterSummary of profile `P` is
//! `P-sveltos-<cluster>`, a ClusterProfile of promotion `Q` is `Q-<stage>`, a GitPromotion's status
//! is filed under its own name. Kept whole, the names of 400,000 summaries and the maps to find
//! them were a fifth of the controller's memory. Kept as what follows the index key and interned
//! with the namespace, a member's key is one pointer, shared by the summaries of one cluster.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::Arc;

use hashbrown::HashTable;

/// A name relative to the index key of its group. Within one group the order of the forms is the
/// order of the names they stand for, except that `Whole` names (rare) come after the others.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum NameForm {
    /// The name is the index key.
    Index,
    /// The name is the index key, a `-`, and this.
    AfterIndex(Box<str>),
    /// The name does not start with the index key (or the object is not indexed).
    Whole(Box<str>),
}

/// [`NameForm`] borrowed from a name being looked up, so that a lookup allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum FormRef<'a> {
    Index,
    AfterIndex(&'a str),
    Whole(&'a str),
}

impl<'a> FormRef<'a> {
    fn of(index: Option<&str>, name: &'a str) -> FormRef<'a> {
        let Some(index) = index else {
            return FormRef::Whole(name);
        };
        if name == index {
            return FormRef::Index;
        }
        match name
            .strip_prefix(index)
            .and_then(|rest| rest.strip_prefix('-'))
        {
            Some(rest) => FormRef::AfterIndex(rest),
            None => FormRef::Whole(name),
        }
    }
}

/// Whether `name` is kept relative to `index` (it is the key, or starts with it and a `-`).
pub fn follows_index(index: Option<&str>, name: &str) -> bool {
    !matches!(FormRef::of(index, name), FormRef::Whole(_))
}

impl NameForm {
    fn as_ref(&self) -> FormRef<'_> {
        match self {
            NameForm::Index => FormRef::Index,
            NameForm::AfterIndex(rest) => FormRef::AfterIndex(rest),
            NameForm::Whole(name) => FormRef::Whole(name),
        }
    }

    fn owned(form: FormRef<'_>) -> NameForm {
        match form {
            FormRef::Index => NameForm::Index,
            FormRef::AfterIndex(rest) => NameForm::AfterIndex(rest.into()),
            FormRef::Whole(name) => NameForm::Whole(name.into()),
        }
    }
}

/// The key of a member of a group: its namespace and its name relative to the group's index key.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MemberKey {
    namespace: Arc<str>,
    form: NameForm,
}

impl MemberKey {
    pub fn namespace(&self) -> &Arc<str> {
        &self.namespace
    }

    /// The whole name, given the index key of the group the key belongs to.
    pub fn name(&self, index: Option<&str>) -> String {
        match (&self.form, index) {
            (NameForm::Index, Some(index)) => index.to_string(),
            (NameForm::AfterIndex(rest), Some(index)) => format!("{index}-{rest}"),
            (NameForm::Whole(name), _) => name.to_string(),
            // Not built: `FormRef::of` gives unindexed names the whole form.
            (NameForm::Index | NameForm::AfterIndex(_), None) => String::new(),
        }
    }

    /// A key of an object filed under no index, outside any table.
    #[cfg(test)]
    pub fn unindexed(namespace: &str, name: &str) -> Arc<MemberKey> {
        Arc::new(MemberKey {
            namespace: Arc::from(namespace),
            form: NameForm::Whole(name.into()),
        })
    }

    fn is(&self, namespace: &str, form: FormRef<'_>) -> bool {
        *self.namespace == *namespace && self.form.as_ref() == form
    }
}

/// The interned member keys of one cache content, and the namespaces they share.
#[derive(Default)]
pub struct MemberKeys {
    keys: HashTable<Arc<MemberKey>>,
    namespaces: HashSet<Arc<str>>,
    hasher: RandomState,
}

fn hash_of(hasher: &RandomState, namespace: &str, form: FormRef<'_>) -> u64 {
    let mut state = hasher.build_hasher();
    namespace.hash(&mut state);
    form.hash(&mut state);
    state.finish()
}

impl MemberKeys {
    /// The key of `(namespace, name)` in the group of `index`, if some member has it.
    pub fn find(
        &self,
        index: Option<&str>,
        namespace: &str,
        name: &str,
    ) -> Option<&Arc<MemberKey>> {
        let form = FormRef::of(index, name);
        self.keys
            .find(hash_of(&self.hasher, namespace, form), |key| {
                key.is(namespace, form)
            })
    }

    /// The key of `(namespace, name)` in the group of `index`, made if no member has it yet.
    pub fn intern(&mut self, index: Option<&str>, namespace: &str, name: &str) -> Arc<MemberKey> {
        let form = FormRef::of(index, name);
        let hasher = &self.hasher;
        let namespaces = &mut self.namespaces;
        self.keys
            .entry(
                hash_of(hasher, namespace, form),
                |key| key.is(namespace, form),
                |key| hash_of(hasher, &key.namespace, key.form.as_ref()),
            )
            .or_insert_with(|| {
                let namespace = match namespaces.get(namespace) {
                    Some(shared) => shared.clone(),
                    None => {
                        let shared: Arc<str> = Arc::from(namespace);
                        namespaces.insert(shared.clone());
                        shared
                    }
                };
                Arc::new(MemberKey {
                    namespace,
                    form: NameForm::owned(form),
                })
            })
            .get()
            .clone()
    }

    /// Drops `key` from the table if no member holds it any more (`key` itself is the caller's
    /// last copy), and its namespace with the last key in it.
    pub fn release(&mut self, key: Arc<MemberKey>) {
        // The table's copy and the caller's.
        if Arc::strong_count(&key) > 2 {
            return;
        }
        let hasher = &self.hasher;
        let hash = hash_of(hasher, &key.namespace, key.form.as_ref());
        if let Ok(entry) = self.keys.find_entry(hash, |k| Arc::ptr_eq(k, &key)) {
            entry.remove();
        }
        // The set's copy and this key's.
        if Arc::strong_count(&key.namespace) == 2 {
            self.namespaces.remove(&*key.namespace);
        }
        if self.keys.capacity() > 64 && self.keys.len() < self.keys.capacity() / 4 {
            self.keys
                .shrink_to_fit(|key| hash_of(hasher, &key.namespace, key.form.as_ref()));
        }
    }

    /// Interned keys and namespaces.
    #[cfg(test)]
    pub fn sizes(&self) -> (usize, usize) {
        (self.keys.len(), self.namespaces.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_kept_relative_to_its_index_key() {
        assert_eq!(FormRef::of(Some("p"), "p"), FormRef::Index);
        assert_eq!(
            FormRef::of(Some("p"), "p-sveltos-c1"),
            FormRef::AfterIndex("sveltos-c1")
        );
        // A prefix without the dash is another name, not a relative one.
        assert_eq!(FormRef::of(Some("p"), "px-c1"), FormRef::Whole("px-c1"));
        assert_eq!(FormRef::of(None, "p-c1"), FormRef::Whole("p-c1"));
        let mut keys = MemberKeys::default();
        for (index, name) in [
            (Some("p"), "p"),
            (Some("p"), "p-s1"),
            (Some("p"), "q"),
            (None, "q"),
        ] {
            assert_eq!(keys.intern(index, "ns", name).name(index), name);
        }
    }

    #[test]
    fn the_same_name_after_different_index_keys_is_one_key() {
        let mut keys = MemberKeys::default();
        let first = keys.intern(Some("p1"), "fleet", "p1-sveltos-c1");
        let second = keys.intern(Some("p2"), "fleet", "p2-sveltos-c1");
        assert!(Arc::ptr_eq(&first, &second));
        let other = keys.intern(Some("p1"), "other", "p1-sveltos-c1");
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(keys.sizes(), (2, 2));
        assert!(Arc::ptr_eq(
            keys.find(Some("p3"), "fleet", "p3-sveltos-c1")
                .expect("interned"),
            &first
        ));
        assert!(keys.find(Some("p1"), "fleet", "p1-sveltos-c2").is_none());
    }

    #[test]
    fn a_key_and_its_namespace_go_with_their_last_holder() {
        let mut keys = MemberKeys::default();
        let held = [
            keys.intern(Some("p1"), "fleet", "p1-c1"),
            keys.intern(Some("p2"), "fleet", "p2-c1"),
            keys.intern(Some("p1"), "fleet", "p1-c2"),
        ];
        let [a, b, c] = held;
        keys.release(a);
        assert_eq!(keys.sizes(), (2, 1), "p2-c1 still holds the key");
        keys.release(b);
        assert_eq!(keys.sizes(), (1, 1));
        keys.release(c);
        assert_eq!(keys.sizes(), (0, 0));
    }

    #[test]
    fn keys_order_as_their_names_within_a_group() {
        let mut keys = MemberKeys::default();
        let names = ["p", "p-a", "p-b-c", "p-c"];
        let mut interned: Vec<Arc<MemberKey>> = names
            .iter()
            .rev()
            .map(|name| keys.intern(Some("p"), "ns", name))
            .collect();
        interned.sort();
        let sorted: Vec<String> = interned.iter().map(|k| k.name(Some("p"))).collect();
        assert_eq!(sorted, names);
        // A name that does not follow the index key comes after those that do.
        let whole = keys.intern(Some("p"), "ns", "a");
        assert!(whole > interned[3]);
    }
}
