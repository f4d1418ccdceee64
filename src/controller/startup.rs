//! Start-up: waiting until the management cluster serves what tollgate needs.
//!
//! A management cluster that restarts as a whole brings up its API server, the RBAC authorizer,
//! the CRDs and tollgate in any order. A replica that exited on the first refusal would
//! crash-loop with a growing back-off exactly then; instead it waits, retrying with a capped
//! back-off, with `/readyz` failing and one log line per change of cause naming the cause and
//! the fix. Nothing the cluster answers stops the controller: only a usage error does (flags,
//! files), and those are found before this wait.

use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::cluster::errors::{ClusterError, classify};
use crate::cluster::resources;

/// Where a starting controller is, for `/readyz` and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Startup {
    /// Nothing answered yet.
    Connecting,
    /// The management cluster is not usable yet: what it answered, and what fixes it when the
    /// cause does not pass on its own.
    Waiting { cause: String, fix: String },
    /// The management cluster serves everything tollgate needs: the watches and the loop run.
    Started,
}

impl Startup {
    /// The `/readyz` text of a controller that has not started, `None` once it has.
    pub fn not_ready_reason(&self) -> Option<String> {
        match self {
            Startup::Connecting => Some("connecting to the management cluster".into()),
            Startup::Waiting { cause, fix } => Some(format!(
                "waiting for the management cluster: {cause} (fix: {fix})"
            )),
            Startup::Started => None,
        }
    }
}

/// What the management cluster serves beyond the required types.
#[derive(Debug, Clone, Copy)]
pub struct Served {
    /// Cluster API's clusters (optional: matched too when served).
    pub capi_clusters: bool,
}

/// The first retry comes soon (a blip); later ones at most this far apart, so a CRD installed
/// together with the controller, or a server back from a restart, is noticed within seconds.
const FIRST_RETRY: Duration = Duration::from_millis(200);
const MAX_RETRY: Duration = Duration::from_secs(5);
/// One attempt (a handful of one-item lists) must not hang on a server that accepts
/// connections but does not answer.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// The kinds of cause a start-up waits on; a change of kind (or resource) is logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CauseKind {
    Unreachable,
    Forbidden,
    CrdMissing,
    Refused,
}

/// Why one attempt failed.
#[derive(Debug, Clone)]
struct Cause {
    kind: CauseKind,
    resource: String,
    /// What an unreachable server did: the HTTP status it answered, or the innermost error of
    /// the connection (refused, a TLS failure, a name that does not resolve). A change of it is
    /// a change of cause (issue #45: refused, then a TLS error, was logged once).
    detail: String,
    text: String,
}

impl Cause {
    fn of(error: &ClusterError) -> Cause {
        let (kind, resource): (CauseKind, &str) = match error {
            ClusterError::Unavailable { resource, .. } => (CauseKind::Unreachable, resource),
            ClusterError::Forbidden { resource, .. } => (CauseKind::Forbidden, resource),
            ClusterError::CrdMissing { resource, .. } => (CauseKind::CrdMissing, resource),
            ClusterError::Rejected { resource, .. } | ClusterError::Conflict { resource, .. } => {
                (CauseKind::Refused, resource)
            }
            ClusterError::Decode { what, .. } => (CauseKind::Refused, what),
            ClusterError::NotLeader => (CauseKind::Refused, ""),
        };
        let detail = match (kind, error.kube_error()) {
            (CauseKind::Unreachable, Some(kube::Error::Api(status))) => status.code.to_string(),
            (CauseKind::Unreachable, Some(error)) => innermost(error),
            _ => String::new(),
        };
        Cause {
            kind,
            resource: resource.to_string(),
            detail,
            text: error.to_string(),
        }
    }

    fn timed_out() -> Cause {
        Cause {
            kind: CauseKind::Unreachable,
            resource: String::new(),
            detail: "timeout".into(),
            text: format!("the management cluster did not answer within {ATTEMPT_TIMEOUT:?}"),
        }
    }

    fn fix(&self) -> String {
        match self.kind {
            CauseKind::Unreachable => "none needed if the API server is starting or restarting; \
                otherwise check the kubeconfig's server address and the network to it"
                .into(),
            CauseKind::Forbidden => "none needed while a starting API server loads its roles; \
                otherwise apply tollgate's ClusterRole and ClusterRoleBinding (deploy/)"
                .into(),
            CauseKind::CrdMissing if self.resource == "gitpromotions" => {
                "install the GitPromotion CRD: `tollgate crd | kubectl apply -f -`".into()
            }
            CauseKind::CrdMissing if self.resource.contains('.') => {
                format!(
                    "install the CRD of {} (optional: its watch is skipped when absent)",
                    self.resource
                )
            }
            CauseKind::CrdMissing => "install Sveltos (its CRDs) in the management cluster".into(),
            CauseKind::Refused => "check the kubeconfig's credentials and the API server".into(),
        }
    }

    fn same_as(&self, other: &Cause) -> bool {
        self.kind == other.kind && self.resource == other.resource && self.detail == other.detail
    }
}

