//! One message from two releases' schema files: the older set's oldest versions and the newer
//! set's newest, as one definition.
//!
//! Kafka 4.0 removed the oldest versions of many APIs from its schema files (KIP-896) while
//! adding new ones, so neither Kafka 3.9's files nor 4.4's describe every version a client for
//! brokers 0.10.0 to 4.x speaks. Merging works on the parsed files, before lowering, so the rest
//! of the generator sees one ordinary schema:
//!
//! - the valid versions are the union of both (they must overlap or touch);
//! - every version range of a field (`versions`, `nullableVersions`, `taggedVersions`,
//!   `flexibleVersions`) is first cut to the versions its file describes, and the two cuts are
//!   united; the union must be one range;
//! - in the versions both files describe, both must say the same thing: the same fields with the
//!   same type, default, tag and ranges, in the same order. A difference there is a build error,
//!   never a silent choice, since it would mean one of the two codecs is wrong;
//! - a field that only one file has must live outside the shared versions (a field dropped with
//!   the old versions, or added in a new one); its place is kept relative to the fields around it.
//!
//! Text that does not change the wire (`about`, `ignorable`, `entityType`, `latestVersionUnstable`
//! …) is taken from the newer file.

use crate::schema::{FieldSpec, SchemaFile, StructSpec};
use crate::version::VersionRange;

/// Merges `old` (e.g. Kafka 3.9's definition) and `new` (e.g. 4.4's) of the same message.
pub fn merge(old: &SchemaFile, new: &SchemaFile) -> Result<SchemaFile, String> {
    let at = |what: &str| format!("{}: {what}", new.name);
    if old.name != new.name || old.kind != new.kind || old.api_key != new.api_key {
        return Err(at(&format!(
            "the two files describe different messages ({} {} {:?} vs {} {} {:?})",
            old.name, old.kind, old.api_key, new.name, new.kind, new.api_key
        )));
    }
    let sides = Sides {
        old: VersionRange::parse(&old.valid_versions).map_err(|e| at(&e))?,
        new: VersionRange::parse(&new.valid_versions).map_err(|e| at(&e))?,
    };
    let valid = union(sides.old, sides.new).map_err(|e| at(&format!("validVersions: {e}")))?;
    let flexible = sides
        .range(
            "flexibleVersions",
            Some(&old.flexible_versions),
            Some(&new.flexible_versions),
        )
        .map_err(|e| at(&e))?;
    let fields = merge_fields(&sides, &old.fields, &new.fields).map_err(|e| at(&e))?;
    let common_structs = merge_structs(
        &sides,
        old.common_structs.as_deref().unwrap_or(&[]),
        new.common_structs.as_deref().unwrap_or(&[]),
    )
    .map_err(|e| at(&e))?;
    Ok(SchemaFile {
        api_key: new.api_key,
        kind: new.kind.clone(),
        listeners: new.listeners.clone().or_else(|| old.listeners.clone()),
        name: new.name.clone(),
        valid_versions: valid.to_string(),
        deprecated_versions: new
            .deprecated_versions
            .clone()
            .or_else(|| old.deprecated_versions.clone()),
        flexible_versions: flexible.to_string(),
        latest_version_unstable: new.latest_version_unstable,
        fields,
        common_structs: (!common_structs.is_empty()).then_some(common_structs),
    })
}

/// The valid versions of the two files being merged.
struct Sides {
    old: VersionRange,
    new: VersionRange,
}

impl Sides {
    /// The versions both files describe.
    fn shared(&self) -> VersionRange {
        self.old.intersect(&self.new)
    }

    /// The merged form of one version spec (absent = `none`): each side cut to its file's
    /// versions, checked to agree where both files speak, then united.
    fn range(&self, what: &str, old: Option<&str>, new: Option<&str>) -> Result<VersionRange, String> {
        let parse = |spec: Option<&str>, valid: &VersionRange| -> Result<VersionRange, String> {
            spec.map_or(Ok(VersionRange::NONE), VersionRange::parse)
                .map(|r| r.intersect(valid))
                .map_err(|e| format!("{what}: {e}"))
        };
        let (o, n) = (parse(old, &self.old)?, parse(new, &self.new)?);
        let shared = self.shared();
        if o.intersect(&shared) != n.intersect(&shared) {
            return Err(format!(
                "{what} differ in the versions both files describe ({shared}): {} vs {}",
                o.intersect(&shared),
                n.intersect(&shared)
            ));
        }
        union(o, n).map_err(|e| format!("{what}: {e}"))
    }
}

