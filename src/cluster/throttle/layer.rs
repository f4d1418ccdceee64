//! The tower layer that puts the controller's API requests through a [`Throttle`].
//!
//! Watches, Lease requests and Events are exempt: a watch holds its request open for minutes (it
//! would take a slot for nothing), a lease renewal must never queue behind writes, or a busy
//! leader would lose its lease, and Events are bounded by their senders. Nothing is retried
//! here: a write retried after a wait could land after the lease that allowed it expired. The
//! writer sends a write refused with 429 again, through its lease check (`cluster::writer`), and
//! the controller retries failed steps.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use hyper::{Request, Response};
use tower::{Layer, Service, ServiceExt as _};

use super::{Throttle, retry_after};

#[derive(Debug, Clone)]
pub struct ThrottleLayer {
    throttle: Arc<Throttle>,
}

impl ThrottleLayer {
    pub fn new(throttle: Arc<Throttle>) -> ThrottleLayer {
        ThrottleLayer { throttle }
    }
}

impl<S> Layer<S> for ThrottleLayer {
    type Service = ThrottleService<S>;

    fn layer(&self, inner: S) -> ThrottleService<S> {
        ThrottleService {
            inner,
            throttle: self.throttle.clone(),
        }
    }
}

/// Needs a cloneable inner service (put a `tower::buffer::Buffer` below it): a request waiting
/// for a slot must not hold up the ready requests (or exempt ones) behind it.
#[derive(Debug, Clone)]
pub struct ThrottleService<S> {
    inner: S,
    throttle: Arc<Throttle>,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for ThrottleService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    ReqBody: Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<ResBody>, S::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        // Readiness is checked on the clone each request uses (`oneshot`).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let inner = self.inner.clone();
        let throttle = self.throttle.clone();
        Box::pin(async move {
            if is_exempt(&request) {
                return inner.oneshot(request).await;
            }
            let slot = throttle.acquire().await;
            let response = inner.oneshot(request).await?;
            slot.finish(response.status().as_u16(), retry_after_of(&response));
            Ok(response)
        })
    }
}

fn retry_after_of<B>(response: &Response<B>) -> Option<Duration> {
    let value = response.headers().get(hyper::header::RETRY_AFTER)?;
    retry_after::parse(value.to_str().ok()?)
}

/// Watches, coordination.k8s.io (Leases) and events.k8s.io (Events) bypass the throttle.
/// Events have a bound of their own (one request per sender, `cluster::events`), and in the
/// throttle they took slots the steps' writes needed: with the limit at its ceiling the default
/// ran slower than the same number of fixed steps, whose Events came on top.
pub fn is_exempt<B>(request: &Request<B>) -> bool {
    let uri = request.uri();
    let watch = uri.query().is_some_and(|query| {
        query
            .split('&')
            .any(|p| p == "watch=true" || p == "watch=1")
    });
    let path = uri.path();
    watch
        || path.starts_with("/apis/coordination.k8s.io/")
        || path.starts_with("/apis/events.k8s.io/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uri: &str) -> Request<()> {
        Request::builder().uri(uri).body(()).expect("request")
    }

    #[test]
    fn watches_leases_and_events_are_exempt() {
        assert!(is_exempt(&request(
            "/apis/config.projectsveltos.io/v1beta1/clusterprofiles?resourceVersion=5&watch=true"
        )));
        assert!(is_exempt(&request(
            "/apis/coordination.k8s.io/v1/namespaces/tollgate/leases/tollgate"
        )));
        assert!(is_exempt(&request(
            "/apis/events.k8s.io/v1/namespaces/tollgate/events"
        )));
    }

    #[test]
    fn writes_and_lists_are_throttled() {
        assert!(!is_exempt(&request(
            "/apis/config.projectsveltos.io/v1beta1/clusterprofiles/p?fieldManager=tollgate"
        )));
        assert!(!is_exempt(&request(
            "/apis/config.projectsveltos.io/v1beta1/clusterprofiles?watch=false"
        )));
    }
}
