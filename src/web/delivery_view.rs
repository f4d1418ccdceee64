//! The delivery figures section (the engine computes them: `tollgate_engine::delivery`).

use chrono::Duration;
use maud::{Markup, html};
use tollgate_engine::PromotionStatus;
use tollgate_engine::delivery::{Figures, figures};

/// The figures of the whole pipeline and of each stage, as the engine computes them for the
/// metrics too.
pub fn section(status: &PromotionStatus) -> Markup {
    let whole = figures(&status.runs, None);
    let stages: Vec<(&str, Figures)> = status
        .pipeline()
        .iter()
        .map(|view| (view.name, figures(&status.runs, Some(view.name))))
        .collect();
    html! {
        section id="delivery" aria-label="Delivery figures" {
            h2 { "Delivery" }
            p.muted { "Over the runs kept in status. Lead time: from the snapshot's commit to the stage completed (the same figures as the tollgate_delivery_* metrics)." }
            div.table-wrap { table {
                thead { tr { th { "" } th { "deployments" } th { "lead time (last / mean)" } th { "change-failure rate" } th { "time to restore (mean)" } } }
                tbody {
                    (row("whole pipeline", &whole))
                    @for (name, figures) in &stages { (row(name, figures)) }
                }
            } }
        }
    }
}

fn row(name: &str, figures: &Figures) -> Markup {
    html! {
        tr data-figures=(name) {
            th scope="row" { (name) }
            td { (figures.deployments) }
            td { (span(figures.lead_time_last)) " / " (span(figures.lead_time_mean)) }
            td { @match figures.change_failure_rate() {
                Some(rate) => { (format!("{:.0} %", rate * 100.0)) " (" (figures.failures) " of " (figures.runs_ended) ")" },
                None => "–",
            } }
            td { (span(figures.time_to_restore_mean)) }
        }
    }
}

/// "4m12s", "1h3m", "–".
pub fn span(duration: Option<Duration>) -> String {
    let Some(duration) = duration else {
        return "–".to_string();
    };
    let seconds = duration.num_seconds().max(0);
    match seconds {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}
