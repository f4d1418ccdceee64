//! Parse-only checks of Sveltos `evaluateCEL` rules.
//!
//! Sveltos evaluates each rule as a CEL bool expression with a single variable, `resource`, bound
//! to the object. tollgate parses the rule (never evaluates it) and rejects identifiers Sveltos
//! would not bind, which otherwise only show up as a rule that silently never matches (Sveltos
//! skips rules that fail to evaluate).

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::parser::Parser;

/// The one variable Sveltos binds in `evaluateCEL` rules.
const RESOURCE: &str = "resource";
/// Explanation of an unknown variable without a more specific hint.
const ONLY_RESOURCE: &str = "Sveltos binds only `resource` in evaluateCEL rules";

/// Type identifiers every CEL environment declares (`type(x) == int`).
const BUILTIN_TYPES: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
];

/// Longest rule accepted, in bytes. Real health rules are one-liners; the bound keeps long
/// operator chains (whose parse trees are visited recursively) within `PARSER_STACK_BYTES`.
pub const MAX_RULE_BYTES: usize = 8 * 1024;

/// Stack of the thread that parses a rule. The ANTLR-generated parser recurses deeply per nesting
/// level: a rule nested to its recursion limit (96) overflowed 16 MiB and fitted in 32 MiB in a
/// debug build, while a default thread has 2 MiB. The memory is reserved, not committed.
const PARSER_STACK_BYTES: usize = 64 * 1024 * 1024;

/// Why an `evaluateCEL` rule would not work in Sveltos.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    /// The rule is not valid CEL.
    #[error("CEL syntax error: {message}")]
    Syntax {
        /// The parser's message(s), each as `<line>:<column>: <message>`, joined by `; `.
        message: String,
    },
    /// The rule references a variable other than `resource` (or a macro's iteration variable).
    #[error("unknown variable `{name}`: {}", hint.as_deref().unwrap_or(ONLY_RESOURCE))]
    UnknownVariable {
        /// The free identifier.
        name: String,
        /// A suggestion for well-known mistakes, such as `self` from CRD validation rules.
        hint: Option<String>,
    },
    /// The rule is longer than tollgate parses.
    #[error("CEL rule is {bytes} bytes long, more than the {limit} bytes tollgate checks")]
    TooLong {
        /// Length of the rule.
        bytes: usize,
        /// [`MAX_RULE_BYTES`].
        limit: usize,
    },
    /// The condition can never be true or false (an arithmetic result, a number, a list…).
    #[error("it is {what}, never true or false: write a comparison such as `result < 0.01`")]
    NotBoolean { what: &'static str },
    /// The third-party parser panicked on the rule (a parser bug, reported instead of crashing).
    #[error("the CEL parser failed on this rule (parser bug); simplify the rule")]
    ParserPanicked,
    /// The parser thread could not be started.
    #[error("cannot start the CEL parser thread: {message}")]
    ParserThread {
        /// The operating system's error.
        message: String,
    },
}

/// Parses `rule` as CEL and checks that its only free variable is `resource`.
pub fn check_cel_rule(rule: &str) -> Result<(), CelError> {
    check_cel_over(rule, RESOURCE, hint_for)
}

/// Parses `rule` as CEL and checks that its only free variable is `variable` (or a macro's
/// iteration variable); `hint` explains an unknown one (`None`: Sveltos' `resource` wording).
pub fn check_cel_over(
    rule: &str,
    variable: &str,
    hint: fn(&str) -> Option<String>,
) -> Result<(), CelError> {
    check_parsed(rule, variable, hint, false)
}

/// [`check_cel_over`] for a condition, which must be able to be true or false: an expression
/// whose outermost operation is arithmetic, or a literal other than `true`/`false`, a list or a
/// map, is refused (issue #45: every measurement of such a condition would be an error).
pub fn check_condition_over(
    rule: &str,
    variable: &str,
    hint: fn(&str) -> Option<String>,
) -> Result<(), CelError> {
    check_parsed(rule, variable, hint, true)
}

