//! A strict parser for the Prometheus / OpenMetrics text exposition: what a scrape of
//! /metrics serves, read as Prometheus reads it (the server tests, and any test that reads one
//! sample of a scrape).

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub(crate) name: String,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) value: f64,
}

#[derive(Debug, Default)]
pub(crate) struct Family {
    pub(crate) kind: String,
    pub(crate) help: Option<String>,
    pub(crate) unit: Option<String>,
    pub(crate) samples: Vec<Sample>,
}

#[derive(Debug, Default)]
pub(crate) struct Exposition {
    pub(crate) families: BTreeMap<String, Family>,
}

impl Exposition {
    pub(crate) fn family(&self, name: &str) -> &Family {
        self.families
            .get(name)
            .unwrap_or_else(|| panic!("no family {name}; have {:?}", self.families.keys()))
    }

    pub(crate) fn samples(&self, sample_name: &str) -> Vec<&Sample> {
        self.families
            .values()
            .flat_map(|f| f.samples.iter())
            .filter(|s| s.name == sample_name)
            .collect()
    }

    pub(crate) fn value(&self, sample_name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let wanted: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples(sample_name)
            .into_iter()
            .find(|s| s.labels == wanted)
            .map(|s| s.value)
    }

    pub(crate) fn mentions(&self, label: &str, value: &str) -> bool {
        self.families
            .values()
            .flat_map(|f| f.samples.iter())
            .any(|s| s.labels.get(label).is_some_and(|v| v == value))
    }
}

fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_value(text: &str) -> Result<f64, String> {
    match text {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => text
            .parse::<f64>()
            .map_err(|e| format!("bad value {text:?}: {e}")),
    }
}

/// Parses `{a="x",b="y"}` at the start of `text`; returns the labels and the rest.
fn parse_labels(text: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let mut rest = text.strip_prefix('{').ok_or("labels must start with {")?;
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Ok((labels, after));
        }
        let eq = rest.find('=').ok_or("label without =")?;
        let name = &rest[..eq];
        if !is_label_name(name) {
            return Err(format!("bad label name {name:?}"));
        }
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or("label value must be quoted")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err("unterminated label value".into()),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("bad escape {other:?}")),
                },
                Some((_, c)) => value.push(c),
            }
        };
        if labels.insert(name.to_string(), value).is_some() {
            return Err(format!("duplicate label {name}"));
        }
        rest = &rest[end + 1..];
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else if !rest.starts_with('}') {
            return Err(format!("expected , or }} at {rest:?}"));
        }
    }
}

/// The family a sample name belongs to, given its type.
fn family_of<'a>(sample: &'a str, families: &BTreeMap<String, Family>) -> Option<&'a str> {
    if families.contains_key(sample) {
        return Some(sample);
    }
    for suffix in ["_total", "_created", "_bucket", "_count", "_sum", "_info"] {
        if let Some(base) = sample.strip_suffix(suffix)
            && families.contains_key(base)
        {
            return Some(base);
        }
    }
    None
}

pub(crate) fn parse_exposition(text: &str) -> Result<Exposition, String> {
    let mut exposition = Exposition::default();
    let mut saw_eof = false;
    for (number, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}: {line:?}", number + 1);
        if saw_eof {
            return Err(at("content after # EOF".into()));
        }
        if line == "# EOF" {
            saw_eof = true;
            continue;
        }
        if let Some(meta) = line.strip_prefix("# ") {
            let mut parts = meta.splitn(3, ' ');
            let keyword = parts.next().unwrap_or_default();
            let name = parts
                .next()
                .ok_or_else(|| at("metadata without name".into()))?;
            let rest = parts.next().unwrap_or_default().to_string();
            if !is_metric_name(name) {
                return Err(at(format!("bad metric name {name:?}")));
            }
            let family = exposition.families.entry(name.to_string()).or_default();
            match keyword {
                "TYPE" => {
                    let known = [
                        "counter",
                        "gauge",
                        "histogram",
                        "summary",
                        "info",
                        "stateset",
                        "gaugehistogram",
                        "unknown",
                    ];
                    if !known.contains(&rest.as_str()) {
                        return Err(at(format!("unknown type {rest:?}")));
                    }
                    if !family.kind.is_empty() {
                        return Err(at("second TYPE".into()));
                    }
                    family.kind = rest;
                }
                "HELP" => family.help = Some(rest),
                "UNIT" => family.unit = Some(rest),
                other => return Err(at(format!("unknown metadata {other:?}"))),
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            return Err(at("stray line".into()));
        }
        let name_end = line
            .find(['{', ' '])
            .ok_or_else(|| at("sample without value".into()))?;
        let name = &line[..name_end];
        if !is_metric_name(name) {
            return Err(at(format!("bad sample name {name:?}")));
        }
        let (labels, rest) = if line[name_end..].starts_with('{') {
            parse_labels(&line[name_end..]).map_err(at)?
        } else {
            (BTreeMap::new(), &line[name_end..])
        };
        let rest = rest
            .strip_prefix(' ')
            .ok_or_else(|| at("no space before value".into()))?;
        let mut fields = rest.split(' ');
        let value = parse_value(fields.next().unwrap_or_default()).map_err(at)?;
        if let Some(timestamp) = fields.next() {
            timestamp
                .parse::<f64>()
                .map_err(|e| at(format!("bad timestamp: {e}")))?;
        }
        if fields.next().is_some() {
            return Err(at("trailing fields".into()));
        }
        let family = family_of(name, &exposition.families)
            .ok_or_else(|| at(format!("sample {name} has no TYPE")))?
            .to_string();
        let family = exposition
            .families
            .get_mut(&family)
            .ok_or_else(|| at("family vanished".into()))?;
        if family.kind.is_empty() {
            return Err(at("sample before TYPE".into()));
        }
        family.samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    if !saw_eof {
        return Err("no # EOF".into());
    }
    Ok(exposition)
}

#[test]
fn the_parser_rejects_malformed_expositions() {
    let good = "# TYPE a counter\na_total{x=\"1\"} 2\n# EOF\n";
    assert!(parse_exposition(good).is_ok());
    for bad in [
        "# TYPE a counter\na_total{x=\"1\"} 2\n",          // no EOF
        "a_total 2\n# EOF\n",                              // no TYPE
        "# TYPE a counter\na_total{x=1} 2\n# EOF\n",       // unquoted value
        "# TYPE a counter\na_total{x=\"1\"}2\n# EOF\n",    // no space
        "# TYPE a counter\na_total{x=\"1\"} two\n# EOF\n", // bad value
        "# TYPE a counter\na_total{1x=\"1\"} 2\n# EOF\n",  // bad label name
        "# TYPE a counter\na_total{x=\"1\",x=\"2\"} 2\n# EOF\n", // duplicate label
        "# TYPE a nonsense\n# EOF\n",                      // unknown type
        "# EOF\n# TYPE a counter\n",                       // after EOF
    ] {
        assert!(parse_exposition(bad).is_err(), "accepted {bad:?}");
    }
}
