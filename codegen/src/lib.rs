//! kafka-group's code generator: Kafka's JSON message schemas in, Rust codecs out.
//!
//! Four stages, each testable on its own: [`schema`] parses the files (comments stripped,
//! unknown keys rejected), [`merge`] combines two releases' files of one message, [`model`] lowers them (types checked, version ranges intersected),
//! [`emit`] writes Rust. The build script only picks the files and writes `OUT_DIR`.

pub mod emit;
pub mod error_codes;
pub mod merge;
pub mod model;
pub mod schema;
pub mod version;

use std::path::Path;

/// Generates the Rust source for the given schema files, each looked up in every directory of
/// `dirs` (oldest release first) and, where several have it, merged ([`merge`]) so that the
/// codec covers every version any of them describes. Messages are emitted sorted by name so that
/// the output does not depend on the order the caller lists them in.
pub fn generate(dirs: &[&Path], files: &[&str]) -> Result<String, String> {
    let mut messages = Vec::new();
    for file in files {
        let mut merged: Option<schema::SchemaFile> = None;
        for dir in dirs {
            let path = dir.join(file);
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(format!("{}: {e}", path.display())),
            };
            let schema = schema::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            merged = Some(match merged {
                None => schema,
                Some(old) => merge::merge(&old, &schema).map_err(|e| format!("{file}: {e}"))?,
            });
        }
        let schema = merged.ok_or_else(|| {
            let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            format!("{file}: in none of {}", dirs.join(", "))
        })?;
        messages.push(model::lower(file, &schema)?);
    }
    messages.sort_by(|a, b| a.name.cmp(&b.name));
    for m in &messages {
        if m.kind == model::Kind::Request {
            let key = m.api_key;
            if !messages
                .iter()
                .any(|r| r.kind == model::Kind::Response && r.api_key == key)
            {
                return Err(format!("{}: request without a response schema", m.file));
            }
        }
    }
    Ok(emit::emit(&messages))
}

/// Writes `contents` to `path` unless it already holds exactly that, so that an unchanged
/// generation does not touch the file's mtime and trigger a rebuild.
pub fn write_if_changed(path: &Path, contents: &str) -> std::io::Result<()> {
    if std::fs::read_to_string(path).ok().as_deref() == Some(contents) {
        return Ok(());
    }
    std::fs::write(path, contents)
}
