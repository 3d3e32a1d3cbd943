//! The prepared model: what the emitter needs, with every decision already taken.
//!
//! Lowering validates the schema (types, defaults, tags, nullability) and intersects each
//! field's version ranges with the versions its struct exists in, so the emitter never has to
//! reason about versions a message cannot have.

use crate::schema::{FieldSpec, SchemaFile, StructSpec};
use crate::version::VersionRange;
use std::collections::{BTreeMap, BTreeSet};

/// What kind of message a schema describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A request with an API key.
    Request,
    /// A response with an API key.
    Response,
    /// Request or response header.
    Header,
    /// A standalone data structure (e.g. the consumer protocol's subscription).
    Data,
}

/// A lowered message with all of its nested structs.
#[derive(Debug, Clone)]
pub struct Message {
    /// Message name, e.g. `JoinGroupRequest`.
    pub name: String,
    /// The schema file it came from.
    pub file: String,
    /// Request, response, header or data.
    pub kind: Kind,
    /// API key for requests and responses.
    pub api_key: Option<i16>,
    /// Versions this message has.
    pub valid: VersionRange,
    /// Versions that use the compact encoding (already within `valid`).
    pub flexible: VersionRange,
    /// The top-level struct (named like the message).
    pub root: Struct,
    /// Every nested struct, in declaration order, each once.
    pub structs: Vec<Struct>,
}

/// A struct: the message itself or one declared by a field or in `commonStructs`.
#[derive(Debug, Clone)]
pub struct Struct {
    /// Rust type name.
    pub name: String,
    /// Versions in which the struct can appear (within the message's valid versions).
    pub versions: VersionRange,
    /// Fields in wire order.
    pub fields: Vec<Field>,
}

/// A field's type.
#[derive(Debug, Clone, PartialEq)]
pub enum Type {
    /// `bool`
    Bool,
    /// `int8`
    Int8,
    /// `int16`
    Int16,
    /// `uint16`
    Uint16,
    /// `int32`
    Int32,
    /// `uint32`
    Uint32,
    /// `int64`
    Int64,
    /// `float64`
    Float64,
    /// `string`
    String,
    /// `bytes`
    Bytes,
    /// `records` (a record batch set, opaque at this layer)
    Records,
    /// `uuid`
    Uuid,
    /// A struct by name.
    Struct(String),
    /// `[]T`
    Array(Box<Type>),
}

impl Type {
    /// Whether values of this type can be null on the wire at all.
    pub fn can_be_null(&self) -> bool {
        matches!(
            self,
            Type::String | Type::Bytes | Type::Records | Type::Struct(_) | Type::Array(_)
        )
    }

    fn is_int(&self) -> bool {
        matches!(
            self,
            Type::Int8 | Type::Int16 | Type::Uint16 | Type::Int32 | Type::Uint32 | Type::Int64
        )
    }

    fn int_bounds(&self) -> (i64, i64) {
        match self {
            Type::Int8 => (i8::MIN as i64, i8::MAX as i64),
            Type::Int16 => (i16::MIN as i64, i16::MAX as i64),
            Type::Uint16 => (0, u16::MAX as i64),
            Type::Int32 => (i32::MIN as i64, i32::MAX as i64),
            Type::Uint32 => (0, u32::MAX as i64),
            _ => (i64::MIN, i64::MAX),
        }
    }
}

/// A field's default value, already checked against its type.
#[derive(Debug, Clone, PartialEq)]
pub enum Default {
    /// The type's zero value (0, false, empty string/array/bytes, default struct, nil uuid).
    Zero,
    /// `null`.
    Null,
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A float.
    Float(f64),
    /// A non-empty string.
    Str(String),
}

/// A tagged field's tag and the versions in which it is tagged.
#[derive(Debug, Clone, PartialEq)]
pub struct Tagged {
    /// The tag number.
    pub tag: u32,
    /// Versions in which the field goes in the tagged section.
    pub versions: VersionRange,
}

