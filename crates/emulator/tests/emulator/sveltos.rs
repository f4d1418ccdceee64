//! The Sveltos stand-in, observed only through the API (and the write log).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use tollgate_emulator::{Feature, Fleet, FleetCluster};

const LATENCY: Duration = Duration::from_millis(40);

fn cluster(name: &str, env: &str) -> FleetCluster {
    let mut cluster = FleetCluster::new("fleet", name, &[("env", env)]);
    cluster.latency = Some(LATENCY);
    cluster
}

fn fleet(clusters: Vec<FleetCluster>) -> Fleet {
    let mut fleet = Fleet {
        clusters,
        ..Fleet::default()
    };
    fleet.defaults.latency = LATENCY;
    fleet
}

fn profile_body(name: &str, env: &str, chart_version: &str, extra: Value) -> Value {
    let mut spec = json!({
        "clusterSelector": {"matchLabels": {"env": env}},
        "helmCharts": [{"repositoryURL": "https://kyverno.github.io/kyverno/", "repositoryName": "kyverno",
                        "chartName": "kyverno/kyverno", "chartVersion": chart_version,
                        "releaseName": "kyverno-latest", "releaseNamespace": "kyverno", "helmChartAction": "Install"}],
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
           "metadata": {"name": name, "labels": {"config.projectsveltos.io/promotionname": "demo"},
                        "annotations": {"config.projectsveltos.io/stagename": "dev"}},
           "spec": spec})
}

async fn apply_profile(client: &kube::Client, body: Value) -> DynamicObject {
    let name = body["metadata"]["name"].as_str().unwrap().to_string();
    profiles(client)
        .patch(
            &name,
            &PatchParams::apply("tollgate").force(),
            &Patch::Apply(body),
        )
        .await
        .unwrap()
}

async fn summaries_of(client: &kube::Client, profile: &str) -> Vec<DynamicObject> {
    let selector = format!("projectsveltos.io/cluster-profile-name={profile}");
    summaries(client)
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
}

