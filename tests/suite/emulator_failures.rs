//! End to end: the fleet file's `failures:` rules fail a feature while the applied profile carries
//! a matching chart version, so the rollout stops at the failing stage and a fix commit recovers
//! it. The controller loop runs against the emulator over HTTP with a real git repository.

use crate::support;

use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;
use support::{TestRepo, World, str_at};
use tollgate::cluster::resources;

const PROMOTION: &str = "emufail";
const MESSAGE: &str = "values: replicas must be an integer";

/// Stage `staging` selects ring `early`: two staging clusters (which the rule selects) and a QA
/// cluster (which it does not). Stage `production` selects ring `late`.
const FLEET: &str = r#"
defaults: {latency: 100ms}
clusters:
- {name: staging-1, namespace: fleet, labels: {env: staging, ring: early}}
- {name: staging-2, namespace: fleet, labels: {env: staging, ring: early}}
- {name: qa-1, namespace: fleet, labels: {env: qa, ring: early}}
- {name: production-1, namespace: fleet, labels: {env: production, ring: late}}
failures:
- chartVersion: "9.9.*"
  selector: {env: staging}
  message: "values: replicas must be an integer"
"#;

fn promotion(chart_version: &str) -> String {
    format!(
        r#"apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata:
  name: {PROMOTION}
spec:
  profileSpec:
    syncMode: Continuous
    helmCharts:
    - repositoryURL:    https://kyverno.github.io/kyverno/
      repositoryName:   kyverno
      chartName:        kyverno/kyverno
      chartVersion:     {chart_version}
      releaseName:      kyverno-latest
      releaseNamespace: kyverno
      helmChartAction:  Install
  stages:
  - name: staging
    clusterSelector:
      matchLabels:
        ring: early
    trigger:
      auto:
        delay: 1s
  - name: production
    clusterSelector:
      matchLabels:
        ring: late
    trigger:
      auto:
        delay: 1s
"#
    )
}

