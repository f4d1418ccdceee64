//! Parsing request paths into discovery endpoints and resource endpoints.

/// What a path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Version,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/<group>`
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`
    GroupVersion {
        group: String,
        version: String,
    },
    Resource(ResourcePath),
    /// `/openapi/v3`
    OpenApiRoot,
    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`
    OpenApiGroupVersion {
        group: String,
        version: String,
    },
    Unknown,
}

/// A path below a group/version that names a resource type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub plural: String,
    /// None: cluster-scoped path or all namespaces.
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// `/status` subresource.
    pub status: bool,
}

pub fn parse(path: &str) -> Route {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segments.as_slice() {
        ["version"] => Route::Version,
        ["openapi", "v3"] => Route::OpenApiRoot,
        ["openapi", "v3", "api", version] => Route::OpenApiGroupVersion {
            group: String::new(),
            version: version.to_string(),
        },
        ["openapi", "v3", "apis", group, version] => Route::OpenApiGroupVersion {
            group: group.to_string(),
            version: version.to_string(),
        },
        ["api"] => Route::CoreVersions,
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group(group.to_string()),
        ["api", version] => Route::GroupVersion {
            group: String::new(),
            version: version.to_string(),
        },
        ["apis", group, version] => Route::GroupVersion {
            group: group.to_string(),
            version: version.to_string(),
        },
        ["api", version, rest @ ..] => resource("", version, rest),
        ["apis", group, version, rest @ ..] => resource(group, version, rest),
        _ => Route::Unknown,
    }
}

fn resource(group: &str, version: &str, rest: &[&str]) -> Route {
    let build = |namespace: Option<&str>, plural: &str, name: Option<&str>, status: bool| {
        Route::Resource(ResourcePath {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
            status,
        })
    };
    match rest {
        // `/namespaces/<ns>/status` is the Namespace's own status, not a type called "status".
        ["namespaces", ns, "status"] => build(None, "namespaces", Some(ns), true),
        ["namespaces", ns, plural] => build(Some(ns), plural, None, false),
        ["namespaces", ns, plural, name] => build(Some(ns), plural, Some(name), false),
        ["namespaces", ns, plural, name, "status"] => build(Some(ns), plural, Some(name), true),
        [plural] => build(None, plural, None, false),
        [plural, name] => build(None, plural, Some(name), false),
        [plural, name, "status"] => build(None, plural, Some(name), true),
        _ => Route::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource_path(path: &str) -> ResourcePath {
        match parse(path) {
            Route::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn namespaces_are_both_a_type_and_a_scope() {
        let ns = resource_path("/api/v1/namespaces/fleet");
        assert_eq!(
            (ns.plural.as_str(), ns.name.as_deref(), ns.namespace),
            ("namespaces", Some("fleet"), None)
        );
        let events = resource_path("/api/v1/namespaces/fleet/events");
        assert_eq!(
            (events.plural.as_str(), events.namespace.as_deref()),
            ("events", Some("fleet"))
        );
        assert!(resource_path("/api/v1/namespaces/fleet/status").status);
    }

    #[test]
    fn group_paths() {
        let status = resource_path(
            "/apis/config.projectsveltos.io/v1beta1/namespaces/a/clustersummaries/b/status",
        );
        assert_eq!(
            (status.group.as_str(), status.name.as_deref(), status.status),
            ("config.projectsveltos.io", Some("b"), true)
        );
        let all = resource_path("/apis/config.projectsveltos.io/v1beta1/clustersummaries");
        assert_eq!(all.namespace, None);
        assert_eq!(
            parse("/apis/tollgate.dev"),
            Route::Group("tollgate.dev".into())
        );
        assert_eq!(parse("/healthz/x/y/z/w/v/u"), Route::Unknown);
    }
}
