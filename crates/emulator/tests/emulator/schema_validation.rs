//! Server-side validation of custom resources against their CRD's openAPIV3Schema, over raw HTTP
//! where status lines and `Warning` headers matter: unknown fields per `fieldValidation`
//! (Strict → 400, Warn → pruned with a warning per field, Ignore → pruned), server-side apply
//! refusing undeclared fields, and 422 Invalid with per-field causes worded like the real server.

use crate::common;

use common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tollgate_emulator::{EmulatorHandle, Fleet};

const PROFILES: &str = "/apis/config.projectsveltos.io/v1beta1/clusterprofiles";

/// One HTTP/1.1 exchange on a fresh connection: status code, headers (lower-case names), JSON body.
struct Exchange {
    code: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Exchange {
    fn warnings(&self) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(name, _)| name == "warning")
            .map(|(_, value)| value.as_str())
            .collect()
    }
}

async fn send(
    handle: &EmulatorHandle,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> Exchange {
    let address = handle.url().trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let body = body.to_string();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: {content_type}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    let mut lines = head.lines();
    let code = lines
        .next()
        .and_then(|status| status.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|line| line.split_once(": "))
        .map(|(name, value)| (name.to_lowercase(), value.to_string()))
        .collect();
    Exchange {
        code,
        headers,
        body: serde_json::from_str(body).unwrap_or(Value::Null),
    }
}

fn profile(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
           "metadata": {"name": name}, "spec": spec})
}

async fn stored_spec(handle: &EmulatorHandle, name: &str) -> Option<Value> {
    let got = send(
        handle,
        "GET",
        &format!("{PROFILES}/{name}"),
        "",
        &json!(null),
    )
    .await;
    (got.code == 200).then(|| got.body["spec"].clone())
}

#[tokio::test]
async fn strict_field_validation_rejects_every_unknown_field_as_a_bad_request() {
    let (handle, _client) = start(Fleet::default()).await;
    let body = profile(
        "p",
        json!({"tier": 5, "foo": 1, "helmCharts": [{"releaseName": "r",
        "releaseNamespace": "n", "repositoryURL": "u", "chartVersionn": "1"}]}),
    );
    let create = send(
        &handle,
        "POST",
        &format!("{PROFILES}?fieldValidation=Strict"),
        "application/json",
        &body,
    )
    .await;
    assert_eq!(create.code, 400, "{}", create.body);
    assert_eq!(create.body["reason"], "BadRequest");
    assert_eq!(
        create.body["message"],
        "ClusterProfile in version \"v1beta1\" cannot be handled as a ClusterProfile: strict decoding error: \
         unknown field \"spec.foo\", unknown field \"spec.helmCharts[0].chartVersionn\""
    );
    assert_eq!(stored_spec(&handle, "p").await, None, "nothing was stored");

    // A patch is judged after being applied, and says so without the decoding prefix.
    let valid = profile("p", json!({"tier": 5}));
    assert_eq!(
        send(&handle, "POST", PROFILES, "application/json", &valid)
            .await
            .code,
        201
    );
    let patch = send(
        &handle,
        "PATCH",
        &format!("{PROFILES}/p?fieldValidation=Strict"),
        "application/merge-patch+json",
        &json!({"spec": {"tierr": 6}}),
    )
    .await;
    assert_eq!(patch.code, 400, "{}", patch.body);
    assert_eq!(
        patch.body["message"],
        "strict decoding error: unknown field \"spec.tierr\""
    );
    assert_eq!(stored_spec(&handle, "p").await, Some(json!({"tier": 5})));
    handle.shutdown().await;
}