fn feature_statuses(summary: &DynamicObject) -> Vec<(String, String)> {
    summary.data["status"]["featureSummaries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            (
                f["featureID"].as_str().unwrap_or_default().to_string(),
                f["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn provisioned(summary: &DynamicObject) -> bool {
    let statuses = feature_statuses(summary);
    !statuses.is_empty() && statuses.iter().all(|(_, s)| s == "Provisioned")
}

async fn wait_all_provisioned(
    client: &kube::Client,
    profile: &str,
    count: usize,
    chart_version: &str,
) -> Vec<DynamicObject> {
    eventually(
        &format!("{count} summaries of {profile} provisioned at {chart_version}"),
        || async {
            let items = summaries_of(client, profile).await;
            let done = items.len() == count
                && items.iter().all(|s| {
                    provisioned(s)
                        && s.data["spec"]["clusterProfileSpec"]["helmCharts"][0]["chartVersion"]
                            == chart_version
                });
            done.then_some(items)
        },
    )
    .await
}

#[tokio::test]
async fn matching_summaries_latency_and_status() {
    let mut not_ready = cluster("dev-3", "dev");
    not_ready.ready = false;
    let (handle, client) = start(fleet(vec![
        cluster("dev-1", "dev"),
        cluster("dev-2", "dev"),
        cluster("prod-1", "prod"),
        not_ready,
    ]))
    .await;
    let profile = apply_profile(
        &client,
        profile_body(
            "demo-dev",
            "dev",
            "3.3.3",
            json!({"policyRefs": [{"kind": "ConfigMap", "namespace": "default", "name": "x"}]}),
        ),
    )
    .await;

    let items = wait_all_provisioned(&client, "demo-dev", 2, "3.3.3").await;
    let names: BTreeSet<String> = items
        .iter()
        .filter_map(|s| s.metadata.name.clone())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "demo-dev-sveltos-dev-1".to_string(),
            "demo-dev-sveltos-dev-2".to_string()
        ])
    );
    let summary = items
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("demo-dev-sveltos-dev-1"))
        .unwrap();
    assert_eq!(summary.metadata.namespace.as_deref(), Some("fleet"));
    let labels = summary.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("projectsveltos.io/cluster-name")
            .map(String::as_str),
        Some("dev-1")
    );
    assert_eq!(
        labels
            .get("projectsveltos.io/cluster-type")
            .map(String::as_str),
        Some("Sveltos")
    );
    assert_eq!(
        labels
            .get("config.projectsveltos.io/promotionname")
            .map(String::as_str),
        Some("demo"),
        "profile labels copied"
    );
    let annotations = summary.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("config.projectsveltos.io/stagename")
            .map(String::as_str),
        Some("dev")
    );
    let owner = &summary.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            Some(owner.uid.clone())
        ),
        ("ClusterProfile", "demo-dev", profile.metadata.uid.clone())
    );
    let spec = &summary.data["spec"];
    assert_eq!(
        (
            spec["clusterName"].as_str(),
            spec["clusterNamespace"].as_str(),
            spec["clusterType"].as_str()
        ),
        (Some("dev-1"), Some("fleet"), Some("Sveltos"))
    );
    assert!(spec["clusterProfileSpec"].get("clusterSelector").is_none());
    assert_eq!(
        spec["clusterProfileSpec"]["helmCharts"],
        profile.data["spec"]["helmCharts"]
    );
    let features: BTreeSet<(String, String)> = feature_statuses(summary).into_iter().collect();
    assert_eq!(
        features,
        BTreeSet::from([
            ("Helm".into(), "Provisioned".into()),
            ("Resources".into(), "Provisioned".into())
        ])
    );
    for feature in summary.data["status"]["featureSummaries"]
        .as_array()
        .unwrap()
    {
        assert!(
            feature["lastAppliedTime"]
                .as_str()
                .is_some_and(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok())
        );
        assert_eq!(feature["hash"].as_str().map(str::len), Some(44));
    }

    // Profile status lists the matching clusters.
    let status = profiles(&client).get("demo-dev").await.unwrap();
    let matching: BTreeSet<String> = status.data["status"]["matchingClusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        matching,
        BTreeSet::from(["dev-1".to_string(), "dev-2".to_string()])
    );
    assert!(
        status
            .metadata
            .finalizers
            .as_ref()
            .unwrap()
            .contains(&"clusterprofilefinalizer.projectsveltos.io".to_string())
    );

    // Provisioning first, Provisioned no earlier than the latency later; all by addon-controller.
    let log = handle.write_log();
    let status_writes: Vec<_> = log
        .iter()
        .filter(|w| w.status_subresource && w.name == "demo-dev-sveltos-dev-1")
        .collect();
    let first = status_writes.first().unwrap();
    let last = status_writes.last().unwrap();
    assert_eq!(
        first.object["status"]["featureSummaries"][0]["status"],
        "Provisioning"
    );
    assert!(last.time - first.time >= chrono::Duration::from_std(LATENCY).unwrap());
    assert!(
        log.iter()
            .filter(|w| w.resource.starts_with("clustersummaries"))
            .all(|w| w.field_manager == "addon-controller")
    );

    // Steady state: nothing more is written.
    let writes = handle.write_log().len();
    tokio::time::sleep(LATENCY * 5).await;
    assert_eq!(
        handle.write_log().len(),
        writes,
        "the stand-in does not write when nothing changed"
    );

    // A not-ready cluster that turns ready gets a summary.
    handle.set_cluster_ready("dev-3", true).unwrap();
    wait_all_provisioned(&client, "demo-dev", 3, "3.3.3").await;
    handle.shutdown().await;
}

