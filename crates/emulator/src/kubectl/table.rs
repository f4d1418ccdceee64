//! `meta.k8s.io/v1` Table responses, which kubectl asks for when printing `get`.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::json_path::JsonPath;
use crate::registry::{PrinterColumn, ResourceType};

/// Whether the Accept header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').any(|part| part.contains("as=Table"))
}

/// Human age like kubectl prints it (`45s`, `3m`, `2h`, `5d`).
fn age(created: Option<&str>, now: DateTime<Utc>) -> String {
    let Some(created) = created.and_then(|c| DateTime::parse_from_rfc3339(c).ok()) else {
        return "<unknown>".into();
    };
    let seconds = (now - created.with_timezone(&Utc)).num_seconds().max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// How a Table's columns are filled from an object.
enum Columns {
    /// Name, then the CRD's printer columns with their parsed paths.
    Printer(Vec<(PrinterColumn, Option<JsonPath>)>),
    /// Name and Age, the real server's default for types without printer columns.
    NameAndAge,
}

impl Columns {
    fn of(resource: &ResourceType) -> Self {
        if resource.printer_columns.is_empty() {
            return Self::NameAndAge;
        }
        Self::Printer(
            resource
                .printer_columns
                .iter()
                .map(|c| (c.clone(), JsonPath::parse(&c.json_path).ok()))
                .collect(),
        )
    }

    fn definitions(&self) -> Vec<Value> {
        let name = json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0});
        match self {
            Self::NameAndAge => vec![
                name,
                json!({"name": "Age", "type": "date", "format": "", "description": "Time since creation", "priority": 0}),
            ],
            Self::Printer(columns) => std::iter::once(name)
                .chain(columns.iter().map(|(c, _)| {
                    json!({"name": c.name, "type": c.column_type, "format": c.format,
                           "description": c.description, "priority": c.priority})
                }))
                .collect(),
        }
    }

    fn cells(&self, object: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let metadata = &object["metadata"];
        let name = metadata["name"].clone();
        match self {
            Self::NameAndAge => vec![
                name,
                json!(age(metadata["creationTimestamp"].as_str(), now)),
            ],
            Self::Printer(columns) => std::iter::once(name)
                .chain(columns.iter().map(|(column, path)| {
                    path.as_ref()
                        .and_then(|p| p.first(object))
                        .map_or(Value::Null, |v| cell(&column.column_type, v, now))
                }))
                .collect(),
        }
    }
}

/// A printer column's cell, typed like the real server's table convertor does it.
fn cell(column_type: &str, value: &Value, now: DateTime<Utc>) -> Value {
    match (column_type, value) {
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, Value::from),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, Value::from),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(text)) => json!(age(Some(text), now)),
        ("string", Value::String(text)) => Value::from(text.as_str()),
        ("string", other) => Value::from(other.to_string()),
        _ => Value::Null,
    }
}

/// A Table of objects of `resource`: its printer columns, or Name and Age (Events get the real
/// server's event columns). Rows carry the object metadata so kubectl can add the NAMESPACE
/// column for `-A`.
pub fn table(resource: &ResourceType, objects: &[Value], list_metadata: &Value) -> Value {
    if resource.kind == "Event" && ["", "events.k8s.io"].contains(&resource.group.as_str()) {
        let core: Vec<Value> = objects.iter().map(super::core_events::to_core).collect();
        return event_table(&core, list_metadata);
    }
    let now = Utc::now();
    let columns = Columns::of(resource);
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            json!({
                "cells": columns.cells(o, now),
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]},
            })
        })
        .collect();
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_metadata,
        "columnDefinitions": columns.definitions(),
        "rows": rows,
    })
}

/// The real server's Event columns (its internal printer, wide), for core/v1-shaped Events.
pub fn event_table(events: &[Value], list_metadata: &Value) -> Value {
    let now = Utc::now();
    let column = |name: &str, priority: u8, format: &str| json!({"name": name, "type": "string", "format": format, "description": "", "priority": priority});
    let definitions = [
        column("Last Seen", 0, ""),
        column("Type", 0, ""),
        column("Reason", 0, ""),
        column("Object", 0, ""),
        column("Subobject", 1, ""),
        column("Source", 1, ""),
        column("Message", 0, ""),
        column("First Seen", 1, ""),
        column("Count", 1, ""),
        column("Name", 1, "name"),
    ];
    let rows: Vec<Value> = events
        .iter()
        .map(|e| {
            json!({
                "cells": event_cells(e, now),
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": e["metadata"]},
            })
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_metadata,
           "columnDefinitions": definitions, "rows": rows})
}

/// One Event's cells, computed like the real printer: a series gives the last-seen time and the
/// count; a singleton counts 1.
fn event_cells(event: &Value, now: DateTime<Utc>) -> Value {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
    let present = |value: &Value| value.as_str().filter(|t| !t.is_empty()).map(str::to_string);
    let first_seen = age(
        present(&event["firstTimestamp"])
            .or_else(|| present(&event["eventTime"]))
            .as_deref(),
        now,
    );
    let (last_seen, count) = match event.get("series") {
        Some(series) => (
            age(series["lastObservedTime"].as_str(), now),
            series["count"].as_i64().unwrap_or(1),
        ),
        None => (
            present(&event["lastTimestamp"]).map_or(first_seen.clone(), |t| age(Some(&t), now)),
            event["count"].as_i64().filter(|c| *c != 0).unwrap_or(1),
        ),
    };
    let involved = &event["involvedObject"];
    let kind = text(&involved["kind"]).to_lowercase();
    let object = match present(&involved["name"]) {
        Some(name) => format!("{kind}/{name}"),
        None => kind,
    };
    let component = present(&event["source"]["component"])
        .unwrap_or_else(|| text(&event["reportingComponent"]));
    let host = present(&event["source"]["host"]).or_else(|| present(&event["reportingInstance"]));
    let source = match host {
        Some(host) => format!("{component}, {host}"),
        None => component,
    };
    json!([
        last_seen,
        text(&event["type"]),
        text(&event["reason"]),
        object,
        text(&involved["fieldPath"]),
        source,
        text(&event["message"]).trim(),
        first_seen,
        count,
        event["metadata"]["name"]
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_kubectl_accept_header() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
    }

    #[test]
    fn age_formats() {
        let now = Utc::now();
        let ago = |s: i64| (now - chrono::Duration::seconds(s)).to_rfc3339();
        assert_eq!(age(Some(&ago(30)), now), "30s");
        assert_eq!(age(Some(&ago(600)), now), "10m");
        assert_eq!(age(None, now), "<unknown>");
    }
}