/// The innermost error of `error`'s chain: what actually went wrong on the connection.
fn innermost(error: &dyn std::error::Error) -> String {
    let mut inner = error;
    while let Some(source) = inner.source() {
        inner = source;
    }
    inner.to_string()
}

/// Retries [`check`] until it passes (`Some`), or `shutdown` fires (`None`). Publishes every
/// state on `progress`; logs each change of cause once, and the start after waiting.
pub async fn wait_for_cluster(
    client: &Client,
    progress: &watch::Sender<Startup>,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<Served> {
    let began = Instant::now();
    let mut last: Option<Cause> = None;
    let mut delay = FIRST_RETRY;
    loop {
        let cause = match tokio::time::timeout(ATTEMPT_TIMEOUT, check(client)).await {
            Ok(Ok(served)) => {
                if last.is_some() {
                    info!(
                        waited_s = began.elapsed().as_secs(),
                        "the management cluster serves everything tollgate needs: starting"
                    );
                }
                progress.send_replace(Startup::Started);
                return Some(served);
            }
            Ok(Err(error)) => Cause::of(&error),
            Err(_elapsed) => Cause::timed_out(),
        };
        if !last.as_ref().is_some_and(|seen| seen.same_as(&cause)) {
            warn!(
                cause = %cause.text,
                fix = %cause.fix(),
                "waiting for the management cluster before starting; retrying every {}s at most",
                MAX_RETRY.as_secs()
            );
        }
        progress.send_replace(Startup::Waiting {
            cause: cause.text.clone(),
            fix: cause.fix(),
        });
        last = Some(cause);
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.changed() => return None,
        }
        delay = (delay * 2).min(MAX_RETRY);
    }
}

/// One attempt: the types tollgate needs are served and readable, and whether Cluster API is.
/// A missing Sveltos CRD or RBAC rule is one clear cause here instead of a silent stall later.
pub async fn check(client: &Client) -> Result<Served, ClusterError> {
    for (resource, plural) in [
        (resources::cluster_profile(), "clusterprofiles"),
        (resources::cluster_summary(), "clustersummaries"),
        (resources::sveltos_cluster(), "sveltosclusters"),
        (resources::git_promotion(), "gitpromotions"),
    ] {
        list_one(client, &resource, plural).await?;
    }
    let capi = "clusters.cluster.x-k8s.io";
    let capi_clusters = match list_one(client, &resources::capi_cluster(), capi).await {
        Ok(()) => true,
        // Optional: not installed, or not granted. The required lists just passed, so a 403
        // here is the ClusterRole's, not a starting server's.
        Err(ClusterError::CrdMissing { .. } | ClusterError::Forbidden { .. }) => false,
        Err(error) => return Err(error),
    };
    Ok(Served { capi_clusters })
}

async fn list_one(
    client: &Client,
    resource: &kube::core::ApiResource,
    plural: &str,
) -> Result<(), ClusterError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    api.list(&ListParams::default().limit(1))
        .await
        .map(|_| ())
        .map_err(|error| classify(error, "list", plural, ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(code: u16, resource: &str) -> ClusterError {
        let status = kube::core::Status::failure("refused", "").with_code(code);
        classify(kube::Error::Api(Box::new(status)), "list", resource, "")
    }

    #[test]
    fn each_cause_names_its_fix() {
        let forbidden = Cause::of(&error(403, "clusterprofiles"));
        assert!(
            forbidden.fix().contains("ClusterRole"),
            "{}",
            forbidden.fix()
        );
        let crd = Cause::of(&error(404, "gitpromotions"));
        assert!(crd.fix().contains("tollgate crd | kubectl apply -f -"));
        let sveltos = Cause::of(&error(404, "clustersummaries"));
        assert!(sveltos.fix().contains("Sveltos"), "{}", sveltos.fix());
        for code in [429, 500, 503] {
            assert_eq!(Cause::of(&error(code, "x")).kind, CauseKind::Unreachable);
        }
        assert_eq!(Cause::timed_out().kind, CauseKind::Unreachable);
    }

    #[test]
    fn a_change_of_cause_is_a_change_of_kind_or_resource_not_of_text() {
        let a = Cause::of(&error(503, "clusterprofiles"));
        let mut b = a.clone();
        b.text = "another message".into();
        assert!(a.same_as(&b));
        assert!(!a.same_as(&Cause::of(&error(503, "gitpromotions"))));
        assert!(!a.same_as(&Cause::of(&error(403, "clusterprofiles"))));
    }

    #[test]
    fn only_a_started_controller_has_no_reason_to_be_unready() {
        assert_eq!(Startup::Started.not_ready_reason(), None);
        let waiting = Startup::Waiting {
            cause: "RBAC forbids".into(),
            fix: "apply".into(),
        };
        let reason = waiting.not_ready_reason().expect("a reason");
        assert!(reason.contains("RBAC forbids") && reason.contains("fix: apply"));
        assert!(Startup::Connecting.not_ready_reason().is_some());
    }
}