/// A lowered field.
#[derive(Debug, Clone)]
pub struct Field {
    /// Name as in the schema (`GroupInstanceId`).
    pub schema_name: String,
    /// Rust field name (`group_instance_id`).
    pub rust_name: String,
    /// Its type.
    pub ty: Type,
    /// Versions the field exists in, within its struct's versions.
    pub versions: VersionRange,
    /// Versions in which it may be null, within `versions`.
    pub nullable: VersionRange,
    /// Tag, for tagged fields.
    pub tagged: Option<Tagged>,
    /// Whether a non-default value may be dropped in versions that lack the field.
    pub ignorable: bool,
    /// Default value.
    pub default: Default,
    /// Versions in which strings/bytes/arrays use compact encoding, for this field.
    pub flexible: VersionRange,
    /// Documentation from the schema.
    pub about: Option<String>,
}

impl Field {
    /// Whether the Rust type is an `Option`.
    pub fn is_option(&self) -> bool {
        !self.nullable.is_none()
    }

    /// Versions in which the field is written in the regular (non-tagged) part.
    pub fn regular_versions(&self) -> VersionRange {
        match &self.tagged {
            None => self.versions,
            // Kafka requires tagged versions to reach to the end of the field's versions, so the
            // regular versions are those before the first tagged one.
            Some(t) => match t.versions.min() {
                Some(m) => self.versions.intersect(&VersionRange::new(0, m - 1)),
                None => self.versions,
            },
        }
    }
}

/// Lowers one parsed schema file. Errors name the file and the field.
pub fn lower(file: &str, schema: &SchemaFile) -> Result<Message, String> {
    let ctx = |msg: String| format!("{file}: {msg}");
    let kind = match schema.kind.as_str() {
        "request" => Kind::Request,
        "response" => Kind::Response,
        "header" => Kind::Header,
        "data" => Kind::Data,
        other => return Err(ctx(format!("unknown message type {other:?}"))),
    };
    if matches!(kind, Kind::Request | Kind::Response) != schema.api_key.is_some() {
        return Err(ctx(
            "apiKey must be given exactly for requests and responses".into()
        ));
    }
    let valid =
        VersionRange::parse(&schema.valid_versions).map_err(|e| ctx(format!("validVersions: {e}")))?;
    if valid.is_none() {
        return Err(ctx("validVersions is none".into()));
    }
    let flexible = VersionRange::parse(&schema.flexible_versions)
        .map_err(|e| ctx(format!("flexibleVersions: {e}")))?
        .intersect(&valid);

    let mut lw = Lowerer {
        file,
        valid,
        flexible,
        structs: Vec::new(),
        names: BTreeSet::new(),
        common: BTreeMap::new(),
    };
    lw.names.insert(schema.name.clone());
    for c in schema.common_structs.iter().flatten() {
        lw.common.insert(c.name.clone(), c);
    }
    let root_fields = lw.fields(&schema.name, &schema.fields, valid)?;
    // Common structs that no field used still become types, so that the Rust API mirrors the
    // schema; a used one was already lowered with the versions of its first use.
    let unused: Vec<&StructSpec> = schema
        .common_structs
        .iter()
        .flatten()
        .filter(|c| !lw.names.contains(&c.name))
        .collect();
    for c in unused {
        let v =
            VersionRange::parse(&c.versions).map_err(|e| ctx(format!("common struct {}: {e}", c.name)))?;
        lw.declare(&c.name, &c.fields, v.intersect(&valid))?;
    }
    Ok(Message {
        name: schema.name.clone(),
        file: file.to_string(),
        kind,
        api_key: schema.api_key,
        valid,
        flexible,
        root: Struct {
            name: schema.name.clone(),
            versions: valid,
            fields: root_fields,
        },
        structs: lw.structs,
    })
}

struct Lowerer<'a> {
    file: &'a str,
    valid: VersionRange,
    flexible: VersionRange,
    structs: Vec<Struct>,
    names: BTreeSet<String>,
    common: BTreeMap<String, &'a StructSpec>,
}

impl<'a> Lowerer<'a> {
    fn err(&self, owner: &str, field: &str, msg: impl std::fmt::Display) -> String {
        format!("{}: field {owner}.{field}: {msg}", self.file)
    }

    fn declare(&mut self, name: &str, fields: &'a [FieldSpec], versions: VersionRange) -> Result<(), String> {
        if !self.names.insert(name.to_string()) {
            return Err(format!("{}: struct {name} is declared twice", self.file));
        }
        // Reserve the slot first so that structs appear outer-before-inner in the output.
        let idx = self.structs.len();
        self.structs.push(Struct {
            name: name.to_string(),
            versions,
            fields: Vec::new(),
        });
        let fields = self.fields(name, fields, versions)?;
        self.structs[idx].fields = fields;
        Ok(())
    }

