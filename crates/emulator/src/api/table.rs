//! `meta.k8s.io/v1` Table responses, which kubectl asks for when printing `get`.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

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

/// A Table of objects with Name and Age columns; rows carry the object metadata so kubectl can
/// add the NAMESPACE column for `-A`.
pub fn table(objects: &[Value], list_metadata: &Value) -> Value {
    let now = Utc::now();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let metadata = &o["metadata"];
            json!({
                "cells": [metadata["name"], age(metadata["creationTimestamp"].as_str(), now)],
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata},
            })
        })
        .collect();
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_metadata,
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "Name of the object", "priority": 0},
            {"name": "Age", "type": "string", "format": "", "description": "Time since creation", "priority": 0},
        ],
        "rows": rows,
    })
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
