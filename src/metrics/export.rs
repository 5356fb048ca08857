//! The `/metrics` text: metric families gathered at scrape time (values copied out of the
//! counters, so encoding holds no lock) and written in the Prometheus text format by
//! `prometheus-client`. The names, types and labels are listed in the README's
//! "Operations" section; a unit test keeps that list and this file in step.

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::Metrics;
use tollgate_raft::stats::Histogram;

/// Histogram buckets: powers of two nanoseconds from 2^10 (about 1 µs) to 2^33 (8.6 s).
const LE_FROM: u32 = 10;
const LE_TO: u32 = 33;

/// One value of a series.
#[derive(Debug, Clone)]
pub enum Value {
    /// A monotonic count.
    Counter(u64),
    /// A level.
    Gauge(f64),
    /// A distribution in seconds: sum, count, cumulative `(le, count)` buckets.
    Histogram(f64, u64, Vec<(f64, u64)>),
}

impl Value {
    /// A histogram of durations in seconds from a nanosecond [`Histogram`].
    pub fn histogram(h: &Histogram) -> Value {
        let (cumulative, total) = h.cumulative(LE_FROM, LE_TO);
        let buckets = cumulative
            .into_iter()
            .map(|(le_ns, n)| (le_ns as f64 / 1e9, n))
            .collect();
        Value::Histogram(h.sum_ns() as f64 / 1e9, total, buckets)
    }
}

/// A metric family: its name (without `_total`), help and series.
#[derive(Debug, Clone)]
pub struct Family {
    /// Name; counters get `_total` appended by the encoder.
    pub name: &'static str,
    /// One-line help.
    pub help: &'static str,
    /// The series: labels and value.
    pub series: Vec<(Vec<(&'static str, String)>, Value)>,
}

impl Family {
    /// An empty family.
    pub fn new(name: &'static str, help: &'static str) -> Family {
        Family {
            name,
            help,
            series: Vec::new(),
        }
    }

    /// A family of one unlabelled series.
    pub fn single(name: &'static str, help: &'static str, value: Value) -> Family {
        Family {
            name,
            help,
            series: vec![(Vec::new(), value)],
        }
    }

    /// Add a series.
    pub fn push(&mut self, labels: Vec<(&'static str, String)>, value: Value) {
        self.series.push((labels, value));
    }
}

struct ValueRef<'a>(&'a Value);

impl std::fmt::Debug for ValueRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl EncodeMetric for ValueRef<'_> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        match self.0 {
            Value::Counter(n) => encoder.encode_counter::<NoLabelSet, _, u64>(n, None),
            Value::Gauge(v) => encoder.encode_gauge(v),
            Value::Histogram(sum, count, buckets) => {
                encoder.encode_histogram::<NoLabelSet>(*sum, *count, buckets, None)
            }
        }
    }

    fn metric_type(&self) -> MetricType {
        match self.0 {
            Value::Counter(_) => MetricType::Counter,
            Value::Gauge(_) => MetricType::Gauge,
            Value::Histogram(..) => MetricType::Histogram,
        }
    }
}

#[derive(Debug)]
struct Families(Vec<Family>);

impl prometheus_client::collector::Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for family in &self.0 {
            let Some((_, first)) = family.series.first() else {
                continue;
            };
            let kind = ValueRef(first).metric_type();
            let mut metric = encoder.encode_descriptor(family.name, family.help, None, kind)?;
            for (labels, value) in &family.series {
                let labels: Vec<(&str, &str)> =
                    labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let series = metric.encode_family(&labels)?;
                ValueRef(value).encode(series)?;
            }
        }
        Ok(())
    }
}

/// The Prometheus text of `families`.
pub fn encode(families: Vec<Family>) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Families(families)));
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry);
    out
}

/// The families [`Metrics`] holds: commands, errors, limiter decisions, traffic.
pub fn families(m: &Metrics) -> Vec<Family> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut calls = Family::new("tollgate_commands", "Commands executed, by command");
    let mut errors = Family::new(
        "tollgate_command_errors",
        "Commands answered with an error (failed or rejected), by command",
    );
    let mut time = Family::new(
        "tollgate_command_duration_seconds",
        "Execution time of commands in the engine (not network or Raft wait), by command",
    );
    for (name, s) in m.commands() {
        let label = || vec![("command", name.to_string())];
        calls.push(label(), Value::Counter(s.calls()));
        errors.push(
            label(),
            Value::Counter(s.failed.load(Relaxed) + s.rejected.load(Relaxed)),
        );
        if let Some(h) = s.time() {
            time.push(label(), Value::histogram(h));
        }
    }
    let mut codes = Family::new("tollgate_errors", "Error replies, by error code");
    for (code, n) in m.errors() {
        codes.push(vec![("error", code)], Value::Counter(n));
    }
    let mut decisions = Family::new(
        "tollgate_limiter_decisions",
        "Limiter decisions, by command, outcome and key prefix",
    );
    let mut units = Family::new(
        "tollgate_limiter_units",
        "Units charged by allowed limiter decisions, by command and key prefix",
    );
    for (command, prefix, allowed, denied, charged) in m.decisions.rows() {
        let labels = |outcome: Option<&str>| {
            let mut l = vec![("command", command.to_string())];
            if let Some(o) = outcome {
                l.push(("outcome", o.to_string()));
            }
            if let Some(p) = &prefix {
                l.push(("prefix", p.clone()));
            }
            l
        };
        decisions.push(labels(Some("allowed")), Value::Counter(allowed));
        decisions.push(labels(Some("denied")), Value::Counter(denied));
        units.push(labels(None), Value::Counter(charged));
    }
    vec![
        calls,
        errors,
        time,
        codes,
        decisions,
        units,
        Family::single(
            "tollgate_net_input_bytes",
            "Bytes read from clients",
            Value::Counter(m.net_input.load(Relaxed)),
        ),
        Family::single(
            "tollgate_net_output_bytes",
            "Bytes written to clients",
            Value::Counter(m.net_output.load(Relaxed)),
        ),
        Family::single(
            "tollgate_clusterdown_replies",
            "-CLUSTERDOWN replies sent to clients",
            Value::Counter(m.clusterdown.load(Relaxed)),
        ),
    ]
}