#[tokio::test]
async fn max_update_ten_percent_of_twenty_updates_two_at_a_time() {
    let clusters = (0..20)
        .map(|i| cluster(&format!("c{i:02}"), "prod"))
        .collect();
    let (handle, client) = start(fleet(clusters)).await;
    apply_profile(
        &client,
        profile_body("wave", "prod", "1.0.0", json!({"maxUpdate": "10%"})),
    )
    .await;
    let before = wait_all_provisioned(&client, "wave", 20, "1.0.0").await;
    let old_hash = before[0].data["status"]["featureSummaries"][0]["hash"].clone();
    let start = handle.write_log().len();

    apply_profile(
        &client,
        profile_body("wave", "prod", "2.0.0", json!({"maxUpdate": "10%"})),
    )
    .await;
    wait_all_provisioned(&client, "wave", 20, "2.0.0").await;

    // Replay the summary writes since the update: "updating" = carries the new spec but is not
    // yet Provisioned.
    let mut updating: BTreeMap<String, bool> = BTreeMap::new();
    let mut most = 0;
    for write in handle
        .write_log()
        .iter()
        .skip(start)
        .filter(|w| w.resource.starts_with("clustersummaries"))
    {
        let new_spec =
            write.object["spec"]["clusterProfileSpec"]["helmCharts"][0]["chartVersion"] == "2.0.0";
        let statuses = write.object["status"]["featureSummaries"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        // Done once every feature is Provisioned with a hash other than the old spec's.
        let done = !statuses.is_empty()
            && statuses
                .iter()
                .all(|f| f["status"] == "Provisioned" && f["hash"] != old_hash);
        updating.insert(write.name.clone(), new_spec && !done);
        most = most.max(updating.values().filter(|u| **u).count());
    }
    assert!(most <= 2, "at most 2 clusters updating at once, saw {most}");
    assert_eq!(most, 2, "batches of 2 were used");
    handle.shutdown().await;
}

#[tokio::test]
async fn injected_feature_and_health_check_failures() {
    let mut broken = cluster("uat-1", "uat");
    broken
        .fail_features
        .insert(Feature::Helm, "values: replicas must be an integer".into());
    let mut unhealthy = cluster("uat-2", "uat");
    unhealthy
        .fail_health_checks
        .insert("deployment-health".into(), "available replicas 0/1".into());
    let (handle, client) = start(fleet(vec![broken, unhealthy, cluster("uat-3", "uat")])).await;
    let checks = json!({"validateHealths": [{"name": "deployment-health", "featureID": "Helm", "group": "apps",
                                             "version": "v1", "kind": "Deployment"}]});
    apply_profile(&client, profile_body("checks", "uat", "1", checks)).await;

    let message_of = |items: &[DynamicObject], cluster: &str| {
        items
            .iter()
            .find(|s| s.data["spec"]["clusterName"] == cluster)
            .and_then(|s| s.data["status"]["featureSummaries"][0].as_object().cloned())
    };
    let items = eventually("two failed, one provisioned", || async {
        let items = summaries_of(&client, "checks").await;
        let failed = items
            .iter()
            .filter(|s| feature_statuses(s) == [("Helm".to_string(), "Failed".to_string())])
            .count();
        (items.len() == 3 && failed == 2 && items.iter().filter(|s| provisioned(s)).count() == 1)
            .then_some(items)
    })
    .await;
    assert_eq!(
        message_of(&items, "uat-1").unwrap()["failureMessage"],
        "values: replicas must be an integer"
    );
    assert_eq!(
        message_of(&items, "uat-2").unwrap()["failureMessage"],
        "health check 'deployment-health' for feature Helm failed: available replicas 0/1"
    );

    // Clearing the injected failures lets the retry succeed.
    handle
        .set_feature_failure("uat-1", Feature::Helm, None)
        .unwrap();
    handle
        .set_health_failure("fleet/uat-2", "deployment-health", None)
        .unwrap();
    wait_all_provisioned(&client, "checks", 3, "1").await;
    // And injecting one on a provisioned cluster makes it fail.
    handle
        .set_feature_failure("uat-3", Feature::Helm, Some("boom"))
        .unwrap();
    eventually("uat-3 fails", || async {
        let items = summaries_of(&client, "checks").await;
        (message_of(&items, "uat-3")?.get("failureMessage")? == "boom").then_some(())
    })
    .await;
    handle.shutdown().await;
}

#[tokio::test]
async fn withdrawal_on_label_change_and_profile_delete() {
    let (handle, client) = start(fleet(vec![
        cluster("s-1", "staging"),
        cluster("s-2", "staging"),
    ]))
    .await;
    apply_profile(&client, profile_body("stage", "staging", "1", json!({}))).await;
    wait_all_provisioned(&client, "stage", 2, "1").await;

    handle
        .set_cluster_labels(
            "s-2",
            &BTreeMap::from([("env".to_string(), "production".to_string())]),
        )
        .unwrap();
    eventually("s-2 withdrawn", || async {
        let items = summaries_of(&client, "stage").await;
        (items.len() == 1 && items[0].data["spec"]["clusterName"] == "s-1").then_some(())
    })
    .await;
    eventually("matchingClusters updated", || async {
        let profile = profiles(&client).get("stage").await.ok()?;
        (profile.data["status"]["matchingClusters"].as_array()?.len() == 1).then_some(())
    })
    .await;

    profiles(&client)
        .delete("stage", &DeleteParams::default())
        .await
        .unwrap();
    let pending = profiles(&client).get("stage").await.unwrap();
    assert!(
        pending.metadata.deletion_timestamp.is_some(),
        "the finalizer holds the profile"
    );
    eventually("profile and summaries gone", || async {
        let gone = profiles(&client).get_opt("stage").await.unwrap().is_none();
        (gone && summaries_of(&client, "stage").await.is_empty()).then_some(())
    })
    .await;
    // Summaries were removed before the finalizer was released.
    let log = handle.write_log();
    let last_summary_delete = log
        .iter()
        .rposition(|w| w.verb == "delete" && w.resource.starts_with("clustersummaries"))
        .unwrap();
    let finalizer_release = log
        .iter()
        .rposition(|w| {
            w.resource.starts_with("clusterprofiles") && w.field_manager == "addon-controller"
        })
        .unwrap();
    assert!(last_summary_delete < finalizer_release);
    handle.shutdown().await;
}

#[tokio::test]
async fn paused_cluster_gets_a_summary_but_no_deployment() {
    let mut paused = cluster("p-1", "production");
    paused.paused = true;
    let (handle, client) = start(fleet(vec![paused, cluster("p-2", "production")])).await;
    apply_profile(&client, profile_body("prod", "production", "1", json!({}))).await;
    eventually("p-2 provisioned", || async {
        let items = summaries_of(&client, "prod").await;
        (items.len() == 2
            && items
                .iter()
                .any(|s| s.data["spec"]["clusterName"] == "p-2" && provisioned(s)))
        .then_some(())
    })
    .await;
    tokio::time::sleep(LATENCY * 3).await;
    let items = summaries_of(&client, "prod").await;
    let paused_summary = items
        .iter()
        .find(|s| s.data["spec"]["clusterName"] == "p-1")
        .unwrap();
    assert!(
        feature_statuses(paused_summary).is_empty(),
        "nothing deployed on a paused cluster"
    );
    handle.set_cluster_paused("p-1", false).unwrap();
    wait_all_provisioned(&client, "prod", 2, "1").await;
    handle.shutdown().await;
}

fn helm_of<'a>(items: &'a [DynamicObject], cluster: &str) -> Option<&'a Value> {
    items
        .iter()
        .find(|s| s.data["spec"]["clusterName"] == cluster)?
        .data["status"]["featureSummaries"]
        .as_array()?
        .iter()
        .find(|f| f["featureID"] == "Helm")
}

