//! Judging a result by the analysis's CEL conditions, as Argo Rollouts does: `failureCondition`
//! first, then `successCondition`; with only one of them set, the other is its negation; with
//! both set and neither holding, the measurement is inconclusive. Without conditions a boolean
//! result decides (a commit's checks, a web check's `{.ok}`), and any other answer is a success.
//! A condition that does not compile or evaluate to a boolean is an error. A Prometheus `NaN` never
//! gets here: it is no data (`prometheus`), judged by `onNoData`.
//!
//! CEL runs on one thread of its own with a large stack: the parser recurses deeply per nesting
//! level (see `tollgate-manifest`'s CEL checks), and a runaway condition must not overflow a
//! runtime worker. Compiled programs are kept by their text, and the standard library's
//! environment is built once (building it was most of an evaluation's cost).

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, mpsc};

use cel::{Context, Program, Value};
use tokio::sync::oneshot;
use tollgate_model::analysis::MeasurementVerdict;

use super::observation::ResultValue;

/// Stack of the CEL thread (reserved, not committed), as the manifest crate's parser thread.
const CEL_STACK_BYTES: usize = 64 * 1024 * 1024;
/// Programs kept compiled; past this the cache starts over (policies rarely hold many).
const PROGRAMS_KEPT: usize = 512;

/// An analysis's conditions.
#[derive(Clone, Debug, Default)]
pub struct Conditions {
    pub success: Option<String>,
    pub failure: Option<String>,
}

/// The verdict, or why the conditions could not judge.
pub type Judgement = Result<MeasurementVerdict, String>;

struct Job {
    conditions: Conditions,
    result: ResultValue,
    reply: oneshot::Sender<Judgement>,
}

/// The handle of the CEL thread. Cheap to clone; the thread ends with the last handle.
#[derive(Clone)]
pub struct Judge {
    jobs: mpsc::Sender<Job>,
}

impl Judge {
    pub fn start() -> std::io::Result<Judge> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("analysis-cel".to_string())
            .stack_size(CEL_STACK_BYTES)
            .spawn(move || serve(&queue))?;
        Ok(Judge { jobs })
    }

    pub async fn judge(&self, conditions: Conditions, result: ResultValue) -> Judgement {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            conditions,
            result,
            reply,
        };
        if self.jobs.send(job).is_err() {
            return Err("the condition evaluator stopped".to_string());
        }
        answer
            .await
            .unwrap_or_else(|_| Err("the condition evaluator stopped".to_string()))
    }
}

/// Compiled programs by their text, and the root context their evaluations bind `result` under.
#[derive(Default)]
struct Evaluator {
    programs: HashMap<String, Result<Arc<Program>, String>>,
    root: Context<'static, 'static>,
}

fn serve(queue: &mpsc::Receiver<Job>) {
    let mut evaluator = Evaluator::default();
    for job in queue {
        let judged = catch_unwind(AssertUnwindSafe(|| {
            judge(&job.conditions, &job.result, &mut evaluator)
        }))
        .unwrap_or_else(|_| {
            Err(
                "the CEL evaluator failed on this condition (a bug in it); simplify the condition"
                    .to_string(),
            )
        });
        let _ = job.reply.send(judged);
    }
}

/// Argo Rollouts' rule over the two conditions.
fn judge(conditions: &Conditions, result: &ResultValue, evaluator: &mut Evaluator) -> Judgement {
    let mut holds = |field: &str, text: &Option<String>| -> Result<Option<bool>, String> {
        let Some(text) = text else {
            return Ok(None);
        };
        evaluate(text, result, evaluator)
            .map(Some)
            .map_err(|e| format!("{field} {text:?}: {e}"))
    };
    let failure = holds("failureCondition", &conditions.failure)?;
    if failure == Some(true) {
        return Ok(MeasurementVerdict::Failed);
    }
    let success = holds("successCondition", &conditions.success)?;
    Ok(match (success, failure) {
        (Some(true), _) => MeasurementVerdict::Successful,
        (Some(false), None) => MeasurementVerdict::Failed,
        (None, Some(false)) => MeasurementVerdict::Successful,
        (Some(false), Some(false)) => MeasurementVerdict::Inconclusive,
        (None, None) => match result {
            ResultValue::Bool(false) => MeasurementVerdict::Failed,
            _ => MeasurementVerdict::Successful,
        },
        // Returned above; kept for a total match.
        (_, Some(true)) => MeasurementVerdict::Failed,
    })
}

fn evaluate(text: &str, result: &ResultValue, evaluator: &mut Evaluator) -> Result<bool, String> {
    let programs = &mut evaluator.programs;
    if programs.len() >= PROGRAMS_KEPT && !programs.contains_key(text) {
        programs.clear();
    }
    let program = programs
        .entry(text.to_string())
        .or_insert_with(|| {
            Program::compile(text)
                .map(Arc::new)
                .map_err(|e| format!("does not compile: {e}"))
        })
        .clone()?;
    let mut context = evaluator.root.new_inner_scope();
    context.add_variable_from_value("result", cel_value(result)?);
    match program.execute(&context) {
        Ok(Value::Bool(holds)) => Ok(holds),
        Ok(other) => Err(format!("is not a boolean (it is {})", shown(&other))),
        Err(error) => Err(error.to_string()),
    }
}

