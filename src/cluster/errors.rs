//! Errors talking to the management cluster, classified so that the controller and the user can
//! tell a retryable blip from a misconfiguration.

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("not the leader: writes are disabled on this replica")]
    NotLeader,
    #[error(
        "the management cluster does not serve {resource}: is the {crd} CRD installed? ({message})"
    )]
    CrdMissing {
        resource: String,
        crd: String,
        message: String,
    },
    #[error(
        "RBAC forbids tollgate to {verb} {resource}{}: {message} (see deploy/ for the ClusterRole)",
        named(.name)
    )]
    Forbidden {
        verb: String,
        resource: String,
        name: String,
        message: String,
    },
    #[error("conflict writing {resource} {name:?}: {message}")]
    Conflict {
        resource: String,
        name: String,
        message: String,
    },
    #[error("the API server rejected {verb} {resource}{}: {message}", named(.name))]
    Rejected {
        verb: String,
        resource: String,
        name: String,
        message: String,
    },
    #[error("cannot reach the management cluster to {verb} {resource}{}: {message}", named(.name))]
    Unavailable {
        verb: String,
        resource: String,
        name: String,
        message: String,
    },
    #[error("cannot decode {what}: {message}")]
    Decode { what: String, message: String },
}

impl ClusterError {
    /// Whether retrying the same request later can succeed without a human.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ClusterError::Unavailable { .. }
                | ClusterError::Conflict { .. }
                // A starting API server answers 403 until its RBAC caches are filled; a revoked
                // role stays refused, and the retry cap keeps that cheap.
                | ClusterError::Forbidden { .. }
        )
    }
}

/// Turns a kube error into the variant a user can act on.
pub fn classify(error: kube::Error, verb: &str, resource: &str, name: &str) -> ClusterError {
    let (verb, resource, name) = (verb.to_string(), resource.to_string(), name.to_string());
    match error {
        kube::Error::Api(status) => {
            let message = status.message.clone();
            match status.code {
                403 => ClusterError::Forbidden {
                    verb,
                    resource,
                    name,
                    message,
                },
                409 => ClusterError::Conflict {
                    resource,
                    name,
                    message,
                },
                // A 404 on a named write of a collection that should exist, with reason NotFound and
                // no object details, means the type itself is not served.
                404 if status.details.as_ref().is_none_or(|d| d.name.is_empty()) => {
                    ClusterError::CrdMissing {
                        crd: crd_of(&resource),
                        resource,
                        message,
                    }
                }
                429 | 500..=599 => ClusterError::Unavailable {
                    verb,
                    resource,
                    name,
                    message,
                },
                _ => ClusterError::Rejected {
                    verb,
                    resource,
                    name,
                    message,
                },
            }
        }
        // With the causes: "client error (Connect)" alone hides the "Connection refused" below it.
        other => ClusterError::Unavailable {
            verb,
            resource,
            name,
            message: with_causes(&other),
        },
    }
}

/// ` "name"`, or nothing for a list (no name).
fn named(name: &str) -> String {
    match name {
        "" => String::new(),
        name => format!(" {name:?}"),
    }
}

fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let inner_text = inner.to_string();
        if !text.contains(&inner_text) {
            text = format!("{text}: {inner_text}");
        }
        cause = inner.source();
    }
    text
}

fn crd_of(resource: &str) -> String {
    match resource {
        "clusterprofiles" => "clusterprofiles.config.projectsveltos.io (Sveltos)".into(),
        "clustersummaries" => "clustersummaries.config.projectsveltos.io (Sveltos)".into(),
        "sveltosclusters" => "sveltosclusters.lib.projectsveltos.io (Sveltos)".into(),
        "gitpromotions" => {
            "gitpromotions.tollgate.dev (`tollgate crd | kubectl apply -f -`)".into()
        }
        other => other.to_string(),
    }
}