/// `a ∪ b` when it is one range.
fn union(a: VersionRange, b: VersionRange) -> Result<VersionRange, String> {
    match (a.min().zip(a.max()), b.min().zip(b.max())) {
        (None, _) => Ok(b),
        (_, None) => Ok(a),
        (Some((a0, a1)), Some((b0, b1))) => {
            // Touching counts: 0-3 and 4-9 make 0-9.
            if a1.saturating_add(1) >= b0 && b1.saturating_add(1) >= a0 {
                Ok(VersionRange::new(a0.min(b0), a1.max(b1)))
            } else {
                Err(format!("{a} and {b} leave a gap"))
            }
        }
    }
}

/// An optional spec for the merged file: `None` for the empty range.
fn spec(r: VersionRange) -> Option<String> {
    (!r.is_none()).then(|| r.to_string())
}

/// Merges two field lists in wire order (see the module docs for the rules).
fn merge_fields(sides: &Sides, old: &[FieldSpec], new: &[FieldSpec]) -> Result<Vec<FieldSpec>, String> {
    let mut out = Vec::with_capacity(old.len().max(new.len()));
    // Old fields before this index are in `out` already.
    let mut next_old = 0;
    for n in new {
        match old.iter().position(|o| o.name == n.name) {
            Some(pos) if pos < next_old => {
                return Err(format!("field {} is out of order between the two files", n.name));
            }
            Some(pos) => {
                for o in &old[next_old..pos] {
                    if new.iter().any(|f| f.name == o.name) {
                        return Err(format!(
                            "fields {} and {} are in a different order in the two files",
                            o.name, n.name
                        ));
                    }
                    out.push(one_side(sides, o, Side::Old)?);
                }
                out.push(merge_field(sides, &old[pos], n)?);
                next_old = pos + 1;
            }
            None => out.push(one_side(sides, n, Side::New)?),
        }
    }
    for o in &old[next_old..] {
        out.push(one_side(sides, o, Side::Old)?);
    }
    Ok(out)
}

#[derive(Clone, Copy, PartialEq)]
enum Side {
    Old,
    New,
}

/// A field only one file has: it must not exist in the versions the other file also describes,
/// and its ranges are cut to its own file's versions.
fn one_side(sides: &Sides, f: &FieldSpec, side: Side) -> Result<FieldSpec, String> {
    let (valid, label, other) = match side {
        Side::Old => (sides.old, "older", "newer"),
        Side::New => (sides.new, "newer", "older"),
    };
    let cut = |spec: Option<&str>| -> Result<VersionRange, String> {
        spec.map_or(Ok(VersionRange::NONE), VersionRange::parse)
            .map(|r| r.intersect(&valid))
            .map_err(|e| format!("field {}: {e}", f.name))
    };
    let versions = cut(Some(&f.versions))?;
    let overlap = versions.intersect(&sides.shared());
    if !overlap.is_none() {
        return Err(format!(
            "field {} is in versions {overlap} of the {label} file only, but the {other} file \
             describes those versions too",
            f.name
        ));
    }
    let sub = |specs: &Option<Vec<FieldSpec>>| -> Result<Option<Vec<FieldSpec>>, String> {
        specs
            .as_ref()
            .map(|fs| fs.iter().map(|c| one_side(sides, c, side)).collect())
            .transpose()
    };
    Ok(FieldSpec {
        versions: versions.to_string(),
        nullable_versions: spec(cut(f.nullable_versions.as_deref())?),
        tagged_versions: spec(cut(f.tagged_versions.as_deref())?),
        flexible_versions: match &f.flexible_versions {
            None => None,
            Some(s) => Some(cut(Some(s))?.to_string()),
        },
        fields: sub(&f.fields)?,
        ..f.clone()
    })
}