    fn fields(
        &mut self,
        owner: &str,
        specs: &'a [FieldSpec],
        within: VersionRange,
    ) -> Result<Vec<Field>, String> {
        let mut out = Vec::new();
        let mut tags = BTreeSet::new();
        let mut rust_names = BTreeSet::new();
        for f in specs {
            let field = self.field(owner, f, within)?;
            if let Some(t) = &field.tagged {
                if !tags.insert(t.tag) {
                    return Err(self.err(owner, &f.name, format!("tag {} used twice", t.tag)));
                }
            }
            if !rust_names.insert(field.rust_name.clone()) {
                return Err(self.err(owner, &f.name, "duplicate field name"));
            }
            out.push(field);
        }
        Ok(out)
    }

    fn field(&mut self, owner: &str, f: &'a FieldSpec, within: VersionRange) -> Result<Field, String> {
        let file = self.file;
        let e = |m: String| format!("{file}: field {owner}.{}: {m}", f.name);
        let versions = VersionRange::parse(&f.versions)
            .map_err(|m| e(format!("versions: {m}")))?
            .intersect(&within);
        let nullable = match &f.nullable_versions {
            Some(s) => VersionRange::parse(s)
                .map_err(|m| e(format!("nullableVersions: {m}")))?
                .intersect(&versions),
            None => VersionRange::NONE,
        };
        let ty = self.parse_type(owner, f, versions)?;
        if !nullable.is_none() && !ty.can_be_null() {
            return Err(e(format!("type {} cannot be nullable", f.ty)));
        }
        let tagged = match (&f.tagged_versions, f.tag) {
            (None, None) => None,
            (Some(tv), Some(tag)) => {
                let tv = VersionRange::parse(tv)
                    .map_err(|m| e(format!("taggedVersions: {m}")))?
                    .intersect(&versions);
                let tag = u32::try_from(tag).map_err(|_| e(format!("bad tag {tag}")))?;
                if !self.flexible.covers(&tv) {
                    return Err(e(format!(
                        "tagged versions {tv} are not all flexible ({})",
                        self.flexible
                    )));
                }
                if !tv.is_none() && tv.max() != versions.max() {
                    return Err(e(format!(
                        "tagged versions {tv} must extend to the field's last version {versions}"
                    )));
                }
                Some(Tagged { tag, versions: tv })
            }
            _ => return Err(e("tag and taggedVersions must be given together".into())),
        };
        let flexible = match &f.flexible_versions {
            Some(s) => VersionRange::parse(s)
                .map_err(|m| e(format!("flexibleVersions: {m}")))?
                .intersect(&self.flexible),
            None => self.flexible,
        };
        if f.flexible_versions.is_some() && !matches!(ty, Type::String | Type::Bytes) {
            return Err(e(
                "a field-level flexibleVersions is only allowed on strings and bytes".into(),
            ));
        }
        let default = self.default(f, &ty, &nullable).map_err(e)?;
        Ok(Field {
            schema_name: f.name.clone(),
            rust_name: rust_field_name(&f.name),
            ty,
            versions,
            nullable,
            tagged,
            ignorable: f.ignorable.unwrap_or(false),
            default,
            flexible,
            about: f.about.clone(),
        })
    }

