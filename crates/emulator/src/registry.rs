//! The served resource types. Data-driven so that creating a CustomResourceDefinition registers a
//! new type exactly like the built-in Sveltos ones and the CRDs a caller passes in at start.

use serde_json::Value;

/// One served resource type (a group/version/plural triple).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub namespaced: bool,
    /// Whether `/status` is a subresource (the main endpoint then ignores status changes).
    pub status_subresource: bool,
    /// The CRD version's `additionalPrinterColumns`, for Table answers (`kubectl get`).
    pub printer_columns: Vec<PrinterColumn>,
}

/// One `additionalPrinterColumns` entry of a CRD version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub column_type: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

impl PrinterColumn {
    /// The columns a CRD version declares; entries without a name or jsonPath are skipped, as
    /// the real server's validation would have refused them.
    pub fn from_crd_version(version: &Value) -> Vec<Self> {
        let text =
            |column: &Value, field: &str| column[field].as_str().unwrap_or_default().to_string();
        version["additionalPrinterColumns"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["name"].is_string() && c["jsonPath"].is_string())
            .map(|c| Self {
                name: text(c, "name"),
                column_type: text(c, "type"),
                format: text(c, "format"),
                description: text(c, "description"),
                priority: c["priority"].as_i64().unwrap_or(0),
                json_path: text(c, "jsonPath"),
            })
            .collect()
    }
}

/// `plural.group` of a CRD object: the name of the CRD and of the type it declares.
pub fn crd_name(crd: &Value) -> Option<String> {
    let spec = &crd["spec"];
    let (Some(group), Some(plural)) = (spec["group"].as_str(), spec["names"]["plural"].as_str())
    else {
        return None;
    };
    Some(format!("{plural}.{group}"))
}

impl ResourceType {
    #[allow(clippy::too_many_arguments)]
    fn new(
        group: &str,
        version: &str,
        kind: &str,
        plural: &str,
        short_names: &[&str],
        namespaced: bool,
        status_subresource: bool,
    ) -> Self {
        Self {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
            plural: plural.to_string(),
            singular: kind.to_lowercase(),
            short_names: short_names.iter().map(|s| s.to_string()).collect(),
            namespaced,
            status_subresource,
            printer_columns: Vec::new(),
        }
    }

    /// `apiVersion` as written in objects: `v1` for core, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural.group` (or `plural` for core), the name the real server uses in messages.
    pub fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Whether `name` (plural, `plural.group`, kind, singular or short name) designates this type.
    pub fn is_named(&self, name: &str) -> bool {
        let name = name.to_lowercase();
        name == self.plural
            || name == self.qualified_plural()
            || name == self.singular
            || name == self.kind.to_lowercase()
            || self.short_names.contains(&name)
    }
}

/// Every type the emulator serves.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    types: Vec<ResourceType>,
}

/// Plural of the CustomResourceDefinition type, which has a side effect on the registry.
pub const CRD_QUALIFIED_PLURAL: &str = "customresourcedefinitions.apiextensions.k8s.io";

impl Registry {
    /// The built-in types: the core and Kubernetes types tollgate uses, and Sveltos's.
    pub fn builtin() -> Self {
        let sveltos = "config.projectsveltos.io";
        let types = vec![
            ResourceType::new("", "v1", "Namespace", "namespaces", &["ns"], false, true),
            ResourceType::new("", "v1", "Event", "events", &["ev"], true, false),
            ResourceType::new(
                "events.k8s.io",
                "v1",
                "Event",
                "events",
                &["ev"],
                true,
                false,
            ),
            ResourceType::new(
                "coordination.k8s.io",
                "v1",
                "Lease",
                "leases",
                &[],
                true,
                false,
            ),
            ResourceType::new(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                "customresourcedefinitions",
                &["crd", "crds"],
                false,
                true,
            ),
            ResourceType::new(
                sveltos,
                "v1beta1",
                "ClusterProfile",
                "clusterprofiles",
                &[],
                false,
                true,
            ),
            ResourceType::new(
                sveltos,
                "v1beta1",
                "ClusterSummary",
                "clustersummaries",
                &[],
                true,
                true,
            ),
            ResourceType::new(sveltos, "v1beta1", "Profile", "profiles", &[], true, true),
            ResourceType::new(
                "lib.projectsveltos.io",
                "v1beta1",
                "SveltosCluster",
                "sveltosclusters",
                &[],
                true,
                true,
            ),
        ];
        Self { types }
    }

    /// These types minus those named in `without` (by any name [`ResourceType::is_named`]
    /// accepts), so a test can start without e.g. ClusterSummary; CRDs are always served.
    pub fn without(mut self, without: &[String]) -> Self {
        self.types.retain(|t| {
            t.plural == "customresourcedefinitions" || !without.iter().any(|w| t.is_named(w))
        });
        self
    }