fn helm_status<'a>(items: &'a [DynamicObject], cluster: &str) -> Option<&'a str> {
    helm_of(items, cluster)?["status"].as_str()
}

/// The fleet file's `failures:` follow the applied chart version and the cluster's labels, and
/// can be changed at runtime through the handle.
#[tokio::test]
async fn failure_rules_follow_the_applied_chart_version() {
    let yaml = "defaults: {latency: 40ms}\nclusters:\n- {name: s-1, namespace: fleet, labels: {env: staging, ring: a}}\n- {name: q-1, namespace: fleet, labels: {env: qa, ring: a}}\nfailures:\n- chartVersion: \"9.9.*\"\n  selector: {env: staging}\n  message: \"values: replicas must be an integer\"\n";
    let fleet = Fleet::parse(yaml, std::path::Path::new("fleet.yaml")).unwrap();
    let (handle, client) = start(fleet).await;
    let body = |version: &str| {
        let mut body = profile_body("ring", "unused", version, json!({}));
        body["spec"]["clusterSelector"] = json!({"matchLabels": {"ring": "a"}});
        body
    };
    apply_profile(&client, body("9.9.1")).await;
    let items = eventually("s-1 Failed, q-1 Provisioned", || async {
        let items = summaries_of(&client, "ring").await;
        (helm_status(&items, "s-1") == Some("Failed")
            && helm_status(&items, "q-1") == Some("Provisioned"))
        .then_some(items)
    })
    .await;
    let failed = helm_of(&items, "s-1").unwrap();
    assert_eq!(
        failed["failureMessage"],
        "values: replicas must be an integer"
    );
    assert_eq!(failed["consecutiveFailures"], 1);
    assert!(failed["lastAppliedTime"].is_string(), "{failed}");
    let failed = failed.clone();

    // The selector reads the cluster's labels as they are now.
    let staging_labels = [("env", "staging"), ("ring", "a")]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
    handle.set_cluster_labels("q-1", &staging_labels).unwrap();
    eventually("q-1 relabelled to staging fails", || async {
        let items = summaries_of(&client, "ring").await;
        (helm_status(&items, "q-1") == Some("Failed")).then_some(())
    })
    .await;

    // The fix: another chart version redeploys and provisions.
    apply_profile(&client, body("1.2.4")).await;
    let items = wait_all_provisioned(&client, "ring", 2, "1.2.4").await;
    let recovered = helm_of(&items, "s-1").unwrap();
    assert!(recovered.get("failureMessage").is_none(), "{recovered}");
    assert!(
        recovered.get("consecutiveFailures").is_none(),
        "{recovered}"
    );
    assert_ne!(recovered["hash"], failed["hash"]);

    // Rules changed at runtime: one matching what is deployed now fails it, every cluster (no
    // selector) and the Resources feature untouched; clearing the rules recovers.
    let rule: tollgate_emulator::FailureRule =
        serde_saphyr::from_str("chartVersion: \"1.2.?\"\nmessage: boom\n").unwrap();
    handle.set_failure_rules(vec![rule]);
    eventually("both clusters fail on 1.2.4", || async {
        let items = summaries_of(&client, "ring").await;
        let failed = ["s-1", "q-1"]
            .iter()
            .all(|c| helm_of(&items, c).is_some_and(|f| f["failureMessage"] == "boom"));
        failed.then_some(())
    })
    .await;
    handle.set_failure_rules(Vec::new());
    wait_all_provisioned(&client, "ring", 2, "1.2.4").await;
    handle.shutdown().await;
}