/// A field both files have: everything that shapes the wire must agree where both speak.
fn merge_field(sides: &Sides, o: &FieldSpec, n: &FieldSpec) -> Result<FieldSpec, String> {
    let name = &n.name;
    if o.ty != n.ty {
        return Err(format!("field {name}: type {} vs {}", o.ty, n.ty));
    }
    if o.tag != n.tag {
        return Err(format!("field {name}: tag {:?} vs {:?}", o.tag, n.tag));
    }
    if o.default != n.default {
        return Err(format!(
            "field {name}: default {:?} vs {:?}",
            o.default, n.default
        ));
    }
    let range = |what: &str, a: &Option<String>, b: &Option<String>| {
        sides.range(&format!("field {name} {what}"), a.as_deref(), b.as_deref())
    };
    let versions = range("versions", &Some(o.versions.clone()), &Some(n.versions.clone()))?;
    let fields = match (&o.fields, &n.fields) {
        (Some(a), Some(b)) => Some(merge_fields(sides, a, b).map_err(|e| format!("in {name}: {e}"))?),
        (None, None) => None,
        _ => return Err(format!("field {name}: a struct in one file only")),
    };
    Ok(FieldSpec {
        versions: versions.to_string(),
        nullable_versions: spec(range(
            "nullableVersions",
            &o.nullable_versions,
            &n.nullable_versions,
        )?),
        tagged_versions: spec(range("taggedVersions", &o.tagged_versions, &n.tagged_versions)?),
        flexible_versions: match (&o.flexible_versions, &n.flexible_versions) {
            // Absent means "as the message", which `none` is not (a header's ClientId keeps the
            // classic encoding in flexible versions), so the override must be kept as written.
            (None, None) => None,
            (Some(_), Some(_)) => {
                Some(range("flexibleVersions", &o.flexible_versions, &n.flexible_versions)?.to_string())
            }
            _ => {
                return Err(format!(
                    "field {name}: a flexibleVersions override in one file only"
                ))
            }
        },
        fields,
        ..n.clone()
    })
}