fn check_parsed(
    rule: &str,
    variable: &str,
    hint: fn(&str) -> Option<String>,
    boolean: bool,
) -> Result<(), CelError> {
    if rule.len() > MAX_RULE_BYTES {
        return Err(CelError::TooLong {
            bytes: rule.len(),
            limit: MAX_RULE_BYTES,
        });
    }
    // A dedicated thread gives the parser a known, large stack whatever the caller's thread is,
    // and turns a parser panic into an error instead of unwinding through the caller.
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("cel-rule-check".to_string())
            .stack_size(PARSER_STACK_BYTES)
            .spawn_scoped(scope, || parse_and_check(rule, variable, boolean))
            .map_err(|err| CelError::ParserThread {
                message: err.to_string(),
            })?;
        worker.join().unwrap_or(Err(CelError::ParserPanicked))
    })
    .map_err(|error| match error {
        CelError::UnknownVariable { name, .. } => CelError::UnknownVariable {
            hint: hint(&name),
            name,
        },
        other => other,
    })
}

fn parse_and_check(rule: &str, variable: &str, boolean: bool) -> Result<(), CelError> {
    let expr = Parser::new()
        .parse(rule)
        .map_err(|errors| CelError::Syntax {
            message: errors
                .errors
                .iter()
                .map(|e| format!("{}:{}: {}", e.pos.0, e.pos.1, e.msg))
                .collect::<Vec<_>>()
                .join("; "),
        })?;
    let mut bound = vec![variable];
    check_free_identifiers(&expr, &mut bound)?;
    match never_boolean(&expr).filter(|_| boolean) {
        Some(what) => Err(CelError::NotBoolean { what }),
        None => Ok(()),
    }
}

/// What `expr` is when its outermost form can never be a boolean; `None` when it can (or may:
/// a field, an index or a function call is only known when it runs).
fn never_boolean(expr: &IdedExpr) -> Option<&'static str> {
    use cel::common::ast::LiteralValue;
    use cel::common::ast::operators::{ADD, DIVIDE, MODULO, MULTIPLY, NEGATE, SUBSTRACT};
    match &expr.expr {
        Expr::Call(call) => [ADD, SUBSTRACT, MULTIPLY, DIVIDE, MODULO, NEGATE]
            .contains(&call.func_name.as_str())
            .then_some("an arithmetic result"),
        Expr::Literal(LiteralValue::Boolean(_)) => None,
        Expr::Literal(LiteralValue::String(_) | LiteralValue::Bytes(_)) => Some("a string"),
        Expr::Literal(LiteralValue::Null) => Some("null"),
        Expr::Literal(_) => Some("a number"),
        Expr::List(_) => Some("a list"),
        Expr::Map(_) | Expr::Struct(_) => Some("a map"),
        _ => None,
    }
}

/// Walks the expression; `bound` holds the variables in scope (the rule's own, then those of
/// the comprehensions around).
fn check_free_identifiers<'a>(
    expr: &'a IdedExpr,
    bound: &mut Vec<&'a str>,
) -> Result<(), CelError> {
    match &expr.expr {
        Expr::Ident(name) => {
            let name = name.as_str();
            if bound.contains(&name) || BUILTIN_TYPES.contains(&name) {
                Ok(())
            } else {
                Err(CelError::UnknownVariable {
                    name: name.to_string(),
                    hint: None,
                })
            }
        }
        Expr::Select(select) => check_free_identifiers(&select.operand, bound),
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                check_free_identifiers(target, bound)?;
            }
            call.args
                .iter()
                .try_for_each(|arg| check_free_identifiers(arg, bound))
        }
        Expr::List(list) => list
            .elements
            .iter()
            .try_for_each(|element| check_free_identifiers(element, bound)),
        Expr::Map(map) => map
            .entries
            .iter()
            .try_for_each(|entry| check_entry(&entry.expr, bound)),
        Expr::Struct(object) => object
            .entries
            .iter()
            .try_for_each(|entry| check_entry(&entry.expr, bound)),
        Expr::Comprehension(comprehension) => {
            // The range and the accumulator's start value are evaluated outside the loop.
            check_free_identifiers(&comprehension.iter_range, bound)?;
            check_free_identifiers(&comprehension.accu_init, bound)?;
            let outer = bound.len();
            bound.push(&comprehension.accu_var);
            check_free_identifiers(&comprehension.result, bound)?;
            bound.push(&comprehension.iter_var);
            if let Some(second) = &comprehension.iter_var2 {
                bound.push(second);
            }
            check_free_identifiers(&comprehension.loop_cond, bound)?;
            check_free_identifiers(&comprehension.loop_step, bound)?;
            bound.truncate(outer);
            Ok(())
        }
        Expr::Literal(_) | Expr::Unspecified => Ok(()),
    }
}

