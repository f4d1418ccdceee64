#![forbid(unsafe_code)]
//! The structural schema of a CustomResourceDefinition version (its `openAPIV3Schema`), compiled
//! once and then checked against JSON objects the way the Kubernetes API server checks them:
//! nulls of non-nullable fields pruned, unknown fields reported or pruned, optional defaulting,
//! then `type`, `enum`, `pattern`, lengths, bounds, item counts, formats (`date-time`, `byte`,
//! `int32`, `int64`), `required`, optional list-type uniqueness and the CEL rules a caller
//! implements in Rust.
//!
//! One validator for both of tollgate's readers of CRD schemas, which differ only in what they
//! ask of it ([`Checks`]) and in how they word what it finds:
//! - `tollgate-manifest` lints ClusterPromotion files: unknown fields are errors (with a "did
//!   you mean"), defaults are applied, list keys and CEL rules are checked; it words violations
//!   as diagnostics at file, line and field.
//! - `tollgate-emulator` admits writes as a real API server: unknown fields are pruned (and
//!   warned about or refused per `fieldValidation`); it words violations as Kubernetes
//!   `Invalid` causes.
//!
//! Violations are data ([`Violation`]): a path and what is wrong, never a finished sentence.
//!
//! `anyOf`/`oneOf`/`allOf` are not interpreted: in the CRDs tollgate reads, `anyOf` appears only
//! beside `x-kubernetes-int-or-string`, which is handled directly. One form is read: a `oneOf`
//! of `const`s (and `enum`s) is an `enum`, as generators write documented enumerations (the
//! RolloutPolicy's schema, derived from its types).

mod checks;
mod node;
mod path;
mod rule;
mod suggest;
mod violation;
mod walk;

pub use checks::{Checks, UnknownFields};
pub use node::{CompileError, Format, JsonType, StructuralSchema};
pub use path::{PathSegment, SchemaPath};
pub use rule::{CrdRule, RuleLookup, normalize_rule};
pub use violation::{Expected, Findings, Violation, ViolationKind, json_type_name, quoted};
