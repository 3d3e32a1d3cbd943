//! The serde model of Kafka's JSON message schemas, exactly as written in the files.
//!
//! Unknown keys are rejected (`deny_unknown_fields`) so that a schema from a newer Kafka that
//! uses a feature we do not understand fails the build instead of generating a wrong codec.

use serde::Deserialize;

/// One schema file: a request, response, header or data message.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SchemaFile {
    /// The API key, for requests and responses.
    pub api_key: Option<i16>,
    /// `request`, `response`, `header` or `data`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Which Kafka processes accept the request; informational.
    pub listeners: Option<Vec<String>>,
    /// Message name, e.g. `JoinGroupRequest`.
    pub name: String,
    /// Versions this schema describes.
    pub valid_versions: String,
    /// Versions Kafka deprecated; informational.
    pub deprecated_versions: Option<String>,
    /// Versions that use the compact (KIP-482) encoding.
    pub flexible_versions: String,
    /// Whether the newest version is still unstable in this release.
    pub latest_version_unstable: Option<bool>,
    /// Top-level fields.
    pub fields: Vec<FieldSpec>,
    /// Structs shared by several fields of this message.
    pub common_structs: Option<Vec<StructSpec>>,
}

/// A struct declared in `commonStructs`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StructSpec {
    /// Struct name.
    pub name: String,
    /// Versions the struct exists in.
    pub versions: String,
    /// Its fields.
    pub fields: Vec<FieldSpec>,
}

/// One field of a message or struct.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FieldSpec {
    /// Field name in UpperCamelCase.
    pub name: String,
    /// `int32`, `string`, `[]Foo`, `Foo`, …
    #[serde(rename = "type")]
    pub ty: String,
    /// Versions the field exists in.
    pub versions: String,
    /// Versions in which the field may be null.
    pub nullable_versions: Option<String>,
    /// Versions in which the field is sent in the tagged-field section.
    pub tagged_versions: Option<String>,
    /// The tag, for tagged fields.
    pub tag: Option<i64>,
    /// Whether the field may be dropped silently in versions that lack it.
    pub ignorable: Option<bool>,
    /// The default value as text (`"-1"`, `"null"`, `"0x7fffffff"`, `"true"`).
    pub default: Option<serde_json::Value>,
    /// Documentation.
    pub about: Option<String>,
    /// Whether the field keys a map in Kafka's Java model; informational.
    pub map_key: Option<bool>,
    /// What the field identifies (topic name, broker id…); informational.
    pub entity_type: Option<String>,
    /// Overrides the message's flexible versions for this field's encoding.
    pub flexible_versions: Option<String>,
    /// Java-only buffer hint; informational.
    pub zero_copy: Option<bool>,
    /// Fields of the struct this field declares.
    pub fields: Option<Vec<FieldSpec>>,
}

/// Removes `//` comments outside string literals, keeping line structure so that serde's line
/// numbers still point at the right line of the file.
pub fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut chars = src.chars().peekable();
    let (mut in_str, mut escaped) = (false, false);
    while let Some(c) = chars.next() {
        if in_str {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        if c == '/' && chars.peek() == Some(&'/') {
            for c in chars.by_ref() {
                if c == '\n' {
                    out.push('\n');
                    break;
                }
            }
            continue;
        }
        if c == '"' {
            in_str = true;
        }
        out.push(c);
    }
    out
}

/// Parses one schema file's text.
pub fn parse(text: &str) -> Result<SchemaFile, String> {
    serde_json::from_str(&strip_comments(text)).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_comments_but_not_inside_strings() {
        let s = "// header\n{ \"a\": \"x//y\", // tail\n \"b\": 1 }";
        let stripped = strip_comments(s);
        assert_eq!(stripped, "\n{ \"a\": \"x//y\", \n \"b\": 1 }");
    }

    #[test]
    fn rejects_unknown_keys() {
        let s = r#"{"type":"data","name":"X","validVersions":"0","flexibleVersions":"none",
                   "fields":[{"name":"A","type":"int8","versions":"0+","bogus":1}]}"#;
        let err = parse(s).unwrap_err();
        assert!(err.contains("bogus"), "{err}");
    }
}