#[tokio::test]
async fn warn_is_the_default_and_prunes_each_unknown_field_with_a_warning_header() {
    let (handle, _client) = start(Fleet::default()).await;
    let body = profile("p", json!({"tier": 5, "foo": 1, "bar": {"x": 2}}));
    for path in [
        PROFILES.to_string(),
        format!("{PROFILES}?fieldValidation=Warn"),
    ] {
        let created = send(&handle, "POST", &path, "application/json", &body).await;
        assert_eq!(created.code, 201, "{path}: {}", created.body);
        assert_eq!(
            created.warnings(),
            [
                r#"299 - "unknown field \"spec.bar\"""#,
                r#"299 - "unknown field \"spec.foo\"""#
            ],
            "{path}"
        );
        assert_eq!(created.body["spec"], json!({"tier": 5}), "{path}");
        assert_eq!(stored_spec(&handle, "p").await, Some(json!({"tier": 5})));
        let deleted = send(
            &handle,
            "DELETE",
            &format!("{PROFILES}/p"),
            "",
            &json!(null),
        )
        .await;
        assert_eq!(deleted.code, 200);
    }
    handle.shutdown().await;
}

#[tokio::test]
async fn ignore_prunes_unknown_fields_silently() {
    let (handle, _client) = start(Fleet::default()).await;
    let created = send(
        &handle,
        "POST",
        &format!("{PROFILES}?fieldValidation=Ignore"),
        "application/json",
        &profile("p", json!({"tier": 5, "foo": 1})),
    )
    .await;
    assert_eq!(created.code, 201, "{}", created.body);
    assert!(created.warnings().is_empty());
    assert_eq!(stored_spec(&handle, "p").await, Some(json!({"tier": 5})));
    handle.shutdown().await;
}