/// A CEL value as a person reads it: `1.0 (a number)`, not `Float(1.0)`.
fn shown(value: &Value) -> String {
    match value {
        Value::Float(n) => format!("{n:?} (a number)"),
        Value::Int(n) => format!("{n} (a number)"),
        Value::UInt(n) => format!("{n} (a number)"),
        Value::String(text) => format!("{text:?} (a string)"),
        Value::List(items) => format!("a list of {}", items.len()),
        Value::Null => "null".to_string(),
        other => format!("{other:?}"),
    }
}

fn cel_value(result: &ResultValue) -> Result<Value, String> {
    Ok(match result {
        ResultValue::Number(n) => Value::Float(*n),
        ResultValue::Numbers(list) => {
            Value::List(Arc::new(list.iter().map(|n| Value::Float(*n)).collect()))
        }
        ResultValue::Bool(b) => Value::Bool(*b),
        ResultValue::Text(text) => Value::String(Arc::new(text.clone())),
        ResultValue::Json(json) => {
            cel::to_value(json).map_err(|e| format!("the result cannot be bound: {e}"))?
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use MeasurementVerdict::*;
    use serde_json::json;

    fn verdict(success: Option<&str>, failure: Option<&str>, result: ResultValue) -> Judgement {
        let conditions = Conditions {
            success: success.map(str::to_string),
            failure: failure.map(str::to_string),
        };
        judge(&conditions, &result, &mut Evaluator::default())
    }

    #[test]
    fn failure_first_then_success_neither_is_inconclusive() {
        let both = |n: f64| {
            verdict(
                Some("result < 0.01"),
                Some("result >= 0.05"),
                ResultValue::Number(n),
            )
        };
        assert_eq!(both(0.001), Ok(Successful));
        assert_eq!(both(0.2), Ok(Failed));
        assert_eq!(both(0.02), Ok(Inconclusive));
    }

    #[test]
    fn one_condition_alone_is_judged_as_argo_does() {
        let success = |n: f64| verdict(Some("result < 0.01"), None, ResultValue::Number(n));
        assert_eq!(success(0.0), Ok(Successful));
        assert_eq!(success(0.5), Ok(Failed));
        let failure = |n: f64| verdict(None, Some("result > 0.1"), ResultValue::Number(n));
        assert_eq!(failure(0.0), Ok(Successful));
        assert_eq!(failure(0.5), Ok(Failed));
        assert_eq!(verdict(None, None, ResultValue::Bool(false)), Ok(Failed));
        assert_eq!(verdict(None, None, ResultValue::Bool(true)), Ok(Successful));
        assert_eq!(
            verdict(None, None, ResultValue::Number(3.0)),
            Ok(Successful)
        );
    }

    #[test]
    fn lists_json_and_integers_bind_as_cel_values() {
        let list = ResultValue::Numbers(vec![0.01, 0.2]);
        assert_eq!(
            verdict(Some("result.all(x, x < 0.1)"), None, list.clone()),
            Ok(Failed)
        );
        assert_eq!(
            verdict(Some("size(result) == 2"), None, list),
            Ok(Successful)
        );
        let json = ResultValue::Json(json!({"p99": 120, "ok": true}));
        assert_eq!(
            verdict(Some("result.ok && result.p99 < 200"), None, json),
            Ok(Successful)
        );
        assert_eq!(
            verdict(Some("result == 1"), None, ResultValue::Number(1.0)),
            Ok(Successful)
        );
        assert_eq!(
            verdict(Some("result > 100"), None, ResultValue::Json(json!(120))),
            Ok(Successful)
        );
    }

    #[test]
    fn a_condition_that_fails_to_compile_or_is_not_boolean_is_an_error() {
        let bad = verdict(Some("result <"), None, ResultValue::Number(1.0)).expect_err("syntax");
        assert!(
            bad.starts_with("successCondition \"result <\": does not compile"),
            "{bad}"
        );
        let number =
            verdict(Some("result + 1.0"), None, ResultValue::Number(1.0)).expect_err("type");
        assert!(
            number.ends_with("is not a boolean (it is 2.0 (a number))"),
            "{number}"
        );
        let unknown =
            verdict(None, Some("latency > 1"), ResultValue::Number(1.0)).expect_err("var");
        assert!(unknown.starts_with("failureCondition"), "{unknown}");
    }

    #[tokio::test]
    async fn the_cel_thread_judges_and_survives_a_deep_condition() {
        let judge = Judge::start().expect("thread");
        let conditions = Conditions {
            success: Some("result < 0.5".into()),
            failure: None,
        };
        assert_eq!(
            judge.judge(conditions, ResultValue::Number(0.1)).await,
            Ok(Successful)
        );
        let deep = format!("{}result{} < 1", "(".repeat(90), ")".repeat(90));
        let conditions = Conditions {
            success: Some(deep),
            failure: None,
        };
        let judged = judge.judge(conditions, ResultValue::Number(0.1)).await;
        assert!(
            judged.is_ok() || judged.is_err(),
            "answered without overflowing"
        );
    }
}
