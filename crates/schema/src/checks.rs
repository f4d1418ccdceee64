//! What a validation does beyond the checks every caller gets: the API server's admission and a
//! linter of manifests want different things from the same schema.

/// What happens to a field the schema does not declare (and no
/// `x-kubernetes-preserve-unknown-fields` allows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownFields {
    /// A [`crate::ViolationKind::UnknownField`] violation, with the nearest declared name as a
    /// suggestion; the field stays (a linter: `kubectl apply --validate=strict`).
    Report,
    /// Removed from the object and listed in [`crate::Findings::pruned`] (the API server, which
    /// then warns or refuses per `fieldValidation`).
    Prune,
}

/// The checks a validation makes besides `type`, `enum`, `pattern`, lengths, bounds, item counts,
/// formats and `required`, which it always makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checks {
    pub unknown_fields: UnknownFields,
    /// Absent fields with a `default` get it before the object is validated, as the API server
    /// defaults before it validates.
    pub defaults: bool,
    /// `x-kubernetes-list-type: map` keys and `set` items must be unique.
    pub list_types: bool,
    /// An `integer` may be written as a float with an integral value (`5.0`): the API server's
    /// JSON decoder reads it as an integer. A linter whose model then deserializes the value
    /// into an integer type must refuse it.
    pub integral_floats: bool,
}