    pub fn types(&self) -> &[ResourceType] {
        &self.types
    }

    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
    }

    /// Whether any type is served under this group and version.
    pub fn serves(&self, group: &str, version: &str) -> bool {
        self.types
            .iter()
            .any(|t| t.group == group && t.version == version)
    }

    /// The type with this `qualified_plural` (any version; the first registered wins).
    pub fn find_qualified(&self, qualified_plural: &str) -> Option<&ResourceType> {
        self.types
            .iter()
            .find(|t| t.qualified_plural() == qualified_plural)
    }

    /// Groups in registration order, each with its versions.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for t in &self.types {
            match groups.iter_mut().find(|(g, _)| *g == t.group) {
                Some((_, versions)) => {
                    if !versions.contains(&t.version) {
                        versions.push(t.version.clone());
                    }
                }
                None => groups.push((t.group.clone(), vec![t.version.clone()])),
            }
        }
        groups
    }

    /// Registers (or replaces) the served versions a CustomResourceDefinition object declares.
    /// Returns false when the object is not a usable CRD.
    pub fn register_crd(&mut self, crd: &Value) -> bool {
        let spec = &crd["spec"];
        let (Some(group), Some(kind), Some(plural)) = (
            spec["group"].as_str(),
            spec["names"]["kind"].as_str(),
            spec["names"]["plural"].as_str(),
        ) else {
            return false;
        };
        let namespaced = spec["scope"].as_str() == Some("Namespaced");
        let singular = spec["names"]["singular"]
            .as_str()
            .map_or_else(|| kind.to_lowercase(), str::to_string);
        let short_names: Vec<String> = spec["names"]["shortNames"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let Some(versions) = spec["versions"].as_array() else {
            return false;
        };
        self.types
            .retain(|t| !(t.group == group && t.plural == plural));
        for v in versions {
            let (Some(name), served) = (v["name"].as_str(), v["served"].as_bool().unwrap_or(true))
            else {
                continue;
            };
            if !served {
                continue;
            }
            self.types.push(ResourceType {
                group: group.to_string(),
                version: name.to_string(),
                kind: kind.to_string(),
                plural: plural.to_string(),
                singular: singular.clone(),
                short_names: short_names.clone(),
                namespaced,
                status_subresource: v["subresources"].get("status").is_some(),
                printer_columns: PrinterColumn::from_crd_version(v),
            });
        }
        true
    }

    /// Stops serving the types a deleted CRD declared.
    pub fn unregister_crd(&mut self, crd: &Value) {
        if let (Some(group), Some(plural)) = (
            crd["spec"]["group"].as_str(),
            crd["spec"]["names"]["plural"].as_str(),
        ) {
            self.types
                .retain(|t| !(t.group == group && t.plural == plural));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builtin_can_leave_out_a_type() {
        let all = Registry::builtin();
        assert!(
            all.find("config.projectsveltos.io", "v1beta1", "clustersummaries")
                .is_some()
        );
        let without =
            Registry::builtin().without(&["clustersummaries.config.projectsveltos.io".to_string()]);
        assert!(
            without
                .find("config.projectsveltos.io", "v1beta1", "clustersummaries")
                .is_none()
        );
        assert!(
            without
                .find("config.projectsveltos.io", "v1beta1", "clusterprofiles")
                .is_some()
        );
    }

    #[test]
    fn a_registered_crd_brings_its_printer_columns() {
        let mut registry = Registry::builtin();
        let crd = json!({"spec": {"group": "example.com", "scope": "Cluster",
            "names": {"kind": "Gadget", "plural": "gadgets"},
            "versions": [{"name": "v1", "additionalPrinterColumns": [
                {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                {"name": "Nameless", "type": "string"}]}]}});
        assert!(registry.register_crd(&crd));
        assert_eq!(crd_name(&crd).as_deref(), Some("gadgets.example.com"));
        let gadget = registry.find("example.com", "v1", "gadgets").unwrap();
        let columns: Vec<(&str, &str)> = gadget
            .printer_columns
            .iter()
            .map(|c| (c.name.as_str(), c.json_path.as_str()))
            .collect();
        assert_eq!(columns, [("Phase", ".status.phase")]);
    }

    #[test]
    fn crd_registers_served_versions() {
        let mut registry = Registry::builtin();
        let crd = json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "subresources": {"status": {}}},
                         {"name": "v0", "served": false}]}});
        assert!(registry.register_crd(&crd));
        let widget = registry.find("example.com", "v1", "widgets").cloned();
        assert!(
            widget
                .as_ref()
                .is_some_and(|w| w.namespaced && w.status_subresource && w.is_named("wd"))
        );
        assert!(registry.find("example.com", "v0", "widgets").is_none());
        registry.unregister_crd(&crd);
        assert!(registry.find("example.com", "v1", "widgets").is_none());
    }
}
