//! Field access on `serde_json::Value` with errors that name the field.

use serde_json::{Map, Value};

pub(crate) type Obj = Map<String, Value>;

/// Parses one line as a JSON object.
pub(crate) fn parse_object(text: &str) -> Result<Obj, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(other) => Err(format!("expected a JSON object, found {}", kind(&other))),
        Err(e) => Err(format!("invalid JSON: {e}")),
    }
}

/// JSON type name for messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn missing(at: &str, key: &str) -> String {
    format!("missing field `{}`", join(at, key))
}

fn wrong(at: &str, key: &str, want: &str, v: &Value) -> String {
    format!(
        "field `{}` must be {want}, found {}",
        join(at, key),
        kind(v)
    )
}

/// `at.key`, or `key` when `at` is empty.
pub(crate) fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_string()
    } else {
        format!("{at}.{key}")
    }
}

/// A present, non-null field.
pub(crate) fn get<'a>(o: &'a Obj, key: &str) -> Option<&'a Value> {
    o.get(key).filter(|v| !v.is_null())
}

/// Required string field.
pub(crate) fn req_str<'a>(o: &'a Obj, at: &str, key: &str) -> Result<&'a str, String> {
    match get(o, key) {
        None => Err(missing(at, key)),
        Some(Value::String(s)) => Ok(s),
        Some(v) => Err(wrong(at, key, "a string", v)),
    }
}

/// Optional string field (absent or null → `None`; another type is an error).
pub(crate) fn opt_str<'a>(o: &'a Obj, at: &str, key: &str) -> Result<Option<&'a str>, String> {
    match get(o, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(wrong(at, key, "a string", v)),
    }
}

/// Required object field.
pub(crate) fn req_obj<'a>(o: &'a Obj, at: &str, key: &str) -> Result<&'a Obj, String> {
    match get(o, key) {
        None => Err(missing(at, key)),
        Some(Value::Object(m)) => Ok(m),
        Some(v) => Err(wrong(at, key, "an object", v)),
    }
}

/// Optional object field.
pub(crate) fn opt_obj<'a>(o: &'a Obj, at: &str, key: &str) -> Result<Option<&'a Obj>, String> {
    match get(o, key) {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(v) => Err(wrong(at, key, "an object", v)),
    }
}

/// Required array field.
pub(crate) fn req_arr<'a>(o: &'a Obj, at: &str, key: &str) -> Result<&'a [Value], String> {
    match get(o, key) {
        None => Err(missing(at, key)),
        Some(Value::Array(a)) => Ok(a),
        Some(v) => Err(wrong(at, key, "an array", v)),
    }
}

/// Optional array field.
pub(crate) fn opt_arr<'a>(o: &'a Obj, at: &str, key: &str) -> Result<Option<&'a [Value]>, String> {
    match get(o, key) {
        None => Ok(None),
        Some(Value::Array(a)) => Ok(Some(a)),
        Some(v) => Err(wrong(at, key, "an array", v)),
    }
}

/// Optional boolean field.
pub(crate) fn opt_bool(o: &Obj, at: &str, key: &str) -> Result<Option<bool>, String> {
    match get(o, key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(wrong(at, key, "a boolean", v)),
    }
}

/// Optional non-negative integer field (floats with no fraction are accepted).
pub(crate) fn opt_u64(o: &Obj, at: &str, key: &str) -> Result<Option<u64>, String> {
    match get(o, key) {
        None => Ok(None),
        Some(v) => as_u64(v)
            .map(Some)
            .ok_or_else(|| wrong(at, key, "a non-negative integer", v)),
    }
}

/// Optional integer field (may be negative).
pub(crate) fn opt_i64(o: &Obj, at: &str, key: &str) -> Result<Option<i64>, String> {
    match get(o, key) {
        None => Ok(None),
        Some(v) => v
            .as_i64()
            .or_else(|| {
                v.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9e15)
                    .map(|f| f as i64)
            })
            .map(Some)
            .ok_or_else(|| wrong(at, key, "an integer", v)),
    }
}

/// A number as `u64`, lenient about integral floats.
pub(crate) fn as_u64(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19)
            .map(|f| f as u64)
    })
}

/// Lenient usage number: missing or malformed counts as 0 (usage is informational).
pub(crate) fn num(o: Option<&Obj>, key: &str) -> u64 {
    o.and_then(|o| o.get(key)).and_then(as_u64).unwrap_or(0)
}

/// An element of an array as an object, named `at[i]` in errors.
pub(crate) fn elem_obj<'a>(v: &'a Value, at: &str, i: usize) -> Result<&'a Obj, String> {
    v.as_object()
        .ok_or_else(|| format!("`{at}[{i}]` must be an object, found {}", kind(v)))
}

/// Parses a JSON-encoded arguments string; keeps it as a JSON string when it does not parse.
pub(crate) fn parse_args(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.to_string()))
}
