//! Health checks (`ValidateHealth`): Lua `script`s must compile as Lua 5.1 and should set
//! `healthy`; `evaluateCEL` rules must parse and use only `resource`. Checked wherever Sveltos
//! runs them: profileSpec `validateHealths`, `preDeployChecks`, `preDeleteChecks`,
//! `postDeleteChecks`, and each trigger's `postDelayHealthChecks`.

use serde_json::Value;

use crate::context::ValidationContext;
use crate::diagnostic::Finding;
use crate::rules::{cel, lua, stage_path, stages, trigger};

const PROFILE_CHECK_LISTS: &[&str] = &[
    "validateHealths",
    "preDeployChecks",
    "preDeleteChecks",
    "postDeleteChecks",
];

pub fn check(document: &Value, context: &ValidationContext<'_>, findings: &mut Vec<Finding>) {
    let profile_spec = document.get("spec").and_then(|s| s.get("profileSpec"));
    for list in PROFILE_CHECK_LISTS {
        let Some(items) = profile_spec
            .and_then(|p| p.get(*list))
            .and_then(Value::as_array)
        else {
            continue;
        };
        let path = format!("spec.profileSpec.{list}");
        check_list(Some(items), &path, context, findings);
    }
    for (index, stage) in stages(document) {
        let Some((kind, body)) = trigger(stage) else {
            continue;
        };
        let path = format!("{}.trigger.{kind}.postDelayHealthChecks", stage_path(index));
        check_list(
            body.get("postDelayHealthChecks").and_then(Value::as_array),
            &path,
            context,
            findings,
        );
    }
}

fn check_list(
    items: Option<&Vec<Value>>,
    path: &str,
    context: &ValidationContext<'_>,
    findings: &mut Vec<Finding>,
) {
    for (i, item) in items.into_iter().flatten().enumerate() {
        // Paths are formatted only for findings (and Lua, which may need the script's location).
        let base = || format!("{path}[{i}]");
        if context.limits.compile_lua
            && let Some(script) = item.get("script").and_then(Value::as_str)
        {
            check_script(script, &format!("{}.script", base()), context, findings);
        }
        let rules = item.get("evaluateCEL").and_then(Value::as_array);
        for (j, rule) in rules.into_iter().flatten().enumerate() {
            let Some(text) = rule.get("rule").and_then(Value::as_str) else {
                continue;
            };
            if let Err(e) = cel::check_cel_rule(text) {
                findings.push(Finding::error(
                    "invalid-cel",
                    format!("{}.evaluateCEL[{j}].rule", base()),
                    e.to_string(),
                ));
            }
        }
    }
}

fn check_script(
    script: &str,
    path: &str,
    context: &ValidationContext<'_>,
    findings: &mut Vec<Finding>,
) {
    if !context.limits.compile_lua {
        return;
    }
    let result = lua::check_lua_script(script);
    if let Some(error) = &result.error {
        let mut finding = Finding::error(
            "invalid-lua",
            path,
            format!(
                "Lua syntax error (line {} of the script): {}",
                error.line, error.message
            ),
        );
        // The value's location is the script's first line (block scalars start after `|`).
        if let Some(loc) = context.locations.get(path)
            && error.line > 0
        {
            finding = finding.at(loc.value.line + error.line - 1, loc.value.column);
        }
        findings.push(finding);
    }
    if !result.sets_healthy {
        findings.push(Finding::warning(
            "lua-never-sets-healthy",
            path,
            "never sets `healthy` in its result: Sveltos only treats `healthy = true` as healthy (a script that only sets hs.status, as the Sveltos documentation's cert-manager example does, never passes)",
        ));
    }
}
