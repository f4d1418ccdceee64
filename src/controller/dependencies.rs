//! Order between promotions (`tollgate.dev/depends-on`), as the controller observes it: which
//! promotions each one depends on and their stages (from git), so that a step can hand the engine
//! its dependencies' stages and statuses, refuse a cycle or an unknown name, and re-step the
//! dependants of a promotion whose status changed. The rule itself lives in the engine
//! (`tollgate_engine::depends_on`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use tollgate_model::depends_on::{DEPENDS_ON_ANNOTATION, cycle_through, depends_on};

use super::git_task::GitUpdate;

/// What git says of one promotion, as far as ordering cares.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Declared {
    stages: Arc<Vec<String>>,
    depends_on: Vec<String>,
    file: String,
}

/// Every promotion's declared dependencies and stages, kept current by each git sync.
#[derive(Debug, Default)]
pub struct DependencyIndex {
    maps: RwLock<Maps>,
}

#[derive(Debug, Default)]
struct Maps {
    declared: BTreeMap<String, Declared>,
    /// Who names each promotion, so that a status write finds its dependants without a scan of
    /// every promotion (that scan, once per write, was quadratic at 10,000 promotions).
    dependants: HashMap<String, Vec<String>>,
}

impl Maps {
    #[cfg(test)]
    fn new(declared: BTreeMap<String, Declared>) -> Self {
        let mut maps = Maps {
            declared,
            dependants: HashMap::new(),
        };
        maps.index_dependants();
        maps
    }

    fn index_dependants(&mut self) {
        self.dependants.clear();
        for (dependant, declared) in &self.declared {
            for dependency in &declared.depends_on {
                let names = self.dependants.entry(dependency.clone()).or_default();
                if !names.contains(dependant) {
                    names.push(dependant.clone());
                }
            }
        }
    }
}

/// One promotion's dependencies for a step: each named one with its stages, or why the
/// annotation is refused.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    pub dependencies: Vec<(String, Arc<Vec<String>>)>,
    pub problem: Option<String>,
}

impl DependencyIndex {
    /// Takes in a git sync: changed promotions, and the whole set on a complete listing.
    pub fn absorb(&self, update: &GitUpdate) {
        if update.error.is_some() {
            return;
        }
        let mut maps = self.maps.write().unwrap_or_else(|e| e.into_inner());
        let declared = &mut maps.declared;
        let mut orders_changed = false;
        if update.complete {
            declared.retain(|name, d| {
                let kept = update.promotions.contains_key(name);
                orders_changed |= !kept && !d.depends_on.is_empty();
                kept
            });
        }
        for (name, git) in &update.promotions {
            let snapshot = git.as_ref().and_then(|g| g.view.effective_snapshot());
            match snapshot {
                Some(snapshot) => {
                    let promotion = &snapshot.promotion;
                    let names = depends_on(promotion);
                    let before = declared.get(name).map_or(&[][..], |d| &d.depends_on[..]);
                    orders_changed |= before != names.as_slice();
                    declared.insert(
                        name.clone(),
                        Declared {
                            stages: Arc::new(
                                promotion
                                    .spec
                                    .stages
                                    .iter()
                                    .map(|s| s.name.clone())
                                    .collect(),
                            ),
                            depends_on: names,
                            file: snapshot.file.clone(),
                        },
                    );
                }
                None => {
                    orders_changed |= declared
                        .remove(name)
                        .is_some_and(|d| !d.depends_on.is_empty());
                }
            }
        }
        if orders_changed {
            maps.index_dependants();
        }
    }

    /// The promotions that name `name` in their `tollgate.dev/depends-on`.
    pub fn dependants_of(&self, name: &str) -> Vec<String> {
        let maps = self.maps.read().unwrap_or_else(|e| e.into_inner());
        maps.dependants.get(name).cloned().unwrap_or_default()
    }

    /// `name`'s dependencies with their stages, or why its annotation is refused: a name no
    /// promotion in git has, or a cycle through it.
    pub fn resolve(&self, name: &str) -> Resolved {
        let maps = self.maps.read().unwrap_or_else(|e| e.into_inner());
        let declared = &maps.declared;
        let Some(own) = declared.get(name) else {
            return Resolved::default();
        };
        let refused = |why: String| Resolved {
            dependencies: Vec::new(),
            problem: Some(format!(
                "{}: metadata.annotations.{DEPENDS_ON_ANNOTATION}: {why}",
                own.file
            )),
        };
        if let Some(unknown) = own.depends_on.iter().find(|d| !declared.contains_key(*d)) {
            return refused(format!(
                "no promotion named {unknown:?} in the repository (a ClusterPromotion's metadata.name)"
            ));
        }
        let depends_on_of = |n: &str| declared.get(n).map(|d| d.depends_on.as_slice());
        if let Some(cycle) = cycle_through(name, depends_on_of) {
            return refused(format!("a cycle: {}", cycle.join(" -> ")));
        }
        Resolved {
            dependencies: own
                .depends_on
                .iter()
                .filter_map(|d| Some((d.clone(), declared.get(d)?.stages.clone())))
                .collect(),
            problem: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(entries: &[(&str, &[&str], &[&str])]) -> DependencyIndex {
        let declared = entries
            .iter()
            .map(|(name, stages, deps)| {
                (
                    name.to_string(),
                    Declared {
                        stages: Arc::new(stages.iter().map(|s| s.to_string()).collect()),
                        depends_on: deps.iter().map(|s| s.to_string()).collect(),
                        file: format!("promotions/{name}.yaml"),
                    },
                )
            })
            .collect();
        DependencyIndex {
            maps: RwLock::new(Maps::new(declared)),
        }
    }

    #[test]
    fn dependencies_resolve_with_their_stages_and_dependants_are_found() {
        let index = index(&[
            ("cert-manager", &["dev", "prod"], &[]),
            ("apps", &["dev", "prod"], &["cert-manager"]),
        ]);
        let resolved = index.resolve("apps");
        assert_eq!(resolved.problem, None);
        assert_eq!(resolved.dependencies.len(), 1);
        assert_eq!(resolved.dependencies[0].0, "cert-manager");
        assert_eq!(*resolved.dependencies[0].1, ["dev", "prod"]);
        assert_eq!(index.dependants_of("cert-manager"), ["apps"]);
        assert_eq!(index.resolve("cert-manager"), Resolved::default());
    }

    #[test]
    fn unknown_names_and_cycles_are_refused_naming_the_file() {
        let index = index(&[
            ("a", &["dev"], &["b"]),
            ("b", &["dev"], &["c"]),
            ("c", &["dev"], &["a"]),
            ("d", &["dev"], &["nope"]),
            ("e", &["dev"], &["a"]),
        ]);
        let a = index.resolve("a").problem.expect("cycle");
        assert!(a.starts_with("promotions/a.yaml: metadata.annotations.tollgate.dev/depends-on: a cycle: a -> b -> c -> a"), "{a}");
        let d = index.resolve("d").problem.expect("unknown");
        assert!(d.contains("no promotion named \"nope\""), "{d}");
        // Depending on a promotion in a cycle is not itself a cycle: it waits.
        assert_eq!(index.resolve("e").problem, None);
    }
}
