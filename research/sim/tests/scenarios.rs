//! Every file in `research/scenarios/` parses into a scenario, passes the semantic checks, and validates
//! against `research/scenarios/scenario.schema.json` (the testbed's TypeScript reads the same files, so
//! the schema must say exactly what the simulator accepts).

use serde_json::Value;
use sim::catalogue::scenario_files;
use sim::scenario::Scenario;
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A small JSON Schema validator for the subset the scenario schema uses: type, const, enum,
/// properties, required, additionalProperties: false, items, minItems, maxItems, minimum,
/// maximum, exclusiveMinimum, oneOf and local $ref.
fn check(schema: &Value, root: &Value, v: &Value, path: &str, errs: &mut Vec<String>) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/$defs/");
        return check(&root["$defs"][name], root, v, path, errs);
    }
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        let ok = match t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "number" => v.is_number(),
            "integer" => v.is_i64() || v.is_u64(),
            "boolean" => v.is_boolean(),
            _ => false,
        };
        if !ok {
            errs.push(format!("{path}: expected {t}, got {v}"));
            return;
        }
    }
    if let Some(c) = schema.get("const") {
        if c != v {
            errs.push(format!("{path}: expected {c}"));
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            errs.push(format!("{path}: {v} not in enum"));
        }
    }
    if let Some(x) = v.as_f64() {
        if schema
            .get("minimum")
            .and_then(Value::as_f64)
            .is_some_and(|m| x < m)
        {
            errs.push(format!("{path}: {x} below minimum"));
        }
        if schema
            .get("maximum")
            .and_then(Value::as_f64)
            .is_some_and(|m| x > m)
        {
            errs.push(format!("{path}: {x} above maximum"));
        }
        if schema
            .get("exclusiveMinimum")
            .and_then(Value::as_f64)
            .is_some_and(|m| x <= m)
        {
            errs.push(format!("{path}: {x} not above exclusiveMinimum"));
        }
    }
    if let Some(a) = v.as_array() {
        if schema
            .get("minItems")
            .and_then(Value::as_u64)
            .is_some_and(|m| (a.len() as u64) < m)
        {
            errs.push(format!("{path}: too few items"));
        }
        if schema
            .get("maxItems")
            .and_then(Value::as_u64)
            .is_some_and(|m| (a.len() as u64) > m)
        {
            errs.push(format!("{path}: too many items"));
        }
        if let Some(items) = schema.get("items") {
            for (i, x) in a.iter().enumerate() {
                check(items, root, x, &format!("{path}[{i}]"), errs);
            }
        }
    }
    if let Some(o) = v.as_object() {
        if let Some(req) = schema.get("required").and_then(Value::as_array) {
            for r in req.iter().filter_map(Value::as_str) {
                if !o.contains_key(r) {
                    errs.push(format!("{path}: missing {r}"));
                }
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, x) in o {
            match props.and_then(|p| p.get(k)) {
                Some(s) => check(s, root, x, &format!("{path}.{k}"), errs),
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    errs.push(format!("{path}: unknown property {k}"))
                }
                None => {}
            }
        }
    }
    if let Some(alts) = schema.get("oneOf").and_then(Value::as_array) {
        let matching: Vec<Vec<String>> = alts
            .iter()
            .map(|s| {
                let mut e = Vec::new();
                check(s, root, v, path, &mut e);
                e
            })
            .collect();
        let n = matching.iter().filter(|e| e.is_empty()).count();
        if n != 1 {
            errs.push(format!(
                "{path}: matches {n} of oneOf; closest errors: {:?}",
                matching.iter().min_by_key(|e| e.len())
            ));
        }
    }
}

fn schema() -> Value {
    let text =
        std::fs::read_to_string(repo().join("research/scenarios/scenario.schema.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn every_catalogue_file_parses_and_validates_against_the_schema() {
    let schema = schema();
    let files = scenario_files(&repo().join("research/scenarios")).unwrap();
    assert!(files.len() >= 8, "catalogue has {} files", files.len());
    for f in files {
        let sc = Scenario::load(&f).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !sc.measurements.is_empty(),
            "{}: no measurements",
            f.display()
        );
        assert_eq!(
            Some(sc.name.as_str()),
            f.file_stem().and_then(|s| s.to_str()),
            "name must match the file stem"
        );
        let text = std::fs::read_to_string(&f).unwrap();
        let v: Value = serde_norway::from_str(&text).unwrap();
        let mut errs = Vec::new();
        check(&schema, &schema, &v, "$", &mut errs);
        assert!(errs.is_empty(), "{}: {errs:#?}", f.display());
    }
}

#[test]
fn schema_and_parser_reject_the_same_mistakes() {
    let schema = schema();
    let good = r#"
name: g
duration_s: 10
topology:
  nodes: [a, b]
  links: [{from: a, to: b, rate_kbps: 100, delay_ms: 1, queue: {kind: red, min_th: 5, max_th: 15, limit_packets: 30}}]
flows: [{name: c, type: cbr, from: a, to: b, rate_kbps: 10}]
measurements: [{id: x, metric: throughput_kbps, of: [c], min: 1}]
"#;
    let v: Value = serde_norway::from_str(good).unwrap();
    let mut errs = Vec::new();
    check(&schema, &schema, &v, "$", &mut errs);
    assert!(errs.is_empty(), "{errs:?}");
    assert!(Scenario::from_yaml(good).is_ok());
    for (from, to) in [
        ("kind: red, min_th: 5,", "kind: red, bogus: 1, min_th: 5,"),
        ("type: cbr", "type: tcpx"),
        ("metric: throughput_kbps", "metric: goodness"),
        ("rate_kbps: 100", "rate_kbps: -5"),
        ("duration_s: 10", "duration_s: 10\nextra: 1"),
    ] {
        let bad = good.replacen(from, to, 1);
        assert_ne!(bad, good);
        let v: Value = serde_norway::from_str(&bad).unwrap();
        let mut errs = Vec::new();
        check(&schema, &schema, &v, "$", &mut errs);
        assert!(!errs.is_empty(), "schema accepted {to}");
        assert!(Scenario::from_yaml(&bad).is_err(), "parser accepted {to}");
    }
}

#[test]
fn the_example_in_docs_scenarios_md_is_valid() {
    let md = std::fs::read_to_string(repo().join("docs/scenarios.md")).unwrap();
    let start = md.find("```yaml\n").expect("yaml block") + 8;
    let end = start + md[start..].find("```").expect("block end");
    let sc = Scenario::from_yaml(&md[start..end]).unwrap_or_else(|e| panic!("{e}"));
    let v: Value = serde_norway::from_str(&md[start..end]).unwrap();
    let schema = schema();
    let mut errs = Vec::new();
    check(&schema, &schema, &v, "$", &mut errs);
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(sc.flows.len(), 2);
}
