//! Errors talking to the management cluster, classified so that the controller and the user can
//! tell a retryable blip from a misconfiguration. Each keeps the kube error as its source, so the
//! chain down to the transport's error (a refused connection, a TLS failure) stays inspectable;
//! the message already quotes what matters of it.

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
        #[source]
        source: KubeSource,
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
        #[source]
        source: KubeSource,
    },
    #[error("conflict writing {resource} {name:?}: {message}")]
    Conflict {
        resource: String,
        name: String,
        message: String,
        #[source]
        source: KubeSource,
    },
    #[error("the API server rejected {verb} {resource}{}: {message}", named(.name))]
    Rejected {
        verb: String,
        resource: String,
        name: String,
        message: String,
        #[source]
        source: KubeSource,
    },
    #[error("cannot reach the management cluster to {verb} {resource}{}: {message}", named(.name))]
    Unavailable {
        verb: String,
        resource: String,
        name: String,
        message: String,
        #[source]
        source: KubeSource,
    },
    #[error("cannot decode {what}: {message}")]
    Decode { what: String, message: String },
}

/// The kube error a [`ClusterError`] was classified from: boxed (it is large, and most of the
/// variants' size), as a trait object so that walking the chain meets `kube::Error` itself.
pub type KubeSource = Box<dyn std::error::Error + Send + Sync>;

impl ClusterError {
    /// The kube error this error was classified from, if it was.
    pub fn kube_error(&self) -> Option<&kube::Error> {
        match self {
            ClusterError::CrdMissing { source, .. }
            | ClusterError::Forbidden { source, .. }
            | ClusterError::Conflict { source, .. }
            | ClusterError::Rejected { source, .. }
            | ClusterError::Unavailable { source, .. } => source.downcast_ref(),
            ClusterError::NotLeader | ClusterError::Decode { .. } => None,
        }
    }

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

/// Turns a kube error into the variant a user can act on; the kube error stays its source.
pub fn classify(error: kube::Error, verb: &str, resource: &str, name: &str) -> ClusterError {
    let (verb, resource, name) = (verb.to_string(), resource.to_string(), name.to_string());
    let kube::Error::Api(status) = &error else {
        // With the causes: "client error (Connect)" alone hides the "Connection refused" below it.
        return ClusterError::Unavailable {
            verb,
            resource,
            name,
            message: with_causes(&error),
            source: Box::new(error),
        };
    };
    let message = status.message.clone();
    // A 404 on a named write of a collection that should exist, with reason NotFound and no
    // object details, means the type itself is not served.
    let type_missing = status.details.as_ref().is_none_or(|d| d.name.is_empty());
    let code = status.code;
    let source: KubeSource = Box::new(error);
    match code {
        403 => ClusterError::Forbidden {
            verb,
            resource,
            name,
            message,
            source,
        },
        409 => ClusterError::Conflict {
            resource,
            name,
            message,
            source,
        },
        404 if type_missing => ClusterError::CrdMissing {
            crd: crd_of(&resource),
            resource,
            message,
            source,
        },
        429 | 500..=599 => ClusterError::Unavailable {
            verb,
            resource,
            name,
            message,
            source,
        },
        _ => ClusterError::Rejected {
            verb,
            resource,
            name,
            message,
            source,
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

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        let status = kube::core::Status::failure(message, "Conflict").with_code(code);
        kube::Error::Api(Box::new(status))
    }

    /// The kube error under a classified error, as a caller walking the chain finds it.
    fn kube_source(error: &ClusterError) -> &kube::Error {
        error
            .source()
            .and_then(|source| source.downcast_ref::<kube::Error>())
            .expect("the kube error is the source")
    }

    #[test]
    fn an_api_error_keeps_its_status_as_source() {
        let error = classify(
            api_error(409, "the object has been modified"),
            "patch",
            "gitpromotions",
            "web",
        );
        assert!(matches!(error, ClusterError::Conflict { .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            "conflict writing gitpromotions \"web\": the object has been modified"
        );
        let kube::Error::Api(status) = kube_source(&error) else {
            panic!("not the API error");
        };
        assert_eq!(status.code, 409);
        assert!(
            error
                .kube_error()
                .is_some_and(|e| std::ptr::eq(e, kube_source(&error)))
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_found_down_the_chain() {
        // A port nothing listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let uri = format!("http://127.0.0.1:{port}").parse().expect("uri");
        let client = kube::Client::try_from(kube::Config::new(uri)).expect("client");
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
        let refused = namespaces
            .list(&Default::default())
            .await
            .expect_err("nothing listens");
        let error = classify(refused, "list", "namespaces", "");
        assert!(error.is_transient(), "{error}");
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
        let mut kinds = Vec::new();
        while let Some(current) = cause {
            if let Some(io) = current.downcast_ref::<std::io::Error>() {
                kinds.push(io.kind());
            }
            cause = current.source();
        }
        assert_eq!(kinds, [std::io::ErrorKind::ConnectionRefused], "{error}");
    }
}