/// `commonStructs` by name: a struct in both is merged like a field; one in a single file keeps
/// that file's definition (its fields cut to that file's versions).
fn merge_structs(sides: &Sides, old: &[StructSpec], new: &[StructSpec]) -> Result<Vec<StructSpec>, String> {
    let as_field = |s: &StructSpec| FieldSpec {
        name: s.name.clone(),
        ty: s.name.clone(),
        versions: s.versions.clone(),
        nullable_versions: None,
        tagged_versions: None,
        tag: None,
        ignorable: None,
        default: None,
        about: None,
        map_key: None,
        entity_type: None,
        flexible_versions: None,
        zero_copy: None,
        fields: Some(s.fields.clone()),
    };
    let back = |f: FieldSpec| StructSpec {
        name: f.name,
        versions: f.versions,
        fields: f.fields.unwrap_or_default(),
    };
    let mut out = Vec::new();
    for n in new {
        let merged = match old.iter().find(|o| o.name == n.name) {
            // A shared struct's own range is not cut: structs are referenced by fields, whose
            // ranges the check above already compared.
            Some(o) => {
                let versions = union(
                    VersionRange::parse(&o.versions)?.intersect(&sides.old),
                    VersionRange::parse(&n.versions)?.intersect(&sides.new),
                )
                .map_err(|e| format!("struct {}: {e}", n.name))?;
                let fields = merge_fields(sides, &o.fields, &n.fields)
                    .map_err(|e| format!("in struct {}: {e}", n.name))?;
                StructSpec {
                    name: n.name.clone(),
                    versions: versions.to_string(),
                    fields,
                }
            }
            None => back(one_side(sides, &as_field(n), Side::New)?),
        };
        out.push(merged);
    }
    for o in old.iter().filter(|o| !new.iter().any(|n| n.name == o.name)) {
        out.push(back(one_side(sides, &as_field(o), Side::Old)?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::parse;

    fn file(valid: &str, flexible: &str, fields: &str) -> SchemaFile {
        parse(&format!(
            r#"{{"apiKey": 1, "type": "request", "name": "XRequest", "validVersions": "{valid}",
                "flexibleVersions": "{flexible}", "fields": [{fields}]}}"#
        ))
        .unwrap()
    }

    fn names_and_versions(f: &SchemaFile) -> Vec<(String, String)> {
        f.fields
            .iter()
            .map(|f| (f.name.clone(), f.versions.clone()))
            .collect()
    }

    #[test]
    fn dropped_old_versions_and_added_new_ones_make_one_range() {
        let old = file(
            "0-11",
            "9+",
            r#"{"name": "Old", "type": "int32", "versions": "0-2"},
               {"name": "A", "type": "string", "versions": "0+"},
               {"name": "B", "type": "int16", "versions": "3+", "nullableVersions": "9+"}"#,
        );
        let new = file(
            "3-13",
            "9+",
            r#"{"name": "A", "type": "string", "versions": "0-12"},
               {"name": "Id", "type": "uuid", "versions": "13+"},
               {"name": "B", "type": "int16", "versions": "3+", "nullableVersions": "9+"}"#,
        );
        let m = merge(&old, &new).unwrap();
        assert_eq!(m.valid_versions, "0-13");
        assert_eq!(m.flexible_versions, "9-13");
        assert_eq!(
            names_and_versions(&m),
            [("Old", "0-2"), ("A", "0-12"), ("Id", "13"), ("B", "3-13")]
                .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        assert_eq!(m.fields[3].nullable_versions.as_deref(), Some("9-13"));
        assert_eq!(m.fields[0].nullable_versions, None);
    }

    #[test]
    fn a_difference_in_shared_versions_is_an_error() {
        let old = file(
            "0-11",
            "9+",
            r#"{"name": "A", "type": "int32", "versions": "5+"}"#,
        );
        let new = file(
            "3-13",
            "9+",
            r#"{"name": "A", "type": "int32", "versions": "6+"}"#,
        );
        let e = merge(&old, &new).unwrap_err();
        assert!(e.contains("field A versions differ"), "{e}");

        let typed = file(
            "3-13",
            "9+",
            r#"{"name": "A", "type": "int64", "versions": "5+"}"#,
        );
        assert!(merge(&old, &typed).unwrap_err().contains("type int32 vs int64"));

        let flex = file(
            "3-13",
            "8+",
            r#"{"name": "A", "type": "int32", "versions": "5+"}"#,
        );
        assert!(merge(&old, &flex)
            .unwrap_err()
            .contains("flexibleVersions differ"));
    }

    #[test]
    fn a_field_one_file_lacks_in_shared_versions_is_an_error() {
        let old = file(
            "0-11",
            "none",
            r#"{"name": "A", "type": "int32", "versions": "0+"},
               {"name": "Gone", "type": "int32", "versions": "0-5"}"#,
        );
        let new = file(
            "3-13",
            "none",
            r#"{"name": "A", "type": "int32", "versions": "0+"}"#,
        );
        let e = merge(&old, &new).unwrap_err();
        assert!(
            e.contains("field Gone is in versions 3-5 of the older file only"),
            "{e}"
        );

        let early = file(
            "3-13",
            "none",
            r#"{"name": "A", "type": "int32", "versions": "0+"},
               {"name": "New", "type": "int32", "versions": "11+"}"#,
        );
        let old = file(
            "0-11",
            "none",
            r#"{"name": "A", "type": "int32", "versions": "0+"}"#,
        );
        let e = merge(&old, &early).unwrap_err();
        assert!(
            e.contains("field New is in versions 11 of the newer file only"),
            "{e}"
        );
    }

    #[test]
    fn order_and_gaps_are_checked() {
        let old = file(
            "0-5",
            "none",
            r#"{"name": "A", "type": "int32", "versions": "0+"},
               {"name": "B", "type": "int32", "versions": "0+"}"#,
        );
        let swapped = file(
            "0-6",
            "none",
            r#"{"name": "B", "type": "int32", "versions": "0+"},
               {"name": "A", "type": "int32", "versions": "0+"}"#,
        );
        assert!(merge(&old, &swapped).unwrap_err().contains("order"));
        let far = file(
            "8-9",
            "none",
            r#"{"name": "A", "type": "int32", "versions": "0+"},
               {"name": "B", "type": "int32", "versions": "0+"}"#,
        );
        assert!(merge(&old, &far).unwrap_err().contains("gap"));
    }

    #[test]
    fn nested_structs_merge_field_by_field() {
        let old = file(
            "0-4",
            "3+",
            r#"{"name": "Topics", "type": "[]T", "versions": "0+", "fields": [
                 {"name": "Name", "type": "string", "versions": "0+"}]}"#,
        );
        let new = file(
            "1-6",
            "3+",
            r#"{"name": "Topics", "type": "[]T", "versions": "0+", "fields": [
                 {"name": "Name", "type": "string", "versions": "0-5"},
                 {"name": "Id", "type": "uuid", "versions": "6+"}]}"#,
        );
        let m = merge(&old, &new).unwrap();
        let inner = m.fields[0].fields.as_ref().unwrap();
        assert_eq!(inner[0].versions, "0-5");
        assert_eq!(inner[1].versions, "6");
    }

    #[test]
    fn a_field_that_is_never_flexible_stays_so() {
        let f = file(
            "0-2",
            "2+",
            r#"{"name": "ClientId", "type": "string", "versions": "1+", "flexibleVersions": "none"}"#,
        );
        let m = merge(&f, &f).unwrap();
        assert_eq!(m.fields[0].flexible_versions.as_deref(), Some("none"));
        let inherits = file(
            "0-2",
            "2+",
            r#"{"name": "ClientId", "type": "string", "versions": "1+"}"#,
        );
        assert!(merge(&f, &inherits)
            .unwrap_err()
            .contains("override in one file only"));
    }

    /// What one version of a message is on the wire, as a schema says it: every field present
    /// in `v` (nested ones by path) with its type, default, tag, and whether it is nullable,
    /// tagged and flexible in `v`.
    fn wire_at(f: &SchemaFile, v: i16) -> Vec<String> {
        fn has(spec: Option<&str>, v: i16) -> bool {
            spec.is_some_and(|s| VersionRange::parse(s).unwrap().contains(v))
        }
        fn walk(out: &mut Vec<String>, path: &str, fields: &[FieldSpec], v: i16) {
            for x in fields.iter().filter(|x| has(Some(&x.versions), v)) {
                let p = format!("{path}.{}", x.name);
                out.push(format!(
                    "{p}: {} default={:?} tag={:?} nullable={} tagged={} flexible={:?}",
                    x.ty,
                    x.default,
                    x.tag,
                    has(x.nullable_versions.as_deref(), v),
                    has(x.tagged_versions.as_deref(), v),
                    x.flexible_versions.as_deref().map(|s| has(Some(s), v)),
                ));
                walk(out, &p, x.fields.as_deref().unwrap_or(&[]), v);
            }
        }
        let mut out = vec![format!("flexible={}", has(Some(&f.flexible_versions), v))];
        walk(&mut out, "", &f.fields, v);
        for s in f.common_structs.iter().flatten() {
            walk(&mut out, &format!("struct {}", s.name), &s.fields, v);
        }
        out
    }

    /// Every schema the build merges: each version of the merged file is on the wire exactly
    /// what the release file that has that version says.
    #[test]
    fn the_project_schemas_merge_to_what_each_release_says_version_by_version() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas");
        let read = |dir: &str, name: &str| -> Option<SchemaFile> {
            let text = std::fs::read_to_string(root.join(dir).join(name)).ok()?;
            Some(parse(&text).unwrap_or_else(|e| panic!("{dir}/{name}: {e}")))
        };
        let mut merged_files = 0;
        for entry in std::fs::read_dir(root.join("4.4")).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if !name.ends_with(".json") {
                continue;
            }
            let (Some(old), Some(new)) = (read("3.9", &name), read("4.4", &name)) else {
                continue;
            };
            let m = merge(&old, &new).unwrap_or_else(|e| panic!("{name}: {e}"));
            let valid = VersionRange::parse(&m.valid_versions).unwrap();
            for v in valid.min().unwrap()..=valid.max().unwrap() {
                let from = [&new, &old]
                    .into_iter()
                    .find(|f| VersionRange::parse(&f.valid_versions).unwrap().contains(v))
                    .unwrap_or_else(|| panic!("{name} v{v}: in neither file"));
                assert_eq!(wire_at(&m, v), wire_at(from, v), "{name} v{v}");
            }
            merged_files += 1;
        }
        assert!(merged_files >= 40, "only {merged_files} schemas in both sets");
    }

    #[test]
    fn identical_files_merge_to_an_equivalent_one() {
        let f = file(
            "0-3",
            "2+",
            r#"{"name": "A", "type": "int32", "versions": "1+", "taggedVersions": "2+", "tag": 0}"#,
        );
        let m = merge(&f, &f).unwrap();
        assert_eq!(m.valid_versions, "0-3");
        assert_eq!(m.fields[0].versions, "1-3");
        assert_eq!(m.fields[0].tagged_versions.as_deref(), Some("2-3"));
    }
}
