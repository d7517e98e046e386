//! An action's params as the gateway keeps them: canonical JSON text, written once at submit and
//! parsed where an execution needs them.

use std::collections::BTreeMap;

use serde_json::Value;

/// A JSON value with every object's keys sorted (at every depth), so that equal requests hash and
/// compare equally.
pub fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, Value> =
                map.iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// An action's params: a JSON object kept as its canonical text (the form it is stored in), so the
/// hot path of a submit writes it without parsing it again; [`Params::value`] parses it for use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params(String);

impl Params {
    /// The canonical form of `value`.
    pub fn new(value: &Value) -> Self {
        Self(canonical(value).to_string())
    }

    /// Params as the store kept them (written from [`Params::new`]).
    pub fn stored(text: String) -> Self {
        Self(text)
    }

    /// The canonical text, as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The params as a JSON value.
    pub fn value(&self) -> serde_json::Result<Value> {
        serde_json::from_str(&self.0)
    }
}

impl Default for Params {
    /// No params: `{}`.
    fn default() -> Self {
        Self("{}".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_sorts_nested_keys() {
        let a = canonical(&json!({"b": 1, "a": {"d": [ {"z": 1, "y": 2} ], "c": 3}}));
        assert_eq!(a.to_string(), r#"{"a":{"c":3,"d":[{"y":2,"z":1}]},"b":1}"#);
    }

    #[test]
    fn params_round_trip_in_canonical_form() {
        let p = Params::new(&json!({"z": "1", "a": {"c": 2, "b": 1}}));
        assert_eq!(p.as_str(), r#"{"a":{"b":1,"c":2},"z":"1"}"#);
        assert_eq!(p, Params::stored(p.as_str().to_owned()));
        assert_eq!(
            p.value().ok(),
            Some(json!({"a": {"b": 1, "c": 2}, "z": "1"}))
        );
        assert!(Params::stored("{not json".into()).value().is_err());
        assert_eq!(Params::default().value().ok(), Some(json!({})));
    }
}
