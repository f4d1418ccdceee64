//! Failures of API requests, rendered as `Status` objects worded like the real API server.

use serde_json::{Value, json};

/// A failed API request; `status_body` gives the `Status` object the server returns.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    #[error("{qualified_plural} \"{name}\" not found")]
    NotFound {
        qualified_plural: String,
        name: String,
    },
    #[error("{qualified_plural} \"{name}\" already exists")]
    AlreadyExists {
        qualified_plural: String,
        name: String,
    },
    #[error(
        "Operation cannot be fulfilled on {qualified_plural} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
    )]
    ResourceVersionConflict {
        qualified_plural: String,
        name: String,
    },
    #[error("{message}")]
    ApplyConflict {
        message: String,
        fields: Vec<(String, String)>,
    },
    #[error("{qualified_plural} \"{name}\" is invalid: {detail}")]
    Invalid {
        qualified_plural: String,
        name: String,
        detail: String,
    },
    /// Field errors of a custom resource's schema validation, with one cause per field.
    #[error("{kind}.{group} \"{name}\" is invalid: {}", render_causes(causes))]
    FieldsInvalid {
        kind: String,
        group: String,
        name: String,
        causes: Vec<FieldCause>,
    },
    #[error("{0}")]
    BadRequest(String),
    /// An error the real server does not classify: HTTP 500 and no `reason` (e.g. an apply body
    /// with a field its schema does not declare).
    #[error("{0}")]
    Unclassified(String),
    /// Worded like RBAC's refusal; `resource` is `plural.group` (or a path).
    #[error("{}", forbidden_message(.verb, .resource))]
    Forbidden { verb: String, resource: String },
    #[error("too old resource version: {requested} ({oldest})")]
    Gone { requested: u64, oldest: u64 },
    #[error("the server could not find the requested resource")]
    UnknownPath,
    /// A path outside every served group/version: the real server's mux answers plain text,
    /// not a Status (see [`ApiError::PAGE_NOT_FOUND`]).
    #[error("404 page not found")]
    NoSuchPage,
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("the server is currently unable to handle the request")]
    Unavailable,
    /// Over the server's in-flight limit (or injected): the response carries `Retry-After`.
    #[error("Too many requests, please try again later.")]
    TooManyRequests { retry_after_seconds: u64 },
    #[error("Internal error occurred: {0}")]
    Internal(String),
}

/// RBAC's wording: `leases.coordination.k8s.io is forbidden: User "system:anonymous" cannot
/// list resource "leases" in API group "coordination.k8s.io"`, with the reason a starting server has.
fn forbidden_message(verb: &str, resource: &str) -> String {
    let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
    format!(
        "{resource} is forbidden: User \"system:anonymous\" cannot {verb} resource \"{plural}\" \
         in API group \"{group}\": RBAC: the authorizer has not loaded its roles yet"
    )
}

impl ApiError {
    /// The body of [`ApiError::NoSuchPage`], as Go's `http.NotFound` writes it.
    pub const PAGE_NOT_FOUND: &'static str = "404 page not found\n";

