//! kafka-group's code generator: Kafka's JSON message schemas in, Rust codecs out.
//!
//! Three stages, each testable on its own: [`schema`] parses the files (comments stripped,
//! unknown keys rejected), [`model`] lowers them (types checked, version ranges intersected),
//! [`emit`] writes Rust. The build script only picks the files and writes `OUT_DIR`.

pub mod emit;
pub mod error_codes;
pub mod model;
pub mod schema;
pub mod version;

use std::path::Path;

/// Generates the Rust source for the given schema files of `dir`. Messages are emitted sorted
/// by name so that the output does not depend on the order the caller lists them in.
pub fn generate(dir: &Path, files: &[&str]) -> Result<String, String> {
    let mut messages = Vec::new();
    for file in files {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let schema = schema::parse(&text).map_err(|e| format!("{file}: {e}"))?;
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