#[tokio::test]
async fn an_unsupported_field_validation_directive_is_invalid() {
    let (handle, _client) = start(Fleet::default()).await;
    let created = send(
        &handle,
        "POST",
        &format!("{PROFILES}?fieldValidation=strict"),
        "application/json",
        &profile("p", json!({"tier": 5})),
    )
    .await;
    assert_eq!(created.code, 422, "{}", created.body);
    assert_eq!(
        created.body["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"strict\": \
         supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
    );
    assert_eq!(stored_spec(&handle, "p").await, None);
    handle.shutdown().await;
}

#[tokio::test]
async fn server_side_apply_refuses_undeclared_fields_whatever_the_directive() {
    let (handle, _client) = start(Fleet::default()).await;
    for directive in ["", "&fieldValidation=Ignore", "&fieldValidation=Warn"] {
        let applied = send(
            &handle,
            "PATCH",
            &format!("{PROFILES}/p?fieldManager=test{directive}"),
            "application/apply-patch+yaml",
            &profile("p", json!({"tier": 5, "foo": 1})),
        )
        .await;
        // The real server's unclassified 500 (kubernetes/kubernetes#122480): no reason.
        assert_eq!(applied.code, 500, "{directive}: {}", applied.body);
        assert_eq!(applied.body.get("reason"), None, "{}", applied.body);
        assert_eq!(
            applied.body["message"],
            "failed to create typed patch object (/p; config.projectsveltos.io/v1beta1, Kind=ClusterProfile): \
             .spec.foo: field not declared in schema"
        );
        assert_eq!(stored_spec(&handle, "p").await, None);
    }
    // Valid, it creates; an undeclared field later is refused on the existing object too.
    let path = format!("{PROFILES}/p?fieldManager=test");
    let kind = "application/apply-patch+yaml";
    let valid = send(
        &handle,
        "PATCH",
        &path,
        kind,
        &profile("p", json!({"tier": 5})),
    )
    .await;
    assert_eq!(valid.code, 201, "{}", valid.body);
    let invalid = profile("p", json!({"tier": 6, "a": 1, "b": 2}));
    let refused = send(&handle, "PATCH", &path, kind, &invalid).await;
    assert_eq!(refused.code, 500, "{}", refused.body);
    assert!(
        refused.body["message"].as_str().is_some_and(|m| m.ends_with(
            "errors:\n  .spec.a: field not declared in schema\n  .spec.b: field not declared in schema"
        )),
        "{}",
        refused.body
    );
    assert_eq!(stored_spec(&handle, "p").await, Some(json!({"tier": 5})));
    handle.shutdown().await;
}

#[tokio::test]
async fn type_enum_required_pattern_and_bounds_violations_are_invalid_with_a_cause_each() {
    let (handle, _client) = start(Fleet::default()).await;
    let body = profile(
        "p",
        json!({"tier": "high", "syncMode": "Sometimes", "maxUpdate": "200%",
               "helmCharts": [{"releaseName": "", "releaseNamespace": "n"}]}),
    );
    let created = send(&handle, "POST", PROFILES, "application/json", &body).await;
    assert_eq!(created.code, 422, "{}", created.body);
    assert_eq!(created.body["reason"], "Invalid");
    let details = &created.body["details"];
    assert_eq!(
        (&details["kind"], &details["group"], &details["name"]),
        (
            &json!("ClusterProfile"),
            &json!("config.projectsveltos.io"),
            &json!("p")
        )
    );
    let mut causes: Vec<(String, String, String)> = details["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (text("field"), text("reason"), text("message"))
        })
        .collect();
    causes.sort();
    let expected = [
        ("spec.helmCharts[0].releaseName", "FieldValueInvalid",
         "Invalid value: \"\": spec.helmCharts[0].releaseName in body should be at least 1 chars long"),
        ("spec.helmCharts[0].repositoryURL", "FieldValueRequired", "Required value"),
        ("spec.maxUpdate", "FieldValueInvalid",
         "Invalid value: \"200%\": spec.maxUpdate in body should match '^((100|[0-9]{1,2})%|[0-9]+)$'"),
        ("spec.syncMode", "FieldValueNotSupported",
         "Unsupported value: \"Sometimes\": supported values: \"OneTime\", \"Continuous\", \"ContinuousWithDriftDetection\", \"DryRun\""),
        ("spec.tier", "FieldValueTypeInvalid",
         "Invalid value: \"string\": spec.tier in body must be of type integer: \"string\""),
    ]
    .map(|(f, r, m)| (f.to_string(), r.to_string(), m.to_string()));
    assert_eq!(causes, expected);
    let message = created.body["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("ClusterProfile.config.projectsveltos.io \"p\" is invalid: [spec."),
        "{message}"
    );
    assert_eq!(stored_spec(&handle, "p").await, None);

    // One error is not bracketed; a minimum is checked on update too.
    assert_eq!(
        send(
            &handle,
            "POST",
            PROFILES,
            "application/json",
            &profile("p", json!({"tier": 5}))
        )
        .await
        .code,
        201
    );
    let put = send(
        &handle,
        "PUT",
        &format!("{PROFILES}/p"),
        "application/json",
        &profile("p", json!({"tier": 0})),
    )
    .await;
    assert_eq!(put.code, 422, "{}", put.body);
    assert_eq!(
        put.body["message"],
        "ClusterProfile.config.projectsveltos.io \"p\" is invalid: spec.tier: Invalid value: 0: \
         spec.tier in body should be greater than or equal to 1"
    );
    assert_eq!(stored_spec(&handle, "p").await, Some(json!({"tier": 5})));
    handle.shutdown().await;
}