    /// HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            Self::NotFound { .. } | Self::UnknownPath | Self::NoSuchPage => 404,
            Self::AlreadyExists { .. }
            | Self::ResourceVersionConflict { .. }
            | Self::ApplyConflict { .. } => 409,
            Self::Invalid { .. } | Self::FieldsInvalid { .. } => 422,
            Self::BadRequest(_) => 400,
            Self::Forbidden { .. } => 403,
            Self::Gone { .. } => 410,
            Self::MethodNotAllowed => 405,
            Self::UnsupportedMediaType(_) => 415,
            Self::Unavailable => 503,
            Self::TooManyRequests { .. } => 429,
            Self::Internal(_) | Self::Unclassified(_) => 500,
        }
    }

    /// The `reason` field of the Status.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotFound { .. } | Self::UnknownPath | Self::NoSuchPage => "NotFound",
            Self::AlreadyExists { .. } => "AlreadyExists",
            Self::ResourceVersionConflict { .. } | Self::ApplyConflict { .. } => "Conflict",
            Self::Invalid { .. } | Self::FieldsInvalid { .. } => "Invalid",
            Self::BadRequest(_) => "BadRequest",
            Self::Forbidden { .. } => "Forbidden",
            Self::Gone { .. } => "Expired",
            Self::MethodNotAllowed => "MethodNotAllowed",
            Self::UnsupportedMediaType(_) => "UnsupportedMediaType",
            Self::Unavailable => "ServiceUnavailable",
            Self::TooManyRequests { .. } => "TooManyRequests",
            Self::Internal(_) => "InternalError",
            Self::Unclassified(_) => "",
        }
    }

    /// The `Retry-After` header's seconds, for the errors that carry one.
    pub fn retry_after_seconds(&self) -> Option<u64> {
        match self {
            Self::TooManyRequests {
                retry_after_seconds,
            } => Some(*retry_after_seconds),
            _ => None,
        }
    }

    /// The `Status` object.
    pub fn status_body(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        match self {
            Self::NotFound {
                qualified_plural,
                name,
            }
            | Self::AlreadyExists {
                qualified_plural,
                name,
            }
            | Self::ResourceVersionConflict {
                qualified_plural,
                name,
            }
            | Self::Invalid {
                qualified_plural,
                name,
                ..
            } => {
                let (kind, group) = qualified_plural
                    .split_once('.')
                    .unwrap_or((qualified_plural, ""));
                status["details"] = json!({"name": name, "group": group, "kind": kind});
            }
            Self::ApplyConflict { fields, .. } => {
                let causes: Vec<Value> = fields
                    .iter()
                    .map(|(manager, field)| {
                        json!({"type": "FieldManagerConflict",
                               "message": format!("conflict with \"{manager}\""), "field": field})
                    })
                    .collect();
                status["details"] = json!({"causes": causes});
            }
            Self::FieldsInvalid {
                kind,
                group,
                name,
                causes,
            } => {
                let causes: Vec<Value> = causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
                status["details"] =
                    json!({"name": name, "group": group, "kind": kind, "causes": causes});
            }
            Self::Unclassified(_) => {
                if let Some(map) = status.as_object_mut() {
                    map.remove("reason");
                }
            }
            Self::Forbidden { resource, .. } => {
                let (kind, group) = resource.split_once('.').unwrap_or((resource, ""));
                status["details"] = json!({"group": group, "kind": kind});
            }
            Self::TooManyRequests {
                retry_after_seconds,
            } => status["details"] = json!({"retryAfterSeconds": retry_after_seconds}),
            _ => {}
        }
        status
    }
}

/// One field error of a 422 answer, as a `details.causes[]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldCause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, ...
    pub reason: &'static str,
    /// The field path, e.g. `spec.stages[0].name`.
    pub field: String,
    /// The error without the field, e.g. `Required value`.
    pub message: String,
}

/// Like the real server's aggregate: one error as it is, several in brackets.
fn render_causes(causes: &[FieldCause]) -> String {
    let rendered: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    match rendered.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_is_worded_like_the_real_server() {
        let error = ApiError::NotFound {
            qualified_plural: "clusterprofiles.config.projectsveltos.io".into(),
            name: "x".into(),
        };
        let body = error.status_body();
        assert_eq!(
            body["message"],
            "clusterprofiles.config.projectsveltos.io \"x\" not found"
        );
        assert_eq!(body["code"], 404);
        assert_eq!(body["details"]["kind"], "clusterprofiles");
        assert_eq!(body["details"]["group"], "config.projectsveltos.io");
    }

    #[test]
    fn gone_carries_both_versions() {
        let body = ApiError::Gone {
            requested: 3,
            oldest: 9,
        }
        .status_body();
        assert_eq!(body["message"], "too old resource version: 3 (9)");
        assert_eq!(body["code"], 410);
        assert_eq!(body["reason"], "Expired");
    }
}