/// A latency far beyond the test (what deadlines are exercised with) keeps a cluster
/// Provisioning while a fast one, started at the same moment, is long done.
#[tokio::test]
async fn an_hour_of_latency_keeps_a_cluster_provisioning() {
    let mut slow = cluster("slow-1", "uat");
    slow.latency = Some(Duration::from_secs(3600));
    let (handle, client) = start(fleet(vec![slow, cluster("fast-1", "uat")])).await;
    apply_profile(&client, profile_body("slow", "uat", "1", json!({}))).await;
    let items = eventually("fast-1 Provisioned", || async {
        let items = summaries_of(&client, "slow").await;
        (helm_status(&items, "fast-1") == Some("Provisioned")).then_some(items)
    })
    .await;
    assert_eq!(helm_status(&items, "slow-1"), Some("Provisioning"));
    handle.shutdown().await;
}

/// The scale harness's burst: features held by a long latency all finish when told, and a
/// feature armed afterwards takes its latency again (it is not released by the earlier call).
#[tokio::test]
async fn finish_provisioning_now_releases_every_feature_still_provisioning() {
    let mut slow = fleet(vec![
        FleetCluster::new("fleet", "dev-1", &[("env", "dev")]),
        FleetCluster::new("fleet", "dev-2", &[("env", "dev")]),
    ]);
    slow.defaults.latency = Duration::from_secs(3600);
    let (handle, client) = start(slow).await;
    let all_provisioning = |version: &'static str| {
        let client = client.clone();
        async move {
            let items = summaries_of(&client, "demo-dev").await;
            let done = items.len() == 2
                && items.iter().all(|s| {
                    s.data["spec"]["clusterProfileSpec"]["helmCharts"][0]["chartVersion"] == version
                        && feature_statuses(s)
                            .iter()
                            .any(|(_, status)| status == "Provisioning")
                });
            done.then_some(())
        }
    };
    apply_profile(&client, profile_body("demo-dev", "dev", "1.0.0", json!({}))).await;
    eventually("both summaries provisioning 1.0.0", || {
        all_provisioning("1.0.0")
    })
    .await;
    handle.finish_provisioning_now();
    wait_all_provisioned(&client, "demo-dev", 2, "1.0.0").await;

    apply_profile(&client, profile_body("demo-dev", "dev", "1.0.1", json!({}))).await;
    eventually("both summaries provisioning 1.0.1", || {
        all_provisioning("1.0.1")
    })
    .await;
    handle.finish_provisioning_now();
    wait_all_provisioned(&client, "demo-dev", 2, "1.0.1").await;
}