#[tokio::test]
async fn status_subresource_writes_are_validated_and_pruned_too() {
    let (handle, _client) = start(Fleet::default()).await;
    let created = send(
        &handle,
        "POST",
        PROFILES,
        "application/json",
        &profile("p", json!({})),
    )
    .await;
    assert_eq!(created.code, 201, "{}", created.body);
    let status_path = format!("{PROFILES}/p/status");
    let bad = send(
        &handle,
        "PATCH",
        &status_path,
        "application/merge-patch+json",
        &json!({"status": {"dependenciesHash": "not base64!"}}),
    )
    .await;
    assert_eq!(bad.code, 422, "{}", bad.body);
    assert_eq!(
        bad.body["details"]["causes"][0]["message"],
        "Invalid value: \"not base64!\": status.dependenciesHash in body must be of type byte: \"not base64!\""
    );
    let pruned = send(
        &handle,
        "PATCH",
        &status_path,
        "application/merge-patch+json",
        &json!({"status": {"dependenciesHash": "aA==", "extra": true}}),
    )
    .await;
    assert_eq!(pruned.code, 200, "{}", pruned.body);
    assert_eq!(
        pruned.warnings(),
        [r#"299 - "unknown field \"status.extra\"""#]
    );
    assert_eq!(pruned.body["status"], json!({"dependenciesHash": "aA=="}));
    handle.shutdown().await;
}

#[tokio::test]
async fn a_crd_created_through_the_api_validates_its_type_and_a_changed_crd_is_reread() {
    let (handle, _client) = start(Fleet::default()).await;
    let crd = |schema: Value| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Cluster",
                     "names": {"kind": "Widget", "plural": "widgets"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": schema}}]}})
    };
    let crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com?fieldManager=t";
    let apply = "application/apply-patch+yaml";
    let sized = |ty: &str| {
        json!({"type": "object", "properties": {"spec": {"type": "object",
            "required": ["size"], "properties": {"size": {"type": ty, "maximum": 10}}}}})
    };
    assert_eq!(
        send(&handle, "PATCH", crd_path, apply, &crd(sized("integer")))
            .await
            .code,
        201
    );
    let widgets = "/apis/example.com/v1/widgets";
    let widget = |spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec});
    let too_big = send(
        &handle,
        "POST",
        widgets,
        "application/json",
        &widget(json!({"size": 11})),
    )
    .await;
    assert_eq!(too_big.code, 422, "{}", too_big.body);
    assert_eq!(
        too_big.body["message"],
        "Widget.example.com \"w\" is invalid: spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"
    );
    let missing = send(
        &handle,
        "POST",
        widgets,
        "application/json",
        &widget(json!({})),
    )
    .await;
    assert_eq!(
        missing.body["message"],
        "Widget.example.com \"w\" is invalid: spec.size: Required value"
    );
    // The CRD now declares a string: the next write is judged by the new schema.
    assert_eq!(
        send(&handle, "PATCH", crd_path, apply, &crd(sized("string")))
            .await
            .code,
        200
    );
    let number = send(
        &handle,
        "POST",
        widgets,
        "application/json",
        &widget(json!({"size": 3})),
    )
    .await;
    assert_eq!(number.code, 422, "{}", number.body);
    let text = send(
        &handle,
        "POST",
        widgets,
        "application/json",
        &widget(json!({"size": "3"})),
    )
    .await;
    assert_eq!(text.code, 201, "{}", text.body);
    handle.shutdown().await;
}

#[tokio::test]
async fn an_empty_map_in_an_apply_body_is_kept_and_satisfies_required() {
    // GitPromotion requires `spec`; `spec: {}` is a spec (the emulator's apply used to drop it).
    let (handle, _client) = start(Fleet::default()).await;
    let applied = send(
        &handle,
        "PATCH",
        "/apis/tollgate.dev/v1alpha1/gitpromotions/web?fieldManager=tollgate",
        "application/apply-patch+yaml",
        &json!({"apiVersion": "tollgate.dev/v1alpha1", "kind": "GitPromotion",
                "metadata": {"name": "web"}, "spec": {}}),
    )
    .await;
    assert_eq!(applied.code, 201, "{}", applied.body);
    assert_eq!(applied.body["spec"], json!({}));
    let missing = send(
        &handle,
        "PATCH",
        "/apis/tollgate.dev/v1alpha1/gitpromotions/other?fieldManager=tollgate",
        "application/apply-patch+yaml",
        &json!({"apiVersion": "tollgate.dev/v1alpha1", "kind": "GitPromotion",
                "metadata": {"name": "other"}}),
    )
    .await;
    assert_eq!(missing.code, 422, "{}", missing.body);
    assert_eq!(
        missing.body["message"],
        "GitPromotion.tollgate.dev \"other\" is invalid: spec: Required value"
    );
    handle.shutdown().await;
}
