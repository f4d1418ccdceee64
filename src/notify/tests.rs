//! The notifier and its workers against real loopback receivers, with statuses in the status
//! cache as the controller leaves them. The cluster is never reached: recording a settled notice
//! fails to write the annotation (logged), and the in-memory log keeps it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::Utc;
use tollgate_engine::{Notice, Phase};
use tollgate_model::policy::NotifyEvent;

use super::*;
use crate::cluster::statuses::PersistedState;
use dedup::key;

const PROMOTION: &str = "web";

/// A loopback receiver answering `code` to every request after `delay`, counting them.
async fn receiver(code: u16, delay: Duration) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let answered = Arc::new(AtomicUsize::new(0));
    let count = answered.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                tokio::time::sleep(delay).await;
                let answer =
                    format!("HTTP/1.1 {code} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                if stream.write_all(answer.as_bytes()).await.is_ok() {
                    count.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    (addr, answered)
}

fn notice(id: &str, kind: NotifyEvent, stage: &str) -> Notice {
    Notice {
        id: id.to_string(),
        kind,
        promotion: PROMOTION.into(),
        stage: stage.into(),
        snapshot_index: 1,
        snapshot_commit: Some("a".repeat(40)),
        author: None,
        phase: Phase::Progressing,
        reason: None,
        counts: Default::default(),
        time: Utc::now(),
    }
}

struct Setup {
    notifier: Notifier,
    metrics: Arc<Metrics>,
    statuses: Arc<StatusCache>,
    _dir: tempfile::TempDir,
    policy: RolloutPolicy,
}

/// A notifier whose policy has one endpoint `hook` of `kind` at `addr`, listening to stage
/// starts and completions, retrying for `retry_for`.
fn setup(addr: std::net::SocketAddr, kind: &str, retry_for: &str) -> Setup {
    let client = kube::Client::try_from(kube::Config::new(
        "http://127.0.0.1:9".parse().expect("uri"),
    ))
    .expect("client");
    let leader = LeaderGate::always();
    let metrics = Arc::new(Metrics::new());
    let statuses = Arc::new(StatusCache::default());
    let notifier = Notifier::new(
        ClusterWriter::new(client.clone(), leader.clone(), false),
        statuses.clone(),
        EventPublisher::new(client, None, true),
        metrics.clone(),
        leader,
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let secret = dir.path().join("hook");
    std::fs::write(&secret, format!("http://{addr}/repos/o/r\nkey\n")).expect("secret");
    let policy: RolloutPolicy = serde_json::from_value(serde_json::json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "p"},
        "spec": {"notify": [{
            "name": "hook", "type": kind, "addressSecretFile": secret,
            "events": ["StageStarted", "StageCompleted"], "retryFor": retry_for,
        }]},
    }))
    .expect("policy");
    Setup {
        notifier,
        metrics,
        statuses,
        _dir: dir,
        policy,
    }
}

impl Setup {
    /// Persists a status owing `pending` (as the controller's write leaves it) and runs the hook.
    fn owe(&self, pending: Vec<Notice>) {
        let mut status: PromotionStatus =
            serde_json::from_value(serde_json::json!({"hashScheme": 1, "phase": "Progressing"}))
                .expect("status");
        status.set_pending_notices(pending);
        let status = Arc::new(status);
        self.statuses.record_own(
            PROMOTION,
            PersistedState {
                resource_version: Some("1".into()),
                uid: None,
                annotations: BTreeMap::new(),
                status: Some(status.clone()),
            },
        );
        self.notifier
            .after_step(PROMOTION, Some(&self.policy), &status);
    }

    fn counted(&self, metric: &str) -> u64 {
        let prefix = format!("tollgate_notifications_{metric}_total{{endpoint=\"hook\"}} ");
        self.metrics
            .encode()
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    fn settled(&self, id: &str) -> bool {
        let inner = self.notifier.inner.as_ref().expect("enabled");
        inner.shared.log.contains(PROMOTION, &key("hook", id))
    }
}

#[tokio::test]
async fn a_graceful_stop_delivers_what_is_queued() {
    let (addr, answered) = receiver(200, Duration::from_millis(200)).await;
    let s = setup(addr, "webhook", "1h");
    s.owe(vec![
        notice("a", NotifyEvent::StageStarted, "dev"),
        notice("b", NotifyEvent::StageCompleted, "dev"),
        notice("c", NotifyEvent::StageStarted, "prod"),
    ]);
    s.notifier.drain(Duration::from_secs(30)).await;
    assert_eq!(answered.load(Ordering::SeqCst), 3, "all three sent");
    assert!(["a", "b", "c"].iter().all(|id| s.settled(id)));
}

#[tokio::test]
async fn a_graceful_stop_makes_one_attempt_and_leaves_a_failure_pending() {
    let (addr, answered) = receiver(503, Duration::ZERO).await;
    let s = setup(addr, "webhook", "1h");
    s.owe(vec![notice("a", NotifyEvent::StageStarted, "dev")]);
    s.notifier.drain(Duration::from_secs(30)).await;
    assert_eq!(
        answered.load(Ordering::SeqCst),
        1,
        "no retry while stopping"
    );
    assert!(!s.settled("a"), "left for the next process");
    assert_eq!(s.counted("failed"), 0, "not given up");
}

#[tokio::test]
async fn a_failing_receiver_is_retried_until_retry_for_then_given_up() {
    let (addr, answered) = receiver(500, Duration::ZERO).await;
    let s = setup(addr, "webhook", "2s");
    s.owe(vec![notice("a", NotifyEvent::StageStarted, "dev")]);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while s.counted("failed") == 0 {
        assert!(std::time::Instant::now() < deadline, "never given up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        answered.load(Ordering::SeqCst) >= 2,
        "retried before giving up"
    );
    assert!(s.settled("a"), "given up: settled, not resent by a restart");
    let attempts = answered.load(Ordering::SeqCst);
    s.notifier.drain(Duration::from_secs(30)).await;
    assert_eq!(
        answered.load(Ordering::SeqCst),
        attempts,
        "no attempt after"
    );
}

#[tokio::test]
async fn a_pending_commit_status_after_its_success_was_delivered_is_dropped() {
    let (addr, answered) = receiver(201, Duration::ZERO).await;
    let s = setup(addr, "github", "1h");
    let started = notice("started-dev", NotifyEvent::StageStarted, "dev");
    let done = notice("done-dev", NotifyEvent::StageCompleted, "dev");
    // An earlier process delivered `success` and not (yet) `pending`.
    let inner = s.notifier.inner.as_ref().expect("enabled");
    inner
        .shared
        .log
        .record(PROMOTION, &key("hook", &done.id))
        .await;
    s.owe(vec![started, done]);
    s.notifier.drain(Duration::from_secs(30)).await;
    assert_eq!(
        answered.load(Ordering::SeqCst),
        0,
        "a late pending would overwrite success"
    );
    assert_eq!(s.counted("dropped"), 1);
    assert!(s.settled("started-dev"), "dropped once, not again");
}