    fn parse_type(&mut self, owner: &str, f: &'a FieldSpec, versions: VersionRange) -> Result<Type, String> {
        let (is_array, base) = match f.ty.strip_prefix("[]") {
            Some(b) => (true, b),
            None => (false, f.ty.as_str()),
        };
        let prim = match base {
            "bool" => Some(Type::Bool),
            "int8" => Some(Type::Int8),
            "int16" => Some(Type::Int16),
            "uint16" => Some(Type::Uint16),
            "int32" => Some(Type::Int32),
            "uint32" => Some(Type::Uint32),
            "int64" => Some(Type::Int64),
            "float64" => Some(Type::Float64),
            "string" => Some(Type::String),
            "bytes" => Some(Type::Bytes),
            "records" => Some(Type::Records),
            "uuid" => Some(Type::Uuid),
            _ => None,
        };
        let base_ty = match prim {
            Some(t) => {
                if f.fields.is_some() {
                    return Err(self.err(
                        owner,
                        &f.name,
                        format!("primitive type {base} cannot declare fields"),
                    ));
                }
                if is_array && t == Type::Records {
                    return Err(self.err(owner, &f.name, "arrays of records are not supported"));
                }
                t
            }
            None => {
                if !base.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                    || !base.chars().all(|c| c.is_ascii_alphanumeric())
                {
                    return Err(self.err(owner, &f.name, format!("unknown type {:?}", f.ty)));
                }
                match (&f.fields, self.common.get(base).copied()) {
                    (Some(fields), None) => self.declare(base, fields, versions)?,
                    (None, Some(c)) => {
                        if !self.names.contains(base) {
                            let cv = VersionRange::parse(&c.versions).map_err(|m| {
                                self.err(owner, &f.name, format!("common struct {base}: {m}"))
                            })?;
                            self.declare(base, &c.fields, cv.intersect(&self.valid))?;
                        }
                    }
                    (Some(_), Some(_)) => {
                        return Err(self.err(
                            owner,
                            &f.name,
                            format!("{base} is a common struct and cannot be redeclared"),
                        ))
                    }
                    (None, None) => {
                        return Err(self.err(owner, &f.name, format!("unknown struct type {base}")))
                    }
                }
                Type::Struct(base.to_string())
            }
        };
        Ok(if is_array {
            Type::Array(Box::new(base_ty))
        } else {
            base_ty
        })
    }

    fn default(&self, f: &FieldSpec, ty: &Type, nullable: &VersionRange) -> Result<Default, String> {
        let text = match &f.default {
            None => return Ok(Default::Zero),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Bool(b)) => b.to_string(),
            Some(serde_json::Value::Number(n)) => n.to_string(),
            Some(other) => return Err(format!("unsupported default {other}")),
        };
        if text == "null" {
            if nullable.is_none() {
                return Err("default is null but the field is never nullable".into());
            }
            return Ok(Default::Null);
        }
        match ty {
            t if t.is_int() => {
                let v = match text.strip_prefix("0x") {
                    Some(hex) => i64::from_str_radix(hex, 16),
                    None => text.parse::<i64>(),
                }
                .map_err(|_| format!("default {text:?} is not an integer"))?;
                let (lo, hi) = t.int_bounds();
                if v < lo || v > hi {
                    return Err(format!("default {v} out of range for {}", f.ty));
                }
                Ok(if v == 0 { Default::Zero } else { Default::Int(v) })
            }
            Type::Bool => match text.as_str() {
                "true" => Ok(Default::Bool(true)),
                "false" => Ok(Default::Zero),
                _ => Err(format!("default {text:?} is not a boolean")),
            },
            Type::Float64 => {
                let v: f64 = text
                    .parse()
                    .map_err(|_| format!("default {text:?} is not a float"))?;
                Ok(if v == 0.0 {
                    Default::Zero
                } else {
                    Default::Float(v)
                })
            }
            Type::String if text.is_empty() => Ok(Default::Zero),
            Type::String => Ok(Default::Str(text)),
            _ if text.is_empty() => Ok(Default::Zero),
            _ => Err(format!(
                "type {} only takes \"null\" as a default, not {text:?}",
                f.ty
            )),
        }
    }
}

const RUST_KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for", "if",
    "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "static",
    "struct", "super", "trait", "true", "type", "unsafe", "use", "where", "while", "async", "await", "dyn",
    "abstract", "become", "box", "do", "final", "macro", "override", "priv", "typeof", "unsized", "virtual",
    "yield", "try",
];

/// `GroupInstanceId` → `group_instance_id`; acronym runs stay together (`ZkMigration` →
/// `zk_migration`, `IPAddress` → `ip_address`); keywords get a trailing underscore.
pub fn rust_field_name(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if prev.is_ascii_lowercase() || prev.is_ascii_digit() || (prev.is_ascii_uppercase() && next_lower)
            {
                out.push('_');
            }
        }
        out.push(c.to_ascii_lowercase());
    }
    if RUST_KEYWORDS.contains(&out.as_str()) {
        out.push('_');
    }
    out
}

