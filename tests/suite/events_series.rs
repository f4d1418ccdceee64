//! Repeats of an event become a series on the one Event object (a merge PATCH of `series` on the
//! name the first create used), against the emulator over HTTP; another note is another Event.

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams};
use tollgate::cluster::events::EventPublisher;
use tollgate_emulator::{Emulator, EmulatorConfig};
use tollgate_engine::EngineEvent;

/// (note, series count) of every Event regarding `promotion`, sorted by note.
async fn events_of(events: &Api<Event>, promotion: &str) -> Vec<(String, i32)> {
    let mut found: Vec<(String, i32)> = events
        .list(&ListParams::default())
        .await
        .expect("events list")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(promotion))
        .map(|e| {
            let count = e.series.as_ref().map_or(1, |s| s.count);
            (e.note.unwrap_or_default(), count)
        })
        .collect();
    found.sort();
    found
}

async fn until(events: &Api<Event>, promotion: &str, wanted: &[(&str, i32)]) {
    let wanted: Vec<(String, i32)> = wanted.iter().map(|(n, c)| (n.to_string(), *c)).collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let found = events_of(events, promotion).await;
        if found == wanted {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "events of {promotion}: {found:?}, wanted {wanted:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_repeated_event_extends_its_series_and_another_note_is_another_event() {
    let emulator = Emulator::start(EmulatorConfig::default())
        .await
        .expect("emulator starts");
    let client = Client::try_from(kube::Config::new(
        emulator.url().parse().expect("emulator URL"),
    ))
    .expect("client");
    let publisher = EventPublisher::new(client.clone(), None, false);
    let events: Api<Event> = Api::namespaced(client, "default");
    let provisioning = |note: &str| {
        EngineEvent::normal(tollgate_engine::EventReason::Provisioning, note.to_string())
    };

    publisher.publish("p", None, &provisioning("stage dev provisioned"));
    until(&events, "p", &[("stage dev provisioned", 1)]).await;

    // The same event twice more: one Event, its series counting three.
    publisher.publish("p", None, &provisioning("stage dev provisioned"));
    publisher.publish("p", None, &provisioning("stage dev provisioned"));
    until(&events, "p", &[("stage dev provisioned", 3)]).await;

    // Another note, or another promotion, starts its own Event.
    publisher.publish("p", None, &provisioning("stage prod provisioned"));
    publisher.publish("q", None, &provisioning("stage dev provisioned"));
    until(
        &events,
        "p",
        &[("stage dev provisioned", 3), ("stage prod provisioned", 1)],
    )
    .await;
    until(&events, "q", &[("stage dev provisioned", 1)]).await;
}
