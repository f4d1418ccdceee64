//! `status --watch`: on a terminal (table output), the live view, redrawn in place once a second
//! so relative times count down; otherwise one plain frame per change, separated by `---` when
//! piped, for scripts.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use chrono::Utc;
use futures::{Stream, StreamExt};
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;

use super::live::{self, Clock};
use super::screen::{self, Screen};
use super::{Output, Shown, fetch, render};
use crate::cluster::errors::ClusterError;

type Events = std::pin::Pin<
    Box<dyn Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>> + Send>,
>;

/// What is watched, and where (the API server and kubeconfig, for error messages).
pub(super) struct Watched<'a> {
    pub api: &'a Api<DynamicObject>,
    pub name: Option<&'a str>,
    pub target: &'a str,
}

impl Watched<'_> {
    async fn fetch(&self) -> Result<Vec<DynamicObject>, ClusterError> {
        fetch(self.api, self.name).await
    }
}

pub(super) async fn watch(
    watched: &Watched<'_>,
    output: Output,
    events: Events,
) -> anyhow::Result<ExitCode> {
    let tty = std::io::stdout().is_terminal();
    if tty && output == Output::Table {
        live_view(watched, events).await
    } else {
        frames(watched, output, events, tty).await
    }
}

/// One frame per change of the output: plain text, no escapes unless on a terminal.
async fn frames(
    watched: &Watched<'_>,
    output: Output,
    mut events: Events,
    tty: bool,
) -> anyhow::Result<ExitCode> {
    let mut last = String::new();
    while let Some(event) = events.next().await {
        if let Err(error) = event {
            eprintln!("watch error (retrying): {error} [{}]", watched.target);
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let objects = watched
            .fetch()
            .await
            .with_context(|| format!("reading GitPromotions from {}", watched.target))?;
        let text = render(
            &objects,
            watched.name.is_some(),
            output,
            screen::plain_width(),
        )?;
        if text == last {
            continue;
        }
        let mut out = std::io::stdout().lock();
        if tty {
            // Clear the screen and home the cursor: a live view rather than a scrolling log.
            write!(out, "\x1b[2J\x1b[H")?;
        }
        write!(out, "{text}")?;
        if !tty {
            writeln!(out, "---")?;
        }
        out.flush()?;
        last = text;
    }
    Ok(ExitCode::SUCCESS)
}

/// The live view: redrawn on every change and every second; Ctrl-C leaves it with the cursor
/// back and the last frame on screen.
async fn live_view(watched: &Watched<'_>, mut events: Events) -> anyhow::Result<ExitCode> {
    let target = watched.target;
    let mut shown: Vec<Shown> = watched
        .fetch()
        .await
        .with_context(|| format!("reading GitPromotions from {target}"))?
        .iter()
        .map(Shown::of)
        .collect();
    let mut clock = Clock {
        now: Utc::now(),
        updated: Some(Utc::now()),
        problem: absent(watched.name, &shown),
    };
    let mut screen = Screen::enter(std::io::stdout())?;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // Ctrl-C or SIGTERM: the screen is restored (cursor shown) when `screen` drops.
    let interrupted = crate::signals::shutdown();
    tokio::pin!(interrupted);
    loop {
        tokio::select! {
            event = events.next() => match event {
                None => break,
                Some(Err(error)) => {
                    clock.problem = Some(format!("watch error (retrying): {error} [{target}]"));
                }
                Some(Ok(_)) => match watched.fetch().await {
                    Ok(objects) => {
                        let fresh: Vec<Shown> = objects.iter().map(Shown::of).collect();
                        if fresh != shown {
                            shown = fresh;
                            clock.updated = Some(Utc::now());
                        }
                        clock.problem = absent(watched.name, &shown);
                    }
                    Err(error) => {
                        clock.problem = Some(format!("{error} [{target}] (retrying)"));
                    }
                },
            },
            _ = tick.tick() => {}
            _ = &mut interrupted => break,
        }
        // "Now" is read here, at the edge; the frame is a function of it.
        clock.now = Utc::now();
        let size = screen::size();
        screen.draw(&live::frame(&shown, &clock, size), size.rows)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Watching one promotion that is not there (yet): say which, and where to look.
fn absent(name: Option<&str>, shown: &[Shown]) -> Option<String> {
    let name = name.filter(|_| shown.is_empty())?;
    Some(format!(
        "no promotion named {name:?} (yet): is the controller running against this cluster?"
    ))
}