/// `JoinGroupRequest` → `join_group_request` (module names).
pub fn snake_case(name: &str) -> String {
    let s = rust_field_name(name);
    s.trim_end_matches('_').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::parse;

    fn lower_str(s: &str) -> Result<Message, String> {
        lower("Test.json", &parse(s)?)
    }

    #[test]
    fn names() {
        assert_eq!(rust_field_name("GroupInstanceId"), "group_instance_id");
        assert_eq!(rust_field_name("ThrottleTimeMs"), "throttle_time_ms");
        assert_eq!(rust_field_name("IPAddress"), "ip_address");
        assert_eq!(rust_field_name("Type"), "type_");
        assert_eq!(rust_field_name("V2Field"), "v2_field");
        assert_eq!(snake_case("ApiVersionsRequest"), "api_versions_request");
    }

    #[test]
    fn intersects_field_versions_with_valid_versions() {
        let m = lower_str(
            r#"{"apiKey":1,"type":"request","name":"XRequest","validVersions":"0-4","flexibleVersions":"3+",
               "fields":[{"name":"A","type":"int32","versions":"2+"},
                         {"name":"S","type":"[]Sub","versions":"1+","fields":[
                            {"name":"B","type":"string","versions":"0+","nullableVersions":"3+"}]}]}"#,
        )
        .unwrap();
        assert_eq!(m.flexible, VersionRange::new(3, 4));
        assert_eq!(m.root.fields[0].versions, VersionRange::new(2, 4));
        assert_eq!(m.structs[0].versions, VersionRange::new(1, 4));
        assert_eq!(m.structs[0].fields[0].versions, VersionRange::new(1, 4));
        assert_eq!(m.structs[0].fields[0].nullable, VersionRange::new(3, 4));
    }

    #[test]
    fn errors_name_file_and_field() {
        let bad_type = r#"{"type":"data","name":"X","validVersions":"0","flexibleVersions":"none",
                          "fields":[{"name":"A","type":"int33","versions":"0+"}]}"#;
        let err = lower_str(bad_type).unwrap_err();
        assert!(
            err.contains("Test.json") && err.contains("X.A") && err.contains("int33"),
            "{err}"
        );

        let bad_version = r#"{"type":"data","name":"X","validVersions":"0","flexibleVersions":"none",
                          "fields":[{"name":"A","type":"int8","versions":"3-1"}]}"#;
        assert!(lower_str(bad_version).unwrap_err().contains("X.A"));

        let tag_not_flexible = r#"{"type":"data","name":"X","validVersions":"0-3","flexibleVersions":"2+",
                          "fields":[{"name":"A","type":"int8","versions":"0+","taggedVersions":"0+","tag":0}]}"#;
        assert!(lower_str(tag_not_flexible)
            .unwrap_err()
            .contains("not all flexible"));

        let dup_tag = r#"{"type":"data","name":"X","validVersions":"0","flexibleVersions":"0+",
                          "fields":[{"name":"A","type":"int8","versions":"0+","taggedVersions":"0+","tag":0},
                                    {"name":"B","type":"int8","versions":"0+","taggedVersions":"0+","tag":0}]}"#;
        assert!(lower_str(dup_tag).unwrap_err().contains("tag 0 used twice"));

        let null_default = r#"{"type":"data","name":"X","validVersions":"0","flexibleVersions":"none",
                          "fields":[{"name":"A","type":"string","versions":"0+","default":"null"}]}"#;
        assert!(lower_str(null_default).unwrap_err().contains("never nullable"));

        let int_default = r#"{"type":"data","name":"X","validVersions":"0","flexibleVersions":"none",
                          "fields":[{"name":"A","type":"int8","versions":"0+","default":"300"}]}"#;
        assert!(lower_str(int_default).unwrap_err().contains("out of range"));
    }

    #[test]
    fn defaults() {
        let m = lower_str(
            r#"{"type":"data","name":"X","validVersions":"0","flexibleVersions":"none",
               "fields":[{"name":"A","type":"int32","versions":"0+","default":"0x7fffffff"},
                         {"name":"B","type":"int64","versions":"0+","default":"-1"},
                         {"name":"C","type":"bool","versions":"0+","default":"true"},
                         {"name":"D","type":"string","versions":"0+","nullableVersions":"0+","default":"null"}]}"#,
        )
        .unwrap();
        let d: Vec<_> = m.root.fields.iter().map(|f| f.default.clone()).collect();
        assert_eq!(
            d,
            vec![
                Default::Int(i32::MAX as i64),
                Default::Int(-1),
                Default::Bool(true),
                Default::Null
            ]
        );
    }
}