fn check_entry<'a>(entry: &'a EntryExpr, bound: &mut Vec<&'a str>) -> Result<(), CelError> {
    match entry {
        EntryExpr::StructField(field) => check_free_identifiers(&field.value, bound),
        EntryExpr::MapEntry(pair) => {
            check_free_identifiers(&pair.key, bound)?;
            check_free_identifiers(&pair.value, bound)
        }
    }
}

/// Hints for the variable names of other CEL dialects users copy rules from.
fn hint_for(name: &str) -> Option<String> {
    let dialect = match name {
        "self" => "that is the CRD-validation dialect",
        "object" | "oldObject" => "that is the ValidatingAdmissionPolicy dialect",
        "obj" => "that is the name Sveltos gives the object in Lua scripts",
        _ => return None,
    };
    Some(format!(
        "Sveltos evaluates evaluateCEL rules over `resource`, not `{name}` ({dialect})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unknown(name: &str) -> (String, Option<String>) {
        (name.to_string(), hint_for(name))
    }

    fn unknown_variable_of(rule: &str) -> (String, Option<String>) {
        match check_cel_rule(rule) {
            Err(CelError::UnknownVariable { name, hint }) => (name, hint),
            other => panic!("expected UnknownVariable for {rule:?}, got {other:?}"),
        }
    }

    #[test]
    fn rules_over_resource_are_accepted() {
        let rules = [
            "resource.status.readyReplicas == resource.spec.replicas",
            "resource.status.conditions.exists(c, c.type == \"Ready\" && c.status == \"True\")",
            "has(resource.status)",
            "has(resource.status.conditions) && resource.status.conditions.all(c, c.status != \"False\")",
            "resource.spec.containers.map(c, c.name).exists_one(n, n == \"app\")",
            "resource.spec.containers.filter(c, c.image.startsWith(\"nginx\")).size() > 0",
            "resource.status.conditions.exists(c, resource.spec.items.all(i, i == c.type))",
            "type(resource.spec.replicas) == int && resource.metadata.labels[\"app\"] in [\"a\", 'b']",
            "{\"ready\": resource.status.ready}.ready == true",
        ];
        for rule in rules {
            assert_eq!(check_cel_rule(rule), Ok(()), "{rule}");
        }
    }

    #[test]
    fn self_gets_a_hint() {
        let (name, hint) = unknown_variable_of("self.status.ready");
        assert_eq!(name, "self");
        let hint = hint.unwrap_or_default();
        assert!(hint.contains("`resource`, not `self`"), "{hint}");
        assert!(hint.contains("CRD-validation"), "{hint}");
    }

    #[test]
    fn object_and_obj_get_hints() {
        assert_eq!(
            unknown_variable_of("object.spec.replicas > 0"),
            unknown("object")
        );
        assert_eq!(unknown_variable_of("obj.status.ready"), unknown("obj"));
        assert!(hint_for("object").is_some() && hint_for("obj").is_some());
    }

    #[test]
    fn free_variable_inside_a_macro_body_is_reported() {
        assert_eq!(
            unknown_variable_of("resource.items.all(x, x > 0 && y > 0)"),
            ("y".to_string(), None)
        );
    }

    #[test]
    fn iteration_variable_is_not_visible_outside_its_macro() {
        assert_eq!(
            unknown_variable_of("resource.items.exists(x, x > 0) && x > 1"),
            ("x".to_string(), None)
        );
        // The range is evaluated outside the loop, so the variable is not bound there.
        assert_eq!(
            unknown_variable_of("x.all(x, x > 0)"),
            ("x".to_string(), None)
        );
    }

    #[test]
    fn unknown_variable_in_every_position_is_found() {
        let rules = [
            "size(z) > 0",
            "resource.f(z)",
            "z.f()",
            "[resource, z].size() == 2",
            "{\"k\": z}.k",
            "{z: 1}.size() == 1",
            "resource.items.map(x, z)",
        ];
        for rule in rules {
            assert_eq!(unknown_variable_of(rule), ("z".to_string(), None), "{rule}");
        }
    }

    #[test]
    fn syntax_errors_carry_the_parser_message() {
        for rule in [
            "resource.status.(",
            "",
            "resource.status ==",
            "resource.items.all(1, true)",
        ] {
            match check_cel_rule(rule) {
                Err(CelError::Syntax { message }) => {
                    assert!(!message.is_empty(), "{rule}");
                }
                other => panic!("expected Syntax for {rule:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn too_long_rule_is_refused_before_parsing() {
        let rule = format!("resource.a{}", " || true".repeat(MAX_RULE_BYTES / 8));
        assert_eq!(
            check_cel_rule(&rule),
            Err(CelError::TooLong {
                bytes: rule.len(),
                limit: MAX_RULE_BYTES
            })
        );
    }

    /// `head`, then `unit` repeated, then `tail`, as close to [`MAX_RULE_BYTES`] as fits.
    fn longest(head: &str, unit: &str, tail: &str) -> String {
        let count = (MAX_RULE_BYTES - head.len() - tail.len()) / unit.len();
        format!("{head}{}{tail}", unit.repeat(count))
    }

    #[test]
    fn longest_flat_rules_parse_without_exhausting_the_stack() {
        let rules = [
            longest("resource.a", " + 1", ""),
            longest("resource.a", " && resource.b", ""),
            longest("resource", ".a", ""),
            longest("resource", "[0]", ""),
            longest("resource", ".f()", ""),
            longest("resource", ".all(x, true)", ""),
            longest("", "!", "resource"),
            longest("", "-", "resource"),
            format!(
                "resource.a in [{}]",
                vec!["1"; MAX_RULE_BYTES / 2 - 16].join(",")
            ),
        ];
        for rule in &rules {
            assert!(rule.len() <= MAX_RULE_BYTES);
            assert_eq!(check_cel_rule(rule), Ok(()), "{}", &rule[..40]);
        }
    }

    #[test]
    fn deep_nesting_is_a_syntax_error_not_a_stack_overflow() {
        let half = MAX_RULE_BYTES / 2 - 8;
        let rules = [
            longest("", "(", ""),
            format!("{}resource{}", "(".repeat(half), ")".repeat(half)),
            longest("", "[", ""),
            longest("", "{1:", ""),
            longest("", "resource.a ? 1 : ", "2"),
        ];
        for rule in &rules {
            match check_cel_rule(rule) {
                Err(CelError::Syntax { message }) => {
                    assert!(message.contains("Recursion limit"), "{message}");
                }
                other => panic!(
                    "expected a recursion-limit error for {}, got {other:?}",
                    &rule[..20]
                ),
            }
        }
    }

    #[test]
    fn arbitrary_input_never_crashes_the_parser() {
        // A fixed-seed generator over CEL's lexical pieces: reproducible, no extra dependency.
        const PIECES: &[&str] = &[
            "resource", "x", ".", "(", ")", "[", "]", "{", "}", ":", ",", "?", "!", "-", "+", "==",
            "&&", "||", " in ", "'", "\"", "\\", "1", "2.5", "0x1F", "u", "b'", "r\"", "all",
            "exists", "map", "filter", "has", " ", "\n", "@", "#", "`", "é", "\u{0}",
        ];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |bound: usize| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            usize::try_from(state >> 33).unwrap_or(0) % bound
        };
        for _ in 0..400 {
            let length = next(24);
            let rule: String = (0..length).map(|_| PIECES[next(PIECES.len())]).collect();
            let result = check_cel_rule(&rule);
            assert!(
                !matches!(
                    result,
                    Err(CelError::ParserPanicked | CelError::ParserThread { .. })
                ),
                "{rule:?}: {result:?}"
            );
        }
    }

    #[test]
    fn display_names_the_variable_and_the_hint() {
        let error = CelError::UnknownVariable {
            name: "self".to_string(),
            hint: hint_for("self"),
        };
        let text = error.to_string();
        assert!(text.starts_with("unknown variable `self`"), "{text}");
        assert!(text.contains("CRD-validation"), "{text}");

        let plain = CelError::UnknownVariable {
            name: "y".to_string(),
            hint: None,
        }
        .to_string();
        assert_eq!(
            plain,
            "unknown variable `y`: Sveltos binds only `resource` in evaluateCEL rules"
        );
    }
}