/// The Helm feature entry of each summary of `profile`, by cluster name.
async fn helm_by_cluster(world: &World, profile: &str) -> Vec<(String, Value)> {
    let summaries: Api<DynamicObject> =
        Api::all_with(world.client.clone(), &resources::cluster_summary());
    let selector = format!("projectsveltos.io/cluster-profile-name={profile}");
    let mut found: Vec<(String, Value)> = summaries
        .list(&ListParams::default().labels(&selector))
        .await
        .expect("list clustersummaries")
        .items
        .into_iter()
        .filter_map(|s| {
            let cluster = str_at(&s.data, "/spec/clusterName")?.to_string();
            let helm = s.data["status"]["featureSummaries"]
                .as_array()?
                .iter()
                .find(|f| f["featureID"] == "Helm")?
                .clone();
            Some((cluster, helm))
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

fn chart_of(object: &Value) -> Option<&str> {
    object
        .pointer("/spec/helmCharts/0/chartVersion")
        .and_then(Value::as_str)
}

/// The chart versions tollgate ever applied to `profile`, in order, from the emulator's write log.
fn applied_versions(world: &World, profile: &str) -> Vec<String> {
    world
        .emulator
        .write_log()
        .iter()
        .filter(|w| w.name == profile && w.field_manager == "tollgate")
        .filter_map(|w| chart_of(&w.object).map(str::to_string))
        .collect()
}

/// The Helm statuses the stand-in wrote for one summary, in order, without repeats.
fn helm_status_history(world: &World, summary: &str) -> Vec<String> {
    let mut history: Vec<String> = Vec::new();
    for write in world
        .emulator
        .write_log()
        .iter()
        .filter(|w| w.status_subresource && w.name == summary)
    {
        let helm = write.object["status"]["featureSummaries"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| f["featureID"] == "Helm");
        if let Some(status) = helm.and_then(|f| f["status"].as_str())
            && history.last().map(String::as_str) != Some(status)
        {
            history.push(status.to_string());
        }
    }
    history
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_rule_holds_the_matching_clusters_until_a_fix_commit() {
    let repo = TestRepo::new();
    repo.write("promotions/emufail.yaml", &promotion("9.9.1"));
    repo.commit("Chart 9.9.1 (its values are broken on staging)");
    let world = World::start(repo, FLEET).await;
    let staging_profile = format!("{PROMOTION}-staging");
    let production_profile = format!("{PROMOTION}-production");

    // The rule's clusters fail with its message; the QA cluster outside its selector deploys.
    let helm = world
        .eventually("staging clusters Failed, qa-1 Provisioned", || async {
            let helm = helm_by_cluster(&world, &staging_profile).await;
            let states: Vec<(&str, &str)> = helm
                .iter()
                .map(|(c, f)| (c.as_str(), f["status"].as_str().unwrap_or_default()))
                .collect();
            (states
                == [
                    ("qa-1", "Provisioned"),
                    ("staging-1", "Failed"),
                    ("staging-2", "Failed"),
                ])
            .then_some(helm)
        })
        .await;
    for (cluster, feature) in &helm {
        if cluster.starts_with("staging") {
            assert_eq!(feature["failureMessage"], MESSAGE, "{cluster}");
            assert_eq!(feature["consecutiveFailures"], 1, "{cluster}");
            assert!(
                feature["lastAppliedTime"].is_string(),
                "{cluster}: {feature}"
            );
        } else {
            assert!(
                feature.get("failureMessage").is_none(),
                "{cluster}: {feature}"
            );
        }
    }

    // The controller sees the stage incomplete and stays there.
    world.poke();
    let status = world
        .eventually("staging reported not provisioned", || async {
            world.status(PROMOTION).await.filter(|s| {
                s["stages"][0]["failureMessage"].is_string()
                    && s["stages"][0]["lastSuccessfulAppliedTime"].is_null()
            })
        })
        .await;
    assert_eq!(str_at(&status, "/currentStageName"), Some("staging"));
    assert!(
        world.profile(&production_profile).await.is_none(),
        "the rollout did not move past staging"
    );

    // A fix commit changes the chart version: every cluster recovers and the rollout moves on.
    world
        .repo
        .write("promotions/emufail.yaml", &promotion("1.2.4"));
    world.repo.commit("Chart 1.2.4 fixes the values");
    world.poke();
    let status = world.wait_phase(PROMOTION, "Completed").await;
    assert_eq!(str_at(&status, "/currentStageName"), Some("production"));
    for (cluster, feature) in helm_by_cluster(&world, &staging_profile).await {
        assert_eq!(feature["status"], "Provisioned", "{cluster}");
        assert!(
            feature.get("failureMessage").is_none(),
            "{cluster}: {feature}"
        );
        assert!(
            feature.get("consecutiveFailures").is_none(),
            "{cluster}: {feature}"
        );
    }
    let production = helm_by_cluster(&world, &production_profile).await;
    assert_eq!(production.len(), 1);
    assert_eq!(production[0].1["status"], "Provisioned");

    // Like Sveltos redeploying: the failed feature went Provisioning → Provisioned on the fix.
    assert_eq!(
        helm_status_history(&world, &format!("{staging_profile}-sveltos-staging-1")),
        ["Provisioning", "Failed", "Provisioning", "Provisioned"]
    );
    // The bad version never reached production; staging got it, then the fix.
    assert_eq!(applied_versions(&world, &production_profile), ["1.2.4"]);
    let staging_versions = applied_versions(&world, &staging_profile);
    assert_eq!(
        staging_versions.first().map(String::as_str),
        Some("9.9.1"),
        "{staging_versions:?}"
    );
    assert_eq!(
        staging_versions.last().map(String::as_str),
        Some("1.2.4"),
        "{staging_versions:?}"
    );
}

/// A latency far beyond the test keeps a cluster Provisioning (what deadlines are tested with):
/// the stage holds while its other cluster is long done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hour_of_latency_keeps_the_cluster_provisioning() {
    let repo = TestRepo::new();
    repo.write("promotions/emufail.yaml", &promotion("1.2.4"));
    repo.commit("Chart 1.2.4");
    let fleet = r#"
defaults: {latency: 100ms}
clusters:
- {name: staging-1, namespace: fleet, labels: {env: staging, ring: early}}
- {name: staging-2, namespace: fleet, labels: {env: staging, ring: early}, latency: 1h}
- {name: production-1, namespace: fleet, labels: {env: production, ring: late}}
"#;
    let world = World::start(repo, fleet).await;
    let staging_profile = format!("{PROMOTION}-staging");

    let helm = world
        .eventually("staging-1 Provisioned", || async {
            let helm = helm_by_cluster(&world, &staging_profile).await;
            let fast_done = helm
                .iter()
                .any(|(c, f)| c == "staging-1" && f["status"] == "Provisioned");
            (fast_done && helm.len() == 2).then_some(helm)
        })
        .await;
    assert_eq!(helm[1].0, "staging-2");
    assert_eq!(
        helm[1].1["status"], "Provisioning",
        "the slow cluster is still deploying"
    );
    world.poke();
    world
        .eventually("staging reported not provisioned", || async {
            world.status(PROMOTION).await.filter(|s| {
                s["stages"][0]["failureMessage"]
                    .as_str()
                    .is_some_and(|m| m.contains("staging-2"))
            })
        })
        .await;
    assert!(
        world
            .profile(&format!("{PROMOTION}-production"))
            .await
            .is_none(),
        "the stage holds while a cluster is Provisioning"
    );
}
